//! numpy arguments: arrays of the right dtype pass through without a copy;
//! anything else array-like (lists, other dtypes) is converted once by
//! `numpy.ascontiguousarray`, and a failure names the argument.

use numpy::{PyReadonlyArray1, PyUntypedArrayMethods};
use pyo3::prelude::*;

use crate::errors::{wrong_type, InvalidInputError};

fn converted<'py>(obj: &Bound<'py, PyAny>, dtype: &str) -> Option<Bound<'py, PyAny>> {
    let numpy = obj.py().import("numpy").ok()?;
    numpy.call_method1("ascontiguousarray", (obj, dtype)).ok()
}

/// A contiguous 1-D float64 array.
pub fn f64_vector<'py>(obj: &Bound<'py, PyAny>, argument: &str) -> PyResult<PyReadonlyArray1<'py, f64>> {
    if let Ok(array) = obj.extract::<PyReadonlyArray1<'py, f64>>() {
        if array.is_contiguous() {
            return Ok(array);
        }
    }
    let array = converted(obj, "float64").ok_or_else(|| wrong_type(argument, "a 1-D array of numbers", obj))?;
    array.extract::<PyReadonlyArray1<'py, f64>>().map_err(|_| {
        let ndim = array.getattr("ndim").and_then(|n| n.extract::<usize>()).unwrap_or(0);
        InvalidInputError::new_err(format!("{argument}: expected a 1-D array, got {ndim} dimensions"))
    })
}
