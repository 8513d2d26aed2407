//! Cosine similarity matrices and top-k retrieval over embedding rows, plus a
//! BM25 index (`bm25`) for the lexical half of relevance.
//!
//! Rows are L2-normalised once and multiplied with faer's parallel GEMM, the
//! same work numpy's "normalise then matmul" does with BLAS. A zero row has
//! similarity 0 with everything (never NaN), as in scikit-learn.

pub mod bm25;
pub mod normalized;

pub use normalized::{quantize_rows, top_k_normalized, Sketch};

use faer::linalg::matmul::triangular::{self, BlockStructure};
use faer::{Accum, MatMut, MatRef, Par};
use ndarray::{Array2, ArrayView2};

use crate::{Error, Result};

/// The float types the similarity kernels accept.
pub trait Real: faer::traits::ComplexField + Copy + PartialOrd + Send + Sync + 'static {
    const ZERO: Self;
    const ONE: Self;
    fn to_f64(self) -> f64;
    fn from_f64(v: f64) -> Self;
    fn is_finite(self) -> bool;
}

macro_rules! impl_real {
    ($t:ty) => {
        impl Real for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            fn is_finite(self) -> bool {
                <$t>::is_finite(self)
            }
        }
    };
}
impl_real!(f32);
impl_real!(f64);

/// Rows of `x` scaled to unit length, row-major; zero rows stay zero.
/// Accumulates in f64 so float32 norms are as exact as numpy's.
fn normalized_rows<T: Real>(x: ArrayView2<T>, argument: &str) -> Result<Vec<T>> {
    let mut out = Vec::with_capacity(x.len());
    for (i, row) in x.rows().into_iter().enumerate() {
        if let Some(j) = row.iter().position(|v| !v.is_finite()) {
            return Err(Error::invalid(argument, format!("{argument}[{i}, {j}] is not finite; remove NaN and infinite values")));
        }
        let norm = row.iter().map(|v| v.to_f64() * v.to_f64()).sum::<f64>().sqrt();
        let scale = if norm > 0.0 { 1.0 / norm } else { 0.0 };
        out.extend(row.iter().map(|v| T::from_f64(v.to_f64() * scale)));
    }
    Ok(out)
}

fn check_matrix<T>(x: &ArrayView2<T>, argument: &str) -> Result<()> {
    if x.ncols() == 0 {
        return Err(Error::invalid(argument, "has 0 columns; pass vectors with at least one dimension"));
    }
    Ok(())
}

/// `a (n x d) * b (m x d)^T` into a new row-major `n x m` matrix, with values
/// clipped to [-1, 1] (rounding can leave a unit vector's self-similarity at
/// 1 + 1e-7).
fn gram<T: Real>(a: &[T], n: usize, b: &[T], m: usize, d: usize) -> Result<Array2<T>> {
    let mut out = vec![T::ZERO; n * m];
    if n > 0 && m > 0 {
        let lhs = MatRef::from_row_major_slice(a, n, d);
        let rhs = MatRef::from_row_major_slice(b, m, d).transpose();
        let dst = MatMut::from_row_major_slice_mut(&mut out, n, m);
        let par = if n * m * d > 1 << 18 { Par::rayon(0) } else { Par::Seq };
        faer::linalg::matmul::matmul(dst, Accum::Replace, lhs, rhs, T::ONE, par);
    }
    clip_unit(&mut out);
    Array2::from_shape_vec((n, m), out).map_err(|e| Error::invalid("X", e.to_string()))
}

/// Clip to [-1, 1]: rounding can leave a unit vector's self-similarity at 1 + 1e-7.
fn clip_unit<T: Real>(values: &mut [T]) {
    let neg_one = T::from_f64(-1.0);
    for v in values.iter_mut() {
        if *v > T::ONE {
            *v = T::ONE;
        } else if *v < neg_one {
            *v = neg_one;
        }
    }
}

/// `a a^T` for row-major `a` (n x d): only the lower triangle is multiplied
/// (half the work of a general product), then mirrored, in tiles so both the
/// reads and the writes stay in cache.
fn self_gram<T: Real>(a: &[T], n: usize, d: usize) -> Result<Array2<T>> {
    let mut out = vec![T::ZERO; n * n];
    if n > 0 {
        let lhs = MatRef::from_row_major_slice(a, n, d);
        let dst = MatMut::from_row_major_slice_mut(&mut out, n, n);
        let par = if n * n * d > 1 << 19 { Par::rayon(0) } else { Par::Seq };
        triangular::matmul(
            dst,
            BlockStructure::TriangularLower,
            Accum::Replace,
            lhs,
            BlockStructure::Rectangular,
            lhs.transpose(),
            BlockStructure::Rectangular,
            T::ONE,
            par,
        );
        mirror_lower(&mut out, n);
    }
    clip_unit(&mut out);
    Array2::from_shape_vec((n, n), out).map_err(|e| Error::invalid("X", e.to_string()))
}

/// Copy the strict lower triangle of a row-major n x n matrix onto its upper one.
fn mirror_lower<T: Copy>(m: &mut [T], n: usize) {
    const TILE: usize = 64;
    for bi in (0..n).step_by(TILE) {
        for bj in (bi..n).step_by(TILE) {
            for i in bi..(bi + TILE).min(n) {
                for j in bj.max(i + 1)..(bj + TILE).min(n) {
                    m[i * n + j] = m[j * n + i];
                }
            }
        }
    }
}

/// Cosine similarity of every row of `x` with every row of `y` (or of `x`).
pub fn cosine<T: Real>(x: ArrayView2<T>, y: Option<ArrayView2<T>>) -> Result<Array2<T>> {
    check_matrix(&x, "X")?;
    let xn = normalized_rows(x, "X")?;
    match y {
        None => self_gram(&xn, x.nrows(), x.ncols()),
        Some(y) => {
            check_matrix(&y, "Y")?;
            if y.ncols() != x.ncols() {
                return Err(Error::invalid("Y", format!("has {} columns but X has {}; both must embed into the same space", y.ncols(), x.ncols())));
            }
            let yn = normalized_rows(y, "Y")?;
            gram(&xn, x.nrows(), &yn, y.nrows(), x.ncols())
        }
    }
}

/// For each query row, the indices of the `k` rows of `x` most similar to it
/// (cosine), best first, ties broken by the lower index; and their scores.
/// Fewer than `k` rows give all of them.
pub fn top_k<T: Real>(queries: ArrayView2<T>, x: ArrayView2<T>, k: usize) -> Result<(Array2<i64>, Array2<T>)> {
    if queries.ncols() != x.ncols() {
        return Err(Error::invalid("query", format!("has {} dimensions but X has {}", queries.ncols(), x.ncols())));
    }
    let sims = cosine(queries, Some(x))?;
    let k = k.min(x.nrows());
    let mut indices = Array2::<i64>::zeros((queries.nrows(), k));
    let mut scores = Array2::<T>::from_elem((queries.nrows(), k), T::ZERO);
    for (q, row) in sims.rows().into_iter().enumerate() {
        let row = row.as_slice().unwrap_or(&[]);
        for (slot, &i) in best_indices(row, k).iter().enumerate() {
            indices[(q, slot)] = i as i64;
            scores[(q, slot)] = row[i];
        }
    }
    Ok((indices, scores))
}

/// Indices of the `k` largest values, best first, lower index on ties.
/// Partial selection first so the cost is O(n + k log k).
pub fn best_indices<T: Real>(values: &[T], k: usize) -> Vec<usize> {
    let k = k.min(values.len());
    let better = |a: &usize, b: &usize| {
        values[*b].partial_cmp(&values[*a]).unwrap_or(std::cmp::Ordering::Equal).then(a.cmp(b))
    };
    let mut order: Vec<usize> = (0..values.len()).collect();
    if k == 0 {
        return Vec::new();
    }
    if k < order.len() {
        order.select_nth_unstable_by(k - 1, better);
        order.truncate(k);
    }
    order.sort_unstable_by(better);
    order
}
