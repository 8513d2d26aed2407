//! Topic structure of a sequence of blocks (sentences, messages) from their
//! similarity matrix.
//!
//! - [`spectral_clustering`]: scikit-learn's `SpectralClustering(affinity=
//!   "precomputed")`, the same normalised Laplacian, eigenvectors, sign
//!   conventions, discretisation and random stream, so labels agree with it;
//!   only the k needed eigenvectors are computed (block Krylov, `eigen`).
//! - [`segment`]: contiguous topic segmentation by an exact dynamic program
//!   over the similarity matrix (`contiguous`).

mod contiguous;
mod eigen;
mod matrix;
mod mt19937;
mod objective;
mod product;
mod small_eigen;
mod solve;
mod spectral;
mod windows;

pub use contiguous::{segment, SegmentOptions};
pub use matrix::{Real, SYMMETRY_TOLERANCE};
pub use mt19937::Mt19937;
pub use objective::segmentation_objective;
pub use spectral::{spectral_clustering, AssignLabels};
