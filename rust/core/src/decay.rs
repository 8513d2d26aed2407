//! Recency decay: how much a message's age lowers its weight.
//!
//! `weight = clamp(base(age) * importance_factor * recent_factor, 0, 1)` where
//! - `base` is one of the models below (all equal 1 at age 0 and fall with age);
//! - `importance_factor` is 1.5 above importance 0.8, 1.0 above 0.5, 0.7 otherwise
//!   (the seed spec's importance adjustment; off when no importances are given);
//! - `recent_factor` is the recency boost (default 1.2) for the last two turns
//!   (`turns_ago < recent_turns`), so the live exchange is never faded out.
//!
//! The clamp keeps every weight in [0, 1] so it mixes with the other scoring
//! layers, which are all in that range.

use crate::{Error, Result};

/// How weight falls with age.
#[derive(Clone, Debug, PartialEq)]
pub enum DecayModel {
    /// `0.5 ^ (age / half_life)`.
    Exponential { half_life: f64 },
    /// `1 / (1 + rate * ln(1 + age))`: a slow, heavy-tailed fall for long histories.
    Logarithmic { rate: f64 },
    /// Piecewise constant: the weight of the first step whose `max_age >= age`;
    /// older than the last step gets the last step's weight.
    Step { steps: Vec<(f64, f64)> },
    /// Exponential with a half-life chosen by importance: 20 above 0.8, 10
    /// above 0.5, else 5 (important messages fade more slowly).
    Adaptive,
}

/// Everything besides the model that shapes the weights.
#[derive(Clone, Debug, PartialEq)]
pub struct DecayOptions {
    /// Multiply by 1.5 / 1.0 / 0.7 by importance (needs importances).
    pub importance_adjust: bool,
    /// How many of the latest turns get `recent_boost`.
    pub recent_turns: f64,
    pub recent_boost: f64,
}

impl Default for DecayOptions {
    fn default() -> Self {
        Self { importance_adjust: true, recent_turns: 2.0, recent_boost: 1.2 }
    }
}

pub const DEFAULT_IMPORTANCE: f64 = 0.5;

impl DecayModel {
    pub fn validate(&self) -> Result<()> {
        match self {
            DecayModel::Exponential { half_life } if !(half_life.is_finite() && *half_life > 0.0) => {
                Err(Error::invalid("half_life", format!("must be a finite number > 0, got {half_life}")))
            }
            DecayModel::Logarithmic { rate } if !(rate.is_finite() && *rate > 0.0) => {
                Err(Error::invalid("rate", format!("must be a finite number > 0, got {rate}")))
            }
            DecayModel::Step { steps } => validate_steps(steps),
            _ => Ok(()),
        }
    }

    fn base(&self, age: f64, importance: f64) -> f64 {
        match self {
            DecayModel::Exponential { half_life } => 0.5f64.powf(age / half_life),
            DecayModel::Logarithmic { rate } => 1.0 / (1.0 + rate * age.ln_1p()),
            DecayModel::Step { steps } => steps
                .iter()
                .find(|(max_age, _)| age <= *max_age)
                .or(steps.last())
                .map_or(1.0, |(_, weight)| *weight),
            DecayModel::Adaptive => 0.5f64.powf(age / adaptive_half_life(importance)),
        }
    }
}

fn validate_steps(steps: &[(f64, f64)]) -> Result<()> {
    if steps.is_empty() {
        return Err(Error::invalid("steps", "needs at least one (max_age, weight) pair"));
    }
    for (i, &(age, weight)) in steps.iter().enumerate() {
        if !(age.is_finite() || age == f64::INFINITY) || age < 0.0 {
            return Err(Error::invalid("steps", format!("steps[{i}] max_age must be >= 0, got {age}")));
        }
        if !(0.0..=1.0).contains(&weight) {
            return Err(Error::invalid("steps", format!("steps[{i}] weight must be in [0, 1], got {weight}")));
        }
        if i > 0 && age <= steps[i - 1].0 {
            return Err(Error::invalid("steps", format!("max_age must increase; steps[{i}] = {age} follows {}", steps[i - 1].0)));
        }
    }
    Ok(())
}

/// The seed spec's adaptive half-life, in the unit of the ages.
pub fn adaptive_half_life(importance: f64) -> f64 {
    if importance > 0.8 {
        20.0
    } else if importance > 0.5 {
        10.0
    } else {
        5.0
    }
}

/// The seed spec's importance multiplier.
pub fn importance_factor(importance: f64) -> f64 {
    if importance > 0.8 {
        1.5
    } else if importance > 0.5 {
        1.0
    } else {
        0.7
    }
}

fn check_options(options: &DecayOptions) -> Result<()> {
    if !(options.recent_turns.is_finite() && options.recent_turns >= 0.0) {
        return Err(Error::invalid("recent_turns", format!("must be >= 0, got {}", options.recent_turns)));
    }
    if !(options.recent_boost.is_finite() && options.recent_boost >= 1.0) {
        return Err(Error::invalid("recent_boost", format!("must be >= 1 (1 turns the boost off), got {}", options.recent_boost)));
    }
    Ok(())
}

fn check_values(argument: &str, values: &[f64], low: f64, high: f64) -> Result<()> {
    match values.iter().position(|v| !(low..=high).contains(v)) {
        Some(i) => Err(Error::invalid(argument, format!("{argument}[{i}] = {} is outside [{low}, {high}]", values[i]))),
        None => Ok(()),
    }
}

/// Weights for `ages` (turns or seconds ago, >= 0). `importance` (0..1, one per
/// age) drives the adaptive model and the importance adjustment; `turns_ago`
/// (one per age) decides who gets the recent boost — pass the ages themselves
/// when they are in turns.
pub fn decay_weights(
    ages: &[f64],
    model: &DecayModel,
    importance: Option<&[f64]>,
    turns_ago: Option<&[f64]>,
    options: &DecayOptions,
) -> Result<Vec<f64>> {
    model.validate()?;
    check_options(options)?;
    check_values("ages", ages, 0.0, f64::MAX)?;
    for (argument, values) in [("importance", importance), ("turns_ago", turns_ago)] {
        if let Some(values) = values {
            if values.len() != ages.len() {
                return Err(Error::invalid(argument, format!("has {} values but ages has {}", values.len(), ages.len())));
            }
        }
    }
    if let Some(values) = importance {
        check_values("importance", values, 0.0, 1.0)?;
    }
    if let Some(values) = turns_ago {
        check_values("turns_ago", values, 0.0, f64::MAX)?;
    }
    Ok(ages
        .iter()
        .enumerate()
        .map(|(i, &age)| {
            let imp = importance.map_or(DEFAULT_IMPORTANCE, |v| v[i]);
            let mut weight = model.base(age, imp);
            if options.importance_adjust && importance.is_some() {
                weight *= importance_factor(imp);
            }
            if turns_ago.is_some_and(|t| t[i] < options.recent_turns) {
                weight *= options.recent_boost;
            }
            weight.clamp(0.0, 1.0)
        })
        .collect())
}
