//! The float kernels of the top-k passes: the accumulation type with its
//! unit roundoff, and a query's dot product with a row together with the
//! row's squared norm.

use crate::linalg::Real;

/// A float type the kernels accumulate in, with its unit roundoff.
pub trait Dot: Real {
    const UNIT_ROUNDOFF: f64;
    fn mul_add(self, a: Self, b: Self) -> Self;
    fn plus(self, b: Self) -> Self;
    fn times(self, b: Self) -> Self;
    /// The slice as f32 when `Self` is f32 (for the hand-written kernel).
    fn as_f32(values: &[Self]) -> Option<&[f32]>;
}

macro_rules! impl_dot {
    ($t:ty, $u:expr, $v:ident => $as_f32:expr) => {
        impl Dot for $t {
            const UNIT_ROUNDOFF: f64 = $u;
            fn as_f32($v: &[Self]) -> Option<&[f32]> {
                $as_f32
            }
            #[inline(always)]
            fn mul_add(self, a: Self, b: Self) -> Self {
                <$t>::mul_add(self, a, b)
            }
            #[inline(always)]
            fn plus(self, b: Self) -> Self {
                self + b
            }
            #[inline(always)]
            fn times(self, b: Self) -> Self {
                self * b
            }
        }
    };
}
impl_dot!(f32, f32::EPSILON as f64 / 2.0, values => Some(values));
impl_dot!(f64, f64::EPSILON / 2.0, _values => None);

#[cfg(target_arch = "x86_64")]
pub(super) fn has_avx2_fma() -> bool {
    std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
}

/// How far ahead of the row being scored the float passes ask for memory:
/// with the hardware prefetcher alone a core waits on each new row; asking
/// a few rows ahead keeps both cores' streams at memory speed.
const PREFETCH_BYTES: usize = 16 * 1024;

/// `PREFETCH_BYTES` in elements of `T`.
pub(super) fn prefetch_ahead<T>() -> usize {
    PREFETCH_BYTES / std::mem::size_of::<T>().max(1)
}

/// Asks for the cache lines of `values[start..start + len]` (nothing past
/// the end of `values`).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) fn prefetch<V>(values: &[V], start: usize, len: usize) {
    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
    let size = std::mem::size_of::<V>();
    let end = start.saturating_add(len).min(values.len()) * size;
    let bytes = values.as_ptr().cast::<i8>();
    let mut at = start.saturating_mul(size);
    while at < end {
        // SAFETY: `at` is inside `values`; a prefetch never faults anyway.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(bytes.add(at)) };
        at += 64;
    }
}

/// Elsewhere the hardware prefetcher is left to it.
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
pub(super) fn prefetch<V>(_values: &[V], _start: usize, _len: usize) {}

/// `dense_dot` as f64: the AVX2 kernel for f32 when `FMA` (which callers set
/// only inside a function compiled with avx2 and fma), else the portable one.
#[inline(always)]
pub(super) fn dot_and_norm2<T: Dot, const FMA: bool>(q: &[T], row: &[T]) -> (f64, f64) {
    #[cfg(target_arch = "x86_64")]
    if let (true, Some(q), Some(row)) = (FMA, T::as_f32(q), T::as_f32(row)) {
        // SAFETY: FMA is only true inside functions compiled for avx2 and fma.
        return unsafe { dense_dot_f32_avx2(q, row) };
    }
    let (dot, norm2) = dense_dot::<T, FMA>(q, row);
    (dot.to_f64(), norm2.to_f64())
}

/// `dense_dot` for f32 with AVX2 and FMA: 32 lanes in four registers per
/// sum, so the multiply-adds of a row are four short chains, not two long
/// ones, and the loop keeps pace with memory.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn dense_dot_f32_avx2(q: &[f32], x: &[f32]) -> (f64, f64) {
    use std::arch::x86_64::*;
    let d = q.len().min(x.len());
    let (qp, xp) = (q.as_ptr(), x.as_ptr());
    let z = _mm256_setzero_ps;
    let (mut d0, mut d1, mut d2, mut d3) = (z(), z(), z(), z());
    let (mut n0, mut n1, mut n2, mut n3) = (z(), z(), z(), z());
    let mut j = 0;
    while j + 32 <= d {
        // SAFETY: j + 32 <= d bounds the eight 8-float loads.
        unsafe {
            let (b0, b1, b2, b3) = (
                _mm256_loadu_ps(xp.add(j)),
                _mm256_loadu_ps(xp.add(j + 8)),
                _mm256_loadu_ps(xp.add(j + 16)),
                _mm256_loadu_ps(xp.add(j + 24)),
            );
            d0 = _mm256_fmadd_ps(_mm256_loadu_ps(qp.add(j)), b0, d0);
            d1 = _mm256_fmadd_ps(_mm256_loadu_ps(qp.add(j + 8)), b1, d1);
            d2 = _mm256_fmadd_ps(_mm256_loadu_ps(qp.add(j + 16)), b2, d2);
            d3 = _mm256_fmadd_ps(_mm256_loadu_ps(qp.add(j + 24)), b3, d3);
            n0 = _mm256_fmadd_ps(b0, b0, n0);
            n1 = _mm256_fmadd_ps(b1, b1, n1);
            n2 = _mm256_fmadd_ps(b2, b2, n2);
            n3 = _mm256_fmadd_ps(b3, b3, n3);
        }
        j += 32;
    }
    while j + 8 <= d {
        // SAFETY: j + 8 <= d bounds the two loads.
        unsafe {
            let b = _mm256_loadu_ps(xp.add(j));
            d0 = _mm256_fmadd_ps(_mm256_loadu_ps(qp.add(j)), b, d0);
            n0 = _mm256_fmadd_ps(b, b, n0);
        }
        j += 8;
    }
    let dots = _mm256_add_ps(_mm256_add_ps(d0, d1), _mm256_add_ps(d2, d3));
    let norms = _mm256_add_ps(_mm256_add_ps(n0, n1), _mm256_add_ps(n2, n3));
    // Both horizontal sums at once: [dot, norm] in the low two lanes.
    let h = _mm256_hadd_ps(dots, norms);
    let h = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    let h = _mm_hadd_ps(h, h);
    let (mut dot, mut norm) = (_mm_cvtss_f32(h), _mm_cvtss_f32(_mm_shuffle_ps(h, h, 1)));
    for (a, b) in q[j..d].iter().zip(&x[j..d]) {
        dot += a * b;
        norm += b * b;
    }
    (dot as f64, norm as f64)
}

/// The dot product of the query with a row and the row's squared norm, in
/// the input precision (the bound covers any summation order).
#[inline(always)]
fn dense_dot<T: Dot, const FMA: bool>(q: &[T], x: &[T]) -> (T, T) {
    const LANES: usize = 16;
    let mut dot = [T::ZERO; LANES];
    let mut norm = [T::ZERO; LANES];
    let (qc, xc) = (q.chunks_exact(LANES), x.chunks_exact(LANES));
    let (qr, xr) = (qc.remainder(), xc.remainder());
    for (a, b) in qc.zip(xc) {
        for l in 0..LANES {
            if FMA {
                dot[l] = a[l].mul_add(b[l], dot[l]);
                norm[l] = b[l].mul_add(b[l], norm[l]);
            } else {
                dot[l] = dot[l].plus(a[l].times(b[l]));
                norm[l] = norm[l].plus(b[l].times(b[l]));
            }
        }
    }
    for (l, (a, b)) in qr.iter().zip(xr).enumerate() {
        dot[l] = dot[l].plus(a.times(*b));
        norm[l] = norm[l].plus(b.times(*b));
    }
    let sum = |v: [T; LANES]| v.iter().fold(T::ZERO, |s, &x| s.plus(x));
    (sum(dot), sum(norm))
}
