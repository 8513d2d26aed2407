//! Spectral clustering and contiguous topic segmentation for Python: a square
//! float32/float64 matrix in (other numpy dtypes are refused, plain lists
//! become float64), an int64 array out, the core run with the GIL released.

use ctxfold_core::segment::{self as core, AssignLabels, SegmentOptions};
use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;

use crate::errors::{non_negative, py_err, string, wrong_type, InvalidInputError};

enum Square<'py> {
    F32(PyReadonlyArray2<'py, f32>),
    F64(PyReadonlyArray2<'py, f64>),
}

fn square<'py>(obj: &Bound<'py, PyAny>, argument: &str) -> PyResult<Square<'py>> {
    if let Ok(a) = obj.extract::<PyReadonlyArray2<'py, f64>>() {
        return Ok(Square::F64(a));
    }
    if let Ok(a) = obj.extract::<PyReadonlyArray2<'py, f32>>() {
        return Ok(Square::F32(a));
    }
    if obj.is_none() {
        return Err(wrong_type(argument, "a square 2-D array of numbers", obj));
    }
    let numpy = obj.py().import("numpy")?;
    if obj.is_instance(&numpy.getattr("ndarray")?)? {
        let dtype = obj.getattr("dtype")?.str()?.to_string();
        let ndim: usize = obj.getattr("ndim")?.extract()?;
        if dtype == "float32" || dtype == "float64" {
            return Err(InvalidInputError::new_err(format!(
                "{argument}: expected a square 2-D array, got {ndim} dimensions"
            )));
        }
        return Err(InvalidInputError::new_err(format!(
            "{argument}: dtype {dtype} is not supported; pass float32 or float64 (e.g. {argument}.astype(numpy.float64))"
        )));
    }
    let converted = numpy
        .call_method1("asarray", (obj, "float64"))
        .map_err(|_| wrong_type(argument, "a square 2-D array of numbers", obj))?;
    square(&converted, argument)
}

fn optional_count(obj: Option<&Bound<'_, PyAny>>, argument: &str) -> PyResult<Option<usize>> {
    obj.filter(|o| !o.is_none()).map(|o| non_negative(argument, o)).transpose()
}

/// Token counts: any 1-D integer array or list, as int64.
fn token_counts<'py>(obj: &Bound<'py, PyAny>) -> PyResult<PyReadonlyArray1<'py, i64>> {
    if let Ok(a) = obj.extract::<PyReadonlyArray1<'py, i64>>() {
        return Ok(a);
    }
    let numpy = obj.py().import("numpy")?;
    let array = numpy.call_method1("asarray", (obj,)).map_err(|_| wrong_type("tokens", "a 1-D array of ints", obj))?;
    let kind: String = array.getattr("dtype")?.getattr("kind")?.extract()?;
    let ndim: usize = array.getattr("ndim")?.extract()?;
    let size: usize = array.getattr("size")?.extract()?;
    if !(kind == "i" || kind == "u" || size == 0) {
        return Err(wrong_type("tokens", "a 1-D array of ints (token counts)", obj));
    }
    if ndim != 1 {
        return Err(InvalidInputError::new_err(format!("tokens: expected a 1-D array, got {ndim} dimensions")));
    }
    array
        .call_method1("astype", ("int64",))?
        .extract::<PyReadonlyArray1<'py, i64>>()
        .map_err(|_| wrong_type("tokens", "a 1-D array of ints", obj))
}

/// Cluster labels of a precomputed affinity matrix, as scikit-learn's
/// `SpectralClustering(affinity="precomputed")`.
#[pyfunction]
#[pyo3(
    signature = (affinity, n_clusters, assign_labels = None, seed = None),
    text_signature = "(affinity, n_clusters, assign_labels=\"discretize\", seed=0)"
)]
fn spectral_clustering<'py>(
    py: Python<'py>,
    affinity: &Bound<'py, PyAny>,
    n_clusters: &Bound<'py, PyAny>,
    assign_labels: Option<&Bound<'py, PyAny>>,
    seed: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyArray1<i64>>> {
    let n_clusters = non_negative("n_clusters", n_clusters)?;
    let assign = match assign_labels.filter(|o| !o.is_none()) {
        Some(obj) => AssignLabels::from_name(&string("assign_labels", obj)?).map_err(py_err)?,
        None => AssignLabels::Discretize,
    };
    let seed = match seed.filter(|o| !o.is_none()) {
        Some(obj) => {
            let value = non_negative("seed", obj)?;
            u32::try_from(value).map_err(|_| {
                InvalidInputError::new_err(format!(
                    "seed: must be an int in 0..=4294967295 (as numpy's RandomState), got {value}"
                ))
            })?
        }
        None => 0,
    };
    let labels = match square(affinity, "affinity")? {
        Square::F32(a) => {
            let a = a.as_array();
            py.detach(|| core::spectral_clustering(a, n_clusters, assign, seed))
        }
        Square::F64(a) => {
            let a = a.as_array();
            py.detach(|| core::spectral_clustering(a, n_clusters, assign, seed))
        }
    }
    .map_err(py_err)?;
    Ok(labels.into_pyarray(py))
}

/// Contiguous topic segmentation; returns the index of the first block of
/// every segment but the first.
#[pyfunction]
#[pyo3(
    signature = (similarity, tokens = None, n_segments = None, target_tokens = None, min_tokens = None, max_tokens = None),
    text_signature = "(similarity, tokens=None, n_segments=None, target_tokens=None, min_tokens=0, max_tokens=None)"
)]
fn segment<'py>(
    py: Python<'py>,
    similarity: &Bound<'py, PyAny>,
    tokens: Option<&Bound<'py, PyAny>>,
    n_segments: Option<&Bound<'py, PyAny>>,
    target_tokens: Option<&Bound<'py, PyAny>>,
    min_tokens: Option<&Bound<'py, PyAny>>,
    max_tokens: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyArray1<i64>>> {
    let n_segments = optional_count(n_segments, "n_segments")?;
    let target_tokens = optional_count(target_tokens, "target_tokens")?.map(|v| v as u64);
    let min_tokens = optional_count(min_tokens, "min_tokens")?.unwrap_or(0) as u64;
    let max_tokens = optional_count(max_tokens, "max_tokens")?.map(|v| v as u64);
    let tokens = tokens.filter(|o| !o.is_none()).map(token_counts).transpose()?;
    let owned_tokens: Option<Vec<i64>> = tokens.as_ref().map(|t| t.as_array().iter().copied().collect());
    let options = SegmentOptions { tokens: owned_tokens.as_deref(), n_segments, target_tokens, min_tokens, max_tokens };
    let boundaries = match square(similarity, "similarity")? {
        Square::F32(a) => {
            let a = a.as_array();
            py.detach(|| core::segment(a, &options))
        }
        Square::F64(a) => {
            let a = a.as_array();
            py.detach(|| core::segment(a, &options))
        }
    }
    .map_err(py_err)?;
    let boundaries: Vec<i64> = boundaries.into_iter().map(|b| b as i64).collect();
    Ok(boundaries.into_pyarray(py))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(spectral_clustering, m)?)?;
    m.add_function(wrap_pyfunction!(segment, m)?)?;
    Ok(())
}
