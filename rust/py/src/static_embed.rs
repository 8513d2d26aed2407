//! Static embeddings for Python: `StaticTable`, the compiled half of
//! `ctxfold.StaticEmbedder` (which finds and verifies the files, then hands
//! the arrays over).

use std::path::PathBuf;

use ctxfold_core::static_embed::StaticEmbedder;
use numpy::{IntoPyArray, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;

use crate::errors::{py_err, wrong_type, InvalidInputError};
use crate::text_input::{text as one_text, texts as text_list, Texts};

/// The compiled half of ``ctxfold.StaticEmbedder``: a Hugging Face
/// tokenizer plus a token table. A text's vector is the weighted mean of the
/// rows of its token ids (no special tokens, no truncation), L2-normalised;
/// a text with no tokens gets the zero vector. Batches run on all cores with
/// the GIL released. BERT-style tokenizers (BertNormalizer, BertPreTokenizer,
/// WordPiece) take a direct path for printable-ASCII words that gives the
/// same ids as the ``tokenizers`` library; other text goes through it.
///
/// ``tokenizer_path``: a ``tokenizer.json``; ``table``: float32 ``(rows,
/// dim)`` with at least one row per token id; ``weights``: float32
/// ``(rows,)``, finite and ``>= 0``. Anything else raises
/// ``InvalidInputError`` / ``InvalidTypeError`` naming the argument;
/// a missing tokenizer file raises ``MissingFileError``.
#[pyclass(module = "ctxfold._core", name = "StaticTable", frozen)]
pub struct PyStaticTable {
    inner: StaticEmbedder,
}

/// `obj` as a C-contiguous float32 ndarray of `ndim` dimensions (a copy only
/// when it is not one already); other dtypes are refused, not converted.
fn float32_array<'py>(obj: &Bound<'py, PyAny>, argument: &str, ndim: usize) -> PyResult<Bound<'py, PyAny>> {
    let numpy = obj.py().import("numpy")?;
    let expected = format!("a {ndim}-D numpy array of float32");
    if !obj.is_instance(&numpy.getattr("ndarray")?)? {
        return Err(wrong_type(argument, &expected, obj));
    }
    let got: usize = obj.getattr("ndim")?.extract()?;
    if got != ndim {
        return Err(InvalidInputError::new_err(format!("{argument}: expected a {ndim}-D array, got {got} dimensions")));
    }
    let dtype = obj.getattr("dtype")?.str()?.to_string();
    if dtype != "float32" {
        return Err(InvalidInputError::new_err(format!(
            "{argument}: dtype {dtype} is not supported; pass float32 (e.g. {argument}.astype(numpy.float32))"
        )));
    }
    numpy.call_method1("ascontiguousarray", (obj,))
}

#[pymethods]
impl PyStaticTable {
    /// `tokenizer_path`: a Hugging Face tokenizer.json; `table`: float32
    /// (vocab, dim); `weights`: float32 (vocab,).
    #[new]
    fn new(py: Python<'_>, tokenizer_path: &Bound<'_, PyAny>, table: &Bound<'_, PyAny>, weights: &Bound<'_, PyAny>) -> PyResult<Self> {
        let path: PathBuf = tokenizer_path
            .extract()
            .map_err(|_| wrong_type("tokenizer_path", "str or os.PathLike", tokenizer_path))?;
        let table = float32_array(table, "table", 2)?;
        let table: PyReadonlyArray2<'_, f32> = table.extract().map_err(|_| wrong_type("table", "float32", &table))?;
        let weights = float32_array(weights, "weights", 1)?;
        let weights: PyReadonlyArray1<'_, f32> = weights.extract().map_err(|_| wrong_type("weights", "float32", &weights))?;
        let (table, weights) = (table.as_array(), weights.as_array());
        let inner = py.detach(|| StaticEmbedder::from_file(&path, table, weights)).map_err(py_err)?;
        Ok(Self { inner })
    }

    /// Columns of the table: the embedding dimension.
    #[getter]
    fn dim(&self) -> usize {
        self.inner.dim()
    }

    /// Rows of the table.
    #[getter]
    fn vocab_size(&self) -> usize {
        self.inner.vocab_size()
    }

    /// Whether printable-ASCII text takes the direct WordPiece path.
    #[getter]
    fn has_fast_tokenizer(&self) -> bool {
        self.inner.has_fast_tokenizer()
    }

    /// ``(dim,)`` for a str, ``(len(texts), dim)`` float32 for a list or tuple.
    #[pyo3(signature = (texts, /))]
    fn encode<'py>(&self, py: Python<'py>, texts: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        match text_list(texts, "texts")? {
            Texts::One(s) => {
                let v = py.detach(|| self.inner.embed(&s)).map_err(py_err)?;
                Ok(v.into_pyarray(py).into_any())
            }
            Texts::Many(batch) => {
                let m = py.detach(|| self.inner.embed_batch(&batch)).map_err(py_err)?;
                Ok(m.into_pyarray(py).into_any())
            }
        }
    }

    /// The token ids a text is averaged over.
    #[pyo3(signature = (text, /))]
    fn token_ids(&self, py: Python<'_>, text: &Bound<'_, PyAny>) -> PyResult<Vec<u32>> {
        let s = one_text(text, "text")?;
        py.detach(|| self.inner.token_ids(&s)).map_err(py_err)
    }

    /// Token counts of the texts (a str counts as a list of one).
    #[pyo3(signature = (texts, /))]
    fn count_tokens<'py>(&self, py: Python<'py>, texts: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let batch = match text_list(texts, "texts")? {
            Texts::One(s) => vec![s],
            Texts::Many(batch) => batch,
        };
        let counts = py.detach(|| self.inner.count_tokens_batch(&batch)).map_err(py_err)?;
        let counts: Vec<i64> = counts.into_iter().map(|n| n as i64).collect();
        Ok(counts.into_pyarray(py).into_any())
    }

    fn __repr__(&self) -> String {
        format!("StaticTable(vocab_size={}, dim={})", self.inner.vocab_size(), self.inner.dim())
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyStaticTable>()
}
