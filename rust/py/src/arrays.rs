//! numpy arguments: arrays of the right dtype pass through without a copy;
//! anything else array-like (lists, other dtypes) is converted once by
//! `numpy.ascontiguousarray`, and a failure names the argument.

use numpy::{PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
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

/// A 2-D float array in its own dtype (float32 or float64); a list becomes
/// float64, any other dtype is refused with the fix.
pub enum Square<'py> {
    F32(PyReadonlyArray2<'py, f32>),
    F64(PyReadonlyArray2<'py, f64>),
}

pub fn square<'py>(obj: &Bound<'py, PyAny>, argument: &str) -> PyResult<Square<'py>> {
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
