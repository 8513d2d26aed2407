//! The one conversion from the core's error enum into the Python hierarchy.
//! The classes live in `ctxfold/errors.py` (so each can also subclass the
//! fitting built-in) and are imported here on first use.

use ctxfold_core::Error;
use pyo3::prelude::*;

pyo3::import_exception!(ctxfold.errors, InvalidInputError);
pyo3::import_exception!(ctxfold.errors, InvalidTypeError);
pyo3::import_exception!(ctxfold.errors, UnknownModelError);
pyo3::import_exception!(ctxfold.errors, UnknownEncodingError);
pyo3::import_exception!(ctxfold.errors, MissingFileError);
pyo3::import_exception!(ctxfold.errors, BudgetError);

/// Orphan rules forbid `impl From<Error> for PyErr` here, so the binding
/// wraps core results with `.map_err(py_err)`.
pub fn py_err(error: Error) -> PyErr {
    let message = error.to_string();
    match error {
        Error::InvalidInput { .. } => InvalidInputError::new_err(message),
        Error::UnknownModel { .. } => UnknownModelError::new_err(message),
        Error::UnknownEncoding { .. } => UnknownEncodingError::new_err(message),
        Error::FileNotFound { .. } => MissingFileError::new_err(message),
        Error::Budget { .. } => BudgetError::new_err(message),
    }
}

/// `argument: expected <expected>, got <type>`, as an `InvalidTypeError`.
pub fn wrong_type(argument: &str, expected: &str, got: &Bound<'_, PyAny>) -> PyErr {
    let type_name = got.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into());
    InvalidTypeError::new_err(format!("{argument}: expected {expected}, got {type_name}"))
}

/// A non-negative `int` argument, with an error naming it otherwise.
pub fn non_negative(argument: &str, obj: &Bound<'_, PyAny>) -> PyResult<usize> {
    if obj.is_instance_of::<pyo3::types::PyBool>() {
        return Err(wrong_type(argument, "int", obj));
    }
    let value: i128 = obj.extract().map_err(|_| wrong_type(argument, "int", obj))?;
    usize::try_from(value)
        .map_err(|_| InvalidInputError::new_err(format!("{argument}: must be an int >= 0, got {value}")))
}

/// A `str` argument, with an error naming it otherwise.
pub fn string(argument: &str, obj: &Bound<'_, PyAny>) -> PyResult<String> {
    obj.cast::<pyo3::types::PyString>()
        .map(|s| s.to_string_lossy().into_owned())
        .map_err(|_| wrong_type(argument, "str", obj))
}
