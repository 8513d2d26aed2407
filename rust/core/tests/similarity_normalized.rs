//! `top_k_normalized` (dense and int8-sketched first pass) against a brute
//! force ranking of exact scores, and its error paths.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use ctxfold_core::similarity::{quantize_rows, top_k_normalized, Sketch};
use ctxfold_core::Error;
use ndarray::{Array1, Array2, ArrayView2};

/// A small deterministic generator (xorshift64*), normal-ish via 4 uniforms.
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
}

fn unit_rows(rng: &mut Rng, n: usize, d: usize) -> Array2<f32> {
    let mut x = Array2::<f32>::zeros((n, d));
    for mut row in x.rows_mut() {
        row.mapv_inplace(|_| rng.normal() as f32);
        let norm = row.iter().map(|v| v * v).sum::<f32>().sqrt();
        if norm > 0.0 {
            row.mapv_inplace(|v| v / norm);
        }
    }
    x
}

/// The definition: f64 dot product rounded to f32 and clipped, sorted best
/// first with ties to the lower index.
fn brute_force(q: &[f32], x: ArrayView2<f32>, k: usize, valid: Option<&[bool]>) -> (Vec<i64>, Vec<f32>) {
    let mut scored: Vec<(usize, f32)> = x
        .rows()
        .into_iter()
        .enumerate()
        .filter(|(i, _)| valid.is_none_or(|v| v[*i]))
        .map(|(i, row)| {
            let s: f64 = q.iter().zip(row).map(|(a, b)| *a as f64 * *b as f64).sum();
            (i, s.clamp(-1.0, 1.0) as f32)
        })
        .collect();
    scored.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap().then(a.0.cmp(&b.0)));
    scored.truncate(k);
    (scored.iter().map(|s| s.0 as i64).collect(), scored.iter().map(|s| s.1).collect())
}

fn check_both_paths(q: &Array2<f32>, x: &Array2<f32>, k: usize, valid: Option<&Array1<bool>>) {
    let (codes, bounds) = quantize_rows(x.view()).unwrap();
    let sketch = Sketch { codes: codes.view(), bounds: bounds.view() };
    let dense = top_k_normalized(q.view(), x.view(), k, valid.map(|v| v.view()), None).unwrap();
    let sketched = top_k_normalized(q.view(), x.view(), k, valid.map(|v| v.view()), Some(sketch)).unwrap();
    for (qi, qrow) in q.rows().into_iter().enumerate() {
        let (idx, scores) = brute_force(qrow.as_slice().unwrap(), x.view(), k, valid.map(|v| v.as_slice().unwrap()));
        assert_eq!(dense.0.row(qi).to_vec(), idx, "dense, query {qi}");
        assert_eq!(dense.1.row(qi).to_vec(), scores, "dense, query {qi}");
        assert_eq!(sketched.0.row(qi).to_vec(), idx, "sketched, query {qi}");
        assert_eq!(sketched.1.row(qi).to_vec(), scores, "sketched, query {qi}");
    }
}

#[test]
fn equals_brute_force_on_random_unit_rows() {
    let mut rng = Rng(7);
    for &(n, d, k) in &[(5000, 384, 10), (3000, 33, 25), (700, 16, 1), (4100, 7, 50), (50, 64, 50)] {
        let x = unit_rows(&mut rng, n, d);
        let q = unit_rows(&mut rng, 3, d);
        check_both_paths(&q, &x, k, None);
    }
}

#[test]
fn equals_brute_force_with_duplicates_and_ties() {
    let mut rng = Rng(11);
    let base = unit_rows(&mut rng, 40, 24);
    // 6,000 rows drawn from 40 distinct ones: every score is tied many times.
    let picks: Vec<usize> = (0..6000).map(|_| (rng.uniform() * 40.0) as usize % 40).collect();
    let x = Array2::from_shape_fn((6000, 24), |(i, j)| base[(picks[i], j)]);
    let q = unit_rows(&mut rng, 2, 24);
    check_both_paths(&q, &x, 30, None);
    let q = Array2::from_shape_fn((1, 24), |(_, j)| base[(3, j)]);
    check_both_paths(&q, &x, 200, None);
}

#[test]
fn equals_brute_force_with_a_valid_mask() {
    let mut rng = Rng(3);
    let x = unit_rows(&mut rng, 5000, 48);
    let valid = Array1::from_shape_fn(5000, |i| i % 3 != 0);
    let q = unit_rows(&mut rng, 2, 48);
    check_both_paths(&q, &x, 10, Some(&valid));
    let none = Array1::from_elem(5000, false);
    let (idx, scores) = top_k_normalized(q.view(), x.view(), 10, Some(none.view()), None).unwrap();
    assert_eq!(idx.dim(), (2, 0));
    assert_eq!(scores.dim(), (2, 0));
}

#[test]
fn k_larger_than_n_gives_every_row_and_empty_x_gives_none() {
    let mut rng = Rng(5);
    let x = unit_rows(&mut rng, 9, 8);
    let q = unit_rows(&mut rng, 1, 8);
    check_both_paths(&q, &x, 100, None);
    let (idx, _) = top_k_normalized(q.view(), x.view(), 100, None, None).unwrap();
    assert_eq!(idx.dim(), (1, 9));
    let empty = Array2::<f32>::zeros((0, 8));
    let (idx, scores) = top_k_normalized(q.view(), empty.view(), 10, None, None).unwrap();
    assert_eq!((idx.dim(), scores.dim()), ((1, 0), (1, 0)));
    let (codes, bounds) = quantize_rows(empty.view()).unwrap();
    assert_eq!((codes.dim(), bounds.dim()), ((0, 8), (0, 2)));
    let (idx, _) = top_k_normalized(q.view(), x.view(), 0, None, None).unwrap();
    assert_eq!(idx.dim(), (1, 0));
}

#[test]
fn zero_rows_and_zero_queries_score_zero() {
    let mut x = Array2::<f32>::zeros((6, 4));
    x[(2, 1)] = 1.0;
    x[(4, 1)] = -1.0;
    let q = Array2::from_shape_vec((2, 4), vec![0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]).unwrap();
    check_both_paths(&q, &x, 6, None);
    let (idx, scores) = top_k_normalized(q.view(), x.view(), 3, None, None).unwrap();
    assert_eq!(idx.row(0).to_vec(), vec![2, 0, 1]);
    assert_eq!(scores.row(0).to_vec(), vec![1.0, 0.0, 0.0]);
    assert_eq!(idx.row(1).to_vec(), vec![0, 1, 2]);
    let (_, bounds) = quantize_rows(x.view()).unwrap();
    assert_eq!(bounds.row(0).to_vec(), vec![0.0, 0.0]);
}

#[test]
fn float64_and_strided_inputs() {
    let mut rng = Rng(9);
    let x32 = unit_rows(&mut rng, 1000, 20);
    let x = x32.mapv(|v| v as f64);
    let q = unit_rows(&mut rng, 1, 20).mapv(|v| v as f64);
    let (idx, scores) = top_k_normalized(q.view(), x.view(), 7, None, None).unwrap();
    let mut all: Vec<(usize, f64)> = x.rows().into_iter().map(|r| r.dot(&q.row(0))).enumerate().collect();
    all.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap().then(a.0.cmp(&b.0)));
    assert_eq!(idx.row(0).to_vec(), all[..7].iter().map(|a| a.0 as i64).collect::<Vec<_>>());
    for (s, a) in scores.row(0).iter().zip(&all) {
        assert!((s - a.1).abs() < 1e-12);
    }
    // A column-major copy gives the same answer.
    let fortran = x32.t().as_standard_layout().into_owned().reversed_axes();
    let q32 = q.mapv(|v| v as f32);
    let a = top_k_normalized(q32.view(), fortran.view(), 7, None, None).unwrap();
    let b = top_k_normalized(q32.view(), x32.view(), 7, None, None).unwrap();
    assert_eq!(a, b);
}

fn invalid_argument(result: Result<impl std::fmt::Debug, Error>) -> (String, String) {
    match result {
        Err(Error::InvalidInput { argument, message }) => (argument, message),
        other => panic!("expected InvalidInput, got {other:?}"),
    }
}

#[test]
fn bad_inputs_name_the_argument() {
    let mut rng = Rng(1);
    let mut x = unit_rows(&mut rng, 10, 4);
    let q = unit_rows(&mut rng, 1, 4);
    let mut bad_q = q.clone();
    bad_q[(0, 2)] = f32::NAN;
    assert_eq!(invalid_argument(top_k_normalized(bad_q.view(), x.view(), 3, None, None)).0, "query");
    let (codes, bounds) = quantize_rows(x.view()).unwrap();
    x[(7, 1)] = f32::NAN;
    let (arg, msg) = invalid_argument(top_k_normalized(q.view(), x.view(), 3, None, None));
    assert_eq!(arg, "X");
    assert!(msg.contains("X[7, 1]"), "{msg}");
    assert_eq!(invalid_argument(quantize_rows(x.view())).0, "X");
    x[(7, 1)] = f32::INFINITY;
    assert_eq!(invalid_argument(top_k_normalized(q.view(), x.view(), 3, None, None)).0, "X");
    x[(7, 1)] = 0.0;
    let wide = unit_rows(&mut rng, 1, 5);
    assert_eq!(invalid_argument(top_k_normalized(wide.view(), x.view(), 3, None, None)).0, "query");
    let mask = Array1::from_elem(9, true);
    assert_eq!(invalid_argument(top_k_normalized(q.view(), x.view(), 3, Some(mask.view()), None)).0, "valid");
    let short = Sketch { codes: codes.slice(ndarray::s![..9, ..]), bounds: bounds.view() };
    assert_eq!(invalid_argument(top_k_normalized(q.view(), x.view(), 3, None, Some(short))).0, "sketch");
    let mut negative = bounds.clone();
    negative[(2, 1)] = -1.0;
    let sketch = Sketch { codes: codes.view(), bounds: negative.view() };
    assert_eq!(invalid_argument(top_k_normalized(q.view(), x.view(), 3, None, Some(sketch))).0, "sketch");
    let no_columns = Array2::<f32>::zeros((3, 0));
    assert_eq!(invalid_argument(top_k_normalized(q.view(), no_columns.view(), 3, None, None)).0, "X");
    assert_eq!(invalid_argument(quantize_rows(no_columns.view())).0, "X");
    let x64 = x.mapv(|v| v as f64);
    let sketch = Sketch { codes: codes.view(), bounds: bounds.view() };
    let q64 = q.mapv(|v| v as f64);
    assert_eq!(invalid_argument(top_k_normalized(q64.view(), x64.view(), 3, None, Some(sketch))).0, "sketch");
}

/// Run with `cargo test --release -p ctxfold-core --test similarity_normalized -- --ignored --nocapture`.
#[test]
#[ignore]
fn timing_100k_by_384() {
    let mut rng = Rng(2);
    let x = unit_rows(&mut rng, 100_000, 384);
    let q = unit_rows(&mut rng, 20, 384);
    let (codes, bounds) = quantize_rows(x.view()).unwrap();
    let sketch = Sketch { codes: codes.view(), bounds: bounds.view() };
    for (name, sk) in [("dense f32", None), ("int8 sketch", Some(sketch))] {
        let mut times = Vec::new();
        for qi in 0..20 {
            let one = q.slice(ndarray::s![qi..qi + 1, ..]);
            let t = std::time::Instant::now();
            let _ = top_k_normalized(one, x.view(), 10, None, sk).unwrap();
            times.push(t.elapsed().as_secs_f64() * 1e3);
        }
        times.sort_by(|a, b| a.partial_cmp(b).unwrap());
        println!("{name}: median {:.2} ms, min {:.2} ms", times[10], times[0]);
    }
}

#[test]
fn several_queries_skip_masked_rows_and_report_the_first_bad_one() {
    let mut rng = Rng(21);
    let mut x = unit_rows(&mut rng, 20_000, 16);
    let q = unit_rows(&mut rng, 4, 16);
    x[(19_000, 3)] = f32::NAN;
    x[(6_000, 1)] = f32::INFINITY;
    let mut valid = Array1::from_elem(20_000, true);
    valid[6_000] = false;
    valid[19_000] = false;
    // (No sketch: quantize_rows refuses non-finite rows, masked or not.)
    let (idx, scores) = top_k_normalized(q.view(), x.view(), 10, Some(valid.view()), None).unwrap();
    for (qi, qrow) in q.rows().into_iter().enumerate() {
        let (want_idx, want_scores) = brute_force(qrow.as_slice().unwrap(), x.view(), 10, valid.as_slice());
        assert_eq!(idx.row(qi).to_vec(), want_idx, "query {qi}");
        assert_eq!(scores.row(qi).to_vec(), want_scores, "query {qi}");
    }
    valid[19_000] = true;
    let (argument, message) = invalid_argument(top_k_normalized(q.view(), x.view(), 10, Some(valid.view()), None));
    assert_eq!(argument, "X");
    assert!(message.contains("X[19000, 3]"), "{message}");
    valid[6_000] = true;
    let (_, message) = invalid_argument(top_k_normalized(q.view(), x.view(), 10, Some(valid.view()), None));
    assert!(message.contains("X[6000, 1]"), "{message}");
}

#[test]
fn overflowing_products_are_rescored_not_dropped() {
    // Not unit rows: dot products that overflow float32 have no usable
    // bound and must still be ranked exactly (one query and the product).
    let d = 384;
    let mut x = Array2::<f32>::zeros((300, d));
    for (i, mut row) in x.rows_mut().into_iter().enumerate() {
        for (j, v) in row.iter_mut().enumerate() {
            *v = if j < d / 2 { 2.0 } else { -2.0 };
        }
        row[d - 1] = -2.0 + 1e-3 * i as f32;
    }
    let q = Array2::<f32>::from_elem((3, d), 3e38);
    for m in [1, 3] {
        let qm = q.slice(ndarray::s![..m, ..]).to_owned();
        let (idx, scores) = top_k_normalized(qm.view(), x.view(), 5, None, None).unwrap();
        for (qi, qrow) in qm.rows().into_iter().enumerate() {
            let (want_idx, want_scores) = brute_force(qrow.as_slice().unwrap(), x.view(), 5, None);
            assert_eq!(idx.row(qi).to_vec(), want_idx, "m={m}, query {qi}");
            assert_eq!(scores.row(qi).to_vec(), want_scores, "m={m}, query {qi}");
        }
    }
}
