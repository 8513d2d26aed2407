#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod numeric;

use ctxfold_core::cluster::{spectral_clustering, AssignLabels, Mt19937};
use ndarray::Array2;
use numeric::{invalid_argument, Lcg};

/// Cosine similarities of noisy points around `k` random centres; labels.
fn clustered(n: usize, k: usize, dim: usize, noise: f64, seed: u64) -> (Array2<f64>, Vec<usize>) {
    let mut rng = Lcg(seed);
    let centres: Vec<Vec<f64>> = (0..k).map(|_| (0..dim).map(|_| rng.normal()).collect()).collect();
    let labels: Vec<usize> = (0..n).map(|i| i % k).collect();
    let points: Vec<Vec<f64>> = labels
        .iter()
        .map(|&l| {
            let p: Vec<f64> = centres[l].iter().map(|c| c + noise * rng.normal()).collect();
            let norm = p.iter().map(|x| x * x).sum::<f64>().sqrt();
            p.into_iter().map(|x| x / norm).collect()
        })
        .collect();
    let a = Array2::from_shape_fn((n, n), |(i, j)| {
        points[i].iter().zip(&points[j]).map(|(x, y)| x * y).sum::<f64>().max(0.0)
    });
    (a, labels)
}

fn same_partition(a: &[i64], b: &[usize]) -> bool {
    (0..a.len()).all(|i| (0..a.len()).all(|j| (a[i] == a[j]) == (b[i] == b[j])))
}

#[test]
fn mt19937_matches_numpy_random_state() {
    // numpy: rs = RandomState(seed); u = rs.uniform(-1, 1, n); rs.randint(n)
    for (seed, n, first, last, pick) in [
        (0u32, 200usize, 0.0976270078546495, -0.13116674888375845, 198u64),
        (0, 2000, 0.0976270078546495, 0.003546261399890449, 1211),
        (42, 7, -0.250919762305275, -0.8838327756636011, 4),
        (123456789, 1000, 0.06566604957951805, -0.9219996461561926, 626),
        (4294967295, 33, -0.8047359420119724, 0.5746954315730615, 30),
    ] {
        let mut rng = Mt19937::new(seed);
        let u0 = -1.0 + 2.0 * rng.next_f64();
        assert_eq!(u0, first);
        rng.skip_uniform(n - 2);
        let ul = -1.0 + 2.0 * rng.next_f64();
        assert_eq!(ul, last);
        assert_eq!(rng.randint(n as u64), pick);
    }
}

#[test]
fn spectral_recovers_separable_clusters() {
    for (n, k) in [(30, 3), (120, 4), (300, 6), (600, 5)] {
        let (a, truth) = clustered(n, k, 32, 0.3, n as u64);
        for assign in [AssignLabels::Discretize, AssignLabels::ClusterQr] {
            let labels = spectral_clustering(a.view(), k, assign, 0).unwrap();
            assert_eq!(labels.len(), n);
            assert!(labels.iter().all(|&l| (0..k as i64).contains(&l)));
            assert!(same_partition(&labels, &truth), "n={n} k={k} {assign:?}");
        }
    }
}

#[test]
fn spectral_float32_and_large_inputs() {
    let (a, truth) = clustered(1600, 5, 32, 0.3, 7);
    let labels = spectral_clustering(a.view(), 5, AssignLabels::Discretize, 3).unwrap();
    assert!(same_partition(&labels, &truth));
    let a32 = a.mapv(|v| v as f32);
    let labels = spectral_clustering(a32.view(), 5, AssignLabels::ClusterQr, 0).unwrap();
    assert!(same_partition(&labels, &truth));
}

#[test]
fn spectral_disconnected_components_and_trivial_cases() {
    // Three disconnected blocks: eigenvalue 1 three times.
    let n = 90;
    let a = Array2::from_shape_fn((n, n), |(i, j)| if i / 30 == j / 30 { 1.0 } else { 0.0 });
    let truth: Vec<usize> = (0..n).map(|i| i / 30).collect();
    for assign in [AssignLabels::Discretize, AssignLabels::ClusterQr] {
        let labels = spectral_clustering(a.view(), 3, assign, 0).unwrap();
        assert!(same_partition(&labels, &truth), "{assign:?}");
    }
    assert_eq!(spectral_clustering(a.view(), 1, AssignLabels::Discretize, 0).unwrap(), vec![0; n]);
    let one = Array2::from_elem((1, 1), 1.0f64);
    assert_eq!(spectral_clustering(one.view(), 1, AssignLabels::Discretize, 0).unwrap(), vec![0]);
    let (small, _) = clustered(6, 2, 4, 0.1, 1);
    let labels = spectral_clustering(small.view(), 6, AssignLabels::ClusterQr, 0).unwrap();
    assert_eq!(labels.len(), 6);
}

#[test]
fn spectral_rejects_bad_input() {
    let ok = Array2::from_elem((4, 4), 0.5f64);
    let err = |a: &Array2<f64>, k: usize| {
        invalid_argument(spectral_clustering(a.view(), k, AssignLabels::Discretize, 0).unwrap_err())
    };
    assert_eq!(err(&Array2::zeros((3, 4)), 2), "affinity");
    assert_eq!(err(&Array2::zeros((0, 0)), 1), "affinity");
    let mut nan = ok.clone();
    nan[[1, 2]] = f64::NAN;
    assert_eq!(err(&nan, 2), "affinity");
    let mut inf = ok.clone();
    inf[[3, 3]] = f64::INFINITY;
    assert_eq!(err(&inf, 2), "affinity");
    let mut asym = ok.clone();
    asym[[0, 1]] = 0.9;
    assert_eq!(err(&asym, 2), "affinity");
    let mut neg = ok.clone();
    neg[[0, 1]] = -0.1;
    neg[[1, 0]] = -0.1;
    assert_eq!(err(&neg, 2), "affinity");
    assert_eq!(err(&ok, 0), "n_clusters");
    assert_eq!(err(&ok, 5), "n_clusters");
    assert_eq!(invalid_argument(AssignLabels::from_name("kmeans").unwrap_err()), "assign_labels");
    let message = spectral_clustering(asym.view(), 2, AssignLabels::Discretize, 0).unwrap_err().to_string();
    assert!(message.contains("symmetric") && message.contains("(A + A.T) / 2"), "{message}");
}

/// Every asymmetric pair is found wherever it sits relative to the scan's
/// vector tiles (4 x 4) and steps (64 rows): inside a tile, next to the
/// diagonal, in the fringe rows and columns a tile leaves, in the last row;
/// in float64 and float32, sequential and parallel (from 1,024 rows) sizes.
#[test]
fn spectral_finds_every_asymmetric_pair() {
    for n in [5usize, 9, 66, 131, 257, 262, 1030] {
        let (base, _) = clustered(n, 2, 8, 0.3, n as u64);
        let last = n - 1;
        let pairs = [(0, 1), (1, 2), (2, 7 % n), (3, last), (last - 1, last), (n / 2, n / 2 + 1), (64 % n, last), (0, last)];
        for (i, j) in pairs.into_iter().filter(|&(i, j)| i < j) {
            for lower in [false, true] {
                let mut a = base.clone();
                let (r, c) = if lower { (j, i) } else { (i, j) };
                a[[r, c]] += 0.25;
                let expected = format!("affinity[{i}, {j}]");
                let m = spectral_clustering(a.view(), 2, AssignLabels::Discretize, 0).unwrap_err().to_string();
                assert!(m.contains("symmetric") && m.contains(&expected), "n={n} ({r}, {c}): {m}");
                let a32 = a.mapv(|v| v as f32);
                let m = spectral_clustering(a32.view(), 2, AssignLabels::Discretize, 0).unwrap_err().to_string();
                assert!(m.contains("symmetric") && m.contains(&expected), "float32 n={n} ({r}, {c}): {m}");
            }
        }
        assert!(spectral_clustering(base.view(), 2, AssignLabels::Discretize, 0).is_ok(), "n={n}");
    }
}
