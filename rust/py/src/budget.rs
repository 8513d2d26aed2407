//! `negotiate_budget`, `plan_layers` and their result, `BudgetAllocation`.
//!
//! The negotiation itself is a few arithmetic steps, cheaper than releasing
//! and re-taking the GIL, so it runs without `py.detach`; the cost of a call
//! is argument conversion, kept to plain tuple/number reads.

use ctxfold_core::budget::{self, Allocation, KnowledgeDepth, Layer, Situation, STANDARD_LAYERS};
use numpy::{IntoPyArray, PyArray1};
use pyo3::exceptions::PyDeprecationWarning;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyList, PySequenceMethods, PyString, PyTuple};

use crate::errors::{non_negative, py_err, string, wrong_type, InvalidInputError, InvalidTypeError};
use crate::renamed::renamed;
use crate::knapsack::float64_matrix;

/// Tokens granted to each context layer (the result of ``negotiate_budget``
/// and ``plan_layers``). ``alloc["history"]`` or ``alloc[6]`` reads one layer;
/// ``alloc.to_dict()`` gives ``{name: tokens}``.
#[pyclass(module = "ctxfold._core", name = "BudgetAllocation", frozen)]
pub struct PyBudgetAllocation {
    names: Option<Vec<String>>,
    layers: Vec<Layer>,
    allocation: Allocation,
}

#[pymethods]
impl PyBudgetAllocation {
    /// Tokens per layer, in the order given.
    #[getter]
    fn allocations<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<i64>> {
        self.allocation.tokens.iter().map(|&t| t as i64).collect::<Vec<_>>().into_pyarray(py)
    }

    /// Per layer: ``True`` if it was dropped to 0 because its minimum did not
    /// fit, or is a fixed layer left below its ideal.
    #[getter]
    fn cut<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<bool>> {
        self.allocation.cut.clone().into_pyarray(py)
    }

    /// Layer names (dict keys, ``names=``, or the standard layer names).
    #[getter]
    fn names(&self) -> Option<Vec<String>> {
        self.names.clone()
    }

    /// Per layer ``(min, ideal, max, priority, elasticity, fixed)`` as negotiated
    /// (for ``plan_layers``: the requirements its formulas computed).
    #[getter]
    fn layers(&self) -> Vec<(u64, u64, u64, f64, f64, bool)> {
        self.layers.iter().map(|l| (l.min, l.ideal, l.max, l.priority, l.elasticity, l.fixed)).collect()
    }

    /// The budget that was split.
    #[getter]
    fn budget(&self) -> u64 {
        self.allocation.total
    }

    /// The old name of ``budget``; warns, and goes away in the next release.
    #[getter]
    fn total(&self, py: Python<'_>) -> PyResult<u64> {
        PyErr::warn(
            py,
            py.get_type::<PyDeprecationWarning>().as_any(),
            c"BudgetAllocation.total is now BudgetAllocation.budget; total will be removed in the next release",
            1,
        )?;
        Ok(self.allocation.total)
    }

    /// Sum of the allocations (never above ``budget``).
    #[getter]
    fn allocated(&self) -> u64 {
        self.allocation.allocated()
    }

    /// ``budget - allocated``: non-zero only when every layer that was not
    /// dropped is at its max.
    #[getter]
    fn unallocated(&self) -> u64 {
        self.allocation.unallocated()
    }

    /// ``{name: tokens}``, or ``{index: tokens}`` when the layers have no names.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(py);
        for (i, &tokens) in self.allocation.tokens.iter().enumerate() {
            match &self.names {
                Some(names) => dict.set_item(&names[i], tokens)?,
                None => dict.set_item(i, tokens)?,
            }
        }
        Ok(dict)
    }

    /// Tokens of one layer, by name (``KeyError`` if unknown) or index.
    fn __getitem__(&self, key: &Bound<'_, PyAny>) -> PyResult<u64> {
        let n = self.allocation.tokens.len();
        if let Ok(name) = key.cast::<PyString>() {
            let name = name.to_str()?;
            let found = self.names.as_ref().and_then(|names| names.iter().position(|x| x == name));
            return found.map(|i| self.allocation.tokens[i]).ok_or_else(|| {
                pyo3::exceptions::PyKeyError::new_err(format!("no layer named {name:?}; layers: {:?}", self.names.clone().unwrap_or_default()))
            });
        }
        let index: isize = key.extract().map_err(|_| wrong_type("key", "str or int", key))?;
        let i = if index < 0 { index + n as isize } else { index };
        usize::try_from(i)
            .ok()
            .and_then(|i| self.allocation.tokens.get(i).copied())
            .ok_or_else(|| pyo3::exceptions::PyIndexError::new_err(format!("layer index {index} out of range for {n} layers")))
    }

    fn __len__(&self) -> usize {
        self.allocation.tokens.len()
    }

    fn __repr__(&self) -> String {
        let parts: Vec<String> = self
            .allocation
            .tokens
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let name = self.names.as_ref().map_or_else(|| i.to_string(), |n| format!("{:?}", n[i]));
                let mark = if self.allocation.cut[i] { " (cut)" } else { "" };
                format!("{name}: {t}{mark}")
            })
            .collect();
        format!(
            "BudgetAllocation({{{}}}, budget={}, unallocated={})",
            parts.join(", "),
            self.allocation.total,
            self.allocation.unallocated()
        )
    }
}

/// A whole number of tokens; the field is named only when building an error.
fn tokens_field(obj: &Bound<'_, PyAny>, i: usize, field: &str) -> PyResult<u64> {
    if !obj.is_instance_of::<PyBool>() {
        if let Ok(v) = obj.extract::<u64>() {
            return Ok(v);
        }
    }
    non_negative(&format!("layers[{i}].{field}"), obj).map(|v| v as u64)
}

fn number_field(obj: &Bound<'_, PyAny>, i: usize, field: &str) -> PyResult<f64> {
    if !obj.is_instance_of::<PyBool>() {
        if let Ok(v) = obj.extract::<f64>() {
            return Ok(v);
        }
    }
    Err(wrong_type(&format!("layers[{i}].{field}"), "a number", obj))
}

/// One `(min, ideal, max, priority, elasticity[, fixed])` tuple (or list).
fn layer_from_sequence(obj: &Bound<'_, PyAny>, i: usize) -> PyResult<Layer> {
    const WHAT: &str = "a tuple (min, ideal, max, priority, elasticity[, fixed])";
    let seq = if let Ok(t) = obj.cast::<PyTuple>() {
        t.as_sequence().clone()
    } else if let Ok(l) = obj.cast::<PyList>() {
        l.as_sequence().clone()
    } else {
        return Err(wrong_type(&format!("layers[{i}]"), WHAT, obj));
    };
    let len = seq.len()?;
    if len != 5 && len != 6 {
        return Err(InvalidInputError::new_err(format!("layers[{i}]: expected {WHAT}, got {len} values")));
    }
    let item = |k: usize| seq.get_item(k);
    let mut layer = Layer::new(
        tokens_field(&item(0)?, i, "min")?,
        tokens_field(&item(1)?, i, "ideal")?,
        tokens_field(&item(2)?, i, "max")?,
        number_field(&item(3)?, i, "priority")?,
        number_field(&item(4)?, i, "elasticity")?,
    );
    if len == 6 {
        let fixed = item(5)?;
        layer.fixed = fixed
            .cast::<PyBool>()
            .map(|b| b.is_true())
            .map_err(|_| wrong_type(&format!("layers[{i}].fixed"), "bool", &fixed))?;
    }
    Ok(layer)
}

/// Rows `[min, ideal, max, priority, elasticity(, fixed)]` of a numeric array.
fn layers_from_array(obj: &Bound<'_, PyAny>) -> PyResult<Vec<Layer>> {
    let array = float64_matrix(obj, "layers", "an (n, 5) or (n, 6) array of [min, ideal, max, priority, elasticity(, fixed)]")?;
    let view = array.as_array();
    if view.ncols() != 5 && view.ncols() != 6 {
        return Err(InvalidInputError::new_err(format!(
            "layers: expected 5 or 6 columns [min, ideal, max, priority, elasticity(, fixed)], got {}",
            view.ncols()
        )));
    }
    let mut layers = Vec::with_capacity(view.nrows());
    for (i, row) in view.rows().into_iter().enumerate() {
        let tokens = |c: usize, f: &str| -> PyResult<u64> {
            let x = row[c];
            if x.is_finite() && x >= 0.0 && x.fract() == 0.0 && x < 2f64.powi(63) {
                Ok(x as u64)
            } else {
                Err(InvalidInputError::new_err(format!("layers[{i}].{f}: must be a whole number of tokens >= 0, got {x}")))
            }
        };
        let mut layer = Layer::new(tokens(0, "min")?, tokens(1, "ideal")?, tokens(2, "max")?, row[3], row[4]);
        if view.ncols() == 6 {
            layer.fixed = row[5] != 0.0;
        }
        layers.push(layer);
    }
    Ok(layers)
}

fn parse_layers(layers: &Bound<'_, PyAny>) -> PyResult<(Vec<Layer>, Option<Vec<String>>)> {
    if let Ok(dict) = layers.cast::<PyDict>() {
        let mut names = Vec::with_capacity(dict.len());
        let mut parsed = Vec::with_capacity(dict.len());
        for (i, (key, value)) in dict.iter().enumerate() {
            names.push(string("layers (a dict key)", &key)?);
            parsed.push(layer_from_sequence(&value, i)?);
        }
        return Ok((parsed, Some(names)));
    }
    if let Ok(list) = layers.cast::<PyList>() {
        let parsed = list.iter().enumerate().map(|(i, l)| layer_from_sequence(&l, i)).collect::<PyResult<_>>()?;
        return Ok((parsed, None));
    }
    if let Ok(tuple) = layers.cast::<PyTuple>() {
        let parsed = tuple.iter().enumerate().map(|(i, l)| layer_from_sequence(&l, i)).collect::<PyResult<_>>()?;
        return Ok((parsed, None));
    }
    if layers.cast::<numpy::PyUntypedArray>().is_ok() {
        return Ok((layers_from_array(layers)?, None));
    }
    Err(wrong_type(
        "layers",
        "a list of (min, ideal, max, priority, elasticity[, fixed]) tuples, a dict of them by name, or an (n, 5|6) array",
        layers,
    ))
}

fn names_argument(names: &Bound<'_, PyAny>, n: usize) -> PyResult<Vec<String>> {
    let items: Vec<Bound<'_, PyAny>> = if let Ok(l) = names.cast::<PyList>() {
        l.iter().collect()
    } else if let Ok(t) = names.cast::<PyTuple>() {
        t.iter().collect()
    } else {
        return Err(wrong_type("names", "a list of str", names));
    };
    if items.len() != n {
        return Err(InvalidInputError::new_err(format!("names: {} names for {n} layers; give one name per layer", items.len())));
    }
    items.iter().enumerate().map(|(i, s)| string(&format!("names[{i}]"), s)).collect()
}

/// Split ``budget`` tokens between context layers.
///
/// Each layer is ``(min, ideal, max, priority, elasticity)`` with an optional
/// sixth ``fixed`` flag (default: fixed when ``elasticity == 0``): tokens are
/// whole numbers with ``min <= ideal <= max``, ``priority`` in 0..100 (higher is
/// served first and cut last), ``elasticity`` in 0..1 (among equal priorities the
/// more elastic layer is cut first). ``layers`` is a list of such tuples, a dict
/// of them by name, or an ``(n, 5|6)`` numeric array.
///
/// Phases:
///
/// 1. fixed layers take their ideal, the others their minimum;
/// 2. cut-to-fit when that does not fit: fixed layers shrink toward their
///    minimum (lowest priority first); if even the minimums do not fit, layers
///    are dropped to 0 from the lowest priority up (ties: more elastic, then
///    earlier, first) and a dropped layer whose minimum fits in what was freed
///    is re-admitted;
/// 3. the rest goes toward the ideals: all of them when it covers every gap,
///    else shares proportional to ``(ideal - min) * priority``, water-filled so
///    that no share passes its ideal;
/// 4. leftovers go to the elastic layers by priority up to their max, then to
///    the fixed layers.
///
/// Guarantees: the sum never exceeds ``budget``; every allocation is 0 or in
/// ``[min, max]``; tokens stay unallocated only when every layer that was not
/// dropped is at its max.
///
/// Fixes to the published OpenScroll algorithm: its cut-to-fit trimmed layers
/// partly below their minimum ("below this, don't include at all") and never
/// cut the fixed layers, so a small budget was over-allocated; its weighted
/// pass scaled shares by ``priority / 100`` against a shrinking remainder, so
/// layers stayed below their ideal even when the budget covered every ideal,
/// and the leftover then went to the highest-priority layer up to its max.
///
/// Raises ``InvalidInputError`` naming the field (``layers[2].ideal``) for an
/// invalid layer, ``InvalidTypeError`` for a wrong type.
#[pyfunction]
#[pyo3(
    signature = (budget = None, layers = None, names = None, *, total = None),
    text_signature = "(budget, layers, names=None)"
)]
fn negotiate_budget(
    budget: Option<&Bound<'_, PyAny>>,
    layers: Option<&Bound<'_, PyAny>>,
    names: Option<&Bound<'_, PyAny>>,
    total: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyBudgetAllocation> {
    let budget = non_negative("budget", renamed("negotiate_budget", ("budget", budget), ("total", total))?)? as u64;
    let layers = layers.ok_or_else(|| InvalidTypeError::new_err("negotiate_budget: missing the required argument layers"))?;
    let (layers, mut layer_names) = parse_layers(layers)?;
    if let Some(names) = names.filter(|n| !n.is_none()) {
        if layer_names.is_some() {
            return Err(InvalidInputError::new_err("names: the layers are a dict, whose keys already name them; drop names="));
        }
        layer_names = Some(names_argument(names, layers.len())?);
    }
    let allocation = budget::negotiate(budget, &layers).map_err(py_err)?;
    Ok(PyBudgetAllocation { names: layer_names, layers, allocation })
}

/// The eight standard layers — ``identity``, ``preferences``, ``topic``,
/// ``entity``, ``conversation_arc``, ``retrieval`` (just-in-time),
/// ``history`` (message history), ``user_message`` — sized by the OpenScroll
/// budget formulas for this situation, then split by ``negotiate_budget``.
///
/// With ``B = budget``, depth ``d`` = 0.5 / 1 / 1.5 (minimal / standard / deep),
/// conversation pressure ``p = min(1, conversation_tokens / 0.7B)``:
///
/// - identity: fixed, priority 100, min 150, ideal ``min(400, 2% B)``, max 500;
/// - preferences: fixed, priority 95, min 100, ideal ``min(600, 3% B)``, max 800;
/// - topic: ``12% B * d * min(2, 1 + 0.3 (topics - 1)) * (1 - 0.4 p)``, min 300
///   if any topic, max 25% B, priority 85 when knowledge-heavy (2+ topics or
///   deep) else 70;
/// - entity: ``6% B * min(2, 1 + 0.4 (entities - 1))`` capped at 400 per
///   entity, min 150 if any entity, max 12% B, priority 65;
/// - conversation_arc: ``150 * log2(max(1, messages) + 1) * d`` capped at
///   15% B, min 200 if the conversation is active, max 20% B, priority 88 if
///   active else 30;
/// - retrieval: ``10% B * max(0.3, 1 - min(1, topic_bundle_tokens / 15% B)) * d``,
///   min 200, max 18% B, priority 75;
/// - history: all of a conversation up to 3,000 tokens, else 35% / 30% / 25% of
///   B (up to 10,000 / 50,000 / beyond), x1.3 with ``prioritize_history``, x1.2
///   when dialogue-heavy (more than 20 messages and ``prioritize_history``),
///   never more than the conversation; min 500 if active, max 60% B, priority
///   90 when dialogue-heavy else 80;
/// - user_message: fixed at ``user_message_tokens``, priority 100.
///
/// ``active_conversation`` defaults to ``message_count > 0``.
///
/// Fixes to the published formulas (besides those of ``negotiate_budget``):
/// every ideal is clamped into ``[min, max]`` and every min to ``<= max`` (the
/// identity ideal ``min(400, 2% B)`` fell under its 150 floor below 7,500
/// tokens; the topic ideal could pass its 25% max); the entity max is capped
/// at 400 tokens per entity too (the published cap applied to the ideal only,
/// so leftovers could give a situation without entities 12% of the budget);
/// the history max is capped at the conversation's size and the arc gets
/// nothing without messages (tokens there could never be used); a budget of 0
/// gives 0 everywhere (the published pressure divided by zero).
#[pyfunction]
#[pyo3(signature = (
    budget = None,
    *,
    message_count = None,
    conversation_tokens = None,
    user_message_tokens = None,
    topic_count = None,
    entity_count = None,
    active_conversation = None,
    knowledge_depth = None,
    prioritize_history = None,
    topic_bundle_tokens = None,
    total = None,
), text_signature = "(budget, *, message_count=0, conversation_tokens=0, user_message_tokens=0, topic_count=0, \
    entity_count=0, active_conversation=None, knowledge_depth='standard', prioritize_history=False, topic_bundle_tokens=0)")]
#[allow(clippy::too_many_arguments)]
fn plan_layers(
    budget: Option<&Bound<'_, PyAny>>,
    message_count: Option<&Bound<'_, PyAny>>,
    conversation_tokens: Option<&Bound<'_, PyAny>>,
    user_message_tokens: Option<&Bound<'_, PyAny>>,
    topic_count: Option<&Bound<'_, PyAny>>,
    entity_count: Option<&Bound<'_, PyAny>>,
    active_conversation: Option<&Bound<'_, PyAny>>,
    knowledge_depth: Option<&Bound<'_, PyAny>>,
    prioritize_history: Option<&Bound<'_, PyAny>>,
    topic_bundle_tokens: Option<&Bound<'_, PyAny>>,
    total: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyBudgetAllocation> {
    let budget = renamed("plan_layers", ("budget", budget), ("total", total))?;
    let count = |obj: Option<&Bound<'_, PyAny>>, name: &str| -> PyResult<u64> {
        obj.map_or(Ok(0), |o| non_negative(name, o).map(|v| v as u64))
    };
    let flag = |obj: Option<&Bound<'_, PyAny>>, name: &str| -> PyResult<Option<bool>> {
        obj.filter(|o| !o.is_none())
            .map(|o| o.cast::<PyBool>().map(|b| b.is_true()).map_err(|_| wrong_type(name, "bool", o)))
            .transpose()
    };
    let message_count = count(message_count, "message_count")?;
    let knowledge_depth = match knowledge_depth.filter(|o| !o.is_none()) {
        Some(o) => KnowledgeDepth::from_name(&string("knowledge_depth", o)?).map_err(py_err)?,
        None => KnowledgeDepth::Standard,
    };
    let situation = Situation {
        total: non_negative("budget", budget)? as u64,
        message_count,
        conversation_tokens: count(conversation_tokens, "conversation_tokens")?,
        user_message_tokens: count(user_message_tokens, "user_message_tokens")?,
        topic_count: count(topic_count, "topic_count")?,
        entity_count: count(entity_count, "entity_count")?,
        active_conversation: flag(active_conversation, "active_conversation")?.unwrap_or(message_count > 0),
        knowledge_depth,
        prioritize_history: flag(prioritize_history, "prioritize_history")?.unwrap_or(false),
        topic_bundle_tokens: count(topic_bundle_tokens, "topic_bundle_tokens")?,
    };
    let (layers, allocation) = budget::plan_layers(&situation).map_err(py_err)?;
    let names = STANDARD_LAYERS.iter().map(|s| s.to_string()).collect();
    Ok(PyBudgetAllocation { names: Some(names), layers: layers.to_vec(), allocation })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyBudgetAllocation>()?;
    m.add_function(wrap_pyfunction!(negotiate_budget, m)?)?;
    m.add_function(wrap_pyfunction!(plan_layers, m)?)?;
    Ok(())
}
