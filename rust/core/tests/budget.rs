//! Budget negotiation: the phases, the invariants on random layers, the
//! standard layers and every error path.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use ctxfold_core::budget::{negotiate, plan_layers, KnowledgeDepth, Layer, Situation, STANDARD_LAYERS};
use ctxfold_core::Error;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn layer(min: u64, ideal: u64, max: u64, priority: f64, elasticity: f64) -> Layer {
    Layer::new(min, ideal, max, priority, elasticity)
}

/// The invariants every allocation must satisfy.
fn check(total: u64, layers: &[Layer], tokens: &[u64], cut: &[bool]) {
    let sum: u64 = tokens.iter().sum();
    assert!(sum <= total, "{sum} > {total}");
    for (i, (l, &t)) in layers.iter().zip(tokens).enumerate() {
        assert!(t <= l.max, "layer {i}: {t} > max {}", l.max);
        assert!(t == 0 || t >= l.min, "layer {i}: {t} below min {} but not dropped", l.min);
        if t < l.min {
            assert!(cut[i]);
        }
    }
    if sum < total {
        for (i, (l, &t)) in layers.iter().zip(tokens).enumerate() {
            let dropped = cut[i] && t == 0 && l.min > total - sum;
            assert!(dropped || t == l.max, "{} tokens unspent while layer {i} is at {t} < max {}", total - sum, l.max);
        }
    }
}

#[test]
fn everything_fits_fills_ideals_then_max_by_priority() {
    let layers = [layer(10, 20, 30, 100.0, 0.0), layer(0, 50, 100, 50.0, 0.5), layer(0, 50, 60, 80.0, 0.5)];
    let a = negotiate(130, &layers).unwrap();
    // 20 fixed + 50 + 50 ideals, the 10 left to the higher priority (layer 2).
    assert_eq!(a.tokens, vec![20, 50, 60]);
    let a = negotiate(1000, &layers).unwrap();
    // Elastic layers to their max first, then the fixed layer.
    assert_eq!(a.tokens, vec![30, 100, 60]);
    assert_eq!(a.unallocated(), 1000 - 190);
    assert_eq!(a.cut, vec![false; 3]);
}

#[test]
fn shortfall_is_shared_by_gap_times_priority() {
    let layers = [layer(0, 100, 100, 100.0, 0.5), layer(0, 100, 100, 50.0, 0.5)];
    let a = negotiate(90, &layers).unwrap();
    assert_eq!(a.tokens, vec![60, 30]);
    // Water-filling: a share above the ideal is re-shared.
    let layers = [layer(0, 10, 10, 100.0, 0.5), layer(0, 100, 100, 1.0, 0.5)];
    let a = negotiate(60, &layers).unwrap();
    assert_eq!(a.tokens, vec![10, 50]);
    // Priority 0 still gets what nobody else can take.
    let layers = [layer(0, 10, 10, 100.0, 0.5), layer(0, 100, 100, 0.0, 0.5)];
    assert_eq!(negotiate(60, &layers).unwrap().tokens, vec![10, 50]);
}

#[test]
fn minimums_that_do_not_fit_drop_lowest_priority_first() {
    let layers = [
        layer(100, 100, 100, 100.0, 0.0), // fixed
        layer(300, 400, 500, 70.0, 0.6),
        layer(200, 300, 400, 60.0, 0.7),
        layer(50, 60, 400, 90.0, 0.2),
    ];
    let a = negotiate(500, &layers).unwrap();
    // Minimums need 650: layer 2 (priority 60) is dropped; its tokens go back
    // to the others (ideal gaps 100 + 10 covered, then by priority to max).
    assert_eq!(a.tokens[2], 0);
    assert_eq!(a.cut, vec![false, false, true, false]);
    assert_eq!(a.allocated(), 500);
    check(500, &layers, &a.tokens, &a.cut);
    // Fixed layers shrink to their minimum before anything is dropped.
    let layers = [layer(100, 300, 300, 100.0, 0.0), layer(100, 100, 100, 50.0, 0.5)];
    let a = negotiate(250, &layers).unwrap();
    assert_eq!(a.tokens, vec![150, 100]);
    assert_eq!(a.cut, vec![true, false]);
    // Nothing fits: everything is dropped, never over budget.
    let a = negotiate(10, &layers).unwrap();
    assert_eq!(a.tokens, vec![0, 0]);
    // Equal priorities: the more elastic layer is cut first.
    let layers = [layer(100, 100, 100, 50.0, 0.2), layer(100, 100, 100, 50.0, 0.9)];
    assert_eq!(negotiate(150, &layers).unwrap().tokens, vec![100, 0]);
}

#[test]
fn random_layers_keep_the_invariants() {
    let mut rng = Rng(0xDEAD_BEEF);
    for _ in 0..20_000 {
        let n = 1 + rng.below(9) as usize;
        let layers: Vec<Layer> = (0..n)
            .map(|_| {
                let min = rng.below(300);
                let ideal = min + rng.below(300);
                let max = ideal + rng.below(300);
                let elasticity = if rng.below(3) == 0 { 0.0 } else { rng.below(101) as f64 / 100.0 };
                layer(min, ideal, max, rng.below(101) as f64, elasticity)
            })
            .collect();
        let total = rng.below(3000);
        let a = negotiate(total, &layers).unwrap();
        check(total, &layers, &a.tokens, &a.cut);
        let mins: u64 = layers.iter().map(|l| l.min).sum();
        let ideals: u64 = layers.iter().map(|l| if l.fixed { l.ideal } else { l.min }).sum();
        if ideals <= total {
            assert!(a.cut.iter().all(|&c| !c));
        }
        if mins <= total {
            assert!(a.tokens.iter().zip(&layers).all(|(&t, l)| t >= l.min));
        }
        let wanted: u64 = layers.iter().map(|l| l.ideal).sum();
        if wanted <= total {
            assert!(a.tokens.iter().zip(&layers).all(|(&t, l)| t >= l.ideal));
        }
    }
}

#[test]
fn invalid_layers_name_the_field() {
    let arg = |layers: &[Layer]| match negotiate(100, layers) {
        Err(Error::InvalidInput { argument, .. }) => argument,
        other => panic!("{other:?}"),
    };
    assert_eq!(arg(&[layer(0, 1, 1, 1.0, 0.5), layer(5, 1, 10, 1.0, 0.5)]), "layers[1].ideal");
    assert_eq!(arg(&[layer(0, 11, 10, 1.0, 0.5)]), "layers[0].ideal");
    assert_eq!(arg(&[layer(0, 1, 1, 101.0, 0.5)]), "layers[0].priority");
    assert_eq!(arg(&[layer(0, 1, 1, f64::NAN, 0.5)]), "layers[0].priority");
    assert_eq!(arg(&[layer(0, 1, 1, 1.0, -0.1)]), "layers[0].elasticity");
    assert_eq!(arg(&[layer(0, 1, 1, 1.0, f64::NAN)]), "layers[0].elasticity");
    assert!(KnowledgeDepth::from_name("shallow").is_err());
    assert!(negotiate(0, &[]).unwrap().tokens.is_empty());
}

fn situation(total: u64) -> Situation {
    Situation {
        total,
        message_count: 40,
        conversation_tokens: 20_000,
        user_message_tokens: 120,
        topic_count: 2,
        entity_count: 3,
        active_conversation: true,
        knowledge_depth: KnowledgeDepth::Standard,
        prioritize_history: true,
        topic_bundle_tokens: 500,
    }
}

#[test]
fn standard_layers_follow_the_published_formulas() {
    let (layers, a) = plan_layers(&situation(12_000)).unwrap();
    assert_eq!(STANDARD_LAYERS.len(), layers.len());
    // identity: min(400, 2%) = 240; preferences: 3% = 360; user message fixed.
    assert_eq!((layers[0].min, layers[0].ideal, layers[0].max), (150, 240, 500));
    assert_eq!(layers[1].ideal, 360);
    assert_eq!((layers[7].min, layers[7].ideal, layers[7].max), (120, 120, 120));
    // topic: 12% x 1.3 (2 topics) x (1 - 0.4 pressure 1.0) = 1123, priority 85 (knowledge heavy).
    assert_eq!(layers[2].ideal, 1123);
    assert_eq!(layers[2].priority, 85.0);
    // entity: 6% x 1.8 = 1296 capped at 3 x 400.
    assert_eq!(layers[3].ideal, 1200);
    assert_eq!(layers[3].max, 1200);
    // arc: 150 x log2(41) = 803, under 15%.
    assert_eq!(layers[4].ideal, 803);
    // retrieval: 10% x (1 - 500/1800).
    assert_eq!(layers[5].ideal, 866);
    // history: 30% x 1.3 x 1.2 (dialogue heavy), priority 90.
    assert_eq!(layers[6].ideal, 5616);
    assert_eq!(layers[6].priority, 90.0);
    assert_eq!(a.allocated(), 12_000);
    check(12_000, &layers, &a.tokens, &a.cut);
    assert!(a.tokens.iter().zip(&layers).all(|(&t, l)| t >= l.ideal));
}

#[test]
fn standard_layers_fixes() {
    // Published identity ideal min(400, 2% of 5,000) = 100 is under its 150 floor.
    let (layers, a) = plan_layers(&situation(5_000)).unwrap();
    assert_eq!(layers[0].ideal, 150);
    check(5_000, &layers, &a.tokens, &a.cut);
    // A tiny budget: fixed layers are cut too, never over budget.
    let (layers, a) = plan_layers(&situation(300)).unwrap();
    check(300, &layers, &a.tokens, &a.cut);
    assert!(a.cut.iter().any(|&c| c));
    // No budget at all.
    let (_, a) = plan_layers(&situation(0)).unwrap();
    assert_eq!(a.allocated(), 0);
    // No entities, no messages: those layers get nothing, even from leftovers.
    let s = Situation { entity_count: 0, message_count: 0, conversation_tokens: 0, active_conversation: false, ..situation(200_000) };
    let (layers, a) = plan_layers(&s).unwrap();
    assert_eq!((a.tokens[3], a.tokens[4], a.tokens[6]), (0, 0, 0));
    check(200_000, &layers, &a.tokens, &a.cut);
    // Every depth and flag combination keeps the invariants.
    let mut rng = Rng(3);
    for _ in 0..5_000 {
        let s = Situation {
            total: rng.below(200_000),
            message_count: rng.below(500),
            conversation_tokens: rng.below(300_000),
            user_message_tokens: rng.below(5_000),
            topic_count: rng.below(6),
            entity_count: rng.below(10),
            active_conversation: rng.below(2) == 0,
            knowledge_depth: [KnowledgeDepth::Minimal, KnowledgeDepth::Standard, KnowledgeDepth::Deep][rng.below(3) as usize],
            prioritize_history: rng.below(2) == 0,
            topic_bundle_tokens: rng.below(20_000),
        };
        let (layers, a) = plan_layers(&s).unwrap();
        check(s.total, &layers, &a.tokens, &a.cut);
    }
}
