//! Cosine similarity, top-k and BM25 for Python. Matrices keep their dtype
//! (float32 or float64): X and Y must agree, other dtypes are refused rather
//! than silently converted; plain lists become float64.

use ctxfold_core::linalg::Real;
use ctxfold_core::similarity::{self, bm25};
use numpy::{IntoPyArray, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::errors::{non_negative, py_err, wrong_type, InvalidInputError};
use crate::text_input::{text, texts as text_list, Texts};

/// A 2-D float matrix argument, either precision.
enum Matrix<'py> {
    F32(PyReadonlyArray2<'py, f32>),
    F64(PyReadonlyArray2<'py, f64>),
}

impl<'py> Matrix<'py> {
    fn dtype(&self) -> &'static str {
        match self {
            Matrix::F32(_) => "float32",
            Matrix::F64(_) => "float64",
        }
    }
}

fn matrix<'py>(obj: &Bound<'py, PyAny>, argument: &str, as_row: bool) -> PyResult<Matrix<'py>> {
    if let Ok(a) = obj.extract::<PyReadonlyArray2<'py, f32>>() {
        return Ok(Matrix::F32(a));
    }
    if let Ok(a) = obj.extract::<PyReadonlyArray2<'py, f64>>() {
        return Ok(Matrix::F64(a));
    }
    let numpy = obj.py().import("numpy")?;
    let is_array = obj.is_instance(&numpy.getattr("ndarray")?)?;
    if is_array {
        let dtype = obj.getattr("dtype")?.str()?.to_string();
        let ndim: usize = obj.getattr("ndim")?.extract()?;
        let floating = dtype == "float32" || dtype == "float64";
        if floating && ndim == 1 && as_row {
            return matrix(&obj.call_method1("reshape", (1, -1))?, argument, false);
        }
        if floating {
            return Err(InvalidInputError::new_err(format!("{argument}: expected a 2-D array, got {ndim} dimensions")));
        }
        return Err(InvalidInputError::new_err(format!(
            "{argument}: dtype {dtype} is not supported; pass float32 or float64 (e.g. {argument}.astype(numpy.float32))"
        )));
    }
    let converted = numpy
        .call_method1("asarray", (obj, "float64"))
        .map_err(|_| wrong_type(argument, "a 2-D array of numbers", obj))?;
    matrix(&converted, argument, as_row)
}

fn same_dtype(x: &Matrix<'_>, y: &Matrix<'_>) -> PyResult<()> {
    if x.dtype() == y.dtype() {
        return Ok(());
    }
    Err(dtype_mismatch(x, y))
}

fn dtype_mismatch(x: &Matrix<'_>, y: &Matrix<'_>) -> PyErr {
    InvalidInputError::new_err(format!(
        "Y: dtype {} differs from X's {}; convert one (e.g. Y.astype(X.dtype))",
        y.dtype(),
        x.dtype()
    ))
}

/// Cosine similarity of every row of ``X`` (n, d) with every row of ``Y``
/// (m, d), or of ``X`` with itself: an (n, m) array of the input's dtype
/// (float32 or float64; ``X`` and ``Y`` must agree; lists become float64).
///
/// A zero row has similarity 0 with everything, never NaN; values are clipped
/// to [-1, 1]. Rows are normalised once and multiplied with a parallel GEMM
/// with the GIL released. Non-finite values, a column-count mismatch, other
/// dtypes or a non-2-D input raise ``InvalidInputError`` naming the argument.
#[pyfunction]
#[pyo3(name = "cosine_similarity", signature = (X, Y = None))]
#[allow(non_snake_case)]
fn cosine_similarity<'py>(py: Python<'py>, X: &Bound<'py, PyAny>, Y: Option<&Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyAny>> {
    let x = matrix(X, "X", false)?;
    let y = Y.filter(|y| !y.is_none()).map(|y| matrix(y, "Y", false)).transpose()?;
    match (x, y) {
        (Matrix::F32(x), None) => cosine_to_numpy(py, &x, None),
        (Matrix::F64(x), None) => cosine_to_numpy(py, &x, None),
        (Matrix::F32(x), Some(Matrix::F32(y))) => cosine_to_numpy(py, &x, Some(&y)),
        (Matrix::F64(x), Some(Matrix::F64(y))) => cosine_to_numpy(py, &x, Some(&y)),
        (x, Some(y)) => Err(dtype_mismatch(&x, &y)),
    }
}

/// `similarity::cosine_into` a new array allocated by numpy (which backs
/// large arrays with huge pages; see `cosine_into`), the GIL released.
fn cosine_to_numpy<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    x: &PyReadonlyArray2<'py, T>,
    y: Option<&PyReadonlyArray2<'py, T>>,
) -> PyResult<Bound<'py, PyAny>> {
    let (xv, yv) = (x.as_array(), y.map(|y| y.as_array()));
    let out = PyArray2::<T>::zeros(py, [xv.nrows(), yv.as_ref().map_or(xv.nrows(), |y| y.nrows())], false);
    {
        let mut rw = out.readwrite();
        let view = rw.as_array_mut();
        py.detach(|| similarity::cosine_into(xv, yv, view)).map_err(py_err)?;
    }
    Ok(out.into_any())
}

/// Indices and cosine scores of the ``k`` rows of ``X`` most similar to
/// ``query``, best first (ties: lower index first). A 1-D query gives 1-D
/// results, a 2-D query one row per query. Fewer than ``k`` rows give all.
///
/// Scores keep the input's dtype (float32 or float64; ``query`` and ``X``
/// must agree; lists become float64): each is the cosine with its sums in
/// f64, clipped to [-1, 1] and rounded to that dtype; a zero row, or a zero
/// query, scores 0. ``X`` is read in place (no normalised copy, no score
/// matrix) with the GIL released: one pass takes each row's dot product and
/// norm together, row blocks in parallel, and keeps only the rows that a
/// proven error bound cannot rule out of the top k; those are rescored
/// exactly, so the ranking is that of the exact scores. Several queries go
/// through a blocked matrix product that reads ``X`` once. For rows already
/// unit length, ``top_k_normalized`` skips the norms. Non-finite values, a
/// dimension mismatch, other dtypes, a non-2-D ``X`` or a negative ``k``
/// raise ``InvalidInputError``, and a non-numeric argument or a non-int
/// ``k`` ``InvalidTypeError``, each naming the argument.
#[pyfunction]
#[pyo3(signature = (query, X, k))]
#[allow(non_snake_case)]
fn top_k<'py>(py: Python<'py>, query: &Bound<'py, PyAny>, X: &Bound<'py, PyAny>, k: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyTuple>> {
    let k = non_negative("k", k)?;
    // A 1-D query gives 1-D results, a matrix of queries one row each.
    let single = py.import("numpy")?.call_method1("ndim", (query,))?.extract::<usize>()? == 1;
    let q = matrix(query, "query", true)?;
    let x = matrix(X, "X", false)?;
    same_dtype(&q, &x).map_err(|_| InvalidInputError::new_err(format!("query: dtype {} differs from X's {}", q.dtype(), x.dtype())))?;
    let (indices, scores) = match (q, x) {
        (Matrix::F32(q), Matrix::F32(x)) => {
            let (qv, xv) = (q.as_array(), x.as_array());
            let (i, s) = py.detach(|| similarity::top_k(qv, xv, k)).map_err(py_err)?;
            (i.into_pyarray(py).into_any(), s.into_pyarray(py).into_any())
        }
        (Matrix::F64(q), Matrix::F64(x)) => {
            let (qv, xv) = (q.as_array(), x.as_array());
            let (i, s) = py.detach(|| similarity::top_k(qv, xv, k)).map_err(py_err)?;
            (i.into_pyarray(py).into_any(), s.into_pyarray(py).into_any())
        }
        _ => return Err(InvalidInputError::new_err("query: dtype differs from X's")),
    };
    if single {
        return PyTuple::new(py, [indices.call_method1("reshape", (-1,))?, scores.call_method1("reshape", (-1,))?]);
    }
    PyTuple::new(py, [indices, scores])
}

/// An optional 1-D bool mask argument (one entry per row of X).
fn bool_mask<'py>(obj: Option<&Bound<'py, PyAny>>, argument: &str) -> PyResult<Option<PyReadonlyArray1<'py, bool>>> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else { return Ok(None) };
    obj.extract::<PyReadonlyArray1<'py, bool>>().map(Some).map_err(|_| {
        InvalidInputError::new_err(format!(
            "{argument}: expected a 1-D numpy bool array with one entry per row of X (e.g. numpy.asarray({argument}, dtype=bool))"
        ))
    })
}

/// The `(codes, bounds)` pair `quantize_rows` returns.
type SketchArrays<'py> = (PyReadonlyArray2<'py, i8>, PyReadonlyArray2<'py, f32>);

fn sketch_arrays<'py>(obj: Option<&Bound<'py, PyAny>>) -> PyResult<Option<SketchArrays<'py>>> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else { return Ok(None) };
    obj.extract::<SketchArrays<'py>>().map(Some).map_err(|_| {
        InvalidInputError::new_err(
            "sketch: expected the (codes, bounds) pair quantize_rows(X) returns (int8 (n, d), float32 (n, 2))",
        )
    })
}

/// ``top_k`` for rows of ``X`` that are already unit length (or zero):
/// scores are plain dot products (f64-accumulated, rounded to ``X``'s dtype,
/// clipped to [-1, 1]), best first, ties to the lower index; ``X`` is read in
/// place (no normalised copy), row blocks in parallel with the GIL released.
/// ``valid`` (bool, one per row) skips rows where it is False. ``sketch``,
/// from ``quantize_rows(X)`` (float32 ``X`` only), makes the first pass read
/// int8 codes (a quarter of the memory traffic); results are identical with
/// or without it: each row's approximate score carries a proven error bound
/// and every row whose bound reaches the k-th best lower bound is rescored
/// exactly. Several queries go through one blocked matrix product that reads
/// ``X`` once (the sketch is checked but only a single query reads it).
/// Non-finite values raise ``InvalidInputError`` naming the argument.
#[pyfunction]
#[pyo3(signature = (query, X, k, *, valid = None, sketch = None))]
#[allow(non_snake_case)]
fn top_k_normalized<'py>(
    py: Python<'py>,
    query: &Bound<'py, PyAny>,
    X: &Bound<'py, PyAny>,
    k: &Bound<'py, PyAny>,
    valid: Option<&Bound<'py, PyAny>>,
    sketch: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyTuple>> {
    let k = non_negative("k", k)?;
    let single = py.import("numpy")?.call_method1("ndim", (query,))?.extract::<usize>()? == 1;
    let q = matrix(query, "query", true)?;
    let x = matrix(X, "X", false)?;
    same_dtype(&q, &x).map_err(|_| InvalidInputError::new_err(format!("query: dtype {} differs from X's {}", q.dtype(), x.dtype())))?;
    let valid = bool_mask(valid, "valid")?;
    let sketch = sketch_arrays(sketch)?;
    let valid_view = valid.as_ref().map(|v| v.as_array());
    let sketch_view = sketch.as_ref().map(|(c, b)| similarity::Sketch { codes: c.as_array(), bounds: b.as_array() });
    let (indices, scores) = match (q, x) {
        (Matrix::F32(q), Matrix::F32(x)) => {
            let (qv, xv) = (q.as_array(), x.as_array());
            let (i, s) = py.detach(|| similarity::top_k_normalized(qv, xv, k, valid_view, sketch_view)).map_err(py_err)?;
            (i.into_pyarray(py).into_any(), s.into_pyarray(py).into_any())
        }
        (Matrix::F64(q), Matrix::F64(x)) => {
            let (qv, xv) = (q.as_array(), x.as_array());
            let (i, s) = py.detach(|| similarity::top_k_normalized(qv, xv, k, valid_view, sketch_view)).map_err(py_err)?;
            (i.into_pyarray(py).into_any(), s.into_pyarray(py).into_any())
        }
        _ => return Err(InvalidInputError::new_err("query: dtype differs from X's")),
    };
    if single {
        return PyTuple::new(py, [indices.call_method1("reshape", (-1,))?, scores.call_method1("reshape", (-1,))?]);
    }
    PyTuple::new(py, [indices, scores])
}

/// The int8 sketch of float32 rows for ``top_k_normalized(..., sketch=)``:
/// ``codes`` (n, d) int8 with ``codes[i] * bounds[i, 0]`` approximating row
/// ``i``, and ``bounds[i, 1]`` bounding the norm of the difference. Rows can
/// be sketched in pieces and concatenated (each row's sketch depends on that
/// row only). Non-finite values raise ``InvalidInputError``.
#[pyfunction]
#[pyo3(signature = (X))]
#[allow(non_snake_case)]
fn quantize_rows<'py>(py: Python<'py>, X: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyTuple>> {
    let x = match matrix(X, "X", false)? {
        Matrix::F32(x) => x,
        Matrix::F64(_) => {
            return Err(InvalidInputError::new_err("X: quantize_rows takes float32 rows; pass X.astype(numpy.float32)"))
        }
    };
    let xv = x.as_array();
    let (codes, bounds) = py.detach(|| similarity::quantize_rows(xv)).map_err(py_err)?;
    PyTuple::new(py, [codes.into_pyarray(py).into_any(), bounds.into_pyarray(py).into_any()])
}

/// Okapi BM25 over a fixed list of texts (the lexical half of relevance).
///
/// Tokenisation (see ``Bm25.tokenize``): lowercase, split into runs of Unicode
/// letters and digits, drop common English stop words, Snowball English
/// stemming. idf is Lucene's ``ln(1 + (N - df + 0.5) / (df + 0.5))`` (never
/// negative); each distinct query term counts once. ``k1 >= 0``, ``0 <= b <= 1``.
#[pyclass(module = "ctxfold._core", name = "Bm25", frozen)]
struct PyBm25 {
    index: bm25::Bm25,
}

#[pymethods]
impl PyBm25 {
    #[new]
    #[pyo3(signature = (texts, k1 = 1.5, b = 0.75))]
    fn new(py: Python<'_>, texts: &Bound<'_, PyAny>, k1: f64, b: f64) -> PyResult<Self> {
        let batch = match text_list(texts, "texts")? {
            Texts::Many(batch) => batch,
            Texts::One(_) => return Err(wrong_type("texts", "a list of str", texts)),
        };
        let index = py.detach(|| bm25::Bm25::new(&batch, k1, b)).map_err(py_err)?;
        Ok(Self { index })
    }

    /// The BM25 score of every text for ``query`` (0 where nothing matches).
    fn scores<'py>(&self, py: Python<'py>, query: &Bound<'py, PyAny>) -> PyResult<Bound<'py, numpy::PyArray1<f64>>> {
        let query = text(query, "query")?;
        Ok(py.detach(|| self.index.scores(&query)).into_pyarray(py))
    }

    /// Indices and scores of the ``k`` best texts, best first (ties: lower index).
    fn top_k<'py>(&self, py: Python<'py>, query: &Bound<'py, PyAny>, k: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyTuple>> {
        let k = non_negative("k", k)?;
        let query = text(query, "query")?;
        let (best, scores) = py.detach(|| {
            let scores = self.index.scores(&query);
            let best = similarity::best_indices(&scores, k);
            let picked: Vec<f64> = best.iter().map(|&i| scores[i]).collect();
            (best.into_iter().map(|i| i as i64).collect::<Vec<_>>(), picked)
        });
        PyTuple::new(py, [best.into_pyarray(py).into_any(), scores.into_pyarray(py).into_any()])
    }

    /// The terms BM25 sees in ``text``.
    #[staticmethod]
    fn tokenize(text: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
        Ok(bm25::tokenize(&crate::text_input::text(text, "text")?))
    }

    fn __len__(&self) -> usize {
        self.index.len()
    }

    fn __repr__(&self) -> String {
        format!("Bm25({} texts)", self.index.len())
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(cosine_similarity, m)?)?;
    m.add_function(wrap_pyfunction!(top_k, m)?)?;
    m.add_function(wrap_pyfunction!(top_k_normalized, m)?)?;
    m.add_function(wrap_pyfunction!(quantize_rows, m)?)?;
    m.add_class::<PyBm25>()?;
    Ok(())
}
