//! The k largest eigenpairs of the normalised adjacency
//! `M = D^-1/2 A0 D^-1/2` (A0: the affinity with its diagonal zeroed), which
//! are the k smallest of the normalised Laplacian `I - M` that scikit-learn
//! asks ARPACK for.
//!
//! Why not a dense eigendecomposition: it costs O(n^3), while clustering
//! needs only k vectors. Why block Krylov (block Lanczos with full
//! reorthogonalisation and explicit restarts) rather than subspace iteration:
//! the Krylov space gets the best polynomial filter for free, so a separable
//! affinity converges in a few products with the matrix, and a block finds
//! repeated eigenvalues (one per connected component) that a single-vector
//! Lanczos can miss. A product reads the whole n x n matrix, which is what
//! costs for large n, so the loop is organised to read it once per step.
//! Small dense problems (Rayleigh-Ritz, or tiny n) go to `small_eigen`.

use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, MatRef, Par};

use super::product::product;
use super::small_eigen::symmetric_eigen;
use crate::linalg::{axpy, dot, Real};
use crate::{Error, Result};

/// Krylov blocks per restart cycle (the basis holds `1 + (STEPS + 1) * b`
/// vectors).
const MAX_STEPS: usize = 10;
const MAX_CYCLES: usize = 60;
/// Matrices up to this size are decomposed densely (cheaper than iterating).
const DENSE_MAX: usize = 48;

/// `y = D^-1/2 A0 D^-1/2 x` where A0 is the symmetric `a` without its
/// diagonal, `a` in the caller's precision `E` (often the caller's array
/// itself, read in place: the product never reads the diagonal, so it need
/// not be zeroed in a copy). See `product` for how A0 x is computed.
pub(crate) struct Operator<'a, E> {
    pub a: &'a [E],
    pub n: usize,
    pub dinv: &'a [f64],
}

impl<E: Real> Operator<'_, E> {
    fn apply(&self, x: MatRef<'_, f64>) -> Mat<f64> {
        let (n, b) = (self.n, x.ncols());
        // Scaled input, one float32 row per column: xt[c * n + j] = dinv[j] * x[j, c].
        let mut xt = vec![0.0f32; b * n];
        for (c, out) in xt.chunks_exact_mut(n.max(1)).enumerate() {
            for (j, o) in out.iter_mut().enumerate() {
                *o = (self.dinv[j] * x[(j, c)]) as f32;
            }
        }
        let yt = product(self.a, n, &xt, b);
        Mat::from_fn(n, b, |i, c| self.dinv[i] * yt[c * n + i])
    }

    fn dense(&self) -> Mat<f64> {
        let n = self.n;
        Mat::from_fn(n, n, |i, j| if i == j { 0.0 } else { self.dinv[i] * self.a[i * n + j].to_f64() * self.dinv[j] })
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
/// of the largest eigenvalue, 1 (sqrt of the degrees); `tol` bounds each
/// returned pair's residual `||M u - theta u||` (`||M|| <= 1`).
pub(crate) fn top_eigenvectors<E: Real>(op: &Operator<'_, E>, k: usize, start: &[f64], tol: f64) -> Result<Mat<f64>> {
    let n = op.n;
    // The known eigenvector (eigenvalue 1, the largest) is locked in front
    // of the Krylov blocks rather than carried in one: its product would
    // only reproduce it, so every block column stays free for the others.
    let start_norm = norm(start);
    let locked = usize::from(start_norm > 0.0 && start_norm.is_finite());
    // Blocks as wide as the vectors still to find, k - 1 beside `start`:
    // spare columns do not save products, and each column costs in the
    // products, the orthogonalisation and the Rayleigh-Ritz step (whose
    // cost grows with the cube of the width).
    let b = (k - locked).clamp(1, n);
    if n <= DENSE_MAX || n < 4 * b {
        return dense_top(op, k);
    }
    let steps = MAX_STEPS.min((n - locked) / b - 1);
    let cap = locked + (steps + 1) * b;
    let mut stream = Stream(0x5eed);
    let mut basis = Mat::<f64>::zeros(n, cap);
    if locked == 1 {
        basis.col_as_slice_mut(0).iter_mut().zip(start).for_each(|(q, s)| *q = s / start_norm);
    }
    let mut block = Mat::<f64>::from_fn(n, b, |_, _| stream.next());
    orthonormalize_beside(&mut block, basis.subcols(0, locked), &mut stream);
    basis.subcols_mut(locked, b).copy_from(&block);

    let mut projected = Mat::<f64>::zeros(cap, cap);
    let mut ritz = Mat::<f64>::zeros(0, 0);
    for _cycle in 0..MAX_CYCLES {
        projected.fill(0.0);
        if locked == 1 {
            projected[(0, 0)] = 1.0;
        }
        // The largest residual at the last Rayleigh-Ritz check, if the
        // previous step had one.
        let mut last_residual: Option<f64> = None;
        for j in 0..steps {
            let (lo, m) = (locked + j * b, locked + (j + 1) * b);
            let mut w = op.apply(basis.subcols(lo, b));
            let norms: Vec<f64> = (0..b).map(|c| norm(w.col_as_slice(c))).collect();
            // Full reorthogonalisation against the whole basis, twice (CGS2):
            // the coefficients are the new column block of Q^T M Q.
            let q = basis.subcols(0, m);
            let h = project_out(&mut w, q);
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
            // residual of the Ritz pair (theta, Q y) is ||B y_last||. The
            // check is skipped right after one that was far off: it could
            // not pass, and its eigendecomposition is the dearest part of a
            // step for small n. Never twice in a row, nor before a restart.
            let far = last_residual.is_some_and(|r| r > SKIP_ABOVE * tol);
            if far && j + 1 < steps {
                last_residual = None;
                couple(&mut projected, &coupling, lo, m);
                continue;
            }
            let evd = symmetric_eigen(m, |r, c| projected[(r, c)]).ok_or_else(not_converged)?;
            let residual = (0..k)
                .map(|t| {
                    let vector = evd.vector(m - 1 - t);
                    let mut r2 = 0.0;
                    for row in 0..b {
                        let mut s = 0.0;
                        for c in row..b {
                            s += coupling[(row, c)] * vector[lo + c];
                        }
                        r2 += s * s;
                    }
                    r2.sqrt()
                })
                .fold(0.0f64, f64::max);
            let converged = residual <= tol;
            last_residual = Some(residual);
            // Ritz vectors are formed only when returned or restarted from.
            if converged || j + 1 == steps {
                let take = if converged { k } else { b + locked };
                let top = Mat::<f64>::from_fn(m, take, |r, t| evd.vector(m - 1 - t)[r]);
                ritz = Mat::zeros(n, take);
                matmul(ritz.as_mut(), Accum::Replace, basis.subcols(0, m), top.as_ref(), 1.0, Par::Seq);
                if converged {
                    return Ok(ritz);
                }
            }
            if j + 1 < steps {
                couple(&mut projected, &coupling, lo, m);
            }
        }
        // Explicit restart from the b best Ritz vectors other than the
        // locked one (the best), made orthogonal to it again.
        let mut restart = Mat::<f64>::from_fn(n, b, |i, c| ritz[(i, c + locked)]);
        orthonormalize_beside(&mut restart, basis.subcols(0, locked), &mut stream);
        basis.subcols_mut(locked, b).copy_from(&restart);
    }
    if ritz.ncols() >= k {
        // Best effort after the cycle budget: the leading Ritz vectors.
        return Ok(Mat::from_fn(n, k, |i, c| ritz[(i, c)]));
    }
    Err(not_converged())
}

/// Removes from the columns of `w` their components along the orthonormal
/// columns of `q`, twice (CGS2: once is not enough in floating point);
/// returns the coefficients, `q^T w` before the projection.
fn project_out(w: &mut Mat<f64>, q: MatRef<'_, f64>) -> Mat<f64> {
    let (m, b) = (q.ncols(), w.ncols());
    let mut h = Mat::<f64>::zeros(m, b);
    if m == 0 {
        return h;
    }
    for _ in 0..2 {
        let mut h2 = Mat::<f64>::zeros(m, b);
        matmul(h2.as_mut(), Accum::Replace, q.transpose(), w.as_ref(), 1.0, Par::Seq);
        matmul(w.as_mut(), Accum::Add, q, h2.as_ref(), -1.0, Par::Seq);
        h += &h2;
    }
    h
}

/// Makes the columns of a new block `w` orthonormal and orthogonal to `q`
/// (the locked vector, or nothing): a start or restart block.
fn orthonormalize_beside(w: &mut Mat<f64>, q: MatRef<'_, f64>, stream: &mut Stream) {
    project_out(w, q);
    orthonormalize(w, q, &vec![1.0; w.ncols()], stream);
}

/// Residuals above this many times the tolerance skip the next check.
const SKIP_ABOVE: f64 = 100.0;

/// Enters the coupling `B` of the block at columns `lo..m` to the next one
/// (columns `m..m + b`) into the projected matrix, both triangles.
fn couple(projected: &mut Mat<f64>, coupling: &Mat<f64>, lo: usize, m: usize) {
    let b = coupling.nrows();
    for r in 0..b {
        for c in 0..b {
            projected[(m + r, lo + c)] = coupling[(r, c)];
            projected[(lo + c, m + r)] = coupling[(r, c)];
        }
    }
}

fn dense_top<E: Real>(op: &Operator<'_, E>, k: usize) -> Result<Mat<f64>> {
    let n = op.n;
    let dense = op.dense();
    let evd = symmetric_eigen(n, |i, j| dense[(i, j)]).ok_or_else(not_converged)?;
    Ok(Mat::from_fn(n, k, |i, t| evd.vector(n - 1 - t)[i]))
}

#[inline(always)]
fn norm(x: &[f64]) -> f64 {
    dot(x, x).sqrt()
}

/// Orthonormalises the columns of `w` (already orthogonal to `q`) in place by
/// modified Gram-Schmidt, twice; returns the upper-triangular `B` with
/// `w_before = w_after B`. A column that vanishes (relative to `norms`, its
/// norm before projection) means the Krylov space is exhausted in that
/// direction: it is replaced by a fresh random direction orthogonal to
/// everything, with a zero in `B`.
fn orthonormalize(w: &mut Mat<f64>, q: MatRef<'_, f64>, norms: &[f64], stream: &mut Stream) -> Mat<f64> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the running CPU has AVX2, all `orthonormalize_avx2`
            // is compiled for; it is otherwise the same safe code.
            return unsafe { orthonormalize_avx2(w, q, norms, stream) };
        }
    }
    orthonormalize_columns(w, q, norms, stream)
}

/// The dots and updates below are most of the work, so they get 256-bit vectors.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn orthonormalize_avx2(w: &mut Mat<f64>, q: MatRef<'_, f64>, norms: &[f64], stream: &mut Stream) -> Mat<f64> {
    orthonormalize_columns(w, q, norms, stream)
}

#[inline(always)]
fn orthonormalize_columns(w: &mut Mat<f64>, q: MatRef<'_, f64>, norms: &[f64], stream: &mut Stream) -> Mat<f64> {
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
