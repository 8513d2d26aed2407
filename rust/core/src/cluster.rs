//! Clustering of items from their affinity matrix.
//!
//! [`spectral_clustering`] is scikit-learn's `SpectralClustering(affinity=
//! "precomputed")`: the same normalised Laplacian, eigenvectors, sign
//! conventions, discretisation and random stream, so labels agree with it;
//! only the k needed eigenvectors are computed (block Krylov, `eigen`, with
//! `small_eigen` for the small dense problems).

mod eigen;
mod mt19937;
mod product;
mod small_eigen;
mod spectral;

pub use mt19937::Mt19937;
pub use spectral::{spectral_clustering, AssignLabels};
