//! The core method: an exact dynamic program over the units whose reduced
//! cost at the break efficiency is smallest (the core), every other unit fixed
//! to the option the LP relaxation gives it, with the core grown until the
//! plan is proven optimal or a work limit is reached (after Pisinger's minimal
//! algorithm for the multiple-choice knapsack).
//!
//! The DP keeps sparse states (tokens used, value) sorted by tokens with value
//! strictly increasing (a state using more tokens for no more value is
//! dropped), and drops every state whose Lagrangian bound cannot beat the best
//! plan known. Any plan either agrees with the fixed units — then it is worth
//! at most what the DP found (or the incumbent) — or moves some unit outside
//! the core to another option, which costs at least that unit's reduced cost
//! against the LP bound. So after each round
//! `upper = max(best, lp_bound - smallest reduced cost outside the core)`,
//! and the plan is optimal once `best` reaches it.

use super::lagrange::Relaxation;
use super::units::Free;

pub(super) struct CoreSolution {
    pub positions: Vec<usize>,
    pub upper_bound: f64,
    pub exact: bool,
}

/// Units in the first core; a later core holds every unit that a proof
/// needs, but at most `GROWTH` times the previous one.
const FIRST_CORE: usize = 64;
const GROWTH: usize = 8;
/// DP states allowed over all rounds (8 bytes of backtrack each).
const STATE_BUDGET: usize = 1_500_000;

#[derive(Clone, Copy)]
struct State {
    tokens: u64,
    value: f64,
}

#[derive(Clone, Copy)]
struct Link {
    parent: u32,
    rank: u32,
}

enum Outcome {
    /// The work limit was hit: this round proves nothing.
    Aborted,
    /// The round finished; a plan better than the incumbent, if it found one.
    Done(Option<(Vec<usize>, f64)>),
}

pub(super) fn solve(free: &Free, relax: &Relaxation, tol: f64) -> CoreSolution {
    let n = free.len();
    let mut positions = relax.greedy.clone();
    let mut value = relax.greedy_value;
    let mut upper = relax.lp_bound.max(value);
    if value >= upper - tol {
        return CoreSolution { positions, upper_bound: value, exact: true };
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_unstable_by(|&a, &b| {
        relax.reduced[a].total_cmp(&relax.reduced[b]).then(relax.distance[a].cmp(&relax.distance[b])).then(b.cmp(&a))
    });

    let mut budget = STATE_BUDGET;
    let mut size = FIRST_CORE.min(n);
    let mut exact = false;
    loop {
        let core = &order[..size];
        match run(free, relax, core, value, tol, &mut budget) {
            Outcome::Aborted => break,
            Outcome::Done(found) => {
                if let Some((better, better_value)) = found {
                    positions = better;
                    value = better_value;
                }
                let outside = if size < n { relax.lp_bound - relax.reduced[order[size]] } else { f64::NEG_INFINITY };
                upper = upper.min((value + tol).max(outside));
                if value >= upper - tol {
                    exact = true;
                    break;
                }
            }
        }
        if size == n {
            break;
        }
        // A proof needs every unit whose reduced cost is below the gap in the core.
        let gap = relax.lp_bound - value - tol;
        let needed = order.partition_point(|&s| relax.reduced[s] < gap);
        size = needed.clamp(size + 1, size.saturating_mul(GROWTH)).min(n);
    }
    CoreSolution { positions, upper_bound: if exact { value } else { upper.max(value) }, exact }
}

/// The exact DP over `core` with the other units at their LP option; only
/// plans worth more than `incumbent` are searched for.
fn run(free: &Free, relax: &Relaxation, core: &[usize], incumbent: f64, tol: f64, budget: &mut usize) -> Outcome {
    let n = free.len();
    let mut in_core = vec![false; n];
    for &s in core {
        in_core[s] = true;
    }
    let mut fixed_cost: u64 = 0;
    let mut fixed_value = 0.0;
    for s in (0..n).filter(|&s| !in_core[s]) {
        fixed_cost = fixed_cost.saturating_add(free.cost[relax.best[s]]);
        fixed_value += free.value[relax.best[s]];
    }
    let Some(room) = free.capacity.checked_sub(fixed_cost) else {
        return Outcome::Done(None);
    };
    let frontier = |s: usize| &relax.frontier[relax.frontier_start[s]..relax.frontier_start[s + 1]];

    // What the units after position t can still add: at most their margins
    // plus lambda per token left; at least their cheapest options' tokens.
    let mut rest_margin = vec![0.0; core.len() + 1];
    let mut rest_floor = vec![0_u64; core.len() + 1];
    for t in (0..core.len()).rev() {
        let s = core[t];
        rest_margin[t] = rest_margin[t + 1] + relax.margin[s];
        rest_floor[t] = rest_floor[t + 1].saturating_add(free.cost[frontier(s)[0]]);
    }
    let target = incumbent + tol - fixed_value;

    let mut states = vec![State { tokens: 0, value: 0.0 }];
    let mut next: Vec<State> = Vec::new();
    let mut links: Vec<Link> = Vec::new();
    let mut layer_start = vec![0_usize];
    let (mut option_cost, mut option_value) = (Vec::new(), Vec::new());
    let (mut heads, mut head_tokens) = (Vec::new(), Vec::new());
    for (t, &s) in core.iter().enumerate() {
        let options = frontier(s);
        option_cost.clear();
        option_cost.extend(options.iter().map(|&p| free.cost[p]));
        option_value.clear();
        option_value.extend(options.iter().map(|&p| free.value[p]));
        let limit = room.saturating_sub(rest_floor[t + 1]);
        // bound(state) = value + rest - lambda * tokens
        let rest = rest_margin[t + 1] + relax.lambda * room as f64;
        heads.clear();
        heads.resize(options.len(), 0_usize);
        head_tokens.clear();
        head_tokens.extend(option_cost.iter().map(|&c| states[0].tokens + c));
        next.clear();
        loop {
            // k-way merge of "every state + option o" by tokens; an
            // exhausted stream sits at u64::MAX.
            let mut o = 0;
            for (i, &w) in head_tokens.iter().enumerate().skip(1) {
                if w < head_tokens[o] {
                    o = i;
                }
            }
            let tokens = head_tokens[o];
            if tokens > limit {
                break; // every stream is past the limit or exhausted
            }
            let h = heads[o];
            heads[o] = h + 1;
            head_tokens[o] = states.get(h + 1).map_or(u64::MAX, |st| st.tokens + option_cost[o]);
            let value = states[h].value + option_value[o];
            if value + rest - relax.lambda * tokens as f64 <= target {
                continue;
            }
            let link = Link { parent: h as u32, rank: o as u32 };
            match next.last_mut() {
                Some(last) if last.tokens == tokens => {
                    if value > last.value {
                        *last = State { tokens, value };
                        if let Some(l) = links.last_mut() {
                            *l = link;
                        }
                    }
                }
                Some(last) if value <= last.value => {}
                _ => {
                    next.push(State { tokens, value });
                    links.push(link);
                }
            }
        }
        if next.is_empty() {
            return Outcome::Done(None);
        }
        if next.len() > *budget || next.len() > u32::MAX as usize {
            return Outcome::Aborted;
        }
        *budget -= next.len();
        layer_start.push(links.len());
        std::mem::swap(&mut states, &mut next);
    }
    let Some(last) = states.last() else {
        return Outcome::Done(None);
    };
    if last.value <= target {
        return Outcome::Done(None);
    }
    let mut positions = relax.best.clone();
    let mut index = states.len() - 1;
    for t in (0..core.len()).rev() {
        let link = links[layer_start[t] + index];
        positions[core[t]] = frontier(core[t])[link.rank as usize];
        index = link.parent as usize;
    }
    let value = free.value_of(&positions);
    Outcome::Done(Some((positions, value)))
}
