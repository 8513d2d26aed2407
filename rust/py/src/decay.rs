//! Recency decay weights for Python: ages in, a float64 array out.

use ctxfold_core::decay::{decay_weights as core_decay, DecayModel, DecayOptions};
use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;

use crate::arrays::f64_vector;
use crate::errors::{py_err, wrong_type, InvalidInputError};

fn curve_from(name: &str, half_life: f64, rate: f64, steps: Option<Vec<(f64, f64)>>) -> PyResult<DecayModel> {
    match name {
        "exponential" => Ok(DecayModel::Exponential { half_life }),
        "logarithmic" => Ok(DecayModel::Logarithmic { rate }),
        "adaptive" => Ok(DecayModel::Adaptive),
        "step" => steps
            .map(|steps| DecayModel::Step { steps })
            .ok_or_else(|| InvalidInputError::new_err("steps: kind=\"step\" needs steps=[(max_age, weight), ...]")),
        other => Err(InvalidInputError::new_err(format!(
            "kind: unknown decay curve {other:?}; use \"exponential\", \"logarithmic\", \"step\" or \"adaptive\""
        ))),
    }
}

fn optional_vector<'py>(obj: Option<&Bound<'py, PyAny>>, argument: &str) -> PyResult<Option<PyReadonlyArray1<'py, f64>>> {
    obj.filter(|o| !o.is_none()).map(|o| f64_vector(o, argument)).transpose()
}

/// Recency weights in [0, 1] for ages (turns or seconds ago, >= 0).
///
/// ``weight = clip(base(age) * importance_factor * recent_factor, 0, 1)``:
///
/// - ``kind="exponential"``: ``0.5 ** (age / half_life)``;
///   ``"logarithmic"``: ``1 / (1 + rate * ln(1 + age))``;
///   ``"step"``: the weight of the first ``(max_age, weight)`` step with
///   ``age <= max_age`` (older: the last step's weight);
///   ``"adaptive"``: exponential with half-life 20 / 10 / 5 for importance
///   > 0.8 / > 0.5 / otherwise (importance defaults to 0.5).
/// - importance factor (when ``importance`` is given and ``importance_adjust``):
///   x1.5 above 0.8, x1 above 0.5, x0.7 otherwise.
/// - recency boost: x``recent_boost`` for items with ``turns_ago < recent_turns``
///   (the last two turns by default). With ``unit="turns"`` the ages are the
///   turns ago; with ``unit="seconds"`` pass ``turns_ago`` to get the boost.
///
/// Every parameter is validated (half-life and rate > 0, weights and
/// importances in [0, 1], ages >= 0 and finite, steps increasing).
#[pyfunction]
#[pyo3(signature = (
    ages, kind = "exponential", *, half_life = 10.0, rate = 1.0, steps = None, importance = None,
    turns_ago = None, unit = "turns", importance_adjust = true, recent_turns = 2.0, recent_boost = 1.2
))]
#[allow(clippy::too_many_arguments)]
fn decay_weights<'py>(
    py: Python<'py>,
    ages: &Bound<'py, PyAny>,
    kind: &str,
    half_life: f64,
    rate: f64,
    steps: Option<&Bound<'py, PyAny>>,
    importance: Option<&Bound<'py, PyAny>>,
    turns_ago: Option<&Bound<'py, PyAny>>,
    unit: &str,
    importance_adjust: bool,
    recent_turns: f64,
    recent_boost: f64,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let steps: Option<Vec<(f64, f64)>> = steps
        .filter(|s| !s.is_none())
        .map(|s| s.extract().map_err(|_| wrong_type("steps", "a list of (max_age, weight) pairs", s)))
        .transpose()?;
    let model = curve_from(kind, half_life, rate, steps)?;
    let ages = f64_vector(ages, "ages")?;
    let importance = optional_vector(importance, "importance")?;
    let mut turns_ago = optional_vector(turns_ago, "turns_ago")?;
    match unit {
        // Ages counted in turns say themselves which turns are the latest.
        "turns" if turns_ago.is_none() => turns_ago = Some(ages.clone()),
        "turns" | "seconds" => {}
        other => return Err(InvalidInputError::new_err(format!("unit: must be \"turns\" or \"seconds\", got {other:?}"))),
    }
    let options = DecayOptions { importance_adjust, recent_turns, recent_boost };
    let (ages, importance, turns_ago) = (ages.as_slice()?, importance.as_ref().map(|a| a.as_slice()).transpose()?, turns_ago.as_ref().map(|a| a.as_slice()).transpose()?);
    let weights = py.detach(|| core_decay(ages, &model, importance, turns_ago, &options)).map_err(py_err)?;
    Ok(weights.into_pyarray(py))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(decay_weights, m)?)?;
    Ok(())
}
