//! ctxfold-core: the pure-Rust half of ctxfold.
//!
//! No pyo3 here: every function takes plain Rust values (slices, ndarray views)
//! and returns `Result<_, Error>`, so it can be tested with `cargo test` and
//! wrapped by any binding. `rust/py` is the only crate that knows about Python.

pub mod budget;
pub mod cluster;
pub mod decay;
pub mod entity_scan;
pub mod error;
pub mod knapsack;
pub mod linalg;
mod pool;
pub mod segment;
pub mod similarity;
pub mod static_embed;
pub mod tokens;

pub use error::{Error, Result};
