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

const BLOCK: usize = 128;

/// Row-major contiguous data of `a` (copied only when `a` is not).
pub(crate) fn row_major<T: Real>(a: &ArrayView2<'_, T>) -> Vec<T> {
    match a.as_slice() {
        Some(slice) => slice.to_vec(),
        None => a.iter().copied().collect(),
    }
}

/// The size n of a square, non-empty matrix (checked before anything is
/// allocated for it).
pub(crate) fn square_size<T>(a: &ArrayView2<'_, T>, argument: &str) -> Result<usize> {
    let (rows, cols) = a.dim();
    if rows != cols {
        return Err(Error::invalid(argument, format!("must be a square matrix, got shape ({rows}, {cols})")));
    }
    if rows == 0 {
        return Err(Error::invalid(argument, "is empty; pass at least one row"));
    }
    Ok(rows)
}

/// Checks that `a` is square, non-empty, finite and symmetric, handing each
/// row (as float64) to `visit(i, row, &mut out[i])`, which may reject it.
/// `out` must hold one slot per row; returns `n`.
///
/// One pass over memory that only ever reads along rows: walking down the
/// columns of a large matrix (for the transpose) costs a cache and TLB miss
/// per element. Rows are taken BLOCK at a time; the block-column below each
/// block (its mirror) is read along its rows too and transposed in cache.
pub(crate) fn scan_square<T: Real, R>(
    a: &ArrayView2<'_, T>,
    argument: &str,
    out: &mut [R],
    visit: impl Fn(usize, &[f64], &mut R) -> Result<()>,
) -> Result<usize> {
    let n = square_size(a, argument)?;
    if out.len() != n {
        return Err(Error::invalid(argument, "internal: one output slot per row expected"));
    }
    let owned;
    let data: &[T] = match a.as_slice() {
        Some(slice) => slice,
        None => {
            owned = row_major(a);
            &owned
        }
    };
    let work = |start: usize, slots: &mut [R], buffers: &mut Buffers| -> Result<()> {
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx2") {
                // SAFETY: the running CPU has AVX2, all `block_avx2` is
                // compiled for; it is otherwise the same safe code.
                return unsafe { block_avx2(data, n, start, argument, slots, buffers, &visit) };
            }
        }
        block(data, n, start, argument, slots, buffers, &visit)
    };
    let mut buffers = Buffers::new(n);
    for (b, slots) in out.chunks_mut(BLOCK).enumerate() {
        work(b * BLOCK, slots, &mut buffers)?;
    }
    Ok(n)
}

struct Buffers {
    gathered: Vec<f64>,
    mirror: Vec<f64>,
    row: Vec<f64>,
}

impl Buffers {
    fn new(n: usize) -> Self {
        let size = n * BLOCK.min(n);
        Self { gathered: vec![0.0; size], mirror: vec![0.0; size], row: vec![0.0; n] }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn block_avx2<T: Real, R>(
    data: &[T],
    n: usize,
    start: usize,
    argument: &str,
    slots: &mut [R],
    buffers: &mut Buffers,
    visit: &impl Fn(usize, &[f64], &mut R) -> Result<()>,
) -> Result<()> {
    block(data, n, start, argument, slots, buffers, visit)
}

/// Rows `start..start + slots.len()`: the mirror, read along rows and stored
/// transposed (`mirror[(i - start) * n + j] = a[j, i]` for j past the
/// block), then each row whole, compared beyond the diagonal with it.
#[inline(always)]
fn block<T: Real, R>(
    data: &[T],
    n: usize,
    start: usize,
    argument: &str,
    slots: &mut [R],
    buffers: &mut Buffers,
    visit: &impl Fn(usize, &[f64], &mut R) -> Result<()>,
) -> Result<()> {
    let asymmetric = |x: f64, y: f64| (x - y).abs() > SYMMETRY_TOLERANCE * x.abs().max(y.abs()).max(1.0);
    let end = start + slots.len();
    let width = end - start;
    let Buffers { gathered, mirror, row } = buffers;
    for j in end..n {
        let dst = &mut gathered[j * BLOCK..j * BLOCK + width];
        for (d, v) in dst.iter_mut().zip(&data[j * n + start..j * n + end]) {
            *d = v.to_f64();
        }
    }
    for j0 in (end..n).step_by(LANES) {
        let j1 = (j0 + LANES).min(n);
        for t in 0..width {
            for j in j0..j1 {
                mirror[t * n + j] = gathered[j * BLOCK + t];
            }
        }
    }
    for (i, slot) in (start..end).zip(slots.iter_mut()) {
        for (d, v) in row.iter_mut().zip(&data[i * n..(i + 1) * n]) {
            *d = v.to_f64();
        }
        // 0 * x is NaN exactly when x is not finite.
        if sum_lanes(row, |x| 0.0 * x).is_nan() {
            let t = row.iter().position(|v| !v.is_finite()).unwrap_or(0);
            return Err(Error::invalid(
                argument,
                format!("entry [{i}, {t}] is {}; every entry must be finite", row[t]),
            ));
        }
        let theirs = &mirror[(i - start) * n + end..(i - start) * n + n];
        let flagged = row[end..].iter().zip(theirs).fold(false, |any, (&x, &y)| any | asymmetric(x, y));
        // Within the block the mirror entries are in the rows themselves.
        let inside = (i + 1..end).find(|&j| asymmetric(row[j], data[j * n + i].to_f64()));
        let below = if flagged { row[end..].iter().zip(theirs).position(|(&x, &y)| asymmetric(x, y)) } else { None };
        if let Some(j) = inside.or(below.map(|t| end + t)) {
            let (x, y) = (row[j], data[j * n + i].to_f64());
            return Err(Error::invalid(
                argument,
                format!(
                    "must be symmetric, but {argument}[{i}, {j}] = {x} and {argument}[{j}, {i}] = {y}; \
                     pass (A + A.T) / 2"
                ),
            ));
        }
        visit(i, row, slot)?;
    }
    Ok(())
}

const LANES: usize = 8;

/// `sum(f(x))` in independent lanes, so the compiler can vectorise it (a
/// single running sum is a chain of dependent additions).
#[inline(always)]
pub(crate) fn sum_lanes(xs: &[f64], f: impl Fn(f64) -> f64) -> f64 {
    let mut acc = [0.0f64; LANES];
    let chunks = xs.chunks_exact(LANES);
    let rest = chunks.remainder();
    for c in chunks {
        for l in 0..LANES {
            acc[l] += f(c[l]);
        }
    }
    acc.iter().sum::<f64>() + rest.iter().map(|&x| f(x)).sum::<f64>()
}

/// Smallest and largest of `xs` (infinities when empty), in lanes.
#[inline(always)]
pub(crate) fn min_max_lanes(xs: &[f64]) -> (f64, f64) {
    let (mut lo, mut hi) = ([f64::INFINITY; LANES], [f64::NEG_INFINITY; LANES]);
    let chunks = xs.chunks_exact(LANES);
    let rest = chunks.remainder();
    for c in chunks {
        for l in 0..LANES {
            lo[l] = if c[l] < lo[l] { c[l] } else { lo[l] };
            hi[l] = if c[l] > hi[l] { c[l] } else { hi[l] };
        }
    }
    let lo = lo.iter().chain(rest).fold(f64::INFINITY, |m, &x| if x < m { x } else { m });
    let hi = hi.iter().chain(rest).fold(f64::NEG_INFINITY, |m, &x| if x > m { x } else { m });
    (lo, hi)
}
