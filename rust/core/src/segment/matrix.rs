//! The square-matrix checks shared by spectral clustering and segmentation,
//! fused into one cache-friendly pass that also feeds each caller's own
//! accumulation (degrees, row statistics, a copy), so a 2,000 x 2,000 input
//! is read once before the numeric work starts.

use ndarray::ArrayView2;

use crate::{Error, Result};

/// Largest accepted `|a[i, j] - a[j, i]|`, relative to `max(1, |a[i, j]|,
/// |a[j, i]|)`: a float32 `X @ X.T` is symmetric only to rounding.
pub const SYMMETRY_TOLERANCE: f64 = 1e-5;

/// The element types the matrix inputs may have (float32 or float64).
pub trait Real: faer::traits::RealField + Copy + Send + Sync + 'static {
    const NAME: &'static str;
    fn to_f64(self) -> f64;
    fn from_f64(value: f64) -> Self;
}

impl Real for f32 {
    const NAME: &'static str = "float32";
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    fn from_f64(value: f64) -> Self {
        value as f32
    }
}

impl Real for f64 {
    const NAME: &'static str = "float64";
    fn to_f64(self) -> f64 {
        self
    }
    fn from_f64(value: f64) -> Self {
        value
    }
}

const TILE: usize = 64;

/// Row-major contiguous data of `a` (copied only when `a` is not).
pub(crate) fn row_major<T: Real>(a: &ArrayView2<'_, T>) -> Vec<T> {
    match a.as_slice() {
        Some(slice) => slice.to_vec(),
        None => a.iter().copied().collect(),
    }
}

/// Checks that `a` is square, non-empty, finite and symmetric, handing every
/// entry once to `visit(i, j0, values)`, where `values` are
/// `a[i, j0..j0 + values.len()]` (for the caller's own checks and
/// accumulations). Returns `n`.
///
/// One pass over memory, tile by tile: a tile above the diagonal and its
/// mirror below are read along their rows (the mirror into a small buffer),
/// so symmetry is checked without walking down the columns of a large matrix
/// (a cache and TLB miss per element) and without a second pass.
pub(crate) fn scan_square<T: Real>(
    a: &ArrayView2<'_, T>,
    argument: &str,
    visit: impl FnMut(usize, usize, &[f64]) -> Result<()>,
) -> Result<usize> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the running CPU has AVX2, all `scan_avx2` is compiled
            // for; it is otherwise the same safe code.
            return unsafe { scan_avx2(a, argument, visit) };
        }
    }
    scan(a, argument, visit)
}

/// The scan with the caller's closure inlined and vectorised for AVX2 (a
/// third of spectral clustering's time at n = 500 otherwise).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn scan_avx2<T: Real>(
    a: &ArrayView2<'_, T>,
    argument: &str,
    visit: impl FnMut(usize, usize, &[f64]) -> Result<()>,
) -> Result<usize> {
    scan(a, argument, visit)
}

#[inline(always)]
fn scan<T: Real>(
    a: &ArrayView2<'_, T>,
    argument: &str,
    mut visit: impl FnMut(usize, usize, &[f64]) -> Result<()>,
) -> Result<usize> {
    let (rows, cols) = a.dim();
    if rows != cols {
        return Err(Error::invalid(argument, format!("must be a square matrix, got shape ({rows}, {cols})")));
    }
    if rows == 0 {
        return Err(Error::invalid(argument, "is empty; pass at least one row"));
    }
    let n = rows;
    let owned;
    let data: &[T] = match a.as_slice() {
        Some(slice) => slice,
        None => {
            owned = row_major(a);
            &owned
        }
    };
    let finite = |i: usize, j0: usize, values: &[f64]| -> Result<()> {
        if values.iter().all(|v| v.is_finite()) {
            return Ok(());
        }
        let t = values.iter().position(|v| !v.is_finite()).unwrap_or(0);
        Err(Error::invalid(argument, format!("entry [{i}, {}] is {}; every entry must be finite", j0 + t, values[t])))
    };
    let mut tile = vec![0.0f64; TILE * TILE];
    let mut upper = [0.0f64; TILE];
    let mut mirror = [0.0f64; TILE];
    for bi in (0..n).step_by(TILE) {
        let ie = (bi + TILE).min(n);
        for bj in (bi..n).step_by(TILE) {
            let je = (bj + TILE).min(n);
            // Below the diagonal: rows j of the mirror tile, entries i < j;
            // tile[(j - bj) * TILE + (i - bi)] = a[j, i].
            for j in bj..je {
                let end = ie.min(j);
                if end <= bi {
                    continue;
                }
                let dst = &mut tile[(j - bj) * TILE..(j - bj) * TILE + (end - bi)];
                for (d, v) in dst.iter_mut().zip(&data[j * n + bi..j * n + end]) {
                    *d = v.to_f64();
                }
                finite(j, bi, dst)?;
                visit(j, bi, dst)?;
            }
            // On and above the diagonal, checked against the mirror.
            for i in bi..ie {
                let from = bj.max(i);
                if from >= je {
                    continue;
                }
                let len = je - from;
                for (u, v) in upper[..len].iter_mut().zip(&data[i * n + from..i * n + je]) {
                    *u = v.to_f64();
                }
                finite(i, from, &upper[..len])?;
                for (t, m) in mirror[..len].iter_mut().enumerate() {
                    let j = from + t;
                    *m = if j == i { upper[t] } else { tile[(j - bj) * TILE + (i - bi)] };
                }
                let asymmetric = |x: f64, y: f64| (x - y).abs() > SYMMETRY_TOLERANCE * x.abs().max(y.abs()).max(1.0);
                if upper[..len].iter().zip(&mirror[..len]).any(|(&x, &y)| asymmetric(x, y)) {
                    let t = upper[..len].iter().zip(&mirror[..len]).position(|(&x, &y)| asymmetric(x, y)).unwrap_or(0);
                    let (j, x, y) = (from + t, upper[t], mirror[t]);
                    return Err(Error::invalid(
                        argument,
                        format!(
                            "must be symmetric, but {argument}[{i}, {j}] = {x} and {argument}[{j}, {i}] = {y}; \
                             pass (A + A.T) / 2"
                        ),
                    ));
                }
                visit(i, from, &upper[..len])?;
            }
        }
    }
    Ok(n)
}
