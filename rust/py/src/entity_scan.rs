//! The atomic entity scanner for Python: texts in, rows of
//! ``(text, type, start, end, key, weak)`` out, built as tuples under the GIL
//! after the scan ran without it.

use ctxfold_core::entity_scan::{date_reference_starts as core_date_reference_starts, literal_starts as core_literal_starts, Atom, EntityScanner, Kind, Lexicon};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyList, PyString, PyTuple};

use crate::errors::{py_err, wrong_type};
use crate::text_input::{text as one_text, texts as text_list, Texts};

const KINDS: [Kind; 13] = [
    Kind::Email,
    Kind::Url,
    Kind::Path,
    Kind::Version,
    Kind::Money,
    Kind::Percent,
    Kind::Date,
    Kind::Time,
    Kind::Code,
    Kind::Person,
    Kind::Organisation,
    Kind::Location,
    Kind::Other,
];

fn words(obj: &Bound<'_, PyAny>, argument: &str) -> PyResult<Vec<String>> {
    if obj.is_instance_of::<PyString>() {
        return Err(wrong_type(argument, "a collection of str (not one str)", obj));
    }
    let mut out = Vec::new();
    for item in obj.try_iter().map_err(|_| wrong_type(argument, "a collection of str", obj))? {
        let item = item?;
        out.push(item.extract::<String>().map_err(|_| wrong_type(&format!("{argument} item"), "str", &item))?);
    }
    out.sort_unstable();
    Ok(out)
}

/// The atomic entity mentions of texts (emails, URLs, paths, versions,
/// money, percentages, dates, times, code, and runs of capitalised words as
/// people, organisations, places or other names), as
/// ``ctxfold.text.entities.extract_mentions`` reads them.
///
/// Built once from the package's word lists, all lower-cased: ``places``
/// (the gazetteer; names may hold spaces), ``stop_words``, ``not_names``
/// (capitalised chat words that name nothing), ``titles``, ``openers``
/// (sentence openers before a name), ``org_words`` (words ending an
/// organisation's name) and ``person_cues`` (words right before a person's
/// name). Positions are ``str`` indices. A word list that is not a
/// collection of non-empty ``str`` (single words, except places) raises
/// ``InvalidTypeError`` or ``InvalidInputError``.
#[pyclass(module = "ctxfold._core", name = "EntityScanner", frozen)]
struct PyEntityScanner {
    scanner: EntityScanner,
    kinds: Vec<Py<PyString>>,
}

impl PyEntityScanner {
    fn rows<'py>(&self, py: Python<'py>, atoms: Vec<Atom>) -> PyResult<Bound<'py, PyList>> {
        let rows = atoms
            .into_iter()
            .map(|a| {
                let kind = self.kinds[KINDS.iter().position(|&k| k == a.kind).unwrap_or(KINDS.len() - 1)].bind(py);
                PyTuple::new(
                    py,
                    [
                        PyString::new(py, &a.value).into_any(),
                        kind.clone().into_any(),
                        a.start.into_pyobject(py)?.into_any(),
                        a.end.into_pyobject(py)?.into_any(),
                        PyString::new(py, &a.key).into_any(),
                        PyBool::new(py, a.weak).to_owned().into_any(),
                    ],
                )
            })
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, rows)
    }
}

#[pymethods]
impl PyEntityScanner {
    #[new]
    #[pyo3(signature = (*, places, stop_words, not_names, titles, openers, org_words, person_cues))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        places: &Bound<'_, PyAny>,
        stop_words: &Bound<'_, PyAny>,
        not_names: &Bound<'_, PyAny>,
        titles: &Bound<'_, PyAny>,
        openers: &Bound<'_, PyAny>,
        org_words: &Bound<'_, PyAny>,
        person_cues: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        let lexicon = Lexicon {
            places: words(places, "places")?,
            stop_words: words(stop_words, "stop_words")?,
            not_names: words(not_names, "not_names")?,
            titles: words(titles, "titles")?,
            openers: words(openers, "openers")?,
            org_words: words(org_words, "org_words")?,
            person_cues: words(person_cues, "person_cues")?,
        };
        let scanner = py.detach(|| EntityScanner::new(&lexicon)).map_err(py_err)?;
        let kinds = KINDS.iter().map(|k| PyString::intern(py, k.name()).unbind()).collect();
        Ok(Self { scanner, kinds })
    }

    /// The atomic mentions of ``text`` as ``(text, type, start, end, key,
    /// weak)`` rows: first the non-overlapping matches of every kind but names
    /// in order of their start, then the names in order. ``weak`` marks a
    /// sentence's capitalised first word without a person cue.
    fn scan<'py>(&self, py: Python<'py>, text: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
        let one = one_text(text, "text")?;
        let atoms = py.detach(|| self.scanner.scan(&one));
        self.rows(py, atoms)
    }

    /// ``scan`` of each text of a list (one list of rows per text).
    fn scan_many<'py>(&self, py: Python<'py>, texts: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
        let batch = match text_list(texts, "texts")? {
            Texts::Many(batch) => batch,
            Texts::One(_) => return Err(wrong_type("texts", "a list of str", texts)),
        };
        let all = py.detach(|| self.scanner.scan_many(&batch));
        let lists = all.into_iter().map(|atoms| self.rows(py, atoms)).collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, lists)
    }
}

/// Every position of the lower-cased ``text`` where a relative date
/// reference can start, in order: where "last", "next" or "this" occurs,
/// and the starts of the word holding a head word (day, week, month, year,
/// night, tomorrow) and of the four words before it (``str`` indices).
#[pyfunction]
fn date_reference_starts(py: Python<'_>, text: &Bound<'_, PyAny>) -> PyResult<Vec<usize>> {
    let text = one_text(text, "text")?;
    Ok(py.detach(|| core_date_reference_starts(&text)))
}

/// For each group of ``(literal, back)`` pairs, every position ``back``
/// characters before an occurrence of one of its literals in ``text`` (where
/// that is not before the start), in order, once each (``str`` indices).
#[pyfunction]
fn literal_starts(py: Python<'_>, text: &Bound<'_, PyAny>, groups: &Bound<'_, PyAny>) -> PyResult<Vec<Vec<usize>>> {
    let text = one_text(text, "text")?;
    let groups: Vec<Vec<(String, usize)>> =
        groups.extract().map_err(|_| wrong_type("groups", "a list of lists of (str, int >= 0) pairs", groups))?;
    Ok(py.detach(|| core_literal_starts(&text, &groups)))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyEntityScanner>()?;
    m.add_function(wrap_pyfunction!(date_reference_starts, m)?)?;
    m.add_function(wrap_pyfunction!(literal_starts, m)?)?;
    Ok(())
}
