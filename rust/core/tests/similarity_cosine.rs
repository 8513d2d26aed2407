//! `cosine` of a matrix with itself (the half-product-and-mirror path)
//! against the general two-matrix path and a direct f64 computation.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use ctxfold_core::similarity::cosine;
use ndarray::Array2;

fn matrix(n: usize, d: usize, seed: u64) -> Array2<f32> {
    let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    Array2::from_shape_fn((n, d), |_| {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((state >> 40) as f32 / (1u64 << 24) as f32) - 0.5
    })
}

fn direct(x: &Array2<f32>, i: usize, j: usize) -> f64 {
    let (a, b) = (x.row(i), x.row(j));
    let dot: f64 = a.iter().zip(b.iter()).map(|(p, q)| f64::from(*p) * f64::from(*q)).sum();
    let na: f64 = a.iter().map(|p| f64::from(*p).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|p| f64::from(*p).powi(2)).sum::<f64>().sqrt();
    if na == 0.0 || nb == 0.0 { 0.0 } else { dot / (na * nb) }
}

#[test]
fn self_cosine_is_symmetric_and_matches_the_general_product() {
    // sizes around the mirror's 64-row tiles, and the parallel threshold
    for (n, d) in [(0, 3), (1, 5), (2, 3), (63, 7), (64, 16), (65, 16), (130, 33), (300, 384)] {
        let mut x = matrix(n, d, n as u64 + 7);
        if n > 3 {
            x.row_mut(3).fill(0.0); // a zero row: similarity 0 with everything
        }
        let own = cosine(x.view(), None).unwrap();
        let general = cosine(x.view(), Some(x.view())).unwrap();
        assert_eq!(own.dim(), (n, n));
        for i in 0..n {
            for j in 0..n {
                assert_eq!(own[[i, j]], own[[j, i]], "not symmetric at ({i}, {j}), n={n}");
                assert!((own[[i, j]] - general[[i, j]]).abs() < 1e-5, "({i}, {j}) n={n}");
                assert!((f64::from(own[[i, j]]) - direct(&x, i, j)).abs() < 1e-5, "({i}, {j}) n={n}");
            }
        }
    }
}
