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

/// `dense_dot` for f32 with AVX2 and FMA: 16 lanes in two registers.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn dense_dot_f32_avx2(q: &[f32], x: &[f32]) -> (f64, f64) {
    use std::arch::x86_64::*;
    let d = q.len().min(x.len());
    let (mut dot0, mut dot1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    let (mut norm0, mut norm1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    let mut j = 0;
    while j + 16 <= d {
        // SAFETY: j + 16 <= d bounds the four 8-float loads.
        let (a0, a1, b0, b1) = unsafe {
            (
                _mm256_loadu_ps(q.as_ptr().add(j)),
                _mm256_loadu_ps(q.as_ptr().add(j + 8)),
                _mm256_loadu_ps(x.as_ptr().add(j)),
                _mm256_loadu_ps(x.as_ptr().add(j + 8)),
            )
        };
        dot0 = _mm256_fmadd_ps(a0, b0, dot0);
        dot1 = _mm256_fmadd_ps(a1, b1, dot1);
        norm0 = _mm256_fmadd_ps(b0, b0, norm0);
        norm1 = _mm256_fmadd_ps(b1, b1, norm1);
        j += 16;
    }
    let mut lanes = [0f32; 16];
    // SAFETY: `lanes` holds 16 floats.
    unsafe {
        _mm256_storeu_ps(lanes.as_mut_ptr(), _mm256_add_ps(dot0, dot1));
        _mm256_storeu_ps(lanes.as_mut_ptr().add(8), _mm256_add_ps(norm0, norm1));
    }
    let (mut dot, mut norm) = (lanes[..8].iter().sum::<f32>(), lanes[8..].iter().sum::<f32>());
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
