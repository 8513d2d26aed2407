//! Token counting for Python: the `Tokenizer` class and the module-level
//! shortcuts `count_tokens`, `count_until`, `truncate`.

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::Arc;

use ctxfold_core::tokens::{self, Encoding, Side, TokenCounter};
use numpy::IntoPyArray;
use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::errors::{non_negative, py_err, string, wrong_type};
use crate::renamed::renamed;
use crate::text_input::{text, texts, Texts};

/// An exact token counter: a built-in OpenAI encoding (vocabulary compiled
/// into the binary, no download) or a Hugging Face ``tokenizer.json``.
///
/// Counts equal tiktoken's ``encode_ordinary``: text such as
/// ``<|endoftext|>`` is counted as plain text. Hugging Face counts exclude
/// special tokens (``[CLS]``, ``<s>``) and ignore any truncation or padding
/// configured in the file. Immutable and thread-safe.
#[pyclass(module = "ctxfold._core", name = "Tokenizer", frozen)]
pub struct PyTokenizer {
    counter: Arc<TokenCounter>,
}

fn optional_str(obj: Option<&Bound<'_, PyAny>>, argument: &str) -> PyResult<Option<String>> {
    obj.filter(|o| !o.is_none()).map(|o| string(argument, o)).transpose()
}

/// A `str` argument read in place: this runs on every call, and copying the
/// name cost more than counting a short message.
fn borrowed_str<'a>(obj: Option<&'a Bound<'_, PyAny>>, argument: &str) -> PyResult<Option<Cow<'a, str>>> {
    match obj.filter(|o| !o.is_none()) {
        None => Ok(None),
        Some(o) => match o.cast::<PyString>() {
            Ok(s) => Ok(Some(s.to_cow().unwrap_or_else(|_| Cow::Owned(s.to_string_lossy().into_owned())))),
            Err(_) => Err(wrong_type(argument, "str", o)),
        },
    }
}

/// The built-in encoding named by `model=` / `encoding=`.
fn resolve(model: Option<&Bound<'_, PyAny>>, encoding: Option<&Bound<'_, PyAny>>) -> PyResult<TokenCounter> {
    let model = borrowed_str(model, "model")?;
    let encoding = borrowed_str(encoding, "encoding")?;
    TokenCounter::resolve(model.as_deref(), encoding.as_deref()).map(TokenCounter::OpenAi).map_err(py_err)
}

/// Texts shorter than this are counted without releasing the GIL: releasing
/// and taking it back costs more than counting a chat message.
const COUNT_WITH_GIL_BYTES: usize = 2048;

fn count_any(py: Python<'_>, counter: &TokenCounter, text: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
    match texts(text, "text")? {
        Texts::One(s) => {
            let n = if s.len() < COUNT_WITH_GIL_BYTES {
                counter.count(&s)
            } else {
                py.detach(|| counter.count(&s))
            }
            .map_err(py_err)?;
            Ok((n as i64).into_pyobject(py)?.into_any().unbind())
        }
        Texts::Many(batch) => {
            let counts = py.detach(|| counter.count_batch(&batch)).map_err(py_err)?;
            let counts: Vec<i64> = counts.into_iter().map(|n| n as i64).collect();
            Ok(counts.into_pyarray(py).into_any().unbind())
        }
    }
}

fn count_until_any(py: Python<'_>, counter: &TokenCounter, text_obj: &Bound<'_, PyAny>, budget: &Bound<'_, PyAny>) -> PyResult<Option<usize>> {
    let budget = non_negative("budget", budget)?;
    let s = text(text_obj, "text")?;
    py.detach(|| counter.count_until(&s, budget)).map_err(py_err)
}

fn truncate_any(py: Python<'_>, counter: &TokenCounter, text_obj: &Bound<'_, PyAny>, budget: &Bound<'_, PyAny>, side: Option<&Bound<'_, PyAny>>) -> PyResult<String> {
    let budget = non_negative("budget", budget)?;
    let side = optional_str(side, "side")?.map_or(Ok(Side::End), |s| Side::from_name(&s)).map_err(py_err)?;
    let s = text(text_obj, "text")?;
    py.detach(|| counter.truncate(&s, budget, side).map(str::to_owned)).map_err(py_err)
}

#[pymethods]
impl PyTokenizer {
    /// ``"cl100k_base"`` or ``"o200k_base"``; anything else raises ``UnknownEncodingError``.
    #[staticmethod]
    fn from_encoding(name: &Bound<'_, PyAny>) -> PyResult<Self> {
        resolve(None, Some(name)).map(Self::new)
    }

    /// The encoding of an OpenAI model (``"gpt-4o"``, ``"o3-mini"``, ``"gpt-4"``...);
    /// an unknown name raises ``UnknownModelError`` listing the known ones.
    #[staticmethod]
    fn for_model(model: &Bound<'_, PyAny>) -> PyResult<Self> {
        resolve(Some(model), None).map(Self::new)
    }

    /// Load a Hugging Face ``tokenizer.json``. A missing file raises
    /// ``MissingFileError``; a file that is not a tokenizer raises ``InvalidInputError``.
    #[staticmethod]
    fn from_file(py: Python<'_>, path: &Bound<'_, PyAny>) -> PyResult<Self> {
        let path: PathBuf = path.extract().map_err(|_| wrong_type("path", "str or os.PathLike", path))?;
        let counter = py.detach(|| TokenCounter::from_file(&path)).map_err(py_err)?;
        Ok(Self::new(counter))
    }

    /// The encoding name, or the path the tokenizer was loaded from.
    #[getter]
    fn name(&self) -> &str {
        self.counter.name()
    }

    /// Token count of one text (an ``int``) or of each text of a list (an
    /// ``int64`` array, computed in parallel with the GIL released).
    fn count(&self, py: Python<'_>, text: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        count_any(py, &self.counter, text)
    }

    /// The exact count if it is at most ``budget``, else ``None``. Stops as
    /// soon as the budget is passed, so the cost follows ``budget``, not the text.
    #[pyo3(signature = (text, budget = None, *, limit = None), text_signature = "($self, text, budget)")]
    fn count_until(
        &self,
        py: Python<'_>,
        text: &Bound<'_, PyAny>,
        budget: Option<&Bound<'_, PyAny>>,
        limit: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<usize>> {
        let budget = renamed("Tokenizer.count_until", ("budget", budget), ("limit", limit))?;
        count_until_any(py, &self.counter, text, budget)
    }

    /// The longest start (``side="end"`` cuts the end) or end (``side="start"``)
    /// of ``text`` cut on a token boundary and on a character boundary that
    /// counts at most ``budget`` tokens. Returns ``text`` itself when it fits.
    #[pyo3(signature = (text, budget = None, side = None, *, max_tokens = None), text_signature = "($self, text, budget, side=\"end\")")]
    fn truncate(
        &self,
        py: Python<'_>,
        text: &Bound<'_, PyAny>,
        budget: Option<&Bound<'_, PyAny>>,
        side: Option<&Bound<'_, PyAny>>,
        max_tokens: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<String> {
        let budget = renamed("Tokenizer.truncate", ("budget", budget), ("max_tokens", max_tokens))?;
        truncate_any(py, &self.counter, text, budget, side)
    }

    /// Token ids of ``text``.
    fn encode(&self, py: Python<'_>, text: &Bound<'_, PyAny>) -> PyResult<Vec<u32>> {
        let s = crate::text_input::text(text, "text")?;
        py.detach(|| self.counter.encode(&s)).map_err(py_err)
    }

    /// Text of token ids; partial UTF-8 sequences become U+FFFD. Ids outside
    /// the vocabulary raise ``InvalidInputError``.
    fn decode(&self, py: Python<'_>, ids: &Bound<'_, PyAny>) -> PyResult<String> {
        let ids: Vec<u32> = ids
            .extract()
            .map_err(|_| wrong_type("ids", "a list of token ids (ints in 0..2**32)", ids))?;
        py.detach(|| self.counter.decode(&ids)).map_err(py_err)
    }

    fn __repr__(&self) -> String {
        format!("Tokenizer({:?})", self.counter.name())
    }
}

impl PyTokenizer {
    fn new(counter: TokenCounter) -> Self {
        Self { counter: Arc::new(counter) }
    }
}

/// Exact token count of a text (``int``) or of each text of a list (``int64`` array,
/// in parallel, GIL released). ``model=`` picks the model's encoding, ``encoding=``
/// names one; with neither, ``o200k_base`` (every current OpenAI model).
#[pyfunction]
#[pyo3(signature = (text, *, model = None, encoding = None))]
fn count_tokens(
    py: Python<'_>,
    text: &Bound<'_, PyAny>,
    model: Option<&Bound<'_, PyAny>>,
    encoding: Option<&Bound<'_, PyAny>>,
) -> PyResult<Py<PyAny>> {
    count_any(py, &resolve(model, encoding)?, text)
}

/// The exact count if it is at most ``budget``, else ``None``; the cost follows ``budget``.
#[pyfunction]
#[pyo3(
    signature = (text, budget = None, *, model = None, encoding = None, limit = None),
    text_signature = "(text, budget, *, model=None, encoding=None)"
)]
fn count_until(
    py: Python<'_>,
    text: &Bound<'_, PyAny>,
    budget: Option<&Bound<'_, PyAny>>,
    model: Option<&Bound<'_, PyAny>>,
    encoding: Option<&Bound<'_, PyAny>>,
    limit: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<usize>> {
    let budget = renamed("count_until", ("budget", budget), ("limit", limit))?;
    count_until_any(py, &resolve(model, encoding)?, text, budget)
}

/// ``text`` cut to at most ``budget`` tokens on a token boundary; ``side="end"`` keeps
/// the beginning, ``side="start"`` keeps the end.
#[pyfunction]
#[pyo3(
    signature = (text, budget = None, side = None, *, model = None, encoding = None, max_tokens = None),
    text_signature = "(text, budget, side=\"end\", *, model=None, encoding=None)"
)]
fn truncate(
    py: Python<'_>,
    text: &Bound<'_, PyAny>,
    budget: Option<&Bound<'_, PyAny>>,
    side: Option<&Bound<'_, PyAny>>,
    model: Option<&Bound<'_, PyAny>>,
    encoding: Option<&Bound<'_, PyAny>>,
    max_tokens: Option<&Bound<'_, PyAny>>,
) -> PyResult<String> {
    let budget = renamed("truncate", ("budget", budget), ("max_tokens", max_tokens))?;
    truncate_any(py, &resolve(model, encoding)?, text, budget, side)
}

/// The encoding name of an OpenAI model; ``UnknownModelError`` for an unknown one.
#[pyfunction]
fn encoding_for_model(model: &Bound<'_, PyAny>) -> PyResult<&'static str> {
    let name = optional_str(Some(model), "model")?.unwrap_or_default();
    tokens::encoding_for_model(&name).map(Encoding::name).map_err(py_err)
}

/// Every model name ``encoding_for_model`` knows (prefixes end in ``*``).
#[pyfunction]
fn known_models() -> Vec<String> {
    tokens::known_models()
}

/// The built-in encodings.
#[pyfunction]
fn list_encodings() -> Vec<&'static str> {
    Encoding::ALL.iter().map(|e| e.name()).collect()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyTokenizer>()?;
    m.add_function(wrap_pyfunction!(count_tokens, m)?)?;
    m.add_function(wrap_pyfunction!(count_until, m)?)?;
    m.add_function(wrap_pyfunction!(truncate, m)?)?;
    m.add_function(wrap_pyfunction!(encoding_for_model, m)?)?;
    m.add_function(wrap_pyfunction!(known_models, m)?)?;
    m.add_function(wrap_pyfunction!(list_encodings, m)?)?;
    Ok(())
}
