//! Spectral clustering for Python: a square float32/float64 affinity matrix
//! in, an int64 array of labels out, the core run with the GIL released.

use ctxfold_core::cluster::{self as core, AssignLabels};
use numpy::{IntoPyArray, PyArray1};
use pyo3::prelude::*;

use crate::arrays::{square, Square};
use crate::errors::{non_negative, py_err, string, InvalidInputError};

/// Cluster labels (``int64``, values ``0..n_clusters``) of the n items of a
/// precomputed ``affinity`` matrix: scikit-learn's
/// ``SpectralClustering(n_clusters, affinity="precomputed",
/// assign_labels=assign_labels, random_state=seed).fit_predict(affinity)``.
///
/// Same algorithm: normalised Laplacian of the affinity (diagonal ignored),
/// its ``n_clusters`` smallest eigenvectors scaled by D^-1/2 with the same
/// sign convention, then ``"discretize"`` (Yu & Shi) or ``"cluster_qr"``
/// (Damle et al.), with the same random stream for ``seed`` as numpy's
/// ``RandomState(seed)``. Only the needed eigenvectors are computed (block
/// Krylov, with float32 products), with the GIL released.
///
/// ``affinity``: square, symmetric (to 1e-5 relative), finite, >= 0; float32
/// or float64 (lists become float64). ``n_clusters`` in ``1..=n``; ``seed`` in
/// ``0..=2**32-1``. Anything else raises ``InvalidInputError`` naming the
/// argument. Items with no affinity to any other item get arbitrary labels,
/// as in scikit-learn.
#[pyfunction]
#[pyo3(
    signature = (affinity, n_clusters, assign_labels = None, seed = None),
    text_signature = "(affinity, n_clusters, assign_labels=\"discretize\", seed=0)"
)]
fn spectral_clustering<'py>(
    py: Python<'py>,
    affinity: &Bound<'py, PyAny>,
    n_clusters: &Bound<'py, PyAny>,
    assign_labels: Option<&Bound<'py, PyAny>>,
    seed: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyArray1<i64>>> {
    let n_clusters = non_negative("n_clusters", n_clusters)?;
    let assign = match assign_labels.filter(|o| !o.is_none()) {
        Some(obj) => AssignLabels::from_name(&string("assign_labels", obj)?).map_err(py_err)?,
        None => AssignLabels::Discretize,
    };
    let seed = match seed.filter(|o| !o.is_none()) {
        Some(obj) => {
            let value = non_negative("seed", obj)?;
            u32::try_from(value).map_err(|_| {
                InvalidInputError::new_err(format!(
                    "seed: must be an int in 0..=4294967295 (as numpy's RandomState), got {value}"
                ))
            })?
        }
        None => 0,
    };
    let labels = match square(affinity, "affinity")? {
        Square::F32(a) => {
            let a = a.as_array();
            py.detach(|| core::spectral_clustering(a, n_clusters, assign, seed))
        }
        Square::F64(a) => {
            let a = a.as_array();
            py.detach(|| core::spectral_clustering(a, n_clusters, assign, seed))
        }
    }
    .map_err(py_err)?;
    Ok(labels.into_pyarray(py))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(spectral_clustering, m)?)?;
    Ok(())
}
