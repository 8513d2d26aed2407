//! The square-matrix checks shared by spectral clustering and segmentation,
//! fused into one cache-friendly pass that also feeds each caller's own
//! accumulation (degrees, row statistics, a copy), so a large input is read
//! once before the numeric work starts.

use ndarray::ArrayView2;
use rayon::prelude::*;

use super::lanes::{sum_lanes, LANES};
use super::{as_type, Real};
use crate::{Error, Result};

/// Largest accepted `|a[i, j] - a[j, i]|`, relative to `max(1, |a[i, j]|,
/// |a[j, i]|)`: a float32 `X @ X.T` is symmetric only to rounding.
pub const SYMMETRY_TOLERANCE: f64 = 1e-5;

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
pub(crate) fn scan_square<T: Real, R: Send>(
    a: &ArrayView2<'_, T>,
    argument: &str,
    out: &mut [R],
    visit: impl Fn(usize, &[f64], &mut R) -> Result<()> + Sync,
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
    if fast_scan(data, n, out, &visit)? {
        return Ok(n);
    }
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

/// Rows per step of the fast scan (held as float64 in L2 between the
/// symmetry check and the visit), and the width of a symmetry tile.
const FAST_ROWS: usize = 64;
const FAST_COLS: usize = 32;
/// From this size the steps of the fast scan run on rayon's threads (below
/// it, as for the spectral product, a parallel pass gains less than a
/// waiting worker can cost).
const PARALLEL_ROWS: usize = 1024;

/// The common case, finite symmetric input, in one pass (no transposed copy
/// of the matrix): per step of FAST_ROWS rows, a finiteness check of those
/// rows, a branch-free symmetry check against their mirror (tile by tile),
/// then the visit of each row. Steps are independent, so from PARALLEL_ROWS
/// rows they run on rayon's threads. The first step, in row order, that is
/// not clean decides: a non-finite or asymmetric one gives `Ok(false)` and
/// the caller reruns the exact scan above, which reports the first problem
/// in row order (the same error as ever; visits are idempotent); an error
/// from `visit` is returned as is (a step checks everything else before it
/// visits, so it is also the first problem in row order).
fn fast_scan<T: Real, R: Send>(
    data: &[T],
    n: usize,
    out: &mut [R],
    visit: &(impl Fn(usize, &[f64], &mut R) -> Result<()> + Sync),
) -> Result<bool> {
    let step = |rows: &mut Vec<f64>, (index, slots): (usize, &mut [R])| -> Result<bool> {
        let start = index * FAST_ROWS;
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx2") {
                // SAFETY: the running CPU has AVX2, all `fast_step_avx2` is
                // compiled for; it is otherwise the same safe code.
                return unsafe { fast_step_avx2(data, n, start, slots, rows, visit) };
            }
        }
        fast_step::<T, R, false>(data, n, start, slots, rows, visit)
    };
    let buffer = Vec::new;
    let outcomes: Vec<Result<bool>> = if n >= PARALLEL_ROWS {
        out.par_chunks_mut(FAST_ROWS).enumerate().map_init(buffer, step).collect()
    } else {
        let mut rows = buffer();
        out.chunks_mut(FAST_ROWS).enumerate().map(|chunk| step(&mut rows, chunk)).collect()
    };
    // The first step (in row order) that is not clean decides.
    outcomes.into_iter().find(|o| !matches!(o, Ok(true))).unwrap_or(Ok(true))
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn fast_step_avx2<T: Real, R>(
    data: &[T],
    n: usize,
    start: usize,
    slots: &mut [R],
    rows: &mut Vec<f64>,
    visit: &impl Fn(usize, &[f64], &mut R) -> Result<()>,
) -> Result<bool> {
    fast_step::<T, R, true>(data, n, start, slots, rows, visit)
}

/// Rows `start..start + slots.len()`: finiteness, symmetry against their
/// mirror, then the visit of each; `Ok(false)` if an entry is not finite or
/// a pair is asymmetric (nothing visited then). `rows` holds the step's
/// rows converted to float64 (float64 input is read in place).
#[inline(always)]
fn fast_step<T: Real, R, const AVX2: bool>(
    data: &[T],
    n: usize,
    start: usize,
    slots: &mut [R],
    rows: &mut Vec<f64>,
    visit: &impl Fn(usize, &[f64], &mut R) -> Result<()>,
) -> Result<bool> {
    let end = start + slots.len();
    let height = end - start;
    let rows: &[f64] = match as_type(&data[start * n..end * n]) {
        Some(rows) => rows,
        None => {
            // The rows of one step are contiguous in the input: one stream.
            rows.resize(height * n, 0.0);
            for (d, v) in rows.iter_mut().zip(&data[start * n..end * n]) {
                *d = v.to_f64();
            }
            rows
        }
    };
    // Finiteness first, in one sequential pass, which also brings the rows
    // into cache for the symmetry check (that reads them across all rows of
    // the step at once: too many streams for the hardware prefetchers). A
    // non-finite entry sends the caller to the exact scan, which reports it,
    // or an earlier problem, in row order.
    if sum_lanes(rows, |x| 0.0 * x).is_nan() {
        return Ok(false);
    }
    #[cfg(target_arch = "x86_64")]
    let flagged = if AVX2 {
        // SAFETY: AVX2 is only set by `fast_step_avx2`, which the CPU runs
        // only when it has AVX2.
        unsafe { asymmetric_tiles_avx2(data, n, start, height, rows) }
    } else {
        asymmetric_mirror(data, n, start, height, rows)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let flagged = asymmetric_mirror(data, n, start, height, rows);
    if flagged {
        return Ok(false);
    }
    for (t, slot) in slots.iter_mut().enumerate() {
        visit(start + t, &rows[t * n..(t + 1) * n], slot)?;
    }
    Ok(true)
}

/// Whether rows `start..start + height` (`rows`, float64) and their mirror
/// below (columns `start..` of rows `start..`) differ anywhere: per tile of
/// FAST_COLS mirror rows, the tile is read along its rows and transposed in
/// L1, then compared with the step's rows.
#[inline(always)]
fn asymmetric_mirror<T: Real>(data: &[T], n: usize, start: usize, height: usize, rows: &[f64]) -> bool {
    // mirror[t * FAST_COLS + u] = a[j0 + u, start + t].
    let mut mirror = [0.0f64; FAST_ROWS * FAST_COLS];
    let end = start + height;
    let mut flagged = false;
    for j0 in (start..n).step_by(FAST_COLS) {
        let j1 = (j0 + FAST_COLS).min(n);
        for j in j0..j1 {
            // The mirror is read a few cache lines per row, one page
            // apart: too scattered for the hardware prefetchers.
            if j + FAST_COLS < n {
                prefetch(&data[(j + FAST_COLS) * n + start..(j + FAST_COLS) * n + end]);
            }
            for (t, v) in data[j * n + start..j * n + end].iter().enumerate() {
                mirror[t * FAST_COLS + (j - j0)] = v.to_f64();
            }
        }
        for t in 0..height {
            let lo = j0.max(start + t + 1);
            if lo >= j1 {
                continue;
            }
            let mine = &rows[t * n + lo..t * n + j1];
            let theirs = &mirror[t * FAST_COLS + (lo - j0)..t * FAST_COLS + (j1 - j0)];
            flagged |= mine.iter().zip(theirs).fold(false, |any, (&x, &y)| any | asymmetric(x, y));
        }
    }
    flagged
}

/// `asymmetric_mirror` with 4 x 4 tiles transposed in AVX2 registers (a
/// scalar transposition costs one store per entry).
/// Entries on both sides of the diagonal block are compared, which only
/// repeats a comparison (the test is symmetric in its two entries).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn asymmetric_tiles_avx2<T: Real>(data: &[T], n: usize, start: usize, height: usize, rows: &[f64]) -> bool {
    use std::arch::x86_64::*;
    let (tall, wide) = (height / 4 * 4, start + (n - start) / 4 * 4);
    let sign = _mm256_set1_pd(-0.0);
    let (one, tolerance) = (_mm256_set1_pd(1.0), _mm256_set1_pd(SYMMETRY_TOLERANCE));
    let mut any = _mm256_setzero_pd();
    for j in (start..wide).step_by(4) {
        // The mirror rows a few tiles ahead (one page apart: too scattered
        // for the hardware prefetchers).
        for ahead in (j + PREFETCH_ROWS..j + PREFETCH_ROWS + 4).filter(|&r| r < n) {
            prefetch(&data[ahead * n + start..ahead * n + start + height]);
        }
        for t in (0..tall).step_by(4) {
            // r_q[p] = a[j + q, start + t + p]; after the transposition
            // c_p = a[j..j + 4, i] for i = start + t + p.
            let r: [__m256d; 4] = std::array::from_fn(|q| load4(data, (j + q) * n + start + t));
            let (t0, t1) = (_mm256_unpacklo_pd(r[0], r[1]), _mm256_unpackhi_pd(r[0], r[1]));
            let (t2, t3) = (_mm256_unpacklo_pd(r[2], r[3]), _mm256_unpackhi_pd(r[2], r[3]));
            let columns = [
                _mm256_permute2f128_pd::<0x20>(t0, t2),
                _mm256_permute2f128_pd::<0x20>(t1, t3),
                _mm256_permute2f128_pd::<0x31>(t0, t2),
                _mm256_permute2f128_pd::<0x31>(t1, t3),
            ];
            for (p, theirs) in columns.into_iter().enumerate() {
                let mine = _mm256_loadu_pd(rows[(t + p) * n + j..(t + p) * n + j + 4].as_ptr());
                let gap = _mm256_andnot_pd(sign, _mm256_sub_pd(mine, theirs));
                let scale = _mm256_max_pd(_mm256_max_pd(_mm256_andnot_pd(sign, mine), _mm256_andnot_pd(sign, theirs)), one);
                any = _mm256_or_pd(any, _mm256_cmp_pd::<_CMP_GT_OQ>(gap, _mm256_mul_pd(tolerance, scale)));
            }
        }
    }
    let mut flagged = _mm256_movemask_pd(any) != 0;
    // The fringes the tiles leave: the last height % 4 rows, and the last
    // (n - start) % 4 columns.
    for t in 0..height {
        let from = if t < tall { wide } else { start };
        for j in from..n {
            flagged |= asymmetric(rows[t * n + j], data[j * n + start + t].to_f64());
        }
    }
    flagged
}

/// How far ahead (in mirror rows) `asymmetric_tiles_avx2` prefetches.
#[cfg(target_arch = "x86_64")]
const PREFETCH_ROWS: usize = 16;

/// Entries `at..at + 4` of `data` as float64 lanes.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn load4<T: Real>(data: &[T], at: usize) -> std::arch::x86_64::__m256d {
    use std::arch::x86_64::*;
    if let Some(values) = as_type::<T, f64>(&data[at..at + 4]) {
        _mm256_loadu_pd(values.as_ptr())
    } else if let Some(values) = as_type::<T, f32>(&data[at..at + 4]) {
        _mm256_cvtps_pd(_mm_loadu_ps(values.as_ptr()))
    } else {
        let values: [f64; 4] = std::array::from_fn(|l| data[at + l].to_f64());
        _mm256_loadu_pd(values.as_ptr())
    }
}

/// Hints the CPU to load the cache lines of `span` (no effect on results).
#[inline(always)]
fn prefetch<T>(span: &[T]) {
    #[cfg(target_arch = "x86_64")]
    {
        let bytes = std::mem::size_of_val(span);
        let base = span.as_ptr().cast::<i8>();
        for offset in (0..bytes).step_by(64) {
            // SAFETY: a prefetch never faults and the address is inside `span`.
            unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(base.add(offset)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = span;
}

#[inline(always)]
fn asymmetric(x: f64, y: f64) -> bool {
    (x - y).abs() > SYMMETRY_TOLERANCE * x.abs().max(y.abs()).max(1.0)
}

#[inline(always)]
fn check_finite(row: &[f64], i: usize, argument: &str) -> Result<()> {
    // 0 * x is NaN exactly when x is not finite.
    if sum_lanes(row, |x| 0.0 * x).is_nan() {
        let t = row.iter().position(|v| !v.is_finite()).unwrap_or(0);
        return Err(Error::invalid(argument, format!("entry [{i}, {t}] is {}; every entry must be finite", row[t])));
    }
    Ok(())
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
        check_finite(row, i, argument)?;
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
