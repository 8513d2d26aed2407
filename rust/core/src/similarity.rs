//! Cosine similarity matrices and top-k retrieval over embedding rows, plus a
//! BM25 index (`bm25`) for the lexical half of relevance.
//!
//! For the matrices, rows are L2-normalised once and multiplied with faer's
//! parallel GEMM, the same work numpy's "normalise then matmul" does with
//! BLAS. Top-k never builds the matrix: `fused` reads the rows in place and
//! keeps only candidates. A zero row has similarity 0 with everything (never
//! NaN), as in scikit-learn.

pub mod bm25;
mod dot;
pub mod fused;
pub mod normalized;
mod pool;

pub use dot::Dot;
pub use normalized::{quantize_rows, top_k_normalized, Sketch};

use faer::linalg::matmul::triangular::{self, BlockStructure};
use faer::{Accum, MatMut, MatRef, Par};
use ndarray::{Array2, ArrayView2, ArrayViewMut2};
use rayon::prelude::*;

use crate::linalg::Real;
use crate::{Error, Result};

/// Rows per unit of parallel work in the row-wise passes.
const ROW_BLOCK: usize = 64;

/// Rows of `x` scaled to unit length, row-major; zero rows stay zero.
/// Accumulates in f64 so float32 norms are as exact as numpy's. Row blocks
/// run in parallel; the error reported is the first non-finite entry in
/// row order, whatever the scheduling.
fn normalized_rows<T: Real>(x: ArrayView2<T>, argument: &str) -> Result<Vec<T>> {
    let (n, d) = x.dim();
    let x = x.as_standard_layout();
    let flat = x.as_slice().unwrap_or(&[]);
    let mut out = vec![T::ZERO; n * d];
    let block = |(b, out): (usize, &mut [T])| -> Result<()> {
        for (r, dst) in out.chunks_exact_mut(d).enumerate() {
            let i = b * ROW_BLOCK + r;
            let row = &flat[i * d..(i + 1) * d];
            if let Some(j) = row.iter().position(|v| !v.is_finite()) {
                return Err(Error::invalid(argument, format!("{argument}[{i}, {j}] is not finite; remove NaN and infinite values")));
            }
            let norm = row.iter().map(|v| v.to_f64() * v.to_f64()).sum::<f64>().sqrt();
            let scale = if norm > 0.0 { 1.0 / norm } else { 0.0 };
            dst.iter_mut().zip(row).for_each(|(o, v)| *o = T::from_f64(v.to_f64() * scale));
        }
        Ok(())
    };
    if d > 0 {
        let outcomes: Vec<Result<()>> = if n * d >= PARALLEL_FROM {
            out.par_chunks_mut(ROW_BLOCK * d).enumerate().map(block).collect()
        } else {
            out.chunks_mut(ROW_BLOCK * d).enumerate().map(block).collect()
        };
        outcomes.into_iter().collect::<Result<()>>()?;
    }
    Ok(out)
}

/// Elements from which the row-wise passes run on rayon's threads.
const PARALLEL_FROM: usize = 1 << 17;
/// Multiply-adds (n * m * d) above which a product runs on rayon's threads.
const PARALLEL_PRODUCT: usize = 1 << 18;

fn check_matrix<T>(x: &ArrayView2<T>, argument: &str) -> Result<()> {
    if x.ncols() == 0 {
        return Err(Error::invalid(argument, "has 0 columns; pass vectors with at least one dimension"));
    }
    Ok(())
}

/// `a (n x d) * b (m x d)^T` into the row-major `n x m` `out`, with values
/// clipped to [-1, 1] (rounding can leave a unit vector's self-similarity at
/// 1 + 1e-7).
fn gram<T: Real>(a: &[T], n: usize, b: &[T], m: usize, d: usize, out: &mut [T]) {
    if n > 0 && m > 0 {
        let lhs = MatRef::from_row_major_slice(a, n, d);
        let rhs = MatRef::from_row_major_slice(b, m, d).transpose();
        let dst = MatMut::from_row_major_slice_mut(out, n, m);
        let par = if n * m * d > PARALLEL_PRODUCT { Par::rayon(0) } else { Par::Seq };
        faer::linalg::matmul::matmul(dst, Accum::Replace, lhs, rhs, T::ONE, par);
    }
    clip_unit(out);
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

/// `a a^T` for row-major `a` (n x d) into the row-major `n x n` `out`: only
/// the lower triangle is multiplied (half the work of a general product),
/// then clipped and mirrored.
fn self_gram<T: Real>(a: &[T], n: usize, d: usize, out: &mut [T]) {
    if n > 0 {
        let lhs = MatRef::from_row_major_slice(a, n, d);
        let dst = MatMut::from_row_major_slice_mut(out, n, n);
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
        clip_and_mirror_lower(out, n);
    }
}

/// Clips the lower triangle of a row-major n x n matrix to [-1, 1] and
/// copies it onto the upper one. Work goes by pairs of mirrored 64 x 64
/// tiles (both stay in cache), the pairs of one tile-row per task: the pass
/// is memory-bound, so one core alone would leave bandwidth unused.
fn clip_and_mirror_lower<T: Real>(m: &mut [T], n: usize) {
    const TILE: usize = 64;
    let tiles = n.div_ceil(TILE);
    let base = SharedMut(m.as_mut_ptr());
    let tile_row = |bi: usize| {
        let (neg_one, one) = (T::from_f64(-1.0), T::ONE);
        let clip = |v: T| if v > one { one } else if v < neg_one { neg_one } else { v };
        let p = base.get();
        for bj in (bi..tiles).map(|t| t * TILE) {
            for i in bi * TILE..((bi + 1) * TILE).min(n) {
                for j in bj.max(i)..(bj + TILE).min(n) {
                    // SAFETY: i <= j < n, so both indices are inside the
                    // n x n buffer; the entries (i, j) and (j, i) belong to
                    // the tile pair (bi, bj / TILE) alone, and each pair is
                    // visited by exactly one task (its tile-row bi).
                    unsafe {
                        let v = clip(*p.add(j * n + i));
                        *p.add(j * n + i) = v;
                        *p.add(i * n + j) = v;
                    }
                }
            }
        }
    };
    if n * n >= PARALLEL_FROM {
        (0..tiles).into_par_iter().for_each(tile_row);
    } else {
        (0..tiles).for_each(tile_row);
    }
}

/// A pointer the mirror's tasks share; they write disjoint entries.
#[derive(Clone, Copy)]
struct SharedMut<T>(*mut T);
// SAFETY: used only by `clip_and_mirror_lower`, whose tasks touch disjoint
// entries of a buffer that outlives them.
unsafe impl<T> Send for SharedMut<T> {}
unsafe impl<T> Sync for SharedMut<T> {}
impl<T> SharedMut<T> {
    fn get(self) -> *mut T {
        self.0
    }
}

/// Cosine similarity of every row of `x` with every row of `y` (or of `x`).
pub fn cosine<T: Real>(x: ArrayView2<T>, y: Option<ArrayView2<T>>) -> Result<Array2<T>> {
    let rows = y.as_ref().map_or(x.nrows(), |y| y.nrows());
    let mut out = Array2::from_elem((x.nrows(), rows), T::ZERO);
    cosine_into(x, y, out.view_mut())?;
    Ok(out)
}

/// `cosine` into a caller's C-contiguous `out` of shape (rows of x, rows of
/// y or x): every entry is written. Lets the Python binding hand over a
/// numpy-allocated array (numpy asks the kernel for huge pages on large
/// arrays, which fault in far faster than 4 KiB ones).
pub fn cosine_into<T: Real>(x: ArrayView2<T>, y: Option<ArrayView2<T>>, mut out: ArrayViewMut2<T>) -> Result<()> {
    check_matrix(&x, "X")?;
    if let Some(y) = &y {
        check_matrix(y, "Y")?;
        if y.ncols() != x.ncols() {
            return Err(Error::invalid("Y", format!("has {} columns but X has {}; both must embed into the same space", y.ncols(), x.ncols())));
        }
    }
    let shape = (x.nrows(), y.as_ref().map_or(x.nrows(), |y| y.nrows()));
    if out.dim() != shape {
        return Err(Error::invalid("out", format!("has shape {:?}, expected {shape:?}", out.dim())));
    }
    let Some(out) = out.as_slice_mut() else {
        return Err(Error::invalid("out", "must be C-contiguous"));
    };
    // Normalisation, product and clip-and-mirror are parallel passes.
    let parallel = shape.0 * shape.1 * x.ncols() > PARALLEL_PRODUCT;
    crate::pool::on_pool_if(parallel, || {
        let xn = normalized_rows(x, "X")?;
        match y {
            None => self_gram(&xn, shape.0, x.ncols(), out),
            Some(y) => gram(&xn, shape.0, &normalized_rows(y, "Y")?, shape.1, x.ncols(), out),
        }
        Ok(())
    })
}

/// For each query row, the indices of the `k` rows of `x` most similar to it
/// (cosine), best first, ties broken by the lower index; and their scores.
/// Fewer than `k` rows give all of them. Exact scores and the one-pass
/// search: `fused::top_k_cosine`.
pub fn top_k<T: Dot>(queries: ArrayView2<T>, x: ArrayView2<T>, k: usize) -> Result<(Array2<i64>, Array2<T>)> {
    fused::top_k_cosine(queries, x, k)
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
