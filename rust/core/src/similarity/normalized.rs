//! Exact top-k by dot product over rows that are already unit length (the
//! memory store's embeddings), read in place: no normalised copy, no score
//! matrix, row blocks in parallel, each worker keeping only its candidates.
//!
//! Two passes per query. The first computes, for every row, an approximate
//! score `a` and a bound `eps` with `|a - s| <= eps`, where `s` is the exact
//! score the second pass returns (f64-accumulated dot product rounded to the
//! input's precision, clipped to [-1, 1]). With `L` the k-th largest of the
//! lower bounds `a - eps`, a row whose upper bound `a + eps` is below `L` is
//! strictly beaten by k rows and cannot be in the top k; every other row is
//! a candidate and is rescored exactly. The result is therefore identical to
//! ranking the exact scores of all rows (best first, ties to the lower index)
//! whatever the approximation, only the number of candidates depends on it.
//!
//! The approximation is either the input precision itself (bound: the
//! rounding of the summation, from the row's norm) or an int8 *sketch* of
//! the rows (`quantize_rows`: one scale per row, a quarter of float32's
//! memory traffic, which is what bounds this memory-bound loop) multiplied
//! exactly in integers with the query quantised to int16; its bound is
//! `|q| |e_x| + |e_q| |x~|` (Cauchy-Schwarz on both quantisation errors).
//! Memory: nothing per row; only the candidates are kept.

use std::cmp::Ordering;

use ndarray::{Array2, ArrayView1, ArrayView2, CowArray, Ix2};
use rayon::prelude::*;

use super::dot::{dot_and_norm2, has_avx2_fma, prefetch, prefetch_ahead, Dot};
use super::fused;
use super::pool::{Pool, BLOCK};
use crate::{Error, Result};

/// With a sketch, from this many queries the blocked product replaces one
/// sketched pass per query (each reads a quarter of the product's bytes).
const SKETCH_PRODUCT_FROM: usize = 8;


/// The int8 sketch of a matrix: `codes[i] * bounds[i, 0]` approximates row
/// `i`, and `bounds[i, 1]` bounds (for a unit query) the distance between the
/// approximate score and the exact one, summation rounding included.
#[derive(Clone, Copy)]
pub struct Sketch<'a> {
    pub codes: ArrayView2<'a, i8>,
    pub bounds: ArrayView2<'a, f32>,
}

/// The int8 sketch of the rows of `x` (see `Sketch`); a zero row gets a
/// zero scale and a zero bound.
pub fn quantize_rows(x: ArrayView2<f32>) -> Result<(Array2<i8>, Array2<f32>)> {
    let (n, d) = x.dim();
    if d == 0 {
        return Err(Error::invalid("X", "has 0 columns; pass vectors with at least one dimension"));
    }
    let x = x.as_standard_layout();
    let flat = x.as_slice().unwrap_or(&[]);
    let mut codes = vec![0i8; n * d];
    let mut bounds = vec![0f32; n * 2];
    let gamma = (d as f64 + 2.0) * 2.0 * f32::UNIT_ROUNDOFF;
    codes
        .par_chunks_mut(d)
        .zip(bounds.par_chunks_mut(2))
        .enumerate()
        .try_for_each(|(i, (code, bound))| {
            let row = &flat[i * d..(i + 1) * d];
            if let Some(j) = row.iter().position(|v| !v.is_finite()) {
                return Err(Error::invalid("X", format!("X[{i}, {j}] is not finite; remove NaN and infinite values")));
            }
            let max = row.iter().fold(0f32, |m, v| m.max(v.abs()));
            let scale = max / 127.0;
            let inverse = if scale > 0.0 { 1.0 / scale } else { 0.0 };
            // Adding and subtracting 1.5 * 2^23 rounds |v| <= 2^22 to an
            // integer without a libm call; any rounding would do, the stored
            // bound is measured from the codes actually chosen.
            const ROUND: f32 = 12_582_912.0;
            let (mut err2, mut norm2) = (0f64, 0f64);
            for (c, &v) in code.iter_mut().zip(row) {
                let q = ((v * inverse + ROUND) - ROUND).clamp(-127.0, 127.0);
                *c = q as i8;
                let e = v as f64 - q as f64 * scale as f64;
                err2 += e * e;
                norm2 += v as f64 * v as f64;
            }
            let (err, norm) = (err2.sqrt(), norm2.sqrt());
            let total = err + gamma * (norm + err);
            bound[0] = scale;
            // Rounded up so the stored bound never understates.
            bound[1] = (total * (1.0 + 1e-6)) as f32 * (1.0 + 1e-6);
            Ok(())
        })?;
    let codes = Array2::from_shape_vec((n, d), codes).map_err(|e| Error::invalid("X", e.to_string()))?;
    let bounds = Array2::from_shape_vec((n, 2), bounds).map_err(|e| Error::invalid("X", e.to_string()))?;
    Ok((codes, bounds))
}

/// For each query row, the indices and dot-product scores of the `k` rows of
/// `x` with the highest score (`x`'s rows and the queries being unit length,
/// the cosine), best first, ties to the lower index; rows where `valid` is
/// false are skipped. With a `sketch` of `x` (from `quantize_rows(x)`) the
/// first pass reads the int8 codes instead of `x`; the results are the same.
pub fn top_k_normalized<T: Dot>(
    queries: ArrayView2<T>,
    x: ArrayView2<T>,
    k: usize,
    valid: Option<ArrayView1<bool>>,
    sketch: Option<Sketch<'_>>,
) -> Result<(Array2<i64>, Array2<T>)> {
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
    if let Some(v) = &valid {
        if v.len() != n {
            return Err(Error::invalid("valid", format!("has {} entries but X has {n} rows; pass one bool per row", v.len())));
        }
    }
    if let Some(s) = &sketch {
        if std::mem::size_of::<T>() != 4 {
            return Err(Error::invalid("sketch", "is for float32 X only; pass X as float32 or no sketch"));
        }
        check_sketch(s, n, d)?;
    }
    let x = x.as_standard_layout();
    let valid = valid.map(|v| v.to_vec());
    let sketch = sketch.as_ref().map(|s| (s.codes.as_standard_layout(), s.bounds.as_standard_layout()));
    let rows = Rows { x: &x, d, valid: valid.as_deref(), sketch: sketch.as_ref() };
    let available = valid.as_ref().map_or(n, |v| v.iter().filter(|&&b| b).count());
    let k = k.min(available);
    let mut indices = Array2::<i64>::zeros((queries.nrows(), k));
    let mut scores = Array2::<T>::from_elem((queries.nrows(), k), T::ZERO);
    let product_from = if rows.sketch.is_some() { SKETCH_PRODUCT_FROM } else { fused::PRODUCT_FROM };
    let results = if k == 0 {
        Vec::new()
    } else if queries.nrows() >= product_from {
        rows.search_many(queries, k)?
    } else {
        queries.rows().into_iter().map(|q| rows.search(&q.to_vec(), k)).collect::<Result<Vec<_>>>()?
    };
    for (qi, best) in results.into_iter().enumerate() {
        for (slot, (i, s)) in best.into_iter().enumerate() {
            indices[(qi, slot)] = i as i64;
            scores[(qi, slot)] = s;
        }
    }
    Ok((indices, scores))
}

fn check_sketch(s: &Sketch<'_>, n: usize, d: usize) -> Result<()> {
    if s.codes.dim() != (n, d) {
        return Err(Error::invalid(
            "sketch",
            format!("codes have shape {:?} but X is ({n}, {d}); pass quantize_rows(X) for this X", s.codes.dim()),
        ));
    }
    if s.bounds.dim() != (n, 2) {
        return Err(Error::invalid(
            "sketch",
            format!("bounds have shape {:?}, expected ({n}, 2); pass quantize_rows(X) for this X", s.bounds.dim()),
        ));
    }
    let bad = |v: &f32| !(v.is_finite() && *v >= 0.0);
    let any_bad = match s.bounds.as_slice() {
        Some(flat) => flat.iter().any(bad),
        None => s.bounds.iter().any(bad),
    };
    if let Some(((i, j), _)) = s.bounds.indexed_iter().find(|(_, v)| any_bad && bad(v)) {
        return Err(Error::invalid("sketch", format!("bounds[{i}, {j}] is negative or not finite; pass quantize_rows(X)")));
    }
    Ok(())
}

type OwnedSketch<'a> = (CowArray<'a, i8, Ix2>, CowArray<'a, f32, Ix2>);

struct Rows<'r, 'a, T> {
    x: &'r CowArray<'a, T, Ix2>,
    d: usize,
    valid: Option<&'r [bool]>,
    sketch: Option<&'r OwnedSketch<'a>>,
}

impl<T: Dot> Rows<'_, '_, T> {
    fn row(&self, i: usize) -> &[T] {
        let flat = self.x.as_slice().unwrap_or(&[]);
        &flat[i * self.d..(i + 1) * self.d]
    }

    /// The exact score: products summed in f64, rounded to `T`, clipped.
    fn exact(&self, q: &[T], i: usize) -> Result<T> {
        let row = self.row(i);
        let mut acc = [0f64; 4];
        let (qc, xc) = (q.chunks_exact(4), row.chunks_exact(4));
        let tail: f64 = qc.remainder().iter().zip(xc.remainder()).map(|(a, b)| a.to_f64() * b.to_f64()).sum();
        for (a, b) in qc.zip(xc) {
            for l in 0..4 {
                acc[l] += a[l].to_f64() * b[l].to_f64();
            }
        }
        let s = (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail;
        if s.is_nan() {
            return Err(Error::invalid("X", format!("X[{i}] gives a NaN dot product; remove NaN and infinite values")));
        }
        Ok(T::from_f64(s.clamp(-1.0, 1.0)))
    }

    fn search(&self, q: &[T], k: usize) -> Result<Vec<(usize, T)>> {
        let n = self.x.nrows();
        let qnorm = q.iter().map(|v| v.to_f64() * v.to_f64()).sum::<f64>().sqrt() * (1.0 + 1e-9);
        // Final rounding to T and the f64 summation of the exact pass.
        let slack = 4.0 * T::UNIT_ROUNDOFF + 1e-12;
        let sq = self.sketch.map(|_| SketchQuery::new(q));
        let blocks = n.div_ceil(BLOCK);
        let pool = (0..blocks)
            .into_par_iter()
            .try_fold(
                || Pool::new(k),
                |mut pool, b| {
                    let range = b * BLOCK..((b + 1) * BLOCK).min(n);
                    match (self.sketch, &sq) {
                        (Some((codes, bounds)), Some(sq)) => {
                            let block = Block { rows: range, valid: self.valid, qnorm, slack, pool: &mut pool };
                            sketch_block(sq, codes, bounds, block)
                        }
                        _ => self.dense_block(q, range, qnorm, slack, &mut pool)?,
                    }
                    Ok::<_, Error>(pool)
                },
            )
            .try_reduce(|| Pool::new(k), |a, b| Ok(a.merge(b)))?;
        let mut scored = Vec::with_capacity(pool.candidate_count());
        for i in pool.survivors() {
            scored.push((i, self.exact(q, i)?));
        }
        scored.sort_unstable_by(|a, b| b.1.partial_cmp(&a.1).unwrap_or(Ordering::Equal).then(a.0.cmp(&b.0)));
        scored.truncate(k);
        Ok(scored)
    }

    /// Several queries at once through the blocked product (which reads each
    /// row once for all of them; the sketch serves the one-query pass only).
    fn search_many(&self, queries: ArrayView2<T>, k: usize) -> Result<Vec<Vec<(usize, T)>>> {
        let (n, d) = (self.x.nrows(), self.d);
        let qflat: Vec<T> = queries.iter().copied().collect();
        let m = queries.nrows();
        let norm = |q: &[T]| q.iter().map(|v| v.to_f64() * v.to_f64()).sum::<f64>().sqrt() * (1.0 + 1e-9);
        let scorer = DotScorer {
            valid: self.valid,
            qnorms: qflat.chunks_exact(d).map(norm).collect(),
            gamma: 2.5 * (d as f64 + 2.0) * T::UNIT_ROUNDOFF,
            slack: 4.0 * T::UNIT_ROUNDOFF + 1e-12,
        };
        let flat = self.x.as_slice().unwrap_or(&[]);
        let parallel = n * d * m >= 1 << 17;
        let pools = fused::product(&qflat, m, flat, d, k, parallel, &scorer)
            .map_err(|fused::NonFinite| fused::non_finite_error(flat, d, self.valid))?;
        let mut results = Vec::with_capacity(m);
        for (q, pool) in qflat.chunks_exact(d).zip(&pools) {
            let mut scored = Vec::with_capacity(pool.candidate_count());
            for i in pool.survivors() {
                scored.push((i, self.exact(q, i)?));
            }
            scored.sort_unstable_by(|a, b| b.1.partial_cmp(&a.1).unwrap_or(Ordering::Equal).then(a.0.cmp(&b.0)));
            scored.truncate(k);
            results.push(scored);
        }
        Ok(results)
    }

    fn dense_block(&self, q: &[T], range: std::ops::Range<usize>, qnorm: f64, slack: f64, pool: &mut Pool) -> Result<()> {
        let flat = self.x.as_slice().unwrap_or(&[]);
        let block = Block { rows: range, valid: self.valid, qnorm, slack, pool: &mut *pool };
        #[cfg(target_arch = "x86_64")]
        let overflow = if has_avx2_fma() {
            // SAFETY: the CPU supports the features the function is compiled for.
            unsafe { dense_block_avx2(q, flat, block) }
        } else {
            dense_block_body::<T, false>(q, flat, block)
        };
        #[cfg(not(target_arch = "x86_64"))]
        let overflow = dense_block_body::<T, false>(q, flat, block);
        for i in overflow {
            if let Some(j) = self.row(i).iter().position(|v| !v.is_finite()) {
                return Err(Error::invalid("X", format!("X[{i}, {j}] is not finite; remove NaN and infinite values")));
            }
            // Finite but overflowing T: no usable bound, always rescore.
            pool.offer(i, f64::NEG_INFINITY, f64::INFINITY);
        }
        Ok(())
    }
}

/// The dot-product rule for the blocked product: `|dot - s| <= gamma |q|
/// |x| + slack`, rows where `valid` is false skipped.
struct DotScorer<'v> {
    valid: Option<&'v [bool]>,
    qnorms: Vec<f64>,
    gamma: f64,
    slack: f64,
}

impl<T: Dot> fused::Scorer<T> for DotScorer<'_> {
    #[inline(always)]
    fn row(&self, i: usize, norm2: f64) -> Option<(f64, f64)> {
        (norm2.is_finite() && self.valid.is_none_or(|v| v[i])).then(|| (1.0, norm2.sqrt()))
    }

    #[inline(always)]
    fn query(&self, j: usize, floor: f64) -> (f64, f64) {
        // dot + eps >= floor, less a margin for the rounding of both sides.
        (self.gamma * self.qnorms[j], floor - self.slack - 1e-9)
    }

    #[inline(always)]
    fn offer(&self, j: usize, row: &[T], i: usize, dot: f64, norm2: f64, pool: &mut Pool) -> fused::Outcome {
        if self.valid.is_some_and(|v| !v[i]) {
            return Ok(());
        }
        if dot.is_finite() && norm2.is_finite() {
            let eps = self.gamma * self.qnorms[j] * norm2.sqrt() + self.slack;
            pool.offer(i, dot - eps, dot + eps);
        } else if row.iter().any(|v| !v.is_finite()) {
            return Err(fused::NonFinite);
        } else {
            // Finite but overflowing T: no usable bound, always rescore.
            pool.offer(i, f64::NEG_INFINITY, f64::INFINITY);
        }
        Ok(())
    }
}

/// A range of rows to score into a worker's pool.
struct Block<'p> {
    rows: std::ops::Range<usize>,
    valid: Option<&'p [bool]>,
    qnorm: f64,
    slack: f64,
    pool: &'p mut Pool,
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dense_block_avx2<T: Dot>(q: &[T], flat: &[T], block: Block<'_>) -> Vec<usize> {
    dense_block_body::<T, true>(q, flat, block)
}

/// Scores the block's rows from the dense matrix; the rows whose score or
/// norm is not finite are returned for the caller to diagnose.
#[inline(always)]
fn dense_block_body<T: Dot, const FMA: bool>(q: &[T], flat: &[T], block: Block<'_>) -> Vec<usize> {
    let d = q.len();
    let gamma = 2.5 * (d as f64 + 2.0) * T::UNIT_ROUNDOFF;
    let ahead = prefetch_ahead::<T>();
    let mut overflow = Vec::new();
    for i in block.rows {
        if block.valid.is_some_and(|v| !v[i]) {
            continue;
        }
        let row = &flat[i * d..(i + 1) * d];
        prefetch(flat, i * d + ahead, d);
        let (dot, norm2) = dot_and_norm2::<T, FMA>(q, row);
        if dot.is_finite() && norm2.is_finite() {
            // Most rows lose to the floor: tell them without the square root
            // (sqrt(n) <= (n + 1) / 2 makes this upper bound larger still).
            if dot + gamma * block.qnorm * (norm2 + 1.0) * 0.5 + block.slack < block.pool.floor() {
                continue;
            }
            let eps = gamma * block.qnorm * norm2.sqrt() + block.slack;
            block.pool.offer(i, dot - eps, dot + eps);
        } else {
            overflow.push(i);
        }
    }
    overflow
}

/// The query as int16 for the sketch kernel: `codes[i] * scale` approximates
/// it, `err_norm` is the norm of what that leaves out. The largest code is
/// chosen so that `127 * max_code * d < 2^31`: the integer dot products of a
/// row's int8 codes with it are exact in i32.
struct SketchQuery {
    codes: Vec<i16>,
    scale: f64,
    err_norm: f64,
}

impl SketchQuery {
    fn new<T: Dot>(q: &[T]) -> Self {
        let d = q.len().max(1) as f64;
        let top = (32767.0f64).min(((i32::MAX as f64) / (127.0 * d)).floor()).max(1.0);
        let max = q.iter().fold(0f64, |m, v| m.max(v.to_f64().abs()));
        let scale = if max > 0.0 { max / top } else { 0.0 };
        let mut err2 = 0f64;
        let codes = q
            .iter()
            .map(|v| {
                let c = if scale > 0.0 { (v.to_f64() / scale).round().clamp(-top, top) } else { 0.0 };
                let e = v.to_f64() - c * scale;
                err2 += e * e;
                c as i16
            })
            .collect();
        SketchQuery { codes, scale, err_norm: err2.sqrt() * (1.0 + 1e-9) }
    }
}

fn sketch_block(q: &SketchQuery, codes: &CowArray<'_, i8, Ix2>, bounds: &CowArray<'_, f32, Ix2>, block: Block<'_>) {
    let codes = codes.as_slice().unwrap_or(&[]);
    let bounds = bounds.as_slice().unwrap_or(&[]);
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports the features the function is compiled for.
        return unsafe { sketch_block_avx2(q, codes, bounds, block) };
    }
    sketch_block_body::<false>(q, codes, bounds, block)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn sketch_block_avx2(q: &SketchQuery, codes: &[i8], bounds: &[f32], block: Block<'_>) {
    sketch_block_body::<true>(q, codes, bounds, block)
}

/// The approximate score is `q.scale * scale_i * (q.codes . codes_i)`,
/// exact up to f64 rounding. Its distance to `q . x_i` is at most
/// `|q| |e_i| + |e_q| |x~_i|` (Cauchy-Schwarz twice), with `|e_i|` the
/// row's stored bound and `|x~_i| <= 127 scale_i sqrt(d)`.
#[inline(always)]
fn sketch_block_body<const AVX2: bool>(q: &SketchQuery, codes: &[i8], bounds: &[f32], block: Block<'_>) {
    let d = q.codes.len();
    let row_norm = 127.0 * (d as f64).sqrt() * (1.0 + 1e-9);
    for i in block.rows {
        if block.valid.is_some_and(|v| !v[i]) {
            continue;
        }
        let row = &codes[i * d..(i + 1) * d];
        #[cfg(target_arch = "x86_64")]
        if AVX2 {
            prefetch(codes, (i + PREFETCH_ROWS) * d, d);
        }
        #[cfg(target_arch = "x86_64")]
        let dot = if AVX2 {
            // SAFETY: only instantiated inside `sketch_block_avx2`.
            unsafe { sketch_dot_avx2(&q.codes, row) }
        } else {
            sketch_dot(&q.codes, row)
        };
        #[cfg(not(target_arch = "x86_64"))]
        let dot = sketch_dot(&q.codes, row);
        let scale = bounds[2 * i] as f64;
        let approx = dot as f64 * q.scale * scale;
        let eps = block.qnorm * bounds[2 * i + 1] as f64 * (1.0 + 1e-6) + q.err_norm * row_norm * scale + block.slack;
        block.pool.offer(i, approx - eps, approx + eps);
    }
}

/// How many rows ahead the sketch loop asks for: the hardware prefetcher
/// alone leaves this loop waiting on memory.
const PREFETCH_ROWS: usize = 8;

/// The integer dot product of the int16 query with a row's int8 codes.
fn sketch_dot(q: &[i16], codes: &[i8]) -> i32 {
    q.iter().zip(codes).fold(0i32, |s, (&a, &c)| s.wrapping_add(a as i32 * c as i32))
}

/// `sketch_dot` with AVX2: 16 codes widened to i16 and multiplied pairwise
/// into i32 (`vpmaddwd`) per step; the same exact integer result.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn sketch_dot_avx2(q: &[i16], codes: &[i8]) -> i32 {
    use std::arch::x86_64::*;
    let d = q.len().min(codes.len());
    let mut acc = _mm256_setzero_si256();
    let mut j = 0;
    while j + 16 <= d {
        // SAFETY: j + 16 <= d bounds both 16-element loads.
        let c = unsafe { _mm256_cvtepi8_epi16(_mm_loadu_si128(codes.as_ptr().add(j).cast())) };
        let a = unsafe { _mm256_loadu_si256(q.as_ptr().add(j).cast()) };
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(c, a));
        j += 16;
    }
    let half = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    let quad = _mm_add_epi32(half, _mm_shuffle_epi32(half, 0b01_00_11_10));
    let pair = _mm_add_epi32(quad, _mm_shuffle_epi32(quad, 0b10_11_00_01));
    _mm_cvtsi128_si32(pair).wrapping_add(sketch_dot(&q[j..d], &codes[j..d]))
}
