//! What the numeric modules share: the float types they accept ([`Real`]),
//! float64 vector kernels (`dot`, `axpy`), lane-parallel reductions
//! (`lanes`) and the one-pass validation of a square matrix (`scan`).

mod lanes;
mod scan;

pub(crate) use lanes::{row_stats_lanes, sum_lanes};
pub(crate) use scan::{row_major, scan_square, square_size};
pub use scan::SYMMETRY_TOLERANCE;

/// The element types the numeric inputs may have (float32 or float64).
pub trait Real: faer::traits::RealField + Copy + PartialOrd + Send + Sync + 'static {
    const ZERO: Self;
    const ONE: Self;
    fn to_f64(self) -> f64;
    fn to_f32(self) -> f32;
    fn from_f64(value: f64) -> Self;
    fn is_finite(self) -> bool;
}

macro_rules! impl_real {
    ($t:ty) => {
        impl Real for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn to_f32(self) -> f32 {
                self as f32
            }
            #[inline(always)]
            fn from_f64(value: f64) -> Self {
                value as $t
            }
            #[inline(always)]
            fn is_finite(self) -> bool {
                <$t>::is_finite(self)
            }
        }
    };
}
impl_real!(f32);
impl_real!(f64);

/// `values` as `&[E]` when they are that already (`T` is `E`): the same
/// slice, no copy.
#[inline(always)]
pub(crate) fn as_type<T: Real, E: Real>(values: &[T]) -> Option<&[E]> {
    if std::any::TypeId::of::<T>() != std::any::TypeId::of::<E>() {
        return None;
    }
    // SAFETY: T and E are the same type (checked above), so the slice is
    // reinterpreted as itself: same pointer, length and lifetime.
    Some(unsafe { std::slice::from_raw_parts(values.as_ptr().cast::<E>(), values.len()) })
}


/// Independent accumulators: 4 vectors of 4 with AVX2.
const DOT_LANES: usize = 16;

/// In independent accumulators: a single running sum is bound by the
/// add latency.
#[inline(always)]
pub(crate) fn dot(x: &[f64], y: &[f64]) -> f64 {
    let mut acc = [0.0f64; DOT_LANES];
    let (xc, yc) = (x.chunks_exact(DOT_LANES), y.chunks_exact(DOT_LANES));
    let tail: f64 = xc.remainder().iter().zip(yc.remainder()).map(|(a, b)| a * b).sum();
    for (a, b) in xc.zip(yc) {
        for l in 0..DOT_LANES {
            acc[l] += a[l] * b[l];
        }
    }
    acc.iter().sum::<f64>() + tail
}

/// `y += alpha * x`.
#[inline(always)]
pub(crate) fn axpy(alpha: f64, x: &[f64], y: &mut [f64]) {
    for (yi, xi) in y.iter_mut().zip(x) {
        *yi += alpha * xi;
    }
}
