//! The k largest eigenpairs of the normalised adjacency
//! `M = D^-1/2 A0 D^-1/2` (A0: the affinity with its diagonal zeroed), which
//! are the k smallest of the normalised Laplacian `I - M` that scikit-learn
//! asks ARPACK for.
//!
//! Why not a dense eigendecomposition: for n = 2,000 it costs seconds, while
//! clustering needs only k vectors. Why block Krylov (block Lanczos with full
//! reorthogonalisation and explicit restarts) rather than subspace iteration:
//! the Krylov space gets the best polynomial filter for free, so a separable
//! affinity converges in 4-6 products with the matrix, and a block finds
//! repeated eigenvalues (one per connected component) that a single-vector
//! Lanczos can miss. A product reads the whole n x n matrix, which is what
//! costs at n = 2,000, so the loop is organised to read it once per step.
//! Small dense problems (Rayleigh-Ritz, or tiny n) go to faer's eigensolver.

use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, MatRef, Par, Side};
use rayon::prelude::*;

use super::matrix::Real;
use crate::{Error, Result};

/// Krylov blocks per restart cycle (the basis holds `(STEPS + 1) * b` vectors).
const MAX_STEPS: usize = 10;
const MAX_CYCLES: usize = 60;
/// Matrices up to this size are decomposed densely (cheaper than iterating).
const DENSE_MAX: usize = 48;

/// `y = D^-1/2 A0 D^-1/2 x` where A0 is `a` without its diagonal, `a` kept
/// in precision `E` (often the caller's array itself, read in place: the
/// diagonal is subtracted after the product rather than zeroed in a copy).
pub(crate) struct Operator<'a, E> {
    pub a: &'a [E],
    pub diag: &'a [f64],
    pub n: usize,
    pub dinv: &'a [f64],
}

impl<E: Real> Operator<'_, E> {
    fn apply(&self, x: MatRef<'_, f64>) -> Mat<f64> {
        let (n, b) = (self.n, x.ncols());
        let chunks = b.div_ceil(LANES);
        // Scaled input, chunk-major: xs[c][j][l] = dinv[j] * x[j, c * LANES + l].
        let mut xs = vec![0.0f64; chunks * n * LANES];
        for c in 0..b {
            let base = (c / LANES) * n * LANES + c % LANES;
            for j in 0..n {
                xs[base + j * LANES] = self.dinv[j] * x[(j, c)];
            }
        }
        let mut y = vec![0.0f64; n * chunks * LANES];
        product(self.a, n, &xs, chunks, &mut y);
        let width = chunks * LANES;
        Mat::from_fn(n, b, |i, c| {
            let own = xs[(c / LANES) * n * LANES + i * LANES + c % LANES];
            self.dinv[i] * (y[i * width + c] - self.diag[i] * own)
        })
    }

    fn dense(&self) -> Mat<f64> {
        let n = self.n;
        Mat::from_fn(n, n, |i, j| if i == j { 0.0 } else { self.dinv[i] * self.a[i * n + j].to_f64() * self.dinv[j] })
    }
}

/// Columns handled together by the product kernel.
const LANES: usize = 8;

/// `y = A x` for the n x n row-major `a` and a few columns `x`, stored as
/// `chunks` blocks of n x 8 (`y`: n x 8 chunks, row-major). Why not faer's
/// GEMM: it packs the whole n x n operand on every call, which for 8-16
/// right-hand columns costs more than the product; this kernel streams each
/// row of A once, 4 rows at a time against 8 columns kept in registers,
/// accumulating in float64 even when A is stored in float32.
fn product<E: Real>(a: &[E], n: usize, xs: &[f64], chunks: usize, y: &mut [f64]) {
    let width = chunks * LANES;
    let rows = |(a, y): (&[E], &mut [f64])| product_rows(a, n, xs, chunks, y);
    if n >= PARALLEL_FROM {
        // Memory-bound at this size: both cores stream their half of A.
        a.par_chunks(PARALLEL_ROWS * n).zip(y.par_chunks_mut(PARALLEL_ROWS * width)).for_each(rows);
    } else {
        rows((a, y));
    }
}

/// From this size the product runs on rayon's threads, in row blocks.
pub(crate) const PARALLEL_FROM: usize = 256;
const PARALLEL_ROWS: usize = 32;

/// `product` over the rows of `a` given (a multiple of n entries), into the
/// same rows of `y`.
fn product_rows<E: Real>(a: &[E], n: usize, xs: &[f64], chunks: usize, y: &mut [f64]) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            // SAFETY: the running CPU has the features `product_avx2` is
            // compiled for; it is otherwise the same safe code.
            unsafe { product_avx2(a, n, xs, chunks, y) };
            return;
        }
    }
    product_kernel::<E, false>(a, n, xs, chunks, y);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn product_avx2<E: Real>(a: &[E], n: usize, xs: &[f64], chunks: usize, y: &mut [f64]) {
    product_kernel::<E, true>(a, n, xs, chunks, y);
}

/// `FUSED`: multiply-adds as single FMA instructions (compiled only where
/// the CPU has them; elsewhere `mul_add` would be a slow library call).
#[inline(always)]
fn product_kernel<E: Real, const FUSED: bool>(a: &[E], n: usize, xs: &[f64], chunks: usize, y: &mut [f64]) {
    let width = chunks * LANES;
    let rows = a.len() / n;
    let mut i = 0;
    while i + 4 <= rows {
        let (r0, r1) = (&a[i * n..(i + 1) * n], &a[(i + 1) * n..(i + 2) * n]);
        let (r2, r3) = (&a[(i + 2) * n..(i + 3) * n], &a[(i + 3) * n..(i + 4) * n]);
        for c in 0..chunks {
            let xc = &xs[c * n * LANES..(c + 1) * n * LANES];
            let mut acc = [[0.0f64; LANES]; 4];
            for ((((xr, v0), v1), v2), v3) in xc.chunks_exact(LANES).zip(r0).zip(r1).zip(r2).zip(r3) {
                let Ok(xr) = <&[f64; LANES]>::try_from(xr) else { continue };
                let v = [v0.to_f64(), v1.to_f64(), v2.to_f64(), v3.to_f64()];
                for r in 0..4 {
                    for l in 0..LANES {
                        acc[r][l] = multiply_add::<FUSED>(v[r], xr[l], acc[r][l]);
                    }
                }
            }
            for (r, row) in acc.iter().enumerate() {
                y[(i + r) * width + c * LANES..(i + r) * width + (c + 1) * LANES].copy_from_slice(row);
            }
        }
        i += 4;
    }
    for i in i..rows {
        let r0 = &a[i * n..(i + 1) * n];
        for c in 0..chunks {
            let xc = &xs[c * n * LANES..(c + 1) * n * LANES];
            let mut acc = [0.0f64; LANES];
            for (xr, v0) in xc.chunks_exact(LANES).zip(r0) {
                let v0 = v0.to_f64();
                for (s, x) in acc.iter_mut().zip(xr) {
                    *s = multiply_add::<FUSED>(v0, *x, *s);
                }
            }
            y[i * width + c * LANES..i * width + (c + 1) * LANES].copy_from_slice(&acc);
        }
    }
}

#[inline(always)]
fn multiply_add<const FUSED: bool>(a: f64, b: f64, c: f64) -> f64 {
    if FUSED {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// A deterministic stream for start and replacement vectors (SplitMix64).
struct Stream(u64);

impl Stream {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }
}

fn not_converged() -> Error {
    Error::invalid("affinity", "the eigenvalue solver did not converge; check the matrix for extreme values")
}

/// Eigenvectors (columns, n x k) of the k largest eigenvalues of `op`, in
/// decreasing order of eigenvalue. `start` (length n) is a known eigenvector
/// to seed the first block with (sqrt of the degrees); `tol` bounds each
/// returned pair's residual `||M u - theta u||` (`||M|| <= 1`).
pub(crate) fn top_eigenvectors<E: Real>(op: &Operator<'_, E>, k: usize, start: &[f64], tol: f64) -> Result<Mat<f64>> {
    let n = op.n;
    let b = (k + 2).min(n);
    if n <= DENSE_MAX || n < 4 * b {
        return dense_top(op, k);
    }
    let steps = MAX_STEPS.min(n / b - 1);
    let cap = (steps + 1) * b;
    let mut stream = Stream(0x5eed);
    let mut basis = Mat::<f64>::zeros(n, cap);
    let mut block = Mat::<f64>::from_fn(n, b, |i, c| if c == 0 { start[i] } else { stream.next() });
    orthonormalize(&mut block, basis.subcols(0, 0), &vec![1.0; b], &mut stream);
    basis.subcols_mut(0, b).copy_from(&block);

    let mut projected = Mat::<f64>::zeros(cap, cap);
    let mut ritz = Mat::<f64>::zeros(0, 0);
    for _cycle in 0..MAX_CYCLES {
        projected.fill(0.0);
        for j in 0..steps {
            let (lo, m) = (j * b, (j + 1) * b);
            let mut w = op.apply(basis.subcols(lo, b));
            let norms: Vec<f64> = (0..b).map(|c| norm(w.col_as_slice(c))).collect();
            // Full reorthogonalisation against the whole basis, twice (CGS2):
            // the coefficients are the new column block of Q^T M Q.
            let q = basis.subcols(0, m);
            let mut h = Mat::<f64>::zeros(m, b);
            for _ in 0..2 {
                let mut h2 = Mat::<f64>::zeros(m, b);
                matmul(h2.as_mut(), Accum::Replace, q.transpose(), w.as_ref(), 1.0, Par::Seq);
                matmul(w.as_mut(), Accum::Add, q, h2.as_ref(), -1.0, Par::Seq);
                h += &h2;
            }
            for r in 0..m {
                for c in 0..b {
                    projected[(r, lo + c)] = h[(r, c)];
                    projected[(lo + c, r)] = h[(r, c)];
                }
            }
            for r in 0..b {
                for c in 0..r {
                    let mean = 0.5 * (h[(lo + r, c)] + h[(lo + c, r)]);
                    projected[(lo + r, lo + c)] = mean;
                    projected[(lo + c, lo + r)] = mean;
                }
            }
            let coupling = orthonormalize(&mut w, q, &norms, &mut stream);
            basis.subcols_mut(m, b).copy_from(&w);

            // Rayleigh-Ritz on the leading m x m block. With full
            // reorthogonalisation M Q = Q T + Q_next B e_j^T holds, so the
            // residual of the Ritz pair (theta, Q y) is ||B y_last||.
            let evd = projected.submatrix(0, 0, m, m).self_adjoint_eigen(Side::Lower).map_err(|_| not_converged())?;

            let vectors = evd.U();
            let converged = (0..k).all(|t| {
                let col = m - 1 - t;
                let mut r2 = 0.0;
                for row in 0..b {
                    let mut s = 0.0;
                    for c in row..b {
                        s += coupling[(row, c)] * vectors[(lo + c, col)];
                    }
                    r2 += s * s;
                }
                r2.sqrt() <= tol
            });
            // Ritz vectors are formed only when returned or restarted from.
            if converged || j + 1 == steps {
                let take = if converged { k } else { b };
                let top = Mat::<f64>::from_fn(m, take, |r, t| vectors[(r, m - 1 - t)]);
                ritz = Mat::zeros(n, take);
                matmul(ritz.as_mut(), Accum::Replace, basis.subcols(0, m), top.as_ref(), 1.0, Par::Seq);
                if converged {
                    return Ok(ritz);
                }
            }
            if j + 1 < steps {
                for r in 0..b {
                    for c in 0..b {
                        projected[(m + r, lo + c)] = coupling[(r, c)];
                        projected[(lo + c, m + r)] = coupling[(r, c)];
                    }
                }
            }
        }
        // Explicit restart from the b best Ritz vectors (orthonormal already).
        basis.subcols_mut(0, b).copy_from(&ritz);
    }
    if ritz.ncols() >= k {
        // Best effort after the cycle budget: the leading Ritz vectors.
        return Ok(Mat::from_fn(n, k, |i, c| ritz[(i, c)]));
    }
    Err(not_converged())
}

fn dense_top<E: Real>(op: &Operator<'_, E>, k: usize) -> Result<Mat<f64>> {
    let n = op.n;
    let evd = op.dense().self_adjoint_eigen(Side::Lower).map_err(|_| not_converged())?;
    let vectors = evd.U();
    Ok(Mat::from_fn(n, k, |i, t| vectors[(i, n - 1 - t)]))
}

fn norm(x: &[f64]) -> f64 {
    dot(x, x).sqrt()
}

/// In four independent accumulators: a single running sum is bound by the
/// add latency, and these dots are most of the orthogonalisation.
fn dot(x: &[f64], y: &[f64]) -> f64 {
    let mut acc = [0.0f64; 4];
    let (xc, yc) = (x.chunks_exact(4), y.chunks_exact(4));
    let tail: f64 = xc.remainder().iter().zip(yc.remainder()).map(|(a, b)| a * b).sum();
    for (a, b) in xc.zip(yc) {
        for l in 0..4 {
            acc[l] += a[l] * b[l];
        }
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

fn axpy(alpha: f64, x: &[f64], y: &mut [f64]) {
    for (yi, xi) in y.iter_mut().zip(x) {
        *yi += alpha * xi;
    }
}

/// Orthonormalises the columns of `w` (already orthogonal to `q`) in place by
/// modified Gram-Schmidt, twice; returns the upper-triangular `B` with
/// `w_before = w_after B`. A column that vanishes (relative to `norms`, its
/// norm before projection) means the Krylov space is exhausted in that
/// direction: it is replaced by a fresh random direction orthogonal to
/// everything, with a zero in `B`.
fn orthonormalize(w: &mut Mat<f64>, q: MatRef<'_, f64>, norms: &[f64], stream: &mut Stream) -> Mat<f64> {
    let (n, b) = (w.nrows(), w.ncols());
    let mut coupling = Mat::<f64>::zeros(b, b);
    let mut col = vec![0.0f64; n];
    for c in 0..b {
        col.copy_from_slice(w.col_as_slice(c));
        for _ in 0..2 {
            for p in 0..c {
                let r = dot(w.col_as_slice(p), &col);
                axpy(-r, w.col_as_slice(p), &mut col);
                coupling[(p, c)] += r;
            }
        }
        w.col_as_slice_mut(c).copy_from_slice(&col);
        let length = norm(&col);
        if length > 1e-12 * norms[c].max(f64::MIN_POSITIVE) && length > 1e-300 {
            w.col_as_slice_mut(c).iter_mut().for_each(|v| *v /= length);
            coupling[(c, c)] = length;
            continue;
        }
        for attempt in 0..8 {
            let mut fresh: Vec<f64> = (0..n).map(|_| stream.next()).collect();
            for _ in 0..2 {
                for p in 0..q.ncols() {
                    let col: Vec<f64> = (0..n).map(|i| q[(i, p)]).collect();
                    let r = dot(&col, &fresh);
                    axpy(-r, &col, &mut fresh);
                }
                for p in 0..c {
                    let r = dot(w.col_as_slice(p), &fresh);
                    axpy(-r, w.col_as_slice(p), &mut fresh);
                }
            }
            let length = norm(&fresh);
            if length > 1e-8 || attempt == 7 {
                let length = length.max(f64::MIN_POSITIVE);
                w.col_as_slice_mut(c).iter_mut().zip(&fresh).for_each(|(v, f)| *v = f / length);
                break;
            }
        }
    }
    coupling
}
