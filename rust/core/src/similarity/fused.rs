//! Exact cosine top-k over raw (not normalised) rows, read in place: each
//! row's dot product with the query and its norm come from the same pass,
//! row blocks run in parallel and each worker keeps only its candidates.
//!
//! The scheme is `normalized`'s: a first pass gives every row an approximate
//! cosine `a` with a proven bound `|a - s| <= eps`, where `s` is the exact
//! score the second pass returns; rows whose upper bound is below the k-th
//! best lower bound are strictly beaten by k rows, every other row is
//! rescored exactly. The ranking is therefore that of the exact scores of
//! all rows (best first, ties to the lower index), whatever the rounding of
//! the first pass.
//!
//! Exact score: the query is scaled by a power of two so its largest entry
//! is near 1 (cosine is scale-free, and the scaling is exact but for entries
//! pushed below the normal range, whose change is far below the result's
//! rounding); then `dot / (|q| |x|)` with the sums in f64, clipped to
//! [-1, 1] and rounded to the input's precision. A zero row or a zero query
//! scores 0.
//!
//! First-pass bound: with the dot product `d^` and squared norm `n^` summed
//! in the input precision (any order), `|d^ - D| <= g |q| |x|` and
//! `|n^ - |x|^2| <= g |x|^2` for `g = (d + 3) u / (1 - (d + 3) u)` (one `u`
//! more than the textbook `d u` covers underflow, which the `TINY` threshold
//! keeps below `u` relative), so `a = d^ / (|q| sqrt(n^))` is within
//! `g (2 + g)` of the cosine. Rows below the threshold, or whose sums
//! overflow, are scored exactly in the first pass.
//!
//! One query streams the rows; several go through a blocked product (a block
//! of rows times all queries with faer's GEMM, the block's norms taken while
//! it is in cache, one candidate pool per query), which reads the rows once.

use std::cmp::Ordering;
use std::ops::Range;

use faer::{Accum, MatMut, MatRef, Par};
use ndarray::{Array2, ArrayView2};
use rayon::prelude::*;

use super::dot::{dot_and_norm2, has_avx2_fma, prefetch, prefetch_ahead, Dot};
use super::pool::{Pool, BLOCK};
use crate::{Error, Result};

/// Rows per block of the blocked product: the block (384 float32 columns:
/// 384 KiB), the queries and the block's scores stay in a core's L2 cache.
const PRODUCT_BLOCK: usize = 256;
/// From this many queries the blocked product replaces one pass per query.
pub(super) const PRODUCT_FROM: usize = 2;
/// Multiply-adds (rows * dimensions * queries) from which blocks run on
/// rayon's threads.
const PARALLEL_FROM: usize = 1 << 17;

/// A non-finite entry of X was met; the caller locates the first one.
pub(super) struct NonFinite;

/// A pass's outcome: done, or stopped at a non-finite entry.
pub(super) type Outcome<S = ()> = std::result::Result<S, NonFinite>;

/// One query scaled by a power of two, with its f64 copy and norm.
struct Query<T> {
    values: Vec<T>,
    wide: Vec<f64>,
    norm: f64,
    inv_norm: f64,
}

impl<T: Dot> Query<T> {
    fn new(q: &[T]) -> Self {
        let max = q.iter().fold(0f64, |m, v| m.max(v.to_f64().abs()));
        let (a, b) = if max > 0.0 { pow2_pair(-(max.log2().floor() as i32)) } else { (1.0, 1.0) };
        let values: Vec<T> = q.iter().map(|v| T::from_f64(v.to_f64() * a * b)).collect();
        let wide: Vec<f64> = values.iter().map(|v| v.to_f64()).collect();
        let norm = wide.iter().map(|v| v * v).sum::<f64>().sqrt();
        let inv_norm = if norm > 0.0 { 1.0 / norm } else { 0.0 };
        Query { values, wide, norm, inv_norm }
    }

    fn is_zero(&self) -> bool {
        self.norm == 0.0
    }

    /// The exact score of a finite row (see the module notes).
    fn exact(&self, row: &[T]) -> T {
        if self.is_zero() {
            return T::ZERO;
        }
        let (dot, norm2) = wide_sums(&self.wide, row, (1.0, 1.0));
        let cos = if dot.is_finite() && norm2.is_finite() && norm2 >= 1e-270 {
            dot / (self.norm * norm2.sqrt())
        } else {
            // Tiny or huge f64 rows: rescale so the sums neither underflow nor overflow.
            let max = row.iter().fold(0f64, |m, v| m.max(v.to_f64().abs()));
            if max == 0.0 {
                return T::ZERO;
            }
            let (dot, norm2) = wide_sums(&self.wide, row, pow2_pair(-(max.log2().floor() as i32)));
            if norm2 > 0.0 {
                dot / (self.norm * norm2.sqrt())
            } else {
                0.0
            }
        };
        T::from_f64(cos.clamp(-1.0, 1.0))
    }
}

/// `2^p` as two factors, each representable for |p| up to about 2,000.
fn pow2_pair(p: i32) -> (f64, f64) {
    (2f64.powi(p / 2), 2f64.powi(p - p / 2))
}

/// The dot product of `q` with `row * s0 * s1` and the squared norm of
/// `row * s0 * s1`, in f64.
fn wide_sums<T: Dot>(q: &[f64], row: &[T], (s0, s1): (f64, f64)) -> (f64, f64) {
    let (mut dot, mut norm) = ([0f64; 4], [0f64; 4]);
    let (qc, xc) = (q.chunks_exact(4), row.chunks_exact(4));
    let (qr, xr) = (qc.remainder(), xc.remainder());
    for (a, b) in qc.zip(xc) {
        for l in 0..4 {
            let x = b[l].to_f64() * s0 * s1;
            dot[l] += a[l] * x;
            norm[l] += x * x;
        }
    }
    for (a, b) in qr.iter().zip(xr) {
        let x = b.to_f64() * s0 * s1;
        dot[0] += a * x;
        norm[0] += x * x;
    }
    ((dot[0] + dot[1]) + (dot[2] + dot[3]), (norm[0] + norm[1]) + (norm[2] + norm[3]))
}

/// The first pass's error bound and the squared norm under which a row is
/// scored exactly instead.
#[derive(Clone, Copy)]
struct Bound {
    eps: f64,
    tiny: f64,
}

impl Bound {
    fn new<T: Dot>(d: usize) -> Self {
        let u = T::UNIT_ROUNDOFF;
        let du = (d as f64 + 3.0) * u;
        // Past this the bound is useless (every row a candidate), still exact.
        let g = if du < 0.25 { du / (1.0 - du) } else { 1.0 };
        // The final rounding to T and the f64 sums of the exact pass.
        let slack = 4.0 * u + (4.0 * d as f64 + 16.0) * (f64::EPSILON / 2.0);
        // Squared norms from which underflow costs less than `u` relative.
        let tiny = if u > 1e-10 { 2f64.powi(-60) } else { 2f64.powi(-900) };
        Bound { eps: g * (2.0 + g) * (1.0 + 1e-6) + slack, tiny }
    }
}

/// For each query row, the indices and cosine scores of the `k` rows of `x`
/// most similar to it, best first, ties to the lower index (see the module
/// notes for the exact score); fewer than `k` rows give all of them.
pub fn top_k_cosine<T: Dot>(queries: ArrayView2<T>, x: ArrayView2<T>, k: usize) -> Result<(Array2<i64>, Array2<T>)> {
    let (n, d) = x.dim();
    if d == 0 {
        return Err(Error::invalid("X", "has 0 columns; pass vectors with at least one dimension"));
    }
    if queries.ncols() != d {
        return Err(Error::invalid("query", format!("has {} dimensions but X has {d}", queries.ncols())));
    }
    if let Some((qi, j)) = queries.indexed_iter().find(|(_, v)| !v.is_finite()).map(|(ij, _)| ij) {
        return Err(Error::invalid("query", format!("query[{qi}, {j}] is not finite; remove NaN and infinite values")));
    }
    let x = x.as_standard_layout();
    let flat = x.as_slice().unwrap_or(&[]);
    let prepared: Vec<Query<T>> = queries.rows().into_iter().map(|q| Query::new(&q.to_vec())).collect();
    let m = prepared.len();
    let k = k.min(n);
    let bound = Bound::new::<T>(d);
    let parallel = n.saturating_mul(d).saturating_mul(m.max(1)) >= PARALLEL_FROM;
    let pools = if k == 0 {
        Ok(Vec::new())
    } else if prepared.iter().all(Query::is_zero) {
        check_finite(flat, d, parallel).map(|()| Vec::new())
    } else if m < PRODUCT_FROM {
        prepared
            .iter()
            .map(|q| if q.is_zero() { Ok(Pool::new(k)) } else { stream(q, flat, d, k, bound, parallel) })
            .collect()
    } else {
        let qflat: Vec<T> = prepared.iter().flat_map(|q| q.values.iter().copied()).collect();
        product(&qflat, m, flat, d, k, parallel, &CosineScorer { queries: &prepared, bound })
    };
    let Ok(pools) = pools else {
        return Err(non_finite_error(flat, d, None));
    };
    let mut indices = Array2::<i64>::zeros((m, k));
    let mut scores = Array2::<T>::from_elem((m, k), T::ZERO);
    for (qi, q) in prepared.iter().enumerate() {
        let best: Vec<(usize, T)> = match pools.get(qi) {
            Some(pool) if !q.is_zero() => rescore(q, flat, d, pool, k),
            // A zero query scores 0 with every row: the first k rows.
            _ => (0..k).map(|i| (i, T::ZERO)).collect(),
        };
        for (slot, (i, s)) in best.into_iter().enumerate() {
            indices[(qi, slot)] = i as i64;
            scores[(qi, slot)] = s;
        }
    }
    Ok((indices, scores))
}

/// The surviving candidates scored exactly, best first, ties to the lower
/// index, cut to k.
fn rescore<T: Dot>(q: &Query<T>, flat: &[T], d: usize, pool: &Pool, k: usize) -> Vec<(usize, T)> {
    let mut scored: Vec<(usize, T)> = pool.survivors().map(|i| (i, q.exact(&flat[i * d..(i + 1) * d]))).collect();
    scored.sort_unstable_by(|a, b| b.1.partial_cmp(&a.1).unwrap_or(Ordering::Equal).then(a.0.cmp(&b.0)));
    scored.truncate(k);
    scored
}

/// Folds `step` over `0..blocks` into per-worker states, on rayon's threads
/// when `parallel`; stops at the first error.
fn fold_blocks<S: Send>(
    blocks: usize,
    parallel: bool,
    init: impl Fn() -> S + Sync + Send,
    step: impl Fn(&mut S, usize) -> Outcome + Sync + Send,
    merge: impl Fn(S, S) -> S + Sync + Send,
) -> Outcome<S> {
    if parallel {
        (0..blocks)
            .into_par_iter()
            .try_fold(&init, |mut state, b| step(&mut state, b).map(|()| state))
            .try_reduce(&init, |a, b| Ok(merge(a, b)))
    } else {
        let mut state = init();
        for b in 0..blocks {
            step(&mut state, b)?;
        }
        Ok(state)
    }
}

fn block_rows(b: usize, size: usize, n: usize) -> Range<usize> {
    b * size..((b + 1) * size).min(n)
}

/// Offers row `i` given its first-pass dot product and squared norm; rows
/// without a usable bound (tiny, overflowing) are scored exactly here.
#[inline(always)]
fn offer<T: Dot>(q: &Query<T>, row: &[T], i: usize, dot: f64, norm2: f64, bound: Bound, pool: &mut Pool) -> Outcome {
    if dot.is_finite() && norm2.is_finite() && norm2 >= bound.tiny {
        // Most rows lose to the floor: tell them without the square root and
        // the division (a + eps < floor, squared, with room for its rounding).
        let t = pool.floor() - bound.eps;
        let s = dot * q.inv_norm;
        if t > 0.0 && (s <= 0.0 || s * s * (1.0 + 1e-9) < t * t * norm2) {
            return Ok(());
        }
        let a = s / norm2.sqrt();
        pool.offer(i, a - bound.eps, a + bound.eps);
    } else {
        if row.iter().any(|v| !v.is_finite()) {
            return Err(NonFinite);
        }
        let s = q.exact(row).to_f64();
        pool.offer(i, s, s);
    }
    Ok(())
}

/// One query: the rows streamed once, blocks in parallel.
fn stream<T: Dot>(q: &Query<T>, flat: &[T], d: usize, k: usize, bound: Bound, parallel: bool) -> Outcome<Pool> {
    let n = flat.len() / d;
    fold_blocks(
        n.div_ceil(BLOCK),
        parallel,
        || Pool::new(k),
        |pool, b| stream_block(q, flat, block_rows(b, BLOCK, n), bound, pool),
        Pool::merge,
    )
}

fn stream_block<T: Dot>(q: &Query<T>, flat: &[T], rows: Range<usize>, bound: Bound, pool: &mut Pool) -> Outcome {
    #[cfg(target_arch = "x86_64")]
    if has_avx2_fma() {
        // SAFETY: the CPU supports the features the function is compiled for.
        return unsafe { stream_block_avx2(q, flat, rows, bound, pool) };
    }
    stream_block_body::<T, false>(q, flat, rows, bound, pool)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn stream_block_avx2<T: Dot>(
    q: &Query<T>,
    flat: &[T],
    rows: Range<usize>,
    bound: Bound,
    pool: &mut Pool,
) -> Outcome {
    stream_block_body::<T, true>(q, flat, rows, bound, pool)
}

#[inline(always)]
fn stream_block_body<T: Dot, const FMA: bool>(
    q: &Query<T>,
    flat: &[T],
    rows: Range<usize>,
    bound: Bound,
    pool: &mut Pool,
) -> Outcome {
    let d = q.values.len();
    let ahead = prefetch_ahead::<T>();
    for i in rows {
        let row = &flat[i * d..(i + 1) * d];
        prefetch(flat, i * d + ahead, d);
        let (dot, norm2) = dot_and_norm2::<T, FMA>(&q.values, row);
        offer(q, row, i, dot, norm2, bound, pool)?;
    }
    Ok(())
}

/// A worker's state in the blocked product: one pool per query and the
/// block's scratch.
struct Product<T> {
    pools: Vec<Pool>,
    /// The block's scores, one row's queries contiguous.
    scores: Vec<T>,
    norms: Vec<f64>,
    /// Per row, the prefilter's `(s, t)`; `s == 0` marks a row for `offer` alone.
    factors: Vec<(f64, f64)>,
    /// Per query, the prefilter's `(c, f)`.
    thresholds: Vec<(f64, f64)>,
}

/// A scoring rule for the blocked product. The scan first tests every
/// (row, query) score with a cheap conservative prefilter, passing unless
/// `dot * s + c * t < f` (so a NaN passes), then hands the rows that pass to
/// `offer`, which applies the exact bound: the prefilter must pass every row
/// `offer` would keep.
pub(super) trait Scorer<T>: Sync {
    /// Row `i`'s prefilter factors `(s, t)`, `s > 0`, from its squared norm;
    /// `None` sends the row to `offer` for every query (no usable bound, or
    /// masked out).
    fn row(&self, i: usize, norm2: f64) -> Option<(f64, f64)>;
    /// Query `j`'s `(c, f)` given its pool's floor.
    fn query(&self, j: usize, floor: f64) -> (f64, f64);
    /// Offers row `i` to query `j`'s pool (dot product and squared norm
    /// summed in the input precision).
    fn offer(&self, j: usize, row: &[T], i: usize, dot: f64, norm2: f64, pool: &mut Pool) -> Outcome;
}

/// The cosine rule: `a = dot / (|q| sqrt(n^))` within `eps`.
struct CosineScorer<'q, T> {
    queries: &'q [Query<T>],
    bound: Bound,
}

impl<T: Dot> Scorer<T> for CosineScorer<'_, T> {
    #[inline(always)]
    fn row(&self, _i: usize, norm2: f64) -> Option<(f64, f64)> {
        (norm2.is_finite() && norm2 >= self.bound.tiny).then(|| (1.0 / norm2.sqrt(), 0.0))
    }

    #[inline(always)]
    fn query(&self, j: usize, floor: f64) -> (f64, f64) {
        match &self.queries[j] {
            q if q.is_zero() => (0.0, f64::INFINITY),
            // a + eps >= floor, times |q|, less a margin for the rounding of both sides.
            q => (0.0, (floor - self.bound.eps) * q.norm - 1e-9 * q.norm),
        }
    }

    #[inline(always)]
    fn offer(&self, j: usize, row: &[T], i: usize, dot: f64, norm2: f64, pool: &mut Pool) -> Outcome {
        match &self.queries[j] {
            q if q.is_zero() => Ok(()),
            q => offer(q, row, i, dot, norm2, self.bound, pool),
        }
    }
}

/// Several queries (`qflat`: m rows of d): each block of rows multiplied by
/// all of them at once, its squared norms taken while it is in cache, every
/// score passed through `scorer` into the query's pool.
pub(super) fn product<T: Dot>(
    qflat: &[T],
    m: usize,
    flat: &[T],
    d: usize,
    k: usize,
    parallel: bool,
    scorer: &impl Scorer<T>,
) -> Outcome<Vec<Pool>> {
    let n = flat.len() / d;
    // The queries column-major (d x m row-major): the product's left operand as is.
    let mut qt = vec![T::ZERO; d * m];
    for (j, q) in qflat.chunks_exact(d).enumerate() {
        for (c, &v) in q.iter().enumerate() {
            qt[c * m + j] = v;
        }
    }
    let state = fold_blocks(
        n.div_ceil(PRODUCT_BLOCK),
        parallel,
        || Product {
            pools: (0..m).map(|_| Pool::new(k)).collect(),
            scores: vec![T::ZERO; PRODUCT_BLOCK * m],
            norms: vec![0.0; PRODUCT_BLOCK],
            factors: vec![(0.0, 0.0); PRODUCT_BLOCK],
            thresholds: vec![(0.0, 0.0); m],
        },
        |state, b| product_block(&qt, m, flat, d, block_rows(b, PRODUCT_BLOCK, n), scorer, state),
        |mut a, b| {
            a.pools = a.pools.into_iter().zip(b.pools).map(|(p, o)| p.merge(o)).collect();
            a
        },
    )?;
    Ok(state.pools)
}

fn product_block<T: Dot>(
    qt: &[T],
    m: usize,
    flat: &[T],
    d: usize,
    rows: Range<usize>,
    scorer: &impl Scorer<T>,
    state: &mut Product<T>,
) -> Outcome {
    let b = rows.len();
    let block = &flat[rows.start * d..rows.end * d];
    block_norms(block, d, &mut state.norms[..b]);
    let lhs = MatRef::from_column_major_slice(qt, m, d);
    let rhs = MatRef::from_row_major_slice(block, b, d).transpose();
    let dst = MatMut::from_column_major_slice_mut(&mut state.scores[..b * m], m, b);
    faer::linalg::matmul::matmul(dst, Accum::Replace, lhs, rhs, T::ONE, Par::Seq);
    #[cfg(target_arch = "x86_64")]
    if has_avx2_fma() {
        // SAFETY: the CPU supports the features the function is compiled for.
        return unsafe { scan_avx2(block, d, rows.start, scorer, state) };
    }
    scan(block, d, rows.start, scorer, state)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn scan_avx2<T: Dot>(
    block: &[T],
    d: usize,
    start: usize,
    scorer: &impl Scorer<T>,
    state: &mut Product<T>,
) -> Outcome {
    scan(block, d, start, scorer, state)
}

/// Offers the block's scores: rows with a usable bound through the
/// prefilter (vectorised across the queries), the others to every query.
#[inline(always)]
fn scan<T: Dot>(block: &[T], d: usize, start: usize, scorer: &impl Scorer<T>, state: &mut Product<T>) -> Outcome {
    let m = state.pools.len();
    let b = block.len() / d;
    let Product { pools, scores, norms, factors, thresholds } = state;
    for (r, (factor, &norm2)) in factors[..b].iter_mut().zip(&norms[..b]).enumerate() {
        *factor = scorer.row(start + r, norm2).unwrap_or((0.0, 0.0));
    }
    for (j, (threshold, pool)) in thresholds.iter_mut().zip(pools.iter()).enumerate() {
        *threshold = scorer.query(j, pool.floor());
    }
    for (r, (dots, &(s, t))) in scores[..b * m].chunks_exact(m).zip(&factors[..b]).enumerate() {
        let row = &block[r * d..(r + 1) * d];
        if s == 0.0 {
            for (j, (dot, pool)) in dots.iter().zip(pools.iter_mut()).enumerate() {
                scorer.offer(j, row, start + r, dot.to_f64(), norms[r], pool)?;
            }
            continue;
        }
        let hit =
            dots.iter().zip(thresholds.iter()).fold(false, |h, (dot, &(c, f))| h | may_reach(dot.to_f64() * s + c * t, f));
        if !hit {
            continue;
        }
        for (j, (dot, pool)) in dots.iter().zip(pools.iter_mut()).enumerate() {
            let (c, f) = thresholds[j];
            if may_reach(dot.to_f64() * s + c * t, f) {
                scorer.offer(j, row, start + r, dot.to_f64(), norms[r], pool)?;
                thresholds[j] = scorer.query(j, pool.floor());
            }
        }
    }
    Ok(())
}

/// The prefilter's test: `v` is not provably below `f` (a NaN passes).
#[inline(always)]
fn may_reach(v: f64, f: f64) -> bool {
    v >= f || v.is_nan()
}

/// The squared norms of a block's rows, in the input precision.
fn block_norms<T: Dot>(block: &[T], d: usize, out: &mut [f64]) {
    #[cfg(target_arch = "x86_64")]
    if has_avx2_fma() {
        // SAFETY: the CPU supports the features the function is compiled for.
        return unsafe { block_norms_avx2(block, d, out) };
    }
    block_norms_body::<T, false>(block, d, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn block_norms_avx2<T: Dot>(block: &[T], d: usize, out: &mut [f64]) {
    block_norms_body::<T, true>(block, d, out)
}

#[inline(always)]
fn block_norms_body<T: Dot, const FMA: bool>(block: &[T], d: usize, out: &mut [f64]) {
    for (row, norm2) in block.chunks_exact(d).zip(out) {
        *norm2 = dot_and_norm2::<T, FMA>(row, row).1;
    }
}

/// Every entry finite (only needed when no query pass reads the rows).
fn check_finite<T: Dot>(flat: &[T], d: usize, parallel: bool) -> Outcome {
    let bad = |chunk: &[T]| chunk.iter().any(|v| !v.is_finite());
    let found = if parallel { flat.par_chunks(BLOCK * d).any(bad) } else { flat.chunks(BLOCK * d).any(bad) };
    if found {
        Err(NonFinite)
    } else {
        Ok(())
    }
}

/// The error for the first non-finite entry of X in row order among the
/// `valid` rows, whichever block met one first.
pub(super) fn non_finite_error<T: Dot>(flat: &[T], d: usize, valid: Option<&[bool]>) -> Error {
    let d = d.max(1);
    let at = flat
        .chunks_exact(d)
        .enumerate()
        .filter(|(i, _)| valid.is_none_or(|v| v.get(*i).copied().unwrap_or(true)))
        .find_map(|(i, row)| row.iter().position(|v| !v.is_finite()).map(|j| (i, j)));
    let (i, j) = at.unwrap_or((0, 0));
    Error::invalid("X", format!("X[{i}, {j}] is not finite; remove NaN and infinite values"))
}
