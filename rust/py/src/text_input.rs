//! Turning Python text arguments into UTF-8 slices the core can read without
//! the GIL. `PyBackedStr` keeps the Python object alive and is `Send`, so a
//! batch needs no copying before `py.detach`.

use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use pyo3::types::{PyList, PyString, PyTuple};

use crate::errors::{wrong_type, InvalidInputError};

/// One `str`, or a list/tuple of them.
pub enum Texts {
    One(PyBackedStr),
    Many(Vec<PyBackedStr>),
}

/// One `str` argument; lone surrogates are refused rather than replaced.
pub fn text(obj: &Bound<'_, PyAny>, argument: &str) -> PyResult<PyBackedStr> {
    let string = obj.cast::<PyString>().map_err(|_| wrong_type(argument, "str", obj))?;
    string.extract::<PyBackedStr>().map_err(|_| {
        InvalidInputError::new_err(format!(
            "{argument}: the text holds a lone surrogate (such as '\\ud800') and is not valid UTF-8; \
             clean it first, e.g. text.encode('utf-8', 'replace').decode('utf-8')"
        ))
    })
}

/// A `str` or a list/tuple of `str`; each element error names its index.
pub fn texts(obj: &Bound<'_, PyAny>, argument: &str) -> PyResult<Texts> {
    if obj.is_instance_of::<PyString>() {
        return text(obj, argument).map(Texts::One);
    }
    let items: Vec<Bound<'_, PyAny>> = if let Ok(list) = obj.cast::<PyList>() {
        list.iter().collect()
    } else if let Ok(tuple) = obj.cast::<PyTuple>() {
        tuple.iter().collect()
    } else {
        return Err(wrong_type(argument, "str or a list of str", obj));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| text(item, &format!("{argument}[{i}]")))
        .collect::<PyResult<Vec<_>>>()
        .map(Texts::Many)
}
