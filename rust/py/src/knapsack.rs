//! `select_options`: the multiple-choice knapsack for Python. numpy arrays of
//! the exact dtype are read in place; lists and other integer/float dtypes
//! are converted once (never a lossy cast: floats are refused as costs).

use ctxfold_core::knapsack::{self, Selection, Settings, Strategy};
use numpy::{IntoPyArray, PyArray1, PyArray2, PyArrayDescrMethods, PyArrayMethods, PyReadonlyArray2, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyList, PyTuple};

use crate::errors::{non_negative, py_err, string, wrong_type, InvalidInputError};

/// `obj` as a numpy array with `ndim` dimensions whose dtype kind is one of
/// `kinds` (numpy's one-letter kinds: b bool, i/u integers, f floats).
fn numpy_array<'py>(obj: &Bound<'py, PyAny>, argument: &str, ndim: usize, kinds: &[u8], expected: &str) -> PyResult<Bound<'py, PyUntypedArray>> {
    let array = match obj.cast::<PyUntypedArray>() {
        Ok(array) => array.clone(),
        Err(_) if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() => {
            let converted = obj.py().import("numpy")?.call_method1("asarray", (obj,)).map_err(|e| {
                InvalidInputError::new_err(format!("{argument}: cannot be read as an array ({e}); give {expected}"))
            })?;
            converted.cast_into::<PyUntypedArray>().map_err(|_| wrong_type(argument, expected, obj))?
        }
        Err(_) => return Err(wrong_type(argument, expected, obj)),
    };
    if array.ndim() != ndim {
        return Err(InvalidInputError::new_err(format!(
            "{argument}: expected a {ndim}-D array ({expected}), got shape {:?}",
            array.shape()
        )));
    }
    let kind = array.dtype().kind();
    // An empty list has dtype float64; any dtype is fine when there is nothing in it.
    if !kinds.contains(&kind) && array.len() > 0 {
        let dtype = array.dtype().str().map(|s| s.to_string()).unwrap_or_else(|_| "?".into());
        return Err(InvalidInputError::new_err(format!("{argument}: expected {expected}, got dtype {dtype}")));
    }
    Ok(array)
}

/// Convert to `dtype` only when needed; `casting="safe"` so nothing is truncated.
fn astype<'py, T>(array: Bound<'py, PyUntypedArray>, argument: &str, dtype: &str) -> PyResult<Bound<'py, T>>
where
    T: pyo3::PyTypeCheck,
{
    if let Ok(exact) = array.cast::<T>() {
        return Ok(exact.clone());
    }
    let kwargs = PyDict::new(array.py());
    kwargs.set_item("casting", "safe")?;
    let converted = array.call_method("astype", (dtype,), Some(&kwargs)).map_err(|_| {
        let from = array.dtype().str().map(|s| s.to_string()).unwrap_or_else(|_| "?".into());
        InvalidInputError::new_err(format!("{argument}: dtype {from} cannot be converted to {dtype} without loss; pass np.asarray({argument}, dtype=np.{dtype})"))
    })?;
    converted.cast_into::<T>().map_err(PyErr::from)
}

pub(crate) fn int64_matrix<'py>(obj: &Bound<'py, PyAny>, argument: &str) -> PyResult<PyReadonlyArray2<'py, i64>> {
    let array = numpy_array(obj, argument, 2, b"iu", "a 2-D int64 array of token costs (items x options)")?;
    Ok(astype::<PyArray2<i64>>(array, argument, "int64")?.readonly())
}

pub(crate) fn float64_matrix<'py>(obj: &Bound<'py, PyAny>, argument: &str, expected: &str) -> PyResult<PyReadonlyArray2<'py, f64>> {
    let array = numpy_array(obj, argument, 2, b"iuf", expected)?;
    Ok(astype::<PyArray2<f64>>(array, argument, "float64")?.readonly())
}

fn bool_vector(obj: &Bound<'_, PyAny>, argument: &str) -> PyResult<Vec<bool>> {
    let array = numpy_array(obj, argument, 1, b"b", "a 1-D bool array, one flag per item")?;
    let array = astype::<PyArray1<bool>>(array, argument, "bool")?;
    Ok(array.readonly().as_array().to_vec())
}

fn int64_vector(obj: &Bound<'_, PyAny>, argument: &str) -> PyResult<Vec<i64>> {
    let array = numpy_array(obj, argument, 1, b"iu", "a 1-D int64 array of group ids, one per item (-1 = no group)")?;
    let array = astype::<PyArray1<i64>>(array, argument, "int64")?;
    Ok(array.readonly().as_array().to_vec())
}

fn flag(obj: &Bound<'_, PyAny>, argument: &str) -> PyResult<bool> {
    obj.cast::<PyBool>().map(|b| b.is_true()).map_err(|_| wrong_type(argument, "bool", obj))
}

fn info<'py>(py: Python<'py>, selection: &Selection) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("value", selection.value)?;
    dict.set_item("cost", selection.cost)?;
    dict.set_item("upper_bound", selection.upper_bound)?;
    dict.set_item("gap", selection.gap())?;
    dict.set_item("lp_bound", selection.lp_bound)?;
    dict.set_item("exact", selection.exact)?;
    dict.set_item("method", selection.method.name())?;
    Ok(dict)
}

/// Choose one option per item (keep / summary levels / drop) maximising the
/// total value with total cost ``<= budget`` tokens: a multiple-choice knapsack.
/// Returns the chosen option index per item (``int64`` array).
///
/// ``costs``: ``(n, k)`` non-negative integer token costs (int64 read in place;
/// other integer dtypes converted; floats refused). ``values``: ``(n, k)``
/// finite numbers. Option 0 is each item's full form: ``protected`` (``n``
/// bools) items take it. ``groups`` (``n`` ints): items with the same id
/// ``>= 0`` take the same option index (a tool call and its result; a group
/// with a protected member takes option 0); ``-1`` = no group. Groups are
/// solved as one super-item whose option ``j`` sums its members' option ``j``.
///
/// Ties: among plans of equal value the more recent (higher-index) items get
/// their lower-index, fuller options (``prefer_recent=False``: earlier items).
/// Exact on the ``"dp"`` path; the core method applies it to its greedy only.
///
/// Methods (``method="auto"`` picks):
///
/// - ``"dp"``: the exact dynamic program over (item, tokens), after shifting
///   each item's cheapest option to 0 and dividing costs by their gcd; used
///   whenever its work (items x options x budget) is at most 5e7;
/// - ``"core"``: the LP relaxation over each item's upper convex hull of
///   options, greedy by value per token to the break item, then an exact DP
///   over the core (the items with the smallest reduced cost at the break
///   efficiency; the others fixed to their LP choice), grown until optimality
///   is proven or a work limit is hit (after Pisinger's minimal algorithm).
///   Its upper bound is ``max(value, lp_bound - smallest reduced cost outside
///   the core)``, so the gap it reports is never exceeded.
///
/// ``return_info=True`` returns ``(choices, info)`` with ``info`` a dict: ``value``, ``cost``, ``upper_bound``, ``gap``,
/// ``lp_bound``, ``exact``, ``method``.
///
/// Raises ``BudgetError`` (saying by how many tokens) when even the cheapest
/// admissible plan — protected items at option 0, every other item at its
/// cheapest option — exceeds the budget: an over-budget plan is never
/// returned. Raises ``InvalidInputError`` naming the argument for mismatched
/// shapes, wrong dtypes, NaN/inf values, negative costs or group ids below -1;
/// ``InvalidTypeError`` for arguments of the wrong type.
#[pyfunction]
#[pyo3(
    signature = (costs, values, budget, protected = None, groups = None, prefer_recent = None, *, return_info = None, method = None),
    text_signature = "(costs, values, budget, protected=None, groups=None, prefer_recent=True, *, return_info=False, method='auto')"
)]
#[allow(clippy::too_many_arguments)]
fn select_options<'py>(
    py: Python<'py>,
    costs: &Bound<'py, PyAny>,
    values: &Bound<'py, PyAny>,
    budget: &Bound<'py, PyAny>,
    protected: Option<&Bound<'py, PyAny>>,
    groups: Option<&Bound<'py, PyAny>>,
    prefer_recent: Option<&Bound<'py, PyAny>>,
    return_info: Option<&Bound<'py, PyAny>>,
    method: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let costs = int64_matrix(costs, "costs")?;
    let values = float64_matrix(values, "values", "a 2-D float64 array of values (items x options)")?;
    let budget = non_negative("budget", budget)? as u64;
    let protected = protected.filter(|o| !o.is_none()).map(|o| bool_vector(o, "protected")).transpose()?;
    let groups = groups.filter(|o| !o.is_none()).map(|o| int64_vector(o, "groups")).transpose()?;
    let prefer_recent = prefer_recent.map_or(Ok(true), |o| flag(o, "prefer_recent"))?;
    let return_info = return_info.map_or(Ok(false), |o| flag(o, "return_info"))?;
    let strategy = match method.filter(|o| !o.is_none()) {
        Some(o) => Strategy::from_name(&string("method", o)?).map_err(py_err)?,
        None => Strategy::Auto,
    };
    let settings = Settings { protected: protected.as_deref(), groups: groups.as_deref(), prefer_recent, strategy };
    let (costs_view, values_view) = (costs.as_array(), values.as_array());
    let selection = py.detach(|| knapsack::select_options(costs_view, values_view, budget, &settings)).map_err(py_err)?;
    let choices: Vec<i64> = selection.choices.iter().map(|&j| j as i64).collect();
    let choices = choices.into_pyarray(py).into_any();
    if return_info {
        Ok(PyTuple::new(py, [choices, info(py, &selection)?.into_any()])?.into_any())
    } else {
        Ok(choices)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(select_options, m)?)?;
    Ok(())
}
