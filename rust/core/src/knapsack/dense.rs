//! The exact dynamic program over (unit, tokens): `best[c]` is the best value
//! of the units seen so far within `c` tokens. Two reductions keep the table
//! small without losing exactness: each unit's cheapest option is shifted to
//! cost 0 (the budget shrinks by the sum of those floors), and all costs are
//! divided by their greatest common divisor.
//!
//! Ties: options are tried in index order and a later option replaces an
//! earlier one only when strictly better, and the backtrack starts from the
//! last unit. So among optimal plans the last unit (the most recent item, in
//! the default order) gets its lowest-index (fullest) option, then the one
//! before it, and so on.

use super::units::Free;

pub(super) struct Plan {
    /// Cells x options: the work the DP will do.
    pub work: u64,
    divisor: u64,
    capacity: usize,
}

/// The table size, or `None` when some unit has more than 255 candidate
/// options (the backtrack table stores one byte per cell).
pub(super) fn plan(free: &Free) -> Option<Plan> {
    let mut divisor: u64 = 0;
    let mut floors: u64 = 0;
    let mut spread: u64 = 0;
    let mut options: u64 = 0;
    for s in 0..free.len() {
        let range = free.options(s);
        if range.len() > 255 {
            return None;
        }
        let lo = free.min_cost(s);
        let mut hi = lo;
        for p in range.clone() {
            divisor = gcd(divisor, free.cost[p] - lo);
            hi = hi.max(free.cost[p]);
        }
        floors = floors.saturating_add(lo);
        spread = spread.saturating_add(hi - lo);
        options += range.len() as u64;
    }
    let divisor = divisor.max(1);
    let slack = free.capacity.saturating_sub(floors);
    let capacity = (slack / divisor).min(spread / divisor);
    let work = options.saturating_mul(capacity.saturating_add(1));
    let capacity = usize::try_from(capacity).ok()?;
    Some(Plan { work, divisor, capacity })
}

/// The optimal candidate position of every unit.
pub(super) fn solve(free: &Free, plan: &Plan, tol: f64) -> Vec<usize> {
    let n = free.len();
    let width = plan.capacity + 1;
    let mut best = vec![0.0_f64; width];
    let mut next = vec![f64::NEG_INFINITY; width];
    let mut choice = vec![0_u8; n * width];
    for s in 0..n {
        let lo = free.min_cost(s);
        next.fill(f64::NEG_INFINITY);
        let row = &mut choice[s * width..(s + 1) * width];
        for (rank, p) in free.options(s).enumerate() {
            let w = shifted(free.cost[p], lo, plan.divisor);
            if w >= width {
                continue;
            }
            let v = free.value[p];
            let rank = rank as u8;
            for ((slot, pick), &prev) in next[w..].iter_mut().zip(row[w..].iter_mut()).zip(best[..width - w].iter()) {
                let candidate = prev + v;
                if candidate > *slot + tol {
                    *slot = candidate;
                    *pick = rank;
                }
            }
        }
        std::mem::swap(&mut best, &mut next);
    }
    let mut positions = vec![0; n];
    let mut c = plan.capacity;
    for s in (0..n).rev() {
        let p = free.start[s] + usize::from(choice[s * width + c]);
        positions[s] = p;
        c -= shifted(free.cost[p], free.min_cost(s), plan.divisor);
    }
    positions
}

fn shifted(cost: u64, lo: u64, divisor: u64) -> usize {
    usize::try_from((cost - lo) / divisor).unwrap_or(usize::MAX)
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}
