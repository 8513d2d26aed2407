//! Sums and extremes of float64 rows in independent lanes, so they vectorise.

pub(super) const LANES: usize = 8;

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

/// `(sum, sum of squares, smallest, largest)` of `xs`, bit for bit as
/// `sum_lanes` and `min_max_lanes` compute them; with AVX2 when the CPU has
/// it (callers are closures, which the scan's AVX2 code does not inline).
pub(crate) fn row_stats_lanes(xs: &[f64]) -> [f64; 4] {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the running CPU has AVX2, all the function is
            // compiled for.
            return unsafe { row_stats_avx2(xs) };
        }
    }
    let (lo, hi) = min_max_lanes(xs);
    [sum_lanes(xs, |x| x), sum_lanes(xs, |x| x * x), lo, hi]
}

/// The sums as in `sum_lanes` (plain loops vectorise); the extremes with
/// explicit vector min/max, which the compiler does not produce for the
/// `if x < m` form here (it emits scalar code): `_mm256_min_pd(x, m)` is
/// exactly `if x < m { x } else { m }` per lane, so the lanes, and the final
/// fold, are those of `min_max_lanes`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(unused_unsafe)]
unsafe fn row_stats_avx2(xs: &[f64]) -> [f64; 4] {
    use std::arch::x86_64::{_mm256_loadu_pd, _mm256_max_pd, _mm256_min_pd, _mm256_set1_pd, _mm256_storeu_pd};
    let chunks = xs.chunks_exact(LANES);
    let rest = chunks.remainder();
    let (mut lo, mut hi) = ([f64::INFINITY; LANES], [f64::NEG_INFINITY; LANES]);
    // SAFETY: every load and store is of 4 f64 inside a chunk of 8 or one of
    // the 8-lane arrays.
    unsafe {
        let (mut lo0, mut lo1) = (_mm256_set1_pd(f64::INFINITY), _mm256_set1_pd(f64::INFINITY));
        let (mut hi0, mut hi1) = (_mm256_set1_pd(f64::NEG_INFINITY), _mm256_set1_pd(f64::NEG_INFINITY));
        for c in chunks {
            let (x0, x1) = (_mm256_loadu_pd(c.as_ptr()), _mm256_loadu_pd(c.as_ptr().add(4)));
            lo0 = _mm256_min_pd(x0, lo0);
            lo1 = _mm256_min_pd(x1, lo1);
            hi0 = _mm256_max_pd(x0, hi0);
            hi1 = _mm256_max_pd(x1, hi1);
        }
        _mm256_storeu_pd(lo.as_mut_ptr(), lo0);
        _mm256_storeu_pd(lo.as_mut_ptr().add(4), lo1);
        _mm256_storeu_pd(hi.as_mut_ptr(), hi0);
        _mm256_storeu_pd(hi.as_mut_ptr().add(4), hi1);
    }
    let lo = lo.iter().chain(rest).fold(f64::INFINITY, |m, &x| if x < m { x } else { m });
    let hi = hi.iter().chain(rest).fold(f64::NEG_INFINITY, |m, &x| if x > m { x } else { m });
    [sum_lanes(xs, |x| x), sum_lanes(xs, |x| x * x), lo, hi]
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
