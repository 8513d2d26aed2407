//! Knapsack selection against brute force, the constraints, ties, bounds and
//! every error path.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use ctxfold_core::knapsack::{select_options, Method, Selection, Settings, Strategy};
use ctxfold_core::Error;
use ndarray::Array2;

/// xorshift64*: deterministic and dependency-free.
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
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

struct Instance {
    costs: Array2<i64>,
    values: Array2<f64>,
    protected: Vec<bool>,
    groups: Vec<i64>,
}

fn random_instance(rng: &mut Rng, n: usize, k: usize, integer_values: bool) -> Instance {
    let mut costs = Array2::zeros((n, k));
    let mut values = Array2::zeros((n, k));
    for i in 0..n {
        for j in 0..k {
            costs[[i, j]] = rng.below(30) as i64;
            values[[i, j]] = if integer_values { rng.below(6) as f64 } else { rng.unit() * 10.0 - 1.0 };
        }
    }
    let protected = (0..n).map(|_| rng.below(6) == 0).collect();
    let groups = (0..n).map(|_| if rng.below(3) == 0 { rng.below(3) as i64 } else { -1 }).collect();
    Instance { costs, values, protected, groups }
}

/// The optimum by enumeration, or None when nothing is feasible.
fn brute_force(inst: &Instance, budget: u64) -> Option<f64> {
    let (n, k) = inst.costs.dim();
    let mut best: Option<f64> = None;
    let mut choice = vec![0usize; n];
    loop {
        let ok = (0..n).all(|i| !inst.protected[i] || choice[i] == 0)
            && (0..n).all(|i| (0..n).all(|j| inst.groups[i] < 0 || inst.groups[i] != inst.groups[j] || choice[i] == choice[j]));
        let cost: i64 = (0..n).map(|i| inst.costs[[i, choice[i]]]).sum();
        if ok && cost as u64 <= budget {
            let value: f64 = (0..n).map(|i| inst.values[[i, choice[i]]]).sum();
            best = Some(best.map_or(value, |b: f64| b.max(value)));
        }
        let mut i = 0;
        loop {
            if i == n {
                return best;
            }
            choice[i] += 1;
            if choice[i] < k {
                break;
            }
            choice[i] = 0;
            i += 1;
        }
    }
}

fn check_plan(inst: &Instance, budget: u64, sel: &Selection) {
    let n = inst.costs.nrows();
    let cost: i64 = (0..n).map(|i| inst.costs[[i, sel.choices[i]]]).sum();
    let value: f64 = (0..n).map(|i| inst.values[[i, sel.choices[i]]]).sum();
    assert!(cost as u64 <= budget, "over budget: {cost} > {budget}");
    assert_eq!(cost as u64, sel.cost);
    assert!((value - sel.value).abs() < 1e-9);
    for i in 0..n {
        if inst.protected[i] {
            assert_eq!(sel.choices[i], 0, "protected item {i} not kept");
        }
        for j in 0..n {
            if inst.groups[i] >= 0 && inst.groups[i] == inst.groups[j] {
                assert_eq!(sel.choices[i], sel.choices[j], "group split");
            }
        }
    }
    assert!(sel.upper_bound >= sel.value - 1e-12);
    assert!(sel.gap() >= 0.0);
}

fn settings(inst: &Instance, strategy: Strategy) -> Settings<'_> {
    Settings { protected: Some(&inst.protected), groups: Some(&inst.groups), prefer_recent: true, strategy }
}

#[test]
fn every_method_matches_brute_force() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for round in 0..1500 {
        let n = 1 + rng.below(7) as usize;
        let k = 1 + rng.below(4) as usize;
        let inst = random_instance(&mut rng, n, k, round % 2 == 0);
        let budget = rng.below(25 * n as u64 + 1);
        let best = brute_force(&inst, budget);
        for strategy in [Strategy::Auto, Strategy::Dp, Strategy::Core] {
            let result = select_options(inst.costs.view(), inst.values.view(), budget, &settings(&inst, strategy));
            match (best, result) {
                (None, Err(Error::Budget { needed, budget: b, .. })) => assert!(needed > b && b == budget),
                (Some(best), Ok(sel)) => {
                    check_plan(&inst, budget, &sel);
                    assert!(sel.value >= best - 1e-9, "{strategy:?}: {} < optimum {best}", sel.value);
                    assert!(sel.upper_bound >= best - 1e-9, "{strategy:?}: bound {} < optimum {best}", sel.upper_bound);
                    assert!(sel.lp_bound >= best - 1e-9);
                }
                (best, result) => panic!("{strategy:?}: optimum {best:?} but got {result:?}"),
            }
        }
    }
}

#[test]
fn larger_budget_never_lowers_the_optimum() {
    let mut rng = Rng(42);
    for _ in 0..200 {
        let inst = random_instance(&mut rng, 8, 3, false);
        let mut last = f64::NEG_INFINITY;
        for budget in (0..200).step_by(7) {
            if let Ok(sel) = select_options(inst.costs.view(), inst.values.view(), budget, &settings(&inst, Strategy::Auto)) {
                assert!(sel.exact);
                assert!(sel.value >= last - 1e-9);
                last = sel.value;
            }
        }
    }
}

#[test]
fn ties_prefer_recent_items() {
    let costs = Array2::from_shape_vec((3, 2), vec![10, 0, 10, 0, 10, 0]).unwrap();
    let values = Array2::from_shape_vec((3, 2), vec![1.0, 0.0, 1.0, 0.0, 1.0, 0.0]).unwrap();
    let recent = select_options(costs.view(), values.view(), 20, &Settings::default()).unwrap();
    assert_eq!(recent.choices, vec![1, 0, 0]);
    let early = Settings { prefer_recent: false, ..Settings::default() };
    let early = select_options(costs.view(), values.view(), 20, &early).unwrap();
    assert_eq!(early.choices, vec![0, 0, 1]);
    // 0.1 + 0.2 != 0.3 in floating point: still a tie.
    let costs = Array2::from_shape_vec((3, 2), vec![1, 0, 1, 0, 2, 0]).unwrap();
    let values = Array2::from_shape_vec((3, 2), vec![0.1, 0.0, 0.2, 0.0, 0.3, 0.0]).unwrap();
    let sel = select_options(costs.view(), values.view(), 2, &Settings::default()).unwrap();
    assert_eq!(sel.choices, vec![1, 1, 0]);
}

#[test]
fn groups_move_together_and_protection_spreads() {
    // A tool call (cheap) and its huge result must share a choice.
    let costs = Array2::from_shape_vec((3, 2), vec![5, 0, 100, 0, 50, 0]).unwrap();
    let values = Array2::from_shape_vec((3, 2), vec![3.0, 0.0, 3.0, 0.0, 2.0, 0.0]).unwrap();
    let groups = [7, 7, -1];
    let s = Settings { groups: Some(&groups), ..Settings::default() };
    let sel = select_options(costs.view(), values.view(), 60, &s).unwrap();
    assert_eq!(sel.choices, vec![1, 1, 0]);
    let protected = [true, false, false];
    let s = Settings { groups: Some(&groups), protected: Some(&protected), ..Settings::default() };
    let sel = select_options(costs.view(), values.view(), 105, &s).unwrap();
    assert_eq!(sel.choices, vec![0, 0, 1]);
    match select_options(costs.view(), values.view(), 100, &s) {
        Err(Error::Budget { needed: 105, budget: 100, message }) => assert!(message.contains("protected")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn budget_error_says_by_how_much() {
    let costs = Array2::from_shape_vec((2, 2), vec![30, 0, 40, 0]).unwrap();
    let values = Array2::from_shape_vec((2, 2), vec![1.0, 0.0, 1.0, 0.0]).unwrap();
    let protected = [true, true];
    let s = Settings { protected: Some(&protected), ..Settings::default() };
    let err = select_options(costs.view(), values.view(), 50, &s).unwrap_err();
    assert!(err.to_string().contains("70") && err.to_string().contains("20 over"), "{err}");
    // Nothing protected, but even the cheapest options do not fit.
    let costs = Array2::from_shape_vec((2, 2), vec![30, 10, 40, 10]).unwrap();
    let err = select_options(costs.view(), values.view(), 15, &Settings::default()).unwrap_err();
    assert!(matches!(err, Error::Budget { needed: 20, budget: 15, .. }), "{err}");
}

#[test]
fn invalid_inputs_name_the_argument() {
    let costs = Array2::from_shape_vec((2, 2), vec![1, 0, 1, 0]).unwrap();
    let values = Array2::from_shape_vec((2, 2), vec![1.0, 0.0, 1.0, 0.0]).unwrap();
    let arg = |r: Result<Selection, Error>| match r {
        Err(Error::InvalidInput { argument, .. }) => argument,
        other => panic!("{other:?}"),
    };
    let short = Array2::<f64>::zeros((2, 3));
    assert_eq!(arg(select_options(costs.view(), short.view(), 5, &Settings::default())), "values");
    let negative = Array2::from_shape_vec((2, 2), vec![1, -1, 1, 0]).unwrap();
    assert_eq!(arg(select_options(negative.view(), values.view(), 5, &Settings::default())), "costs");
    let nan = Array2::from_shape_vec((2, 2), vec![1.0, f64::NAN, 1.0, 0.0]).unwrap();
    assert_eq!(arg(select_options(costs.view(), nan.view(), 5, &Settings::default())), "values");
    let inf = Array2::from_shape_vec((2, 2), vec![1.0, 0.0, f64::INFINITY, 0.0]).unwrap();
    assert_eq!(arg(select_options(costs.view(), inf.view(), 5, &Settings::default())), "values");
    let empty_cols = Array2::<i64>::zeros((2, 0));
    let empty_vals = Array2::<f64>::zeros((2, 0));
    assert_eq!(arg(select_options(empty_cols.view(), empty_vals.view(), 5, &Settings::default())), "costs");
    let protected = [true];
    let s = Settings { protected: Some(&protected), ..Settings::default() };
    assert_eq!(arg(select_options(costs.view(), values.view(), 5, &s)), "protected");
    let groups = [0];
    let s = Settings { groups: Some(&groups), ..Settings::default() };
    assert_eq!(arg(select_options(costs.view(), values.view(), 5, &s)), "groups");
    let groups = [0, -2];
    let s = Settings { groups: Some(&groups), ..Settings::default() };
    assert_eq!(arg(select_options(costs.view(), values.view(), 5, &s)), "groups");
    assert!(Strategy::from_name("greedy").is_err());
}

#[test]
fn empty_input_selects_nothing() {
    let costs = Array2::<i64>::zeros((0, 3));
    let values = Array2::<f64>::zeros((0, 3));
    let sel = select_options(costs.view(), values.view(), 0, &Settings::default()).unwrap();
    assert!(sel.choices.is_empty() && sel.exact && sel.value == 0.0);
}

/// 10,000 items x (keep, summary, drop) under a 128,000-token budget: the
/// benchmark's shape. The core method must stay within 0.5% of the LP bound.
#[test]
fn large_instance_is_near_optimal() {
    let mut rng = Rng(7);
    let n = 10_000;
    let mut costs = Array2::zeros((n, 3));
    let mut values = Array2::zeros((n, 3));
    for i in 0..n {
        let keep = 20 + rng.below(480) as i64;
        let relevance = rng.unit();
        costs[[i, 0]] = keep;
        costs[[i, 1]] = keep / 5 + 5;
        values[[i, 0]] = relevance * keep as f64;
        values[[i, 1]] = relevance * keep as f64 * (0.3 + 0.4 * rng.unit());
    }
    let sel = select_options(costs.view(), values.view(), 128_000, &Settings::default()).unwrap();
    assert!(sel.cost <= 128_000);
    assert!(sel.lp_bound >= sel.upper_bound && sel.upper_bound >= sel.value);
    assert!((sel.lp_bound - sel.value) / sel.lp_bound < 0.005, "{sel:?}");
    assert_eq!(sel.method, Method::CoreDp);
}

type Generator = fn(&mut Rng, usize) -> (i64, f64);

/// Distributions that defeat the LP bound (every option equally efficient),
/// tie everything, or use integer values: the core method must still agree
/// with the exact DP.
#[test]
fn core_method_agrees_with_the_dp_on_hard_distributions() {
    let cases: [(&str, Generator); 4] = [
        ("subset-sum", |rng, j| {
            let c = if j == 2 { 0 } else { 20 + rng.below(480) as i64 / (j as i64 + 1) };
            (c, c as f64)
        }),
        ("identical", |_, j| [(100, 5.0), (20, 2.0), (0, 0.0)][j]),
        ("integer values", |rng, j| if j == 2 { (0, 0.0) } else { (20 + rng.below(480) as i64, rng.below(10) as f64) }),
        ("summaries", |rng, j| {
            let c = [300 + rng.below(40) as i64, 60 + rng.below(40) as i64, 0][j];
            (c, c as f64 * [1.0, 1.4, 0.0][j] * (0.9 + 0.2 * rng.unit()))
        }),
    ];
    for (name, generate) in cases {
        let mut rng = Rng(11);
        let n = 200;
        let mut costs = Array2::zeros((n, 3));
        let mut values = Array2::zeros((n, 3));
        for i in 0..n {
            for j in 0..3 {
                (costs[[i, j]], values[[i, j]]) = generate(&mut rng, j);
            }
        }
        for budget in [800, 4_000, 9_000] {
            let run = |strategy| {
                let s = Settings { strategy, ..Settings::default() };
                select_options(costs.view(), values.view(), budget, &s).unwrap()
            };
            let (core, dp) = (run(Strategy::Core), run(Strategy::Dp));
            assert!(core.cost <= budget && dp.exact, "{name}");
            assert!(core.value <= dp.value + 1e-6 && dp.value <= core.upper_bound + 1e-6, "{name} {budget}: {core:?} vs {dp:?}");
            if core.exact {
                assert!((core.value - dp.value).abs() < 1e-6, "{name} {budget}");
            }
        }
    }
}

/// Eight options per item (several summary levels).
#[test]
fn many_options_per_item() {
    let mut rng = Rng(5);
    let (n, k) = (2_000, 8);
    let mut costs = Array2::zeros((n, k));
    let mut values = Array2::zeros((n, k));
    for i in 0..n {
        let keep = 20 + rng.below(480) as i64;
        let relevance = rng.unit();
        for j in 0..k {
            costs[[i, j]] = keep * (k - 1 - j) as i64 / k as i64;
            values[[i, j]] = relevance * costs[[i, j]] as f64 * (1.0 + 0.3 * rng.unit());
        }
    }
    let sel = select_options(costs.view(), values.view(), 40_000, &Settings::default()).unwrap();
    assert!(sel.cost <= 40_000);
    assert!(sel.gap() / sel.upper_bound < 1e-3, "{sel:?}");
}
