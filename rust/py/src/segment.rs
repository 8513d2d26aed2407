//! Contiguous topic segmentation for Python: a square float32/float64
//! similarity matrix in, an int64 array of boundaries out, the core run with
//! the GIL released.

use ctxfold_core::segment::{self as core, SegmentOptions};
use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;

use crate::arrays::{square, Square};
use crate::errors::{non_negative, py_err, wrong_type, InvalidInputError};

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

/// Boundary costs: any 1-D array or list of finite floats, as float64.
fn boundary_costs<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Vec<f64>> {
    let numpy = obj.py().import("numpy")?;
    let array = numpy
        .call_method1("asarray", (obj,))
        .map_err(|_| wrong_type("boundary_costs", "a 1-D array of floats", obj))?;
    let kind: String = array.getattr("dtype")?.getattr("kind")?.extract()?;
    let ndim: usize = array.getattr("ndim")?.extract()?;
    if !(kind == "f" || kind == "i" || kind == "u") {
        return Err(wrong_type("boundary_costs", "a 1-D array of floats (one cost per block)", obj));
    }
    if ndim != 1 {
        return Err(InvalidInputError::new_err(format!("boundary_costs: expected a 1-D array, got {ndim} dimensions")));
    }
    let floats = array.call_method1("astype", ("float64",))?;
    let floats = floats
        .extract::<PyReadonlyArray1<'py, f64>>()
        .map_err(|_| wrong_type("boundary_costs", "a 1-D array of floats", obj))?;
    Ok(floats.as_array().iter().copied().collect())
}

/// Contiguous topic segmentation of n blocks (sentences, messages) from
/// their pairwise ``similarity`` (n, n), e.g. cosine similarities of their
/// embeddings.
///
/// Returns the boundaries: an increasing ``int64`` array with the index of
/// the first block of every segment except the first (K segments give K - 1
/// boundaries; ``numpy.split(blocks, boundaries)`` gives the segments).
///
/// How many segments: ``n_segments`` if given; else ``round(sum(tokens) /
/// target_tokens)`` moved into the range the token limits allow; else, with
/// only ``max_tokens``, the fewest segments that respect it. Passing both
/// ``n_segments`` and ``target_tokens``, or none of the three, is an error.
/// ``tokens`` (ints >= 0, one per block; default 1 each) only count toward
/// ``min_tokens`` (a floor per segment) and ``max_tokens`` (a hard cap per
/// segment); an infeasible request raises ``InvalidInputError`` saying why
/// (e.g. a block alone exceeds ``max_tokens``). ``boundary_costs`` (floats,
/// one per block, the first unused) is a prior on where segments start: the
/// cost of a boundary before block i is subtracted from the objective
/// whenever one is placed there (negative values favour it); its units are
/// the objective's, see ``ctxfold.dialogue_boundary_costs`` for a scaled
/// one built from the text of a dialogue.
///
/// Where the boundaries go is the exact optimum (dynamic program) of a
/// coherence objective: each similarity becomes evidence that two blocks
/// share a topic, ``w = max(mean of its z-scores within the two blocks' rows,
/// 0) - 0.5`` (row standard deviations shrunk by ``0.3 * mean variance``),
/// and a segment of L blocks scores ``sum of w over its ordered pairs /
/// L**0.3``. Per-row standardisation removes the "every sentence shares
/// 'the'" floor of sparse similarities; the 0.5 threshold makes unrelated
/// pairs cost; the exponent 0.3 is the length prior (0 lets long segments
/// collect evidence quadratically, larger values push towards equal
/// lengths). Ties go to the earliest boundaries. O(K * n^2 / 2)
/// with K segments (less under ``max_tokens``); for K > 24 a Lagrangian
/// search over the segment count runs first and is exact whenever it hits K
/// (else the K-layer program runs). Memory O(K * n) beyond the input (plus
/// up to 32 MB for the Lagrangian search's band of short segments). The
/// input check and row statistics run on rayon's threads for large inputs,
/// with the GIL released.
///
/// Good sentence vectors matter more than the method: ``ctxfold.Embedder``
/// (MiniLM) vectors segment better than ``StaticEmbedder`` ones, and both
/// better than per-document TF-IDF.
#[pyfunction]
#[pyo3(
    signature = (similarity, tokens = None, n_segments = None, target_tokens = None, min_tokens = None, max_tokens = None, boundary_costs = None),
    text_signature = "(similarity, tokens=None, n_segments=None, target_tokens=None, min_tokens=0, max_tokens=None, boundary_costs=None)"
)]
#[allow(clippy::too_many_arguments)]
fn segment<'py>(
    py: Python<'py>,
    similarity: &Bound<'py, PyAny>,
    tokens: Option<&Bound<'py, PyAny>>,
    n_segments: Option<&Bound<'py, PyAny>>,
    target_tokens: Option<&Bound<'py, PyAny>>,
    min_tokens: Option<&Bound<'py, PyAny>>,
    max_tokens: Option<&Bound<'py, PyAny>>,
    boundary_costs: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyArray1<i64>>> {
    let n_segments = optional_count(n_segments, "n_segments")?;
    let target_tokens = optional_count(target_tokens, "target_tokens")?.map(|v| v as u64);
    let min_tokens = optional_count(min_tokens, "min_tokens")?.unwrap_or(0) as u64;
    let max_tokens = optional_count(max_tokens, "max_tokens")?.map(|v| v as u64);
    let tokens = tokens.filter(|o| !o.is_none()).map(token_counts).transpose()?;
    let owned_tokens: Option<Vec<i64>> = tokens.as_ref().map(|t| t.as_array().iter().copied().collect());
    let costs = boundary_costs.filter(|o| !o.is_none()).map(self::boundary_costs).transpose()?;
    let options = SegmentOptions {
        tokens: owned_tokens.as_deref(),
        n_segments,
        target_tokens,
        min_tokens,
        max_tokens,
        boundary_costs: costs.as_deref(),
    };
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
    m.add_function(wrap_pyfunction!(segment, m)?)?;
    Ok(())
}
