//! Multiple-choice knapsack: for every item pick one option (keep, a summary
//! level, drop...) so that the total value is as large as possible while the
//! total token cost stays within the budget.
//!
//! Constraints: `protected` items take option 0 (their full form); items that
//! share a non-negative group id take the same option index (a tool call and
//! its result), which is solved by merging each group into one super-item whose
//! option `j` costs and is worth the sum of its members' option `j`.
//!
//! Methods, chosen by size (see `select_options`):
//! - **trivial**: every combination fits, so each item takes its best option;
//! - **dense DP**: the exact dynamic program over (item, tokens), used whenever
//!   its work fits under a fixed limit; it also applies the tie rule exactly;
//! - **core DP** (Pisinger-style): the LP relaxation over each item's upper
//!   convex hull of options (greedy by value per token up to the break item),
//!   then an exact dynamic program over the "core" — the items whose reduced
//!   cost at the break efficiency is smallest — with every other item fixed to
//!   its LP choice, growing the core until optimality is proven or a work limit
//!   is hit. The answer carries an upper bound (Lagrangian bound tightened by
//!   the core), so `upper_bound - value` bounds how far from optimal it can be.

mod dense;
mod lagrange;
mod sparse;
mod units;

use ndarray::ArrayView2;

use crate::error::{Error, Result};
use units::{Free, Units};

/// How a selection was computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Everything fits at its best option: no search needed.
    Trivial,
    /// The exact dynamic program over (item, tokens).
    DenseDp,
    /// LP relaxation + greedy + exact DP over the core around the break item.
    CoreDp,
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Method::Trivial => "trivial",
            Method::DenseDp => "dp",
            Method::CoreDp => "core",
        }
    }
}

/// Which method to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Strategy {
    /// The exact DP when its work is small enough, else the core method.
    #[default]
    Auto,
    /// Always the exact DP (refused when its table would be unreasonably large).
    Dp,
    /// Always the LP relaxation + core DP.
    Core,
}

impl Strategy {
    pub fn from_name(name: &str) -> Result<Self> {
        match name {
            "auto" => Ok(Strategy::Auto),
            "dp" => Ok(Strategy::Dp),
            "core" => Ok(Strategy::Core),
            other => Err(Error::invalid("method", format!("unknown method {other:?}; use \"auto\", \"dp\" or \"core\""))),
        }
    }
}

/// The constraints and preferences of a selection.
#[derive(Debug, Clone, Copy)]
pub struct Settings<'a> {
    /// One flag per item: `true` forces option 0.
    pub protected: Option<&'a [bool]>,
    /// One id per item: items with the same id >= 0 share an option; -1 = none.
    pub groups: Option<&'a [i64]>,
    /// Among equally valuable plans, prefer the one that gives later items
    /// their lower-index (fuller) options; `false` favours earlier items.
    /// Applied exactly by the dense DP; the core method only breaks its
    /// greedy ties this way.
    pub prefer_recent: bool,
    pub strategy: Strategy,
}

impl Default for Settings<'_> {
    fn default() -> Self {
        Settings { protected: None, groups: None, prefer_recent: true, strategy: Strategy::Auto }
    }
}

/// The chosen option per item, with what it achieves and how far from
/// optimal it can be.
#[derive(Debug, Clone, PartialEq)]
pub struct Selection {
    /// Option index chosen for each item.
    pub choices: Vec<usize>,
    /// Sum of the chosen options' values.
    pub value: f64,
    /// Sum of the chosen options' costs (never above the budget).
    pub cost: u64,
    /// A proven upper bound on the optimal value (`value` itself when exact).
    pub upper_bound: f64,
    /// The LP-relaxation bound (over each item's upper convex hull).
    pub lp_bound: f64,
    /// `true` when the selection is proven optimal.
    pub exact: bool,
    pub method: Method,
}

impl Selection {
    /// How much value an optimal plan could have beyond this one (>= 0).
    pub fn gap(&self) -> f64 {
        (self.upper_bound - self.value).max(0.0)
    }
}

/// Dense DP work (cells x options) allowed before switching to the core
/// method, so that `Auto` stays fast enough to call on every turn.
const DENSE_WORK_LIMIT: u64 = 50_000_000;
/// The largest dense DP `Strategy::Dp` will run (about 1 GB of backtrack table).
const DENSE_FORCED_LIMIT: u64 = 1_000_000_000;
/// Below this the dense DP runs directly (fast, and it applies the tie rule
/// exactly); above it the core method is tried first and the dense DP only
/// runs if the core could not prove optimality.
const DENSE_DIRECT_WORK: u64 = 2_000_000;

/// Pick one option per item maximising total value within `budget` tokens.
///
/// `costs` and `values` are (items x options); option 0 is each item's full
/// form. Fails with `Error::InvalidInput` naming the argument for bad shapes,
/// negative costs, non-finite values or bad group ids, and with
/// `Error::Budget` when even the cheapest admissible plan (protected items at
/// option 0, everything else at its cheapest option) exceeds the budget.
pub fn select_options(
    costs: ArrayView2<'_, i64>,
    values: ArrayView2<'_, f64>,
    budget: u64,
    settings: &Settings<'_>,
) -> Result<Selection> {
    validate(costs, values, settings)?;
    let units = Units::build(costs, values, settings);
    let free = Free::build(&units, budget, settings.prefer_recent)?;
    let tol = free.tolerance();

    let Solved { positions, upper: upper_free, lp: lp_free, exact, method } = match settings.strategy {
        Strategy::Auto => solve(&free, tol),
        Strategy::Dp => solve_dense(&free, tol)?,
        Strategy::Core => solve_core(&free, tol),
    };

    let choices = units.item_choices(&free, &positions);
    let (value, cost) = evaluate(costs, values, &choices);
    if cost > budget {
        // Unreachable by construction; refuse rather than return an over-budget plan.
        return Err(Error::Budget {
            needed: cost,
            budget,
            message: "internal error: the computed plan".into(),
        });
    }
    let upper_bound = if exact { value } else { (free.base_value + upper_free).max(value) };
    let lp_bound = (free.base_value + lp_free).max(upper_bound);
    Ok(Selection { choices, value, cost, upper_bound, lp_bound, exact, method })
}

/// What a method found: a candidate position per free unit, and bounds over
/// the free units only (the forced units' value is added by the caller).
struct Solved {
    positions: Vec<usize>,
    upper: f64,
    lp: f64,
    exact: bool,
    method: Method,
}

fn solve(free: &Free, tol: f64) -> Solved {
    if let Some(positions) = free.trivial() {
        let value = free.value_of(&positions);
        return Solved { positions, upper: value, lp: value, exact: true, method: Method::Trivial };
    }
    let plan = dense::plan(free);
    if let Some(plan) = plan.as_ref().filter(|p| p.work <= DENSE_DIRECT_WORK) {
        let positions = dense::solve(free, plan, tol);
        let value = free.value_of(&positions);
        let lp = lagrange::relax(free).lp_bound;
        return Solved { positions, upper: value, lp, exact: true, method: Method::DenseDp };
    }
    let relaxation = lagrange::relax(free);
    let core = sparse::solve(free, &relaxation, tol);
    if !core.exact {
        if let Some(plan) = plan.as_ref().filter(|p| p.work <= DENSE_WORK_LIMIT) {
            let positions = dense::solve(free, plan, tol);
            let value = free.value_of(&positions);
            return Solved { positions, upper: value, lp: relaxation.lp_bound, exact: true, method: Method::DenseDp };
        }
    }
    Solved { positions: core.positions, upper: core.upper_bound, lp: relaxation.lp_bound, exact: core.exact, method: Method::CoreDp }
}

fn solve_dense(free: &Free, tol: f64) -> Result<Solved> {
    let plan = dense::plan(free).filter(|p| p.work <= DENSE_FORCED_LIMIT).ok_or_else(|| {
        Error::invalid(
            "method",
            "the exact DP table would be too large (over 1e9 cells x options); use method=\"auto\" or \"core\"",
        )
    })?;
    let positions = dense::solve(free, &plan, tol);
    let value = free.value_of(&positions);
    Ok(Solved { positions, upper: value, lp: lagrange::relax(free).lp_bound, exact: true, method: Method::DenseDp })
}

fn solve_core(free: &Free, tol: f64) -> Solved {
    let relaxation = lagrange::relax(free);
    let core = sparse::solve(free, &relaxation, tol);
    Solved { positions: core.positions, upper: core.upper_bound, lp: relaxation.lp_bound, exact: core.exact, method: Method::CoreDp }
}

fn evaluate(costs: ArrayView2<'_, i64>, values: ArrayView2<'_, f64>, choices: &[usize]) -> (f64, u64) {
    let mut value = 0.0;
    let mut cost: u64 = 0;
    for (i, &j) in choices.iter().enumerate() {
        value += values[[i, j]];
        cost = cost.saturating_add(costs[[i, j]].max(0) as u64);
    }
    (value, cost)
}

fn validate(costs: ArrayView2<'_, i64>, values: ArrayView2<'_, f64>, constraints: &Settings<'_>) -> Result<()> {
    let (n, k) = costs.dim();
    if values.dim() != (n, k) {
        let (vn, vk) = values.dim();
        return Err(Error::invalid(
            "values",
            format!("shape ({vn}, {vk}) does not match costs' shape ({n}, {k}); give one value per item and option"),
        ));
    }
    if n > 0 && k == 0 {
        return Err(Error::invalid("costs", "every item needs at least one option, but costs has 0 columns"));
    }
    // Fast scans first; the index is looked up only to report an error.
    if costs.iter().any(|&c| c < 0) {
        let ((i, j), c) = costs.indexed_iter().find(|(_, &c)| c < 0).map_or(((0, 0), 0), |(ij, &c)| (ij, c));
        return Err(Error::invalid(
            "costs",
            format!("costs[{i}, {j}] = {c} is negative; token costs must be >= 0"),
        ));
    }
    if !values.iter().all(|v| v.is_finite()) {
        let ((i, j), v) = values.indexed_iter().find(|(_, v)| !v.is_finite()).map_or(((0, 0), 0.0), |(ij, &v)| (ij, v));
        return Err(Error::invalid(
            "values",
            format!("values[{i}, {j}] = {v} is not finite; replace NaN/inf values (e.g. np.nan_to_num) first"),
        ));
    }
    if let Some(protected) = constraints.protected {
        if protected.len() != n {
            return Err(Error::invalid(
                "protected",
                format!("has {} flags but there are {n} items (rows of costs); give one flag per item", protected.len()),
            ));
        }
    }
    if let Some(groups) = constraints.groups {
        if groups.len() != n {
            return Err(Error::invalid(
                "groups",
                format!("has {} ids but there are {n} items (rows of costs); give one id per item (-1 = no group)", groups.len()),
            ));
        }
        if let Some((i, &g)) = groups.iter().enumerate().find(|(_, &g)| g < -1) {
            return Err(Error::invalid(
                "groups",
                format!("groups[{i}] = {g}; use -1 for no group or a group id >= 0"),
            ));
        }
    }
    Ok(())
}
