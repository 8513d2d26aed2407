#![allow(clippy::unwrap_used)]

use ctxfold_core::decay::{decay_weights, DecayModel, DecayOptions};

fn plain() -> DecayOptions {
    DecayOptions { importance_adjust: false, recent_turns: 0.0, recent_boost: 1.0 }
}

#[test]
fn exponential_halves_every_half_life() {
    let w = decay_weights(&[0.0, 10.0, 20.0], &DecayModel::Exponential { half_life: 10.0 }, None, None, &plain()).unwrap();
    assert_eq!(w, vec![1.0, 0.5, 0.25]);
}

#[test]
fn step_and_logarithmic() {
    let step = DecayModel::Step { steps: vec![(2.0, 1.0), (10.0, 0.5), (f64::INFINITY, 0.1)] };
    let w = decay_weights(&[0.0, 2.0, 3.0, 100.0], &step, None, None, &plain()).unwrap();
    assert_eq!(w, vec![1.0, 1.0, 0.5, 0.1]);
    let w = decay_weights(&[0.0, std::f64::consts::E - 1.0], &DecayModel::Logarithmic { rate: 1.0 }, None, None, &plain()).unwrap();
    assert!((w[0] - 1.0).abs() < 1e-12 && (w[1] - 0.5).abs() < 1e-12);
}

#[test]
fn adaptive_importance_and_recent_boost() {
    let ages = [10.0, 10.0, 10.0, 1.0];
    let imp = [0.9, 0.6, 0.2, 0.2];
    let w = decay_weights(&ages, &DecayModel::Adaptive, Some(&imp), Some(&ages), &DecayOptions::default()).unwrap();
    let expected = [
        (0.5f64.powf(0.5) * 1.5).min(1.0),
        0.5 * 1.0,
        0.25 * 0.7,
        (0.5f64.powf(0.2) * 0.7 * 1.2).min(1.0),
    ];
    for (a, b) in w.iter().zip(expected) {
        assert!((a - b).abs() < 1e-12, "{a} vs {b}");
    }
}

#[test]
fn bad_parameters_name_the_argument() {
    let err = |r: ctxfold_core::Result<Vec<f64>>| r.unwrap_err().to_string();
    let o = DecayOptions::default();
    assert!(err(decay_weights(&[1.0], &DecayModel::Exponential { half_life: 0.0 }, None, None, &o)).starts_with("half_life"));
    assert!(err(decay_weights(&[-1.0], &DecayModel::Adaptive, None, None, &o)).starts_with("ages"));
    assert!(err(decay_weights(&[f64::NAN], &DecayModel::Adaptive, None, None, &o)).starts_with("ages"));
    assert!(err(decay_weights(&[1.0], &DecayModel::Adaptive, Some(&[1.5]), None, &o)).starts_with("importance"));
    assert!(err(decay_weights(&[1.0], &DecayModel::Adaptive, Some(&[0.5, 0.5]), None, &o)).starts_with("importance"));
    assert!(err(decay_weights(&[1.0], &DecayModel::Step { steps: vec![] }, None, None, &o)).starts_with("steps"));
    assert!(err(decay_weights(&[1.0], &DecayModel::Step { steps: vec![(5.0, 1.0), (2.0, 0.5)] }, None, None, &o)).starts_with("steps"));
    assert!(err(decay_weights(&[1.0], &DecayModel::Step { steps: vec![(5.0, 2.0)] }, None, None, &o)).starts_with("steps"));
    let bad = DecayOptions { recent_boost: 0.5, ..DecayOptions::default() };
    assert!(err(decay_weights(&[1.0], &DecayModel::Adaptive, None, None, &bad)).starts_with("recent_boost"));
}
