//! `top_k` (cosine over raw rows, one streamed pass or the blocked product)
//! against a brute-force ranking of f64 cosines, and its error paths.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use ctxfold_core::similarity::top_k;
use ctxfold_core::Error;
use ndarray::{Array2, ArrayView2};

/// xorshift64*, normal-ish via 4 uniforms.
struct Rng(u64);
impl Rng {
    fn uniform(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }
    fn normal(&mut self) -> f64 {
        (0..4).map(|_| self.uniform()).sum::<f64>() - 2.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.uniform() * n as f64) as usize % n.max(1)
    }
}

fn rows(rng: &mut Rng, n: usize, d: usize, scale: f64) -> Array2<f64> {
    Array2::from_shape_fn((n, d), |_| rng.normal() * scale)
}

/// The definition: the f64 cosine (0 for a zero row or query), clipped,
/// rounded to the input type; best first, ties to the lower index.
fn brute_force<T: Copy + Into<f64> + PartialOrd>(
    q: &[T],
    x: ArrayView2<T>,
    k: usize,
    round: impl Fn(f64) -> T,
) -> (Vec<i64>, Vec<T>) {
    let norm = |v: &[f64]| v.iter().map(|a| a * a).sum::<f64>().sqrt();
    let q: Vec<f64> = q.iter().map(|&v| v.into()).collect();
    let qn = norm(&q);
    let mut scored: Vec<(usize, T)> = x
        .rows()
        .into_iter()
        .enumerate()
        .map(|(i, row)| {
            let row: Vec<f64> = row.iter().map(|&v| v.into()).collect();
            let (dot, rn) = (q.iter().zip(&row).map(|(a, b)| a * b).sum::<f64>(), norm(&row));
            let cos = if qn > 0.0 && rn > 0.0 { dot / (qn * rn) } else { 0.0 };
            (i, round(cos.clamp(-1.0, 1.0)))
        })
        .collect();
    scored.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap().then(a.0.cmp(&b.0)));
    scored.truncate(k);
    (scored.iter().map(|s| s.0 as i64).collect(), scored.iter().map(|s| s.1).collect())
}

fn check<T: ctxfold_core::similarity::Dot + Into<f64> + std::fmt::Debug>(
    q: &Array2<T>,
    x: &Array2<T>,
    k: usize,
    round: impl Fn(f64) -> T + Copy,
    what: &str,
) {
    let (idx, scores) = top_k(q.view(), x.view(), k).unwrap();
    assert_eq!(idx.dim(), (q.nrows(), k.min(x.nrows())), "{what}");
    for (qi, qrow) in q.rows().into_iter().enumerate() {
        let (want_idx, want_scores) = brute_force(qrow.as_slice().unwrap(), x.view(), k, round);
        assert_eq!(idx.row(qi).to_vec(), want_idx, "{what}, query {qi}");
        for (got, want) in scores.row(qi).iter().zip(&want_scores) {
            let (g, w): (f64, f64) = ((*got).into(), (*want).into());
            assert!((g - w).abs() <= 1e-6 * w.abs().max(1e-30), "{what}, query {qi}: {g} vs {w}");
        }
    }
}

/// Rows drawn from a few distinct directions at random scales (exact ties
/// in cosine), some zero rows; queries one of the directions or random.
fn tied(rng: &mut Rng, n: usize, d: usize, distinct: usize) -> Array2<f64> {
    let base = rows(rng, distinct, d, 1.0);
    let mut x = Array2::<f64>::zeros((n, d));
    for i in 0..n {
        let pick = rng.below(distinct + 1);
        if pick < distinct {
            // Powers of two keep the cosine exactly equal between copies.
            let scale = 2f64.powi(rng.below(9) as i32 - 4);
            x.row_mut(i).assign(&(&base.row(pick) * scale));
        }
    }
    x
}

#[test]
fn matches_brute_force_f32_and_f64_both_paths() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    // Sizes around the stream and product blocks and the parallel threshold.
    for (n, d) in [(1, 1), (5, 3), (257, 7), (600, 33), (2049, 16), (5000, 384)] {
        for m in [1, 2, 5] {
            let x = rows(&mut rng, n, d, 3.0);
            let q = rows(&mut rng, m, d, 0.5);
            for k in [0, 1, 10, n + 3] {
                let what = format!("n={n} d={d} m={m} k={k}");
                check(&q.mapv(|v| v as f32), &x.mapv(|v| v as f32), k, |v| v as f32, &what);
                check(&q, &x, k, |v| v, &what);
            }
        }
    }
}

#[test]
fn ties_zero_rows_and_zero_queries() {
    let mut rng = Rng(7);
    for (n, d, distinct) in [(40, 5, 3), (3000, 24, 6), (700, 64, 1)] {
        let x = tied(&mut rng, n, d, distinct);
        let mut q = rows(&mut rng, 4, d, 1.0);
        q.row_mut(1).assign(&x.row(n / 2));
        q.row_mut(2).fill(0.0);
        for k in [1, 7, 50] {
            let what = format!("n={n} d={d} distinct={distinct} k={k}");
            check(&q.mapv(|v| v as f32), &x.mapv(|v| v as f32), k, |v| v as f32, &what);
            check(&q, &x, k, |v| v, &what);
            // One query at a time takes the streamed pass.
            for qi in 0..q.nrows() {
                let one = q.slice(ndarray::s![qi..qi + 1, ..]).to_owned();
                check(&one.mapv(|v| v as f32), &x.mapv(|v| v as f32), k, |v| v as f32, &what);
            }
        }
    }
    // Only zero queries: every score 0, the first k rows.
    let x = rows(&mut rng, 10, 4, 1.0).mapv(|v| v as f32);
    let (idx, scores) = top_k(Array2::<f32>::zeros((2, 4)).view(), x.view(), 3).unwrap();
    assert_eq!(idx.row(1).to_vec(), vec![0, 1, 2]);
    assert!(scores.iter().all(|&s| s == 0.0));
}

#[test]
fn tiny_and_huge_rows_keep_their_cosine() {
    let mut rng = Rng(11);
    let d = 16;
    let base = rows(&mut rng, 300, d, 1.0);
    let q = rows(&mut rng, 3, d, 1.0);
    // Scales where float32 squares underflow or overflow, and f64 extremes.
    for scale in [1e-30, 1e-20, 1.0, 1e18, 1e30] {
        let x = base.mapv(|v| v * scale);
        check(&q.mapv(|v| v as f32), &x.mapv(|v| v as f32), 10, |v| v as f32, &format!("f32 scale {scale}"));
    }
    for scale in [1e-300, 1e-160, 1e160, 1e300] {
        let x = base.mapv(|v| v * scale);
        let (idx, _) = top_k(q.view(), x.view(), 10).unwrap();
        let (want, _) = top_k(q.view(), base.view(), 10).unwrap();
        assert_eq!(idx, want, "f64 scale {scale}");
        // A tiny or huge query is the same direction.
        let (idx, _) = top_k((&q * scale).view(), base.view(), 10).unwrap();
        assert_eq!(idx, want, "f64 query scale {scale}");
    }
}

#[test]
fn errors_name_the_argument_and_the_first_bad_entry() {
    // Large enough for parallel blocks: the report is still the first in row order.
    let mut x = Array2::<f32>::ones((20_000, 8));
    x[[15_000, 2]] = f32::INFINITY;
    x[[3100, 5]] = f32::NAN;
    for m in [1, 3] {
        let q = Array2::<f32>::ones((m, 8));
        let message = top_k(q.view(), x.view(), 3).unwrap_err().to_string();
        assert!(message.starts_with("X: X[3100, 5] is not finite"), "{message}");
        // Zero queries still refuse non-finite rows.
        let message = top_k(Array2::<f32>::zeros((m, 8)).view(), x.view(), 3).unwrap_err().to_string();
        assert!(message.starts_with("X: X[3100, 5]"), "{message}");
    }
    let ok = Array2::<f32>::ones((4, 8));
    let mut q = Array2::<f32>::ones((2, 8));
    q[[1, 3]] = f32::NAN;
    assert!(matches!(top_k(q.view(), ok.view(), 1), Err(Error::InvalidInput { argument, .. }) if argument == "query"));
    let q = Array2::<f32>::ones((1, 7));
    assert!(matches!(top_k(q.view(), ok.view(), 1), Err(Error::InvalidInput { argument, .. }) if argument == "query"));
    let empty = Array2::<f32>::ones((4, 0));
    assert!(
        matches!(top_k(empty.view(), empty.view(), 1), Err(Error::InvalidInput { argument, .. }) if argument == "X")
    );
    // No rows: empty results.
    let none = Array2::<f32>::ones((0, 8));
    assert_eq!(top_k(Array2::<f32>::ones((2, 8)).view(), none.view(), 3).unwrap().0.dim(), (2, 0));
}

#[test]
fn strided_input_is_read_correctly() {
    let mut rng = Rng(5);
    let wide = rows(&mut rng, 400, 20, 1.0).mapv(|v| v as f32);
    let x = wide.slice(ndarray::s![.., ..;2]);
    let q = rows(&mut rng, 3, 10, 1.0).mapv(|v| v as f32);
    check(&q, &x.to_owned(), 5, |v| v as f32, "contiguous copy");
    let (idx, _) = top_k(q.view(), x, 5).unwrap();
    let (want, _) = top_k(q.view(), x.to_owned().view(), 5).unwrap();
    assert_eq!(idx, want);
}
