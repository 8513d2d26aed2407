//! From items to the units the solvers see: each group becomes one
//! super-item (option `j` = sum of its members' option `j`), protected units
//! are fixed at option 0 and taken out, and every remaining unit keeps only the
//! options that can appear in some plan within the budget.

use ndarray::ArrayView2;
use rustc_hash::FxHashMap;

use super::Settings;
use crate::error::{Error, Result};

/// Items merged by group. Unit ids follow the first appearance of a member.
pub(super) struct Units {
    k: usize,
    /// Unit-major (unit, option) sums.
    cost: Vec<u64>,
    value: Vec<f64>,
    /// Some member is protected: the unit must take option 0.
    forced: Vec<bool>,
    /// Index of the unit's last (most recent) member.
    last: Vec<usize>,
    unit_of: Vec<usize>,
}

impl Units {
    pub(super) fn build(costs: ArrayView2<'_, i64>, values: ArrayView2<'_, f64>, constraints: &Settings<'_>) -> Units {
        let (n, k) = costs.dim();
        let mut ids: FxHashMap<i64, usize> = FxHashMap::default();
        let mut units = Units { k, cost: Vec::new(), value: Vec::new(), forced: Vec::new(), last: Vec::new(), unit_of: Vec::with_capacity(n) };
        for i in 0..n {
            let group = constraints.groups.map_or(-1, |g| g[i]);
            let existing = if group >= 0 { ids.get(&group).copied() } else { None };
            let u = match existing {
                Some(u) => u,
                None => {
                    let u = units.forced.len();
                    if group >= 0 {
                        ids.insert(group, u);
                    }
                    units.cost.resize(units.cost.len() + k, 0);
                    units.value.resize(units.value.len() + k, 0.0);
                    units.forced.push(false);
                    units.last.push(i);
                    u
                }
            };
            for j in 0..k {
                // Costs were validated non-negative.
                let c = costs[[i, j]].max(0) as u64;
                units.cost[u * k + j] = units.cost[u * k + j].saturating_add(c);
                units.value[u * k + j] += values[[i, j]];
            }
            units.forced[u] |= constraints.protected.is_some_and(|p| p[i]);
            units.last[u] = i;
            units.unit_of.push(u);
        }
        units
    }

    fn len(&self) -> usize {
        self.forced.len()
    }

    fn min_cost(&self, u: usize) -> u64 {
        if self.forced[u] {
            self.cost[u * self.k]
        } else {
            self.cost[u * self.k..(u + 1) * self.k].iter().copied().min().unwrap_or(0)
        }
    }

    /// The option index of every item, given a candidate position per free unit.
    pub(super) fn item_choices(&self, free: &Free, positions: &[usize]) -> Vec<usize> {
        self.unit_of
            .iter()
            .map(|&u| match free.slot[u] {
                NOT_FREE => 0,
                s => free.option[positions[s]],
            })
            .collect()
    }
}

const NOT_FREE: usize = usize::MAX;

/// The units left to decide, in solve order (the tie rule favours the units
/// decided last), each with its admissible options in index order.
pub(super) struct Free {
    /// Free-unit slot of each unit id, `NOT_FREE` for forced units.
    slot: Vec<usize>,
    /// Candidate options of slot `s`: positions `start[s]..start[s + 1]`.
    pub start: Vec<usize>,
    pub cost: Vec<u64>,
    pub value: Vec<f64>,
    /// Original option index of each candidate.
    pub option: Vec<usize>,
    /// Budget left after the forced units.
    pub capacity: u64,
    /// Value of the forced units.
    pub base_value: f64,
    /// Sum over slots of the largest |value|, for tolerances.
    scale: f64,
}

impl Free {
    pub(super) fn build(units: &Units, budget: u64, prefer_recent: bool) -> Result<Free> {
        let n = units.len();
        let mut needed: u64 = 0;
        let mut forced_cost: u64 = 0;
        let mut base_value = 0.0;
        for u in 0..n {
            needed = needed.saturating_add(units.min_cost(u));
            if units.forced[u] {
                forced_cost = forced_cost.saturating_add(units.cost[u * units.k]);
                base_value += units.value[u * units.k];
            }
        }
        if needed > budget {
            let (needed, message) = if forced_cost > budget {
                (forced_cost, "keeping the protected items (and their groups)")
            } else {
                (needed, "the cheapest admissible plan (protected items kept, every other item at its cheapest option)")
            };
            return Err(Error::Budget { needed, budget, message: message.into() });
        }
        let slack = budget - needed;

        let mut order: Vec<usize> = (0..n).filter(|&u| !units.forced[u]).collect();
        // Without groups the units are already in item order.
        if !order.is_sorted_by_key(|&u| units.last[u]) {
            order.sort_unstable_by_key(|&u| units.last[u]);
        }
        if !prefer_recent {
            order.reverse();
        }
        let mut free = Free {
            slot: vec![NOT_FREE; n],
            start: Vec::with_capacity(order.len() + 1),
            cost: Vec::new(),
            value: Vec::new(),
            option: Vec::new(),
            capacity: budget - forced_cost,
            base_value,
            scale: 1.0,
        };
        free.start.push(0);
        for (s, &u) in order.iter().enumerate() {
            free.slot[u] = s;
            let floor = units.min_cost(u);
            let mut largest: f64 = 0.0;
            for j in 0..units.k {
                let c = units.cost[u * units.k + j];
                if c - floor <= slack {
                    let v = units.value[u * units.k + j];
                    free.cost.push(c);
                    free.value.push(v);
                    free.option.push(j);
                    largest = largest.max(v.abs());
                }
            }
            free.scale += largest;
            free.start.push(free.cost.len());
        }
        Ok(free)
    }

    pub(super) fn len(&self) -> usize {
        self.start.len() - 1
    }

    pub(super) fn options(&self, s: usize) -> std::ops::Range<usize> {
        self.start[s]..self.start[s + 1]
    }

    /// Values within this of each other count as ties (summation noise).
    pub(super) fn tolerance(&self) -> f64 {
        8.0 * f64::EPSILON * self.scale
    }

    pub(super) fn min_cost(&self, s: usize) -> u64 {
        self.cost[self.options(s)].iter().copied().min().unwrap_or(0)
    }

    pub(super) fn value_of(&self, positions: &[usize]) -> f64 {
        positions.iter().map(|&p| self.value[p]).sum()
    }

    /// When every combination of candidates fits, each unit simply takes its
    /// most valuable option (the lowest index among ties).
    pub(super) fn trivial(&self) -> Option<Vec<usize>> {
        let mut spread: u64 = 0;
        let mut floor: u64 = 0;
        for s in 0..self.len() {
            let range = self.options(s);
            let lo = self.cost[range.clone()].iter().copied().min().unwrap_or(0);
            let hi = self.cost[range].iter().copied().max().unwrap_or(0);
            spread = spread.saturating_add(hi - lo);
            floor = floor.saturating_add(lo);
        }
        if floor.saturating_add(spread) > self.capacity {
            return None;
        }
        let tol = self.tolerance();
        Some((0..self.len()).map(|s| self.best_option(s, tol)).collect())
    }

    fn best_option(&self, s: usize, tol: f64) -> usize {
        let range = self.options(s);
        let mut best = range.start;
        for p in range {
            if self.value[p] > self.value[best] + tol {
                best = p;
            }
        }
        best
    }
}
