#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod numeric;

use ctxfold_core::segment::{segment, segmentation_objective, segmentation_objective_with_costs, SegmentOptions};
use ndarray::Array2;
use numeric::{invalid_argument, Lcg};

/// A similarity matrix with a planted segmentation (random lengths).
fn planted(n: usize, seed: u64) -> Array2<f64> {
    let mut rng = Lcg(seed);
    let mut topic = vec![0usize; n];
    let mut t = 0;
    for slot in topic.iter_mut() {
        if rng.next() < 0.25 {
            t += 1;
        }
        *slot = t;
    }
    let mut a = Array2::from_shape_fn((n, n), |(i, j)| if i == j { 1.0 } else { 0.0 });
    for i in 0..n {
        for j in 0..i {
            let base = if topic[i] == topic[j] { 0.35 } else { 0.05 };
            let v = (base + 0.2 * rng.next()) * if rng.next() < 0.3 { 0.0 } else { 1.0 };
            a[[i, j]] = v;
            a[[j, i]] = v;
        }
    }
    a
}

/// Every split of 0..n into `k` segments (as boundary lists).
fn all_splits(n: usize, k: usize) -> Vec<Vec<usize>> {
    fn rec(start: usize, n: usize, left: usize, cur: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
        if left == 0 {
            out.push(cur.clone());
            return;
        }
        for b in start..n {
            if n - b >= left {
                cur.push(b);
                rec(b + 1, n, left - 1, cur, out);
                cur.pop();
            }
        }
    }
    let mut out = Vec::new();
    rec(1, n, k - 1, &mut Vec::new(), &mut out);
    out
}

fn seg_tokens(b: &[usize], tokens: &[i64]) -> Vec<i64> {
    let n = tokens.len();
    let mut out = Vec::new();
    let mut start = 0;
    for &end in b.iter().chain(std::iter::once(&n)) {
        out.push(tokens[start..end].iter().sum());
        start = end;
    }
    out
}

#[test]
fn segment_is_optimal_against_brute_force() {
    let mut rng = Lcg(99);
    for case in 0..60u64 {
        let n = 2 + (case as usize % 9);
        let a = planted(n, case);
        let tokens: Vec<i64> = (0..n).map(|_| (rng.next() * 20.0) as i64).collect();
        for k in 1..=n {
            let got = segment(a.view(), &SegmentOptions { n_segments: Some(k), ..Default::default() }).unwrap();
            assert_eq!(got.len(), k - 1);
            let value = segmentation_objective(a.view(), &got).unwrap();
            let best = all_splits(n, k)
                .iter()
                .map(|b| segmentation_objective(a.view(), b).unwrap())
                .fold(f64::NEG_INFINITY, f64::max);
            assert!((value - best).abs() <= 1e-9 * (1.0 + best.abs()), "n={n} k={k}: {value} vs {best}");
        }
        // With token caps: the best split among those respecting them.
        let total: i64 = tokens.iter().sum();
        let cap = (total / 2).max(*tokens.iter().max().unwrap()) as u64;
        let floor = (total / (2 * n as i64)) as u64;
        for k in 1..=n {
            let opts = SegmentOptions {
                tokens: Some(&tokens),
                n_segments: Some(k),
                min_tokens: floor,
                max_tokens: Some(cap),
                ..Default::default()
            };
            let feasible: Vec<Vec<usize>> = all_splits(n, k)
                .into_iter()
                .filter(|b| seg_tokens(b, &tokens).iter().all(|&t| t as u64 >= floor && t as u64 <= cap))
                .collect();
            match segment(a.view(), &opts) {
                Ok(got) => {
                    assert!(!feasible.is_empty());
                    assert_eq!(got.len(), k - 1);
                    assert!(seg_tokens(&got, &tokens).iter().all(|&t| t as u64 >= floor && t as u64 <= cap));
                    let value = segmentation_objective(a.view(), &got).unwrap();
                    let best = feasible
                        .iter()
                        .map(|b| segmentation_objective(a.view(), b).unwrap())
                        .fold(f64::NEG_INFINITY, f64::max);
                    assert!((value - best).abs() <= 1e-9 * (1.0 + best.abs()));
                }
                Err(e) => {
                    assert!(feasible.is_empty(), "n={n} k={k} floor={floor} cap={cap}: {e}");
                }
            }
        }
    }
}

#[test]
fn segment_many_segments_uses_an_exact_method() {
    // K > 24 goes through the Lagrangian search (exact when it hits K, else
    // the K-layer DP): check it against brute force.
    for case in 0..6u64 {
        let n = 26 + case as usize % 3;
        let a = planted(n, 500 + case);
        for k in 25..=n {
            let got = segment(a.view(), &SegmentOptions { n_segments: Some(k), ..Default::default() }).unwrap();
            assert_eq!(got.len(), k - 1);
            let value = segmentation_objective(a.view(), &got).unwrap();
            let best = all_splits(n, k)
                .iter()
                .map(|b| segmentation_objective(a.view(), b).unwrap())
                .fold(f64::NEG_INFINITY, f64::max);
            assert!((value - best).abs() <= 1e-9 * (1.0 + best.abs()), "n={n} k={k}: {value} vs {best}");
        }
    }
}

#[test]
fn segment_with_boundary_costs_is_optimal_against_brute_force() {
    // Few and many segments (the K-layer DP and the Lagrangian search).
    let mut rng = Lcg(7);
    for case in 0..40u64 {
        let n = if case < 34 { 2 + (case as usize % 9) } else { 26 + case as usize % 2 };
        let a = planted(n, 900 + case);
        let costs: Vec<f64> = (0..n).map(|_| (rng.next() - 0.5) * 6.0).collect();
        let ks: Vec<usize> = if n > 24 { (25..=n).collect() } else { (1..=n).collect() };
        for k in ks {
            let opts = SegmentOptions { n_segments: Some(k), boundary_costs: Some(&costs), ..Default::default() };
            let got = segment(a.view(), &opts).unwrap();
            assert_eq!(got.len(), k - 1);
            let value = segmentation_objective_with_costs(a.view(), &got, Some(&costs)).unwrap();
            let best = all_splits(n, k)
                .iter()
                .map(|b| segmentation_objective_with_costs(a.view(), b, Some(&costs)).unwrap())
                .fold(f64::NEG_INFINITY, f64::max);
            assert!((value - best).abs() <= 1e-9 * (1.0 + best.abs()), "n={n} k={k}: {value} vs {best}");
        }
    }
}

#[test]
fn boundary_costs_move_a_boundary_and_zero_costs_change_nothing() {
    let a = planted(30, 3);
    let plain = segment(a.view(), &SegmentOptions { n_segments: Some(4), ..Default::default() }).unwrap();
    let zeros = vec![0.0; 30];
    let opts = SegmentOptions { n_segments: Some(4), boundary_costs: Some(&zeros), ..Default::default() };
    assert_eq!(segment(a.view(), &opts).unwrap(), plain);
    // A prohibitive cost where the first boundary was: it moves.
    let mut costs = vec![0.0; 30];
    costs[plain[0]] = 1e6;
    let opts = SegmentOptions { n_segments: Some(4), boundary_costs: Some(&costs), ..Default::default() };
    let moved = segment(a.view(), &opts).unwrap();
    assert!(!moved.contains(&plain[0]), "{moved:?}");
    // A cost on block 0 is ignored (no boundary can be there).
    let mut first = vec![0.0; 30];
    first[0] = 1e6;
    let opts = SegmentOptions { n_segments: Some(4), boundary_costs: Some(&first), ..Default::default() };
    assert_eq!(segment(a.view(), &opts).unwrap(), plain);
}

#[test]
fn boundary_costs_are_checked() {
    let a = planted(6, 1);
    let short = [0.0; 5];
    let e = segment(a.view(), &SegmentOptions { n_segments: Some(2), boundary_costs: Some(&short), ..Default::default() })
        .unwrap_err();
    assert_eq!(invalid_argument(e), "boundary_costs");
    let nan = [0.0, 1.0, f64::NAN, 0.0, 0.0, 0.0];
    let e = segment(a.view(), &SegmentOptions { n_segments: Some(2), boundary_costs: Some(&nan), ..Default::default() })
        .unwrap_err();
    assert_eq!(invalid_argument(e), "boundary_costs");
}

#[test]
fn segment_finds_planted_topics() {
    // Three topics of 10 blocks: strong within, weak across.
    let n = 30;
    let a =
        Array2::from_shape_fn((n, n), |(i, j)| if i / 10 == j / 10 { 0.6 } else { 0.1 } + 0.01 * ((i * j) % 7) as f64);
    let a = (&a + &a.t()) / 2.0;
    let got = segment(a.view(), &SegmentOptions { n_segments: Some(3), ..Default::default() }).unwrap();
    assert_eq!(got, vec![10, 20]);
    let a32 = a.mapv(|v| v as f32);
    let got = segment(a32.view(), &SegmentOptions { target_tokens: Some(10), ..Default::default() }).unwrap();
    assert_eq!(got, vec![10, 20]);
}

#[test]
fn segment_respects_caps_and_counts() {
    let n = 200;
    let a = planted(n, 3);
    let mut rng = Lcg(5);
    let tokens: Vec<i64> = (0..n).map(|_| 10 + (rng.next() * 90.0) as i64).collect();
    let total: i64 = tokens.iter().sum();
    for (k, cap) in [(5usize, None), (30, Some(2000u64)), (60, Some(600)), (14, Some(1500))] {
        let opts = SegmentOptions { tokens: Some(&tokens), n_segments: Some(k), max_tokens: cap, ..Default::default() };
        let got = segment(a.view(), &opts).unwrap();
        assert_eq!(got.len(), k - 1);
        assert!(got.windows(2).all(|w| w[0] < w[1]) && got.iter().all(|&b| b > 0 && b < n));
        if let Some(cap) = cap {
            assert!(seg_tokens(&got, &tokens).iter().all(|&t| t as u64 <= cap));
        }
    }
    // Only a cap: the fewest segments that respect it.
    let got =
        segment(a.view(), &SegmentOptions { tokens: Some(&tokens), max_tokens: Some(1000), ..Default::default() })
            .unwrap();
    let sizes = seg_tokens(&got, &tokens);
    assert!(sizes.iter().all(|&t| t <= 1000));
    assert!(sizes.len() as i64 <= 2 * total / 1000 + 1);
    // target_tokens: round(total / target) segments, with a floor.
    let got = segment(
        a.view(),
        &SegmentOptions { tokens: Some(&tokens), target_tokens: Some(1000), min_tokens: 300, ..Default::default() },
    )
    .unwrap();
    assert_eq!(got.len() + 1, ((total as f64) / 1000.0).round() as usize);
    assert!(seg_tokens(&got, &tokens).iter().all(|&t| t >= 300));
}

#[test]
fn segment_rejects_bad_input() {
    let a = planted(6, 1);
    let tokens = [5i64, 5, 50, 5, 5, 5];
    let err = |opts: SegmentOptions| invalid_argument(segment(a.view(), &opts).unwrap_err());
    assert_eq!(err(SegmentOptions::default()), "n_segments");
    assert_eq!(err(SegmentOptions { n_segments: Some(0), ..Default::default() }), "n_segments");
    assert_eq!(err(SegmentOptions { n_segments: Some(7), ..Default::default() }), "n_segments");
    assert_eq!(err(SegmentOptions { n_segments: Some(2), target_tokens: Some(3), ..Default::default() }), "n_segments");
    assert_eq!(err(SegmentOptions { target_tokens: Some(0), ..Default::default() }), "target_tokens");
    assert_eq!(err(SegmentOptions { tokens: Some(&[1, 2]), n_segments: Some(2), ..Default::default() }), "tokens");
    assert_eq!(
        err(SegmentOptions { tokens: Some(&[1, 2, -3, 4, 5, 6]), n_segments: Some(2), ..Default::default() }),
        "tokens"
    );
    // A block larger than the cap.
    let e = segment(a.view(), &SegmentOptions { tokens: Some(&tokens), max_tokens: Some(20), ..Default::default() })
        .unwrap_err();
    assert!(e.to_string().contains("block 2 alone has 50 tokens"), "{e}");
    // Too few segments for the cap, too many for the floor.
    let e = segment(
        a.view(),
        &SegmentOptions { tokens: Some(&tokens), n_segments: Some(1), max_tokens: Some(60), ..Default::default() },
    )
    .unwrap_err();
    assert!(e.to_string().contains("at least 2"), "{e}");
    let e = segment(
        a.view(),
        &SegmentOptions { tokens: Some(&tokens), n_segments: Some(5), min_tokens: 10, ..Default::default() },
    )
    .unwrap_err();
    assert!(e.to_string().contains("min_tokens"), "{e}");
    assert_eq!(
        err(SegmentOptions { tokens: Some(&tokens), n_segments: Some(2), min_tokens: 100, ..Default::default() }),
        "min_tokens"
    );
    assert_eq!(
        err(SegmentOptions { n_segments: Some(2), min_tokens: 5, max_tokens: Some(4), ..Default::default() }),
        "min_tokens"
    );
    let mut bad = a.clone();
    bad[[0, 3]] = f64::NAN;
    assert_eq!(
        invalid_argument(
            segment(bad.view(), &SegmentOptions { n_segments: Some(2), ..Default::default() }).unwrap_err()
        ),
        "similarity"
    );
    let mut asym = a.clone();
    asym[[0, 3]] += 0.5;
    assert_eq!(
        invalid_argument(
            segment(asym.view(), &SegmentOptions { n_segments: Some(2), ..Default::default() }).unwrap_err()
        ),
        "similarity"
    );
    let rect = Array2::<f64>::zeros((2, 3));
    assert_eq!(
        invalid_argument(
            segment(rect.view(), &SegmentOptions { n_segments: Some(1), ..Default::default() }).unwrap_err()
        ),
        "similarity"
    );
    assert_eq!(invalid_argument(segmentation_objective(a.view(), &[3, 3]).unwrap_err()), "boundaries");
    // One block: one segment, no boundaries.
    let one = Array2::from_elem((1, 1), 1.0f64);
    assert!(segment(one.view(), &SegmentOptions { n_segments: Some(1), ..Default::default() }).unwrap().is_empty());
}

/// The objective's evidence `w(a, b)`, transcribed from the documentation
/// (row z-scores averaged, clipped at 0, minus 0.5; sd shrunk by 0.3 x the
/// mean variance), and the score of every segment `[i, j)` (sum over its
/// ordered pairs / L^0.3), for a reference DP independent of the core's.
fn reference_scores(a: &Array2<f64>) -> Vec<Vec<f64>> {
    let n = a.nrows();
    let others = (n - 1).max(1) as f64;
    let mean: Vec<f64> = (0..n).map(|r| (0..n).filter(|&c| c != r).map(|c| a[[r, c]]).sum::<f64>() / others).collect();
    let var: Vec<f64> = (0..n)
        .map(|r| {
            ((0..n).filter(|&c| c != r).map(|c| a[[r, c]] * a[[r, c]]).sum::<f64>() / others - mean[r] * mean[r])
                .max(0.0)
        })
        .collect();
    let average = var.iter().sum::<f64>() / n as f64;
    let inv: Vec<f64> = var
        .iter()
        .map(|v| {
            let s = (v + 0.3 * average).sqrt();
            if s > 1e-12 {
                1.0 / s
            } else {
                0.0
            }
        })
        .collect();
    let w = |x: usize, y: usize| {
        let s = a[[x, y]];
        (0.5 * ((s - mean[x]) * inv[x] + (s - mean[y]) * inv[y])).max(0.0) - 0.5
    };
    let mut score = vec![vec![f64::NEG_INFINITY; n + 1]; n + 1];
    for (i, row) in score.iter_mut().enumerate().take(n) {
        let mut within = 0.0;
        for (j, slot) in row.iter_mut().enumerate().skip(i + 1) {
            within += 2.0 * (i..j - 1).map(|x| w(x, j - 1)).sum::<f64>();
            *slot = within / ((j - i) as f64).powf(0.3);
        }
    }
    score
}

/// The best objective over splits into k segments whose token sums lie in
/// [floor, cap], by the textbook O(k n^2) DP; None if there is none.
fn reference_best(score: &[Vec<f64>], k: usize, tokens: &[i64], floor: i64, cap: i64) -> Option<f64> {
    let n = tokens.len();
    let mut prefix = vec![0i64; n + 1];
    for i in 0..n {
        prefix[i + 1] = prefix[i] + tokens[i];
    }
    let mut best = vec![vec![f64::NEG_INFINITY; n + 1]; k + 1];
    best[0][0] = 0.0;
    for c in 1..=k {
        for j in 1..=n {
            for i in 0..j {
                let t = prefix[j] - prefix[i];
                if t >= floor && t <= cap && best[c - 1][i] > f64::NEG_INFINITY {
                    best[c][j] = best[c][j].max(best[c - 1][i] + score[i][j]);
                }
            }
        }
    }
    (best[k][n] > f64::NEG_INFINITY).then_some(best[k][n])
}

#[test]
fn segment_matches_a_reference_dp_on_larger_inputs() {
    // Sizes where the batched score stream, the cached band of the
    // Lagrangian search (k > 24 with 4n/k < n) and its full check all run.
    for (case, n) in [(0u64, 97usize), (1, 150), (2, 203)] {
        let a = planted(n, 900 + case);
        let score = reference_scores(&a);
        let mut rng = Lcg(case);
        let tokens: Vec<i64> = (0..n).map(|_| 1 + (rng.next() * 40.0) as i64).collect();
        let total: i64 = tokens.iter().sum();
        for k in [2usize, 7, 24, 25, 31, 40, 60] {
            let ones = vec![1i64; n];
            let best = reference_best(&score, k, &ones, 0, i64::MAX).unwrap();
            let got = segment(a.view(), &SegmentOptions { n_segments: Some(k), ..Default::default() }).unwrap();
            assert_eq!(got.len(), k - 1);
            let value = segmentation_objective(a.view(), &got).unwrap();
            assert!((value - best).abs() <= 1e-9 * (1.0 + best.abs()), "n={n} k={k}: {value} vs {best}");
            // With a cap and a floor.
            let cap = 3 * total / k as i64 + 40;
            let floor = total / (3 * k as i64);
            let opts = SegmentOptions {
                tokens: Some(&tokens),
                n_segments: Some(k),
                min_tokens: floor as u64,
                max_tokens: Some(cap as u64),
                ..Default::default()
            };
            match (segment(a.view(), &opts), reference_best(&score, k, &tokens, floor, cap)) {
                (Ok(got), Some(best)) => {
                    assert!(seg_tokens(&got, &tokens).iter().all(|&t| t >= floor && t <= cap));
                    let value = segmentation_objective(a.view(), &got).unwrap();
                    assert!((value - best).abs() <= 1e-9 * (1.0 + best.abs()), "capped n={n} k={k}");
                }
                (Err(_), None) => {}
                (got, best) => panic!("n={n} k={k}: {got:?} vs {best:?}"),
            }
        }
    }
}

#[test]
fn large_input_errors_name_the_first_problem_in_row_order() {
    // 700 rows: the fast (tiled, parallel) scan; the first problem in row
    // order is reported, whichever step finds what.
    let base = planted(700, 77);
    let message = |a: &Array2<f64>| {
        segment(a.view(), &SegmentOptions { n_segments: Some(3), ..Default::default() }).unwrap_err().to_string()
    };
    // Asymmetry at row 100 (column 650, another step's mirror) before a NaN at row 600.
    let mut a = base.clone();
    a[[600, 2]] = f64::NAN;
    a[[2, 600]] = f64::NAN;
    a[[100, 650]] += 0.5;
    // The NaN is in row 2 as well (column 600): row 2 comes first.
    let m = message(&a);
    assert!(m.contains("finite") && m.contains("[2, 600]"), "{m}");
    // Without it: the asymmetry at row 100 before the NaN of row 600.
    a[[2, 600]] = a[[600, 3]];
    a[[600, 2]] = a[[600, 3]];
    a[[600, 7]] = f64::NAN;
    a[[7, 600]] = f64::NAN;
    let m = message(&a);
    assert!(m.contains("finite") && m.contains("[7, 600]"), "{m}");
    a[[600, 7]] = 0.1;
    a[[7, 600]] = 0.1;
    a[[600, 600]] = f64::NAN;
    let m = message(&a);
    assert!(m.contains("symmetric") && m.contains("similarity[100, 650]"), "{m}");
    // Only the asymmetry: reported with its position.
    let mut a = base.clone();
    a[[100, 650]] += 0.5;
    let m = message(&a);
    assert!(m.contains("symmetric") && m.contains("similarity[100, 650]"), "{m}");
    // Asymmetry inside one step (rows 64..128) and a later NaN.
    let mut a = base.clone();
    a[[70, 71]] -= 0.25;
    a[[500, 500]] = f64::INFINITY;
    let m = message(&a);
    assert!(m.contains("symmetric") && m.contains("similarity[70, 71]"), "{m}");
    // A NaN first, an asymmetry in a later step.
    let mut a = base.clone();
    a[[50, 50]] = f64::NAN;
    a[[400, 690]] += 0.5;
    let m = message(&a);
    assert!(m.contains("finite") && m.contains("[50, 50]"), "{m}");
    // The same matrices as float32.
    let mut a = base.mapv(|v| v as f32);
    a[[300, 10]] += 0.5;
    let e = segment(a.view(), &SegmentOptions { n_segments: Some(3), ..Default::default() }).unwrap_err().to_string();
    assert!(e.contains("similarity[10, 300]"), "{e}");
}
