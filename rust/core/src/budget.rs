//! Splitting a token budget between context layers (identity, preferences,
//! topics, history...), each declaring `min` / `ideal` / `max` tokens, a
//! `priority` (0-100) and an `elasticity` (0-1, how willing it is to shrink).
//!
//! `negotiate` runs the phases of the OpenScroll budget algorithm with its
//! defects fixed (each fix is marked "Fix:" below):
//! 1. fixed layers take their ideal, every other layer its minimum;
//! 2. if that does not fit, fixed layers shrink toward their minimum (lowest
//!    priority first); if even all minimums do not fit, layers are dropped to 0
//!    from the lowest priority up (ties: the more elastic, then the earlier
//!    layer first), and a dropped layer whose minimum fits in what the drops
//!    freed comes back, most important first. Fix: the published cut trimmed a layer partly below its
//!    minimum ("below this, don't include at all") and never touched fixed
//!    layers, so it could over-allocate; here a layer is kept at >= its
//!    minimum or dropped, and fixed layers are cut too when nothing else is left;
//! 3. the rest goes toward the ideals: everyone reaches the ideal when the
//!    rest covers all of them, otherwise each layer gets a share proportional
//!    to (ideal - min) x priority, water-filled so no share is lost to a cap.
//!    Fix: the published pass scaled shares by priority/100 against a
//!    shrinking remainder, so layers stayed below their ideal even when the
//!    budget covered every ideal, and the leftover then went to whichever layer
//!    had the highest priority, up to its max;
//! 4. leftovers go to the elastic layers by priority up to their max, then to
//!    the fixed layers. Fix: tokens are never left unspent while a layer that
//!    was not dropped is below its max.

use crate::error::{Error, Result};

/// One layer's requirements.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Layer {
    pub min: u64,
    pub ideal: u64,
    pub max: u64,
    /// 0-100; higher is served first and cut last.
    pub priority: f64,
    /// 0-1; among equal priorities the more elastic layer is cut first.
    pub elasticity: f64,
    /// Fixed layers take their ideal before the others get anything.
    pub fixed: bool,
}

impl Layer {
    /// A layer that is fixed exactly when its elasticity is 0.
    pub fn new(min: u64, ideal: u64, max: u64, priority: f64, elasticity: f64) -> Self {
        Layer { min, ideal, max, priority, elasticity, fixed: elasticity == 0.0 }
    }

    fn check(&self, index: usize) -> Result<()> {
        let arg = |field: &str| format!("layers[{index}].{field}");
        if !(self.min <= self.ideal && self.ideal <= self.max) {
            return Err(Error::invalid(
                arg("ideal"),
                format!(
                    "needs min <= ideal <= max, got min={}, ideal={}, max={}",
                    self.min, self.ideal, self.max
                ),
            ));
        }
        if !(0.0..=100.0).contains(&self.priority) {
            return Err(Error::invalid(arg("priority"), format!("must be in 0..=100, got {}", self.priority)));
        }
        if !(0.0..=1.0).contains(&self.elasticity) {
            return Err(Error::invalid(arg("elasticity"), format!("must be in 0..=1, got {}", self.elasticity)));
        }
        Ok(())
    }
}

/// Tokens granted to each layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocation {
    pub total: u64,
    pub tokens: Vec<u64>,
    /// The layer got less than it must have: dropped (its minimum did not
    /// fit) or, for a fixed layer, less than its ideal.
    pub cut: Vec<bool>,
}

impl Allocation {
    pub fn allocated(&self) -> u64 {
        self.tokens.iter().sum()
    }

    pub fn unallocated(&self) -> u64 {
        self.total - self.allocated()
    }
}

/// Split `total` tokens between `layers` (see the module documentation).
pub fn negotiate(total: u64, layers: &[Layer]) -> Result<Allocation> {
    for (i, layer) in layers.iter().enumerate() {
        layer.check(i)?;
    }
    let n = layers.len();
    let mut tokens: Vec<u64> = layers.iter().map(|l| if l.fixed { l.ideal } else { l.min }).collect();
    let mut dropped = vec![false; n];
    let mut used: u128 = tokens.iter().map(|&t| u128::from(t)).sum();

    if used > u128::from(total) {
        let order = cut_order(layers);
        // Fixed layers give up what they hold above their minimum...
        for &i in &order {
            if used <= u128::from(total) {
                break;
            }
            let give = (tokens[i] - layers[i].min).min(clamp_u64(used - u128::from(total)));
            tokens[i] -= give;
            used -= u128::from(give);
        }
        // ...then layers whose minimum cannot be met are dropped...
        for &i in &order {
            if used <= u128::from(total) {
                break;
            }
            if tokens[i] > 0 {
                used -= u128::from(tokens[i]);
                tokens[i] = 0;
                dropped[i] = true;
            }
        }
        // ...and a dropped layer whose minimum fits in what the last drop
        // freed comes back (most important first), then fixed layers regrow.
        for &i in order.iter().rev() {
            if dropped[i] && u128::from(layers[i].min) + used <= u128::from(total) {
                tokens[i] = layers[i].min;
                used += u128::from(layers[i].min);
                dropped[i] = false;
            }
        }
        for &i in order.iter().rev() {
            if layers[i].fixed && !dropped[i] {
                let give = (layers[i].ideal - tokens[i]).min(clamp_u64(u128::from(total) - used.min(u128::from(total))));
                tokens[i] += give;
                used += u128::from(give);
            }
        }
    }
    // used <= total from here on.
    let mut rest = total - clamp_u64(used);
    let live = |i: usize| !dropped[i];
    rest = toward_ideal(layers, &mut tokens, rest, |i| live(i) && !layers[i].fixed);
    rest = toward_max(layers, &mut tokens, rest, |i| live(i) && !layers[i].fixed);
    toward_max(layers, &mut tokens, rest, |i| live(i) && layers[i].fixed);

    let cut = (0..n).map(|i| dropped[i] || (layers[i].fixed && tokens[i] < layers[i].ideal)).collect();
    Ok(Allocation { total, tokens, cut })
}

fn clamp_u64(x: u128) -> u64 {
    u64::try_from(x).unwrap_or(u64::MAX)
}

/// Lowest priority first; then the more elastic; then the earlier layer.
fn cut_order(layers: &[Layer]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..layers.len()).collect();
    order.sort_by(|&a, &b| {
        let (la, lb) = (&layers[a], &layers[b]);
        la.priority.total_cmp(&lb.priority).then(lb.elasticity.total_cmp(&la.elasticity)).then(a.cmp(&b))
    });
    order
}

/// Highest priority first; then the earlier layer.
fn serve_order(layers: &[Layer], eligible: impl Fn(usize) -> bool) -> Vec<usize> {
    let mut order: Vec<usize> = (0..layers.len()).filter(|&i| eligible(i)).collect();
    order.sort_by(|&a, &b| layers[b].priority.total_cmp(&layers[a].priority).then(a.cmp(&b)));
    order
}

/// Raise eligible layers toward their ideal: fully if `rest` covers every
/// gap, else in proportion to gap x priority (water-filling: a layer whose
/// share would pass its ideal is capped and the excess re-shared). Returns
/// what is left.
fn toward_ideal(layers: &[Layer], tokens: &mut [u64], mut rest: u64, eligible: impl Fn(usize) -> bool) -> u64 {
    let mut active: Vec<usize> = (0..layers.len()).filter(|&i| eligible(i) && tokens[i] < layers[i].ideal).collect();
    let gaps: u128 = active.iter().map(|&i| u128::from(layers[i].ideal - tokens[i])).sum();
    if gaps <= u128::from(rest) {
        for &i in &active {
            rest -= layers[i].ideal - tokens[i];
            tokens[i] = layers[i].ideal;
        }
        return rest;
    }
    // Water-fill in real numbers, then hand out the rounding remainder.
    let mut share = vec![0.0_f64; layers.len()];
    let mut pool = rest as f64;
    loop {
        let weight = |i: usize| (layers[i].ideal - tokens[i]) as f64 * layers[i].priority;
        let mut total_weight: f64 = active.iter().map(|&i| weight(i)).sum();
        let by_gap = total_weight <= 0.0;
        if by_gap {
            total_weight = active.iter().map(|&i| (layers[i].ideal - tokens[i]) as f64).sum();
        }
        let w = |i: usize| if by_gap { (layers[i].ideal - tokens[i]) as f64 } else { weight(i) };
        let capped: Vec<usize> = active
            .iter()
            .copied()
            .filter(|&i| pool * w(i) / total_weight >= (layers[i].ideal - tokens[i]) as f64)
            .collect();
        if capped.is_empty() {
            for &i in &active {
                share[i] = pool * w(i) / total_weight;
            }
            break;
        }
        for &i in &capped {
            share[i] = (layers[i].ideal - tokens[i]) as f64;
            pool -= share[i];
        }
        active.retain(|i| !capped.contains(i));
        if active.is_empty() {
            break;
        }
    }
    for (i, s) in share.iter().enumerate() {
        let gap = layers[i].ideal.saturating_sub(tokens[i]);
        let give = (s.floor().max(0.0) as u64).min(gap).min(rest);
        tokens[i] += give;
        rest -= give;
    }
    for i in serve_order(layers, &eligible) {
        if rest == 0 {
            break;
        }
        if tokens[i] < layers[i].ideal {
            tokens[i] += 1;
            rest -= 1;
        }
    }
    // Float rounding can leave a few tokens; they go by priority.
    for i in serve_order(layers, &eligible) {
        let give = (layers[i].ideal - tokens[i].min(layers[i].ideal)).min(rest);
        tokens[i] += give;
        rest -= give;
    }
    rest
}

/// Hand `rest` to eligible layers by priority, each up to its max.
fn toward_max(layers: &[Layer], tokens: &mut [u64], mut rest: u64, eligible: impl Fn(usize) -> bool) -> u64 {
    for i in serve_order(layers, eligible) {
        let give = (layers[i].max - tokens[i]).min(rest);
        tokens[i] += give;
        rest -= give;
    }
    rest
}

/// How much knowledge the user wants in context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KnowledgeDepth {
    Minimal,
    Standard,
    Deep,
}

impl KnowledgeDepth {
    pub fn from_name(name: &str) -> Result<Self> {
        match name {
            "minimal" => Ok(KnowledgeDepth::Minimal),
            "standard" => Ok(KnowledgeDepth::Standard),
            "deep" => Ok(KnowledgeDepth::Deep),
            other => Err(Error::invalid(
                "knowledge_depth",
                format!("unknown depth {other:?}; use \"minimal\", \"standard\" or \"deep\""),
            )),
        }
    }

    fn multiplier(self) -> f64 {
        match self {
            KnowledgeDepth::Minimal => 0.5,
            KnowledgeDepth::Standard => 1.0,
            KnowledgeDepth::Deep => 1.5,
        }
    }
}

/// What `plan_layers` looks at.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Situation {
    pub total: u64,
    pub message_count: u64,
    pub conversation_tokens: u64,
    pub user_message_tokens: u64,
    pub topic_count: u64,
    pub entity_count: u64,
    pub active_conversation: bool,
    pub knowledge_depth: KnowledgeDepth,
    pub prioritize_history: bool,
    /// Tokens of topic bundles already available (lowers retrieval's share).
    pub topic_bundle_tokens: u64,
}

/// The eight standard layers, in this order.
pub const STANDARD_LAYERS: [&str; 8] = [
    "identity",
    "preferences",
    "topic",
    "entity",
    "conversation_arc",
    "retrieval",
    "history",
    "user_message",
];

/// The standard layers' requirements for a situation (OpenScroll formulas).
///
/// Fixes to the published formulas: every ideal is clamped into
/// [min, max] and every min to <= max (the published identity ideal
/// `min(400, 2%)` fell under its 150 floor below 7,500 tokens, the topic ideal
/// could pass its 25% max); the entity max is also capped at 400 tokens per
/// entity (the published per-entity cap applied to the ideal only, so the
/// leftover pass could hand an entity-less situation 12% of the budget); the
/// history max is capped at the conversation's size and the arc gets nothing
/// without messages (tokens there could never be used).
pub fn standard_layers(s: &Situation) -> [Layer; 8] {
    let b = s.total as f64;
    let depth = s.knowledge_depth.multiplier();
    let pressure = if s.total == 0 { 1.0 } else { (s.conversation_tokens as f64 / (b * 0.7)).min(1.0) };
    let knowledge_heavy = s.topic_count >= 2 || s.knowledge_depth == KnowledgeDepth::Deep;
    let dialogue_heavy = s.message_count > 20 && s.prioritize_history;
    let pct = |p: f64| (b * p).floor() as u64;
    let active = s.active_conversation;

    let identity = (150, pct(0.02).min(400), 500, 100.0, 0.0, true);
    let preferences = (100, pct(0.03).min(600), 800, 95.0, 0.1, true);

    let topic_factor = (1.0 + (s.topic_count as f64 - 1.0) * 0.3).min(2.0);
    let topic_ideal = (b * 0.12 * depth * topic_factor * (1.0 - pressure * 0.4)).max(0.0).floor() as u64;
    let topic = (
        if s.topic_count > 0 { 300 } else { 0 },
        topic_ideal,
        pct(0.25),
        if knowledge_heavy { 85.0 } else { 70.0 },
        0.6,
        false,
    );

    let entity_factor = (1.0 + (s.entity_count as f64 - 1.0) * 0.4).min(2.0);
    let entity_cap = s.entity_count.saturating_mul(400);
    let entity_ideal = ((b * 0.06 * entity_factor).max(0.0).floor() as u64).min(entity_cap);
    let entity = (if s.entity_count > 0 { 150 } else { 0 }, entity_ideal, pct(0.12).min(entity_cap), 65.0, 0.7, false);

    let arc_ideal = (150.0 * ((s.message_count.max(1) as f64) + 1.0).log2() * depth).floor() as u64;
    let arc_max = if s.message_count == 0 { 0 } else { pct(0.20) };
    let arc = (
        if active { 200 } else { 0 },
        arc_ideal.min(pct(0.15)),
        arc_max,
        if active { 88.0 } else { 30.0 },
        0.3,
        false,
    );

    let coverage = 1.0 - if s.total == 0 { 1.0 } else { (s.topic_bundle_tokens as f64 / (b * 0.15)).min(1.0) };
    let retrieval = (200, (b * 0.10 * coverage.max(0.3) * depth).floor() as u64, pct(0.18), 75.0, 0.5, false);

    let t = s.conversation_tokens;
    // Small conversations (<= 3,000 tokens) want all of it: ratio t / B of B tokens.
    let wanted = match t {
        0..=3_000 => t.min(s.total) as f64,
        3_001..=10_000 => b * 0.35,
        10_001..=50_000 => b * 0.30,
        _ => b * 0.25,
    };
    let boost = if s.prioritize_history { 1.3 } else { 1.0 } * if dialogue_heavy { 1.2 } else { 1.0 };
    let history_ideal = ((wanted * boost).floor() as u64).min(t);
    let history = (
        if active { 500 } else { 0 },
        history_ideal,
        pct(0.60).min(t),
        if dialogue_heavy { 90.0 } else { 80.0 },
        0.4,
        false,
    );

    let u = s.user_message_tokens;
    let user_message = (u, u, u, 100.0, 0.0, true);

    [identity, preferences, topic, entity, arc, retrieval, history, user_message].map(
        |(min, ideal, max, priority, elasticity, fixed): (u64, u64, u64, f64, f64, bool)| {
            let min = min.min(max);
            Layer { min, ideal: ideal.clamp(min, max), max, priority, elasticity, fixed }
        },
    )
}

/// The standard layers for a situation and their negotiated allocation.
pub fn plan_layers(situation: &Situation) -> Result<([Layer; 8], Allocation)> {
    let layers = standard_layers(situation);
    let allocation = negotiate(situation.total, &layers)?;
    Ok((layers, allocation))
}
