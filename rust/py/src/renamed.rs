//! Arguments renamed in the public API: the old keyword keeps working for one
//! release with a `DeprecationWarning` naming the new one (the same words as
//! `ctxfold._renamed` on the Python side).

use std::ffi::CString;

use pyo3::exceptions::PyDeprecationWarning;
use pyo3::prelude::*;

use crate::errors::InvalidTypeError;

/// The value passed as `new`, or as the old keyword `old` (with a warning).
/// Both are optional in the signature so that the old name can be accepted;
/// the text signature shows only the new one.
pub fn renamed<'a, 'py>(
    function: &str,
    new: (&str, Option<&'a Bound<'py, PyAny>>),
    old: (&str, Option<&'a Bound<'py, PyAny>>),
) -> PyResult<&'a Bound<'py, PyAny>> {
    let ((new_name, new_value), (old_name, old_value)) = (new, old);
    match (new_value, old_value) {
        (Some(value), None) => Ok(value),
        (None, Some(value)) => {
            let py = value.py();
            let message = format!(
                "{function}: the argument {old_name}= is now {new_name}=; {old_name}= will be removed in the next release"
            );
            let message = CString::new(message).map_err(|e| InvalidTypeError::new_err(e.to_string()))?;
            PyErr::warn(py, py.get_type::<PyDeprecationWarning>().as_any(), &message, 1)?;
            Ok(value)
        }
        (Some(_), Some(_)) => Err(InvalidTypeError::new_err(format!(
            "{function}: got both {new_name}= and its old name {old_name}=; pass only {new_name}="
        ))),
        (None, None) => Err(InvalidTypeError::new_err(format!(
            "{function}: missing the required argument {new_name} (a number of tokens)"
        ))),
    }
}
