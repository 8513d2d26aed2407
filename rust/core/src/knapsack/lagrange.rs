//! The LP relaxation of the multiple-choice knapsack and what the core method
//! needs from it.
//!
//! Each unit's undominated options (cheaper or more valuable than every
//! other) form its frontier; the upper convex hull of the frontier turns the
//! unit into a sequence of increments with decreasing value per token. Taking
//! all increments greedily by value per token until one does not fit gives the
//! LP optimum (that increment, the "break", taken fractionally) and its
//! efficiency `lambda`; continuing past the break with what still fits gives a
//! feasible integer plan.
//!
//! For any `lambda >= 0`, `L = lambda * capacity + sum_u max_j (v_uj - lambda * c_uj)`
//! bounds every plan (Lagrangian relaxation of the budget); at the break
//! efficiency it equals the LP bound. A plan that puts unit `u` on option `j`
//! is worth at most `L - r_uj`, where `r_uj` is how far `v_uj - lambda * c_uj`
//! falls short of the unit's maximum: units with a large reduced cost can be
//! fixed, which is what makes the core small.

use super::units::Free;

pub(super) struct Relaxation {
    pub lambda: f64,
    /// L(lambda) over the free units (the LP bound).
    pub lp_bound: f64,
    /// A feasible plan (greedy past the break): candidate position per slot.
    pub greedy: Vec<usize>,
    pub greedy_value: f64,
    /// Frontier of slot `s`: positions `frontier[frontier_start[s]..frontier_start[s + 1]]`,
    /// by increasing cost and value.
    pub frontier_start: Vec<usize>,
    pub frontier: Vec<usize>,
    /// The LP solution's option (its integral part: the break unit stays at
    /// its lower vertex); it maximises `v - lambda * c`.
    pub best: Vec<usize>,
    /// max_j (v_j - lambda * c_j).
    pub margin: Vec<f64>,
    /// Smallest reduced cost of any other frontier option (infinite if none).
    pub reduced: Vec<f64>,
    /// How many places the unit's nearest increment is from the break in
    /// the greedy order: among equal reduced costs the core takes the units
    /// nearest the break, from both sides.
    pub distance: Vec<usize>,
}

/// One hull increment, packed so that sorting the integers sorts by best
/// value per token first, then the later slot (favoured by the tie rule),
/// then the unit's own increments in order. Efficiencies are positive, so
/// their bits order like the numbers.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Step(u128);

impl Step {
    fn new(efficiency: f64, slot: usize, level: usize) -> Self {
        let slot = u32::MAX - slot as u32;
        Step((u128::from(!efficiency.to_bits()) << 64) | (u128::from(slot) << 32) | level as u128)
    }
    fn efficiency(self) -> f64 {
        f64::from_bits(!((self.0 >> 64) as u64))
    }
    fn slot(self) -> usize {
        (u32::MAX - (self.0 >> 32) as u32) as usize
    }
    fn level(self) -> u32 {
        self.0 as u32
    }
}

pub(super) fn relax(free: &Free) -> Relaxation {
    let n = free.len();
    let (frontier_start, frontier) = frontiers(free);
    let mut hull_start = Vec::with_capacity(n + 1);
    let mut hull: Vec<usize> = Vec::with_capacity(frontier.len());
    let mut steps: Vec<Step> = Vec::with_capacity(frontier.len().saturating_sub(n));
    hull_start.push(0);
    let mut room = free.capacity;
    for s in 0..n {
        let points = &frontier[frontier_start[s]..frontier_start[s + 1]];
        let first = hull.len();
        upper_hull(free, points, &mut hull);
        let vertices = &hull[first..];
        room = room.saturating_sub(free.cost[vertices[0]]);
        for (level, pair) in vertices.windows(2).enumerate() {
            let cost = free.cost[pair[1]] - free.cost[pair[0]];
            let value = free.value[pair[1]] - free.value[pair[0]];
            steps.push(Step::new(value / cost as f64, s, level + 1));
        }
        hull_start.push(hull.len());
    }
    steps.sort_unstable();
    let step_cost = |step: Step| {
        let at = hull_start[step.slot()] + step.level() as usize;
        free.cost[hull[at]] - free.cost[hull[at - 1]]
    };

    let mut level = vec![0_u32; n];
    let mut blocked = vec![false; n];
    let mut lambda = 0.0;
    // The LP's integral part: the levels reached before the break.
    let mut lp_level: Option<Vec<u32>> = None;
    let mut break_at = steps.len();
    for (i, &step) in steps.iter().enumerate() {
        let s = step.slot();
        if blocked[s] || level[s] + 1 != step.level() {
            blocked[s] = true;
            continue;
        }
        let cost = step_cost(step);
        if cost <= room {
            room -= cost;
            level[s] = step.level();
        } else {
            if lp_level.is_none() {
                lp_level = Some(level.clone());
                lambda = step.efficiency();
                break_at = i;
            }
            blocked[s] = true;
        }
    }
    let broken = lp_level.is_some();
    let mut distance = vec![usize::MAX; n];
    for (i, step) in steps.iter().enumerate() {
        let d = &mut distance[step.slot()];
        *d = (*d).min(i.abs_diff(break_at));
    }
    let vertex = |levels: &[u32], s: usize| hull[hull_start[s] + levels[s] as usize];
    let greedy: Vec<usize> = (0..n).map(|s| vertex(&level, s)).collect();
    let greedy_value = free.value_of(&greedy);
    let lp_choice: Vec<usize> = match &lp_level {
        Some(levels) => (0..n).map(|s| vertex(levels, s)).collect(),
        None => greedy.clone(),
    };

    let mut best = Vec::with_capacity(n);
    let mut margin = Vec::with_capacity(n);
    let mut reduced = Vec::with_capacity(n);
    for s in 0..n {
        let points = &frontier[frontier_start[s]..frontier_start[s + 1]];
        let score = |p: usize| free.value[p] - lambda * free.cost[p] as f64;
        // The LP choice maximises the score in exact arithmetic; the bounds
        // use the true maximum so rounding cannot make them invalid.
        let fixed = lp_choice[s];
        let m = points.iter().map(|&p| score(p)).fold(score(fixed), f64::max);
        let r = points.iter().filter(|&&p| p != fixed).map(|&p| m - score(p)).fold(f64::INFINITY, f64::min);
        best.push(fixed);
        margin.push(m);
        reduced.push(r);
    }
    let lp_bound = if broken { lambda * free.capacity as f64 + margin.iter().sum::<f64>() } else { greedy_value };
    Relaxation { lambda, lp_bound, greedy, greedy_value, frontier_start, frontier, best, margin, reduced, distance }
}

/// Per slot, the candidates no other candidate beats on both cost and value,
/// by increasing cost (and so increasing value).
fn frontiers(free: &Free) -> (Vec<usize>, Vec<usize>) {
    let mut start = Vec::with_capacity(free.len() + 1);
    let mut frontier = Vec::with_capacity(free.cost.len());
    let mut scratch: Vec<usize> = Vec::new();
    start.push(0);
    for s in 0..free.len() {
        scratch.clear();
        scratch.extend(free.options(s));
        // Cheapest first; among equal costs the most valuable, then the lowest
        // index (insertion sort: a unit has a handful of options).
        let before = |a: usize, b: usize| {
            free.cost[a] < free.cost[b] || (free.cost[a] == free.cost[b] && free.value[a] > free.value[b])
        };
        for i in 1..scratch.len() {
            let mut j = i;
            while j > 0 && before(scratch[j], scratch[j - 1]) {
                scratch.swap(j, j - 1);
                j -= 1;
            }
        }
        let mut top = f64::NEG_INFINITY;
        for &p in &scratch {
            if free.value[p] > top {
                top = free.value[p];
                frontier.push(p);
            }
        }
        start.push(frontier.len());
    }
    (start, frontier)
}

/// Append the upper convex hull of `points` (a frontier: cost and value both
/// increasing) to `hull`; collinear middle points are dropped.
fn upper_hull(free: &Free, points: &[usize], hull: &mut Vec<usize>) {
    let first = hull.len();
    for &p in points {
        while hull.len() >= first + 2 {
            let a = hull[hull.len() - 2];
            let b = hull[hull.len() - 1];
            let (ac, av) = ((free.cost[b] - free.cost[a]) as f64, free.value[b] - free.value[a]);
            let (pc, pv) = ((free.cost[p] - free.cost[a]) as f64, free.value[p] - free.value[a]);
            // b lies on or under the segment a-p: slope(a,b) <= slope(a,p).
            if av * pc <= pv * ac {
                hull.pop();
            } else {
                break;
            }
        }
        hull.push(p);
    }
}
