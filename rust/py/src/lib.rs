//! `ctxfold._core`: thin PyO3 bindings over `ctxfold-core`. Each file wraps
//! one area: convert arguments while holding the GIL, run the core inside
//! `py.detach`, convert the result back.

mod arrays;
mod budget;
mod cluster;
mod decay;
mod entity_scan;
mod errors;
mod knapsack;
mod renamed;
mod segment;
mod similarity;
mod static_embed;
mod text_input;
mod tokens;

use pyo3::prelude::*;

#[pymodule(gil_used = false)]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    tokens::register(m)?;
    similarity::register(m)?;
    cluster::register(m)?;
    segment::register(m)?;
    decay::register(m)?;
    entity_scan::register(m)?;
    budget::register(m)?;
    knapsack::register(m)?;
    static_embed::register(m)?;
    Ok(())
}
