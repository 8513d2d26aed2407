//! `Y = A0 X` for a symmetric n x n matrix A (A0: A with its diagonal taken
//! as zero) and the few columns of a Krylov block X: the product the
//! eigenvector iteration spends its time in. Two ways, by size:
//!
//! - While A fits in the caches (below STREAMED_BYTES), the product is bound
//!   by multiply-adds: whole rows of A, two at a time, against the columns
//!   of X held in vector registers (`full_product`).
//! - Larger, it is bound by reading A from memory, so only the upper
//!   triangle is read (`symmetric_product`): entry a[i, j] (i < j) adds
//!   a[i, j] x[j] to y[i] (the row part) and a[i, j] x[i] to y[j] (the
//!   column part). That halves the bytes but needs more loads and stores per
//!   multiply-add, so it pays only once A no longer fits in the caches.
//!
//! Why float32 arithmetic: 8 float32 lanes per vector do twice the work of 4
//! float64 ones. The rounding (relative 1e-7 per term; row parts summed in 8
//! lanes, column parts over the BLOCK_ROWS rows of a block, both then added
//! in float64) perturbs the operator by ~1e-6, far below the eigenvector
//! tolerance (`TOL` in spectral.rs, 1e-4). Why not faer's GEMM: it packs the
//! whole n x n operand on every call, which for a few right-hand columns
//! costs more than the product.

use rayon::prelude::*;

use crate::linalg::Real;

/// From this many bytes of A the symmetric product is used: A then no
/// longer fits in the L2 caches, and reading half of it is worth the extra
/// loads per multiply-add.
const STREAMED_BYTES: usize = 8 << 20;
/// Rows per work item (both ways). A block's column part is accumulated in float32 over
/// its own rows only, then added to the float64 result.
const BLOCK_ROWS: usize = 32;
/// From this size the blocks run on rayon's threads. Below it a parallel
/// pass gains little and stalls whenever the other worker is kept waiting,
/// behind BLAS threads that spin after a numpy or scikit-learn call or by
/// the hypervisor.
pub(crate) const PARALLEL_FROM: usize = 1024;
/// Vector lanes along a row of A.
#[cfg(target_arch = "x86_64")]
const LANES: usize = 8;
/// Columns of X per pass over a pair of rows in `full_product`: 2 x 6
/// accumulators take 12 of the 16 vector registers, the two rows of A and
/// an x the rest.
#[cfg(target_arch = "x86_64")]
const FULL_GROUP: usize = 6;
/// The same in `symmetric_product`: 2 x 3 row-part accumulators and 2 x 3
/// broadcast x[i], with the two rows of A, an x and a y.
#[cfg(target_arch = "x86_64")]
const SYMMETRIC_GROUP: usize = 3;

/// `yt[c * n + i] = sum over j != i of a[i, j] * xt[c * n + j]`: the b
/// columns of X given as rows of `xt` (b x n), the result likewise.
pub(crate) fn product<E: Real>(a: &[E], n: usize, xt: &[f32], b: usize) -> Vec<f64> {
    #[cfg(target_arch = "x86_64")]
    {
        let in_cache = n * n * std::mem::size_of::<E>() < STREAMED_BYTES;
        if in_cache && std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            return full_product(a, n, xt, b);
        }
    }
    symmetric_product(a, n, xt, b)
}

/// `product` reading whole rows of A (the diagonal term is subtracted after).
#[cfg(target_arch = "x86_64")]
fn full_product<E: Real>(a: &[E], n: usize, xt: &[f32], b: usize) -> Vec<f64> {
    // y is n x b, row-major, so that row blocks of A and y go together.
    let mut y = vec![0.0f64; n * b];
    // SAFETY (both calls): `product` checked that the CPU has AVX2 and FMA.
    let rows = |(a, y): (&[E], &mut [f64])| unsafe { full_rows_avx2(a, n, xt, b, y) };
    if n >= PARALLEL_FROM {
        a.par_chunks(BLOCK_ROWS * n).zip(y.par_chunks_mut(BLOCK_ROWS * b)).for_each(rows);
    } else {
        rows((a, &mut y));
    }
    let mut yt = vec![0.0f64; b * n];
    for (c, out) in yt.chunks_exact_mut(n).enumerate() {
        for (i, o) in out.iter_mut().enumerate() {
            *o = y[i * b + c] - a[i * n + i].to_f64() * f64::from(xt[c * n + i]);
        }
    }
    yt
}

/// `full_product` over the rows of `a` given (a multiple of n entries), into
/// the same rows of `y`, the columns of X in groups of up to FULL_GROUP.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn full_rows_avx2<E: Real>(a: &[E], n: usize, xt: &[f32], b: usize, y: &mut [f64]) {
    let mut first = 0;
    while first < b {
        let group = (b - first).min(FULL_GROUP);
        match group {
            1 => full_group_avx2::<E, 1>(a, n, xt, b, first, y),
            2 => full_group_avx2::<E, 2>(a, n, xt, b, first, y),
            3 => full_group_avx2::<E, 3>(a, n, xt, b, first, y),
            4 => full_group_avx2::<E, 4>(a, n, xt, b, first, y),
            5 => full_group_avx2::<E, 5>(a, n, xt, b, first, y),
            _ => full_group_avx2::<E, FULL_GROUP>(a, n, xt, b, first, y),
        }
        first += group;
    }
}

/// Two rows of A at a time against the columns `first..first + G`: per 8
/// entries of a row, one conversion to float32 and G multiply-adds of 8
/// lanes per row.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn full_group_avx2<E: Real, const G: usize>(a: &[E], n: usize, xt: &[f32], b: usize, first: usize, y: &mut [f64]) {
    use std::arch::x86_64::*;
    let body = n / LANES * LANES;
    let x: [&[f32]; G] = std::array::from_fn(|c| &xt[(first + c) * n..(first + c + 1) * n]);
    let rows = a.len() / n;
    for i in (0..rows).step_by(2) {
        let pair = (rows - i).min(2);
        let r0 = &a[i * n..(i + 1) * n];
        // An odd last row is paired with itself (its second result unused).
        let r1 = &a[(i + pair - 1) * n..(i + pair) * n];
        let mut acc0 = [_mm256_setzero_ps(); G];
        let mut acc1 = [_mm256_setzero_ps(); G];
        for j in (0..body).step_by(LANES) {
            // SAFETY: j + 8 <= body <= n, the length of r0, r1 and each x[c].
            let (v0, v1) = (load8(r0, j), load8(r1, j));
            for c in 0..G {
                let xc = _mm256_loadu_ps(x[c].as_ptr().add(j));
                acc0[c] = _mm256_fmadd_ps(v0, xc, acc0[c]);
                acc1[c] = _mm256_fmadd_ps(v1, xc, acc1[c]);
            }
        }
        for (r, (row, acc)) in [(r0, &acc0), (r1, &acc1)].into_iter().enumerate().take(pair) {
            for c in 0..G {
                let tail: f64 = row[body..].iter().zip(&x[c][body..]).map(|(v, &t)| v.to_f64() * f64::from(t)).sum();
                y[(i + r) * b + first + c] = lane_sum(acc[c]) + tail;
            }
        }
    }
}

/// `product` reading only the upper triangle of A.
fn symmetric_product<E: Real>(a: &[E], n: usize, xt: &[f32], b: usize) -> Vec<f64> {
    let blocks = n.div_ceil(BLOCK_ROWS);
    let product = Product { a, n, xt, b };
    let fresh = || Partial { yt: vec![0.0; b * n], column: vec![0.0; b * n] };
    let add_block = |mut partial: Partial, block: usize| {
        product.block(block * BLOCK_ROWS, &mut partial);
        partial
    };
    let partial = if n >= PARALLEL_FROM {
        // Each thread sums into its own result (column parts reach every
        // later row), added up at the end.
        (0..blocks).into_par_iter().fold(fresh, add_block).map(|p| p.yt).reduce_with(|mut sum, yt| {
            sum.iter_mut().zip(&yt).for_each(|(s, y)| *s += y);
            sum
        })
    } else {
        Some((0..blocks).fold(fresh(), add_block).yt)
    };
    partial.unwrap_or_else(|| vec![0.0; b * n])
}

/// One thread's result so far, and its float32 column-part buffer (b x n,
/// columns `start..n` of the current block in use).
struct Partial {
    yt: Vec<f64>,
    column: Vec<f32>,
}

#[derive(Clone, Copy)]
struct Product<'a, E> {
    a: &'a [E],
    n: usize,
    xt: &'a [f32],
    b: usize,
}

impl<E: Real> Product<'_, E> {
    /// Rows `start..start + BLOCK_ROWS` (fewer at the end).
    fn block(&self, start: usize, partial: &mut Partial) {
        let Product { n, b, .. } = *self;
        let end = (start + BLOCK_ROWS).min(n);
        for c in 0..b {
            partial.column[c * n + start..(c + 1) * n].fill(0.0);
        }
        let mut i = start;
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
                while i + 2 <= end {
                    // SAFETY: the running CPU has AVX2 and FMA.
                    unsafe { self.pair_avx2(i, partial) };
                    i += 2;
                }
            }
        }
        for i in i..end {
            self.row(i, partial);
        }
        for c in 0..b {
            let (yt, column) = (&mut partial.yt[c * n + start..(c + 1) * n], &partial.column[c * n + start..(c + 1) * n]);
            yt.iter_mut().zip(column).for_each(|(y, &part)| *y += f64::from(part));
        }
    }

    /// Row i alone, in scalar float64 (an odd last row, or a CPU without
    /// AVX2).
    fn row(&self, i: usize, partial: &mut Partial) {
        let Product { a, n, xt, b } = *self;
        let r = &a[i * n..(i + 1) * n];
        for c in 0..b {
            let x = &xt[c * n..(c + 1) * n];
            let column = &mut partial.column[c * n..(c + 1) * n];
            let own = f64::from(x[i]);
            let mut sum = 0.0;
            for j in i + 1..n {
                let v = r[j].to_f64();
                sum += v * f64::from(x[j]);
                column[j] += (v * own) as f32;
            }
            partial.yt[c * n + i] += sum;
        }
    }

    /// Rows i and i + 1 together, the columns of X in groups of up to
    /// SYMMETRIC_GROUP.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn pair_avx2(&self, i: usize, partial: &mut Partial) {
        let mut first = 0;
        while first < self.b {
            let group = (self.b - first).min(SYMMETRIC_GROUP);
            match group {
                1 => self.pair_group_avx2::<1>(i, first, partial),
                2 => self.pair_group_avx2::<2>(i, first, partial),
                _ => self.pair_group_avx2::<SYMMETRIC_GROUP>(i, first, partial),
            }
            first += group;
        }
    }

    /// Rows i0 = i and i1 = i + 1 against the columns `first..first + G`:
    /// a[i0, i1] and the entries past the last full vector in float64, the
    /// entries from i + 2 on in float32 vectors.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn pair_group_avx2<const G: usize>(&self, i0: usize, first: usize, partial: &mut Partial) {
        use std::arch::x86_64::*;
        let Product { a, n, xt, .. } = *self;
        let i1 = i0 + 1;
        let (r0, r1) = (&a[i0 * n..(i0 + 1) * n], &a[i1 * n..(i1 + 1) * n]);
        let x: [&[f32]; G] = std::array::from_fn(|c| &xt[(first + c) * n..(first + c + 1) * n]);
        let from = i1 + 1;
        let vector_end = from + (n - from) / LANES * LANES;
        let column = &mut partial.column[first * n..(first + G) * n];
        let mut acc0 = [_mm256_setzero_ps(); G];
        let mut acc1 = [_mm256_setzero_ps(); G];
        let own0: [__m256; G] = std::array::from_fn(|c| _mm256_set1_ps(x[c][i0]));
        let own1: [__m256; G] = std::array::from_fn(|c| _mm256_set1_ps(x[c][i1]));
        let xs: [*const f32; G] = std::array::from_fn(|c| x[c].as_ptr());
        let ys: [*mut f32; G] = std::array::from_fn(|c| column[c * n..(c + 1) * n].as_mut_ptr());
        for j in (from..vector_end).step_by(LANES) {
            // SAFETY: j + 8 <= vector_end <= n, the length of r0, r1, each
            // x[c] and each column's slice.
            let (v0, v1) = (load8(r0, j), load8(r1, j));
            for c in 0..G {
                let xc = _mm256_loadu_ps(xs[c].add(j));
                acc0[c] = _mm256_fmadd_ps(v0, xc, acc0[c]);
                acc1[c] = _mm256_fmadd_ps(v1, xc, acc1[c]);
                let y = ys[c].add(j);
                let sum = _mm256_fmadd_ps(v0, own0[c], _mm256_loadu_ps(y));
                _mm256_storeu_ps(y, _mm256_fmadd_ps(v1, own1[c], sum));
            }
        }
        let pair = r0[i1].to_f64();
        for c in 0..G {
            let (own0, own1) = (f64::from(x[c][i0]), f64::from(x[c][i1]));
            let mut sum0 = lane_sum(acc0[c]) + pair * own1;
            let mut sum1 = lane_sum(acc1[c]);
            let column = &mut column[c * n..(c + 1) * n];
            column[i1] += (pair * own0) as f32;
            for j in vector_end..n {
                let (v0, v1, xj) = (r0[j].to_f64(), r1[j].to_f64(), f64::from(x[c][j]));
                sum0 += v0 * xj;
                sum1 += v1 * xj;
                column[j] += (v0 * own0 + v1 * own1) as f32;
            }
            partial.yt[(first + c) * n + i0] += sum0;
            partial.yt[(first + c) * n + i1] += sum1;
        }
    }
}

/// The 8 lanes of `v` added in float64.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn lane_sum(v: std::arch::x86_64::__m256) -> f64 {
    let mut lanes = [0.0f32; LANES];
    std::arch::x86_64::_mm256_storeu_ps(lanes.as_mut_ptr(), v);
    lanes.iter().map(|&l| f64::from(l)).sum()
}

/// Entries `j..j + 8` of `row` as float32 lanes (`j + 8 <= row.len()`).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn load8<E: Real>(row: &[E], j: usize) -> std::arch::x86_64::__m256 {
    use std::arch::x86_64::*;
    use crate::linalg::as_type;
    debug_assert!(j + LANES <= row.len());
    if let Some(row) = as_type::<E, f64>(row) {
        let low = _mm256_cvtpd_ps(_mm256_loadu_pd(row.as_ptr().add(j)));
        let high = _mm256_cvtpd_ps(_mm256_loadu_pd(row.as_ptr().add(j + 4)));
        _mm256_set_m128(high, low)
    } else if let Some(row) = as_type::<E, f32>(row) {
        _mm256_loadu_ps(row.as_ptr().add(j))
    } else {
        let lanes: [f32; LANES] = std::array::from_fn(|l| row[j + l].to_f32());
        _mm256_loadu_ps(lanes.as_ptr())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A symmetric matrix with an arbitrary diagonal (which must be
    /// ignored), and b columns, from a simple deterministic stream.
    fn inputs(n: usize, b: usize, seed: u64) -> (Vec<f64>, Vec<f32>) {
        let mut state = seed;
        let mut next = move || {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        };
        let mut a = vec![0.0f64; n * n];
        for i in 0..n {
            for j in i..n {
                let v = next();
                a[i * n + j] = v;
                a[j * n + i] = v;
            }
        }
        let xt = (0..b * n).map(|_| next() as f32).collect();
        (a, xt)
    }

    #[test]
    fn matches_the_direct_product_without_the_diagonal() {
        // 1,100 rows of float64 (9.7 MB) take the symmetric way in `product`.
        for (n, b) in [(1, 1), (2, 3), (3, 6), (9, 7), (17, 13), (40, 2), (70, 6), (257, 6), (300, 8), (1100, 6)] {
            let (a, xt) = inputs(n, b, (n * 31 + b) as u64);
            let a32: Vec<f32> = a.iter().map(|&v| v as f32).collect();
            let mut results = vec![("float64", symmetric_product(&a, n, &xt, b)), ("dispatched", product(&a, n, &xt, b))];
            results.push(("float32", symmetric_product(&a32, n, &xt, b)));
            #[cfg(target_arch = "x86_64")]
            if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
                results.push(("float64 full", full_product(&a, n, &xt, b)));
                results.push(("float32 full", full_product(&a32, n, &xt, b)));
            }
            for c in 0..b {
                for i in 0..n {
                    let (mut want, mut scale) = (0.0f64, 0.0f64);
                    for j in (0..n).filter(|&j| j != i) {
                        let term = a[i * n + j] * f64::from(xt[c * n + j]);
                        want += term;
                        scale += term.abs();
                    }
                    let tolerance = 1e-6 * scale.max(1e-30);
                    for (kind, result) in &results {
                        let value = result[c * n + i];
                        assert!((value - want).abs() <= tolerance, "{kind} n={n} b={b} ({i}, {c}): {value} vs {want}");
                    }
                }
            }
        }
    }
}
