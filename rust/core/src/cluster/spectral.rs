//! scikit-learn's `SpectralClustering(affinity="precomputed")`, step by step:
//! `_spectral_embedding(drop_first=False)` (normalised Laplacian of the
//! affinity with its diagonal ignored, the k smallest eigenvectors scaled by
//! D^-1/2, `_deterministic_vector_sign_flip`), then `discretize` or
//! `cluster_qr` from `sklearn/cluster/_spectral.py`, including the random
//! stream `random_state=seed` would give, so labels agree with it.

use faer::Mat;
use ndarray::ArrayView2;

use super::eigen::{top_eigenvectors, Operator};
use super::mt19937::Mt19937;
use super::product::PARALLEL_FROM;
use crate::linalg::{scan_square, square_size, sum_lanes, Real};
use crate::pool::on_pool_if;
use crate::{Error, Result};

/// How the spectral embedding becomes labels (scikit-learn's `assign_labels`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AssignLabels {
    /// Yu & Shi's multiclass discretisation (rotation search), the default.
    Discretize,
    /// Damle, Minden & Ying's pivoted-QR assignment: deterministic, no
    /// iterations.
    ClusterQr,
}

impl AssignLabels {
    pub fn from_name(name: &str) -> Result<Self> {
        match name {
            "discretize" => Ok(Self::Discretize),
            "cluster_qr" => Ok(Self::ClusterQr),
            other => Err(Error::invalid(
                "assign_labels",
                format!("must be \"discretize\" or \"cluster_qr\", got {other:?} (\"kmeans\" is not supported)"),
            )),
        }
    }
}

/// Eigenvector residual tolerance (`||M u - theta u||`, with `||M|| <= 1`):
/// an eigenvector is then off by about tol / gap, far below what changes a
/// label, and a tighter one costs more products with the matrix.
const TOL: f64 = 1e-4;
/// Cluster labels (0..n_clusters) of the n items of a square, symmetric,
/// finite, non-negative `affinity` matrix, as scikit-learn's
/// `SpectralClustering(n_clusters, affinity="precomputed",
/// assign_labels=..., random_state=seed).fit_predict(affinity)`.
///
/// The diagonal is ignored (as scikit-learn's Laplacian does). Items with no
/// affinity to any other item are isolated; like scikit-learn, their labels
/// carry no meaning.
pub fn spectral_clustering<T: Real>(
    affinity: ArrayView2<'_, T>,
    n_clusters: usize,
    assign: AssignLabels,
    seed: u32,
) -> Result<Vec<i64>> {
    // The products run in the input's own precision, reading the caller's
    // array in place: a float32 copy of float64 input would halve the bytes
    // each product reads, but writing it (and faulting in its pages) costs
    // more than the few products save. From PARALLEL_FROM rows the
    // scan and the products are parallel passes (see `on_pool_if`).
    on_pool_if(affinity.nrows() >= PARALLEL_FROM, || cluster(affinity, n_clusters, assign, seed, TOL))
}

fn cluster<T: Real>(
    affinity: ArrayView2<'_, T>,
    n_clusters: usize,
    assign: AssignLabels,
    seed: u32,
    tol: f64,
) -> Result<Vec<i64>> {
    let rows = square_size(&affinity, "affinity")?;
    // The operator reads the caller's array in place when it is contiguous;
    // otherwise a row-major copy made during the scan.
    let in_place = affinity.to_slice();
    let mut copy = if in_place.is_some() { Vec::new() } else { vec![T::from_f64(0.0); rows * rows] };
    let mut degree = vec![0.0f64; rows];
    let mut copy_rows = copy.chunks_mut(rows.max(1));
    let mut slots: Vec<(Option<&mut [T]>, &mut f64)> = degree.iter_mut().map(|d| (copy_rows.next(), d)).collect();
    let n = scan_square(&affinity, "affinity", &mut slots, |i, row, (out, degree)| {
        // A branch-free fold: it vectorises in this closure, which the
        // scan's AVX2 code does not inline (a min reduction would not).
        if row.iter().fold(false, |any, &v| any | (v < 0.0)) {
            let j = row.iter().position(|&v| v < 0.0).unwrap_or(0);
            return Err(Error::invalid(
                "affinity",
                format!(
                    "entry [{i}, {j}] = {} is negative; affinities must be >= 0 (e.g. np.clip(S, 0, None))",
                    row[j]
                ),
            ));
        }
        if let Some(out) = out {
            for (o, &v) in out.iter_mut().zip(row) {
                *o = T::from_f64(v);
            }
        }
        // The diagonal is ignored (csgraph_laplacian zeroes it).
        **degree = sum_lanes(row, |x| x) - row[i];
        Ok(())
    })?;
    drop(slots);
    if n_clusters == 0 || n_clusters > n {
        return Err(Error::invalid(
            "n_clusters",
            format!("must be between 1 and {n} (the number of rows of affinity), got {n_clusters}"),
        ));
    }
    if n_clusters == 1 {
        return Ok(vec![0; n]);
    }
    // csgraph_laplacian(normed=True): isolated nodes get 1 instead of sqrt(0).
    let sqrt_degree: Vec<f64> = degree.iter().map(|d| d.sqrt()).collect();
    let scale: Vec<f64> = sqrt_degree.iter().map(|&s| if s > 0.0 { s } else { 1.0 }).collect();
    let dinv: Vec<f64> = scale.iter().map(|s| 1.0 / s).collect();
    let a = in_place.unwrap_or(&copy);
    let op = Operator { a, n, dinv: &dinv };
    let vectors = top_eigenvectors(&op, n_clusters, &sqrt_degree, tol)?;
    drop(copy);

    let k = n_clusters;
    // embedding = eigenvectors / dd, column-major: maps[c * n + i] is item
    // i's coordinate c (the loops below then run down contiguous columns).
    let mut maps: Vec<f64> =
        (0..k).flat_map(|c| (0..n).map(move |i| (i, c))).map(|(i, c)| vectors[(i, c)] / scale[i]).collect();
    sign_flip(&mut maps, n);
    // The ARPACK start vector is drawn before discretisation's row pick.
    let mut rng = Mt19937::new(seed);
    rng.skip_uniform(n);
    let labels = match assign {
        AssignLabels::Discretize => discretize(maps, n, k, &mut rng)?,
        AssignLabels::ClusterQr => cluster_qr(&maps, n, k)?,
    };
    Ok(labels.into_iter().map(|l| l as i64).collect())
}

/// `_deterministic_vector_sign_flip` on the column-major embedding: each
/// eigenvector's largest-magnitude entry (the first, on ties) becomes
/// positive.
fn sign_flip(maps: &mut [f64], n: usize) {
    for column in maps.chunks_exact_mut(n) {
        let mut best = 0;
        for i in 1..n {
            if column[i].abs() > column[best].abs() {
                best = i;
            }
        }
        if column[best] < 0.0 {
            column.iter_mut().for_each(|x| *x = -*x);
        }
    }
}

fn argmax(row: &[f64]) -> usize {
    let mut best = 0;
    for (c, &v) in row.iter().enumerate() {
        if v > row[best] {
            best = c;
        }
    }
    best
}

/// `sum(x[r] * y[r])`, added in index order.
#[inline(always)]
fn dot_in_order(x: &[f64], y: &[f64]) -> f64 {
    x.iter().zip(y).map(|(a, b)| a * b).sum()
}

fn svd_failed() -> Error {
    Error::invalid("affinity", "the SVD in the label assignment did not converge; check the matrix for extreme values")
}

/// `sklearn.cluster._spectral.discretize` (Yu & Shi 2003), on the
/// column-major embedding `v`: every loop runs down a column of n items in
/// vector lanes (row by row, the short k-length loops cost more than their
/// arithmetic). Each sum still adds its terms in the reference's order.
fn discretize(v: Vec<f64>, n: usize, k: usize, rng: &mut Mt19937) -> Result<Vec<usize>> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the running CPU has AVX2, all `discretize_avx2` is
            // compiled for.
            return unsafe { discretize_avx2(v, n, k, rng) };
        }
    }
    discretize_columns(v, n, k, rng)
}

/// 4-lane vectors for the column loops (the same operations in the same
/// order: the results do not change).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn discretize_avx2(v: Vec<f64>, n: usize, k: usize, rng: &mut Mt19937) -> Result<Vec<usize>> {
    discretize_columns(v, n, k, rng)
}

#[inline(always)]
fn discretize_columns(mut v: Vec<f64>, n: usize, k: usize, rng: &mut Mt19937) -> Result<Vec<usize>> {
    let norm_ones = (n as f64).sqrt();
    for column in v.chunks_exact_mut(n) {
        let length = column.iter().map(|x| x * x).sum::<f64>().sqrt();
        let flip = if column[0] > 0.0 { -1.0 } else { 1.0 };
        let factor = if length > 0.0 { norm_ones / length } else { 0.0 };
        let factor = if column[0] != 0.0 { factor * flip } else { factor };
        column.iter_mut().for_each(|x| *x *= factor);
    }
    // Each row scaled to unit length.
    let mut lengths = vec![0.0f64; n];
    for column in v.chunks_exact(n) {
        lengths.iter_mut().zip(column).for_each(|(l, x)| *l += x * x);
    }
    lengths.iter_mut().for_each(|l| *l = l.sqrt());
    for column in v.chunks_exact_mut(n) {
        column.iter_mut().zip(&lengths).filter(|(_, &l)| l > 0.0).for_each(|(x, &l)| *x /= l);
    }
    // Initial rotation (k x k, column c = rotation[c * k..(c + 1) * k]): a
    // random row, then rows as orthogonal as possible to those picked.
    let mut rotation = vec![0.0f64; k * k];
    let first = rng.randint(n as u64) as usize;
    let row_of = |i: usize, out: &mut [f64]| out.iter_mut().enumerate().for_each(|(r, o)| *o = v[r * n + i]);
    row_of(first, &mut rotation[..k]);
    let mut c_acc = vec![0.0f64; n];
    let mut projection = vec![0.0f64; n];
    for j in 1..k {
        project(&v, &rotation[(j - 1) * k..j * k], &mut projection);
        c_acc.iter_mut().zip(&projection).for_each(|(a, p)| *a += p.abs());
        let mut pick = 0;
        for i in 1..n {
            if c_acc[i] < c_acc[pick] {
                pick = i;
            }
        }
        row_of(pick, &mut rotation[j * k..(j + 1) * k]);
    }
    let mut labels = vec![0usize; n];
    let mut best = vec![0.0f64; n];
    let mut sums = vec![0.0f64; k * k];
    let mut last_objective = 0.0f64;
    for iteration in 1.. {
        // labels = argmax of each row of v @ rotation (the first on ties).
        for (c, column) in rotation.chunks_exact(k).enumerate() {
            project(&v, column, &mut projection);
            if c == 0 {
                best.copy_from_slice(&projection);
                labels.fill(0);
                continue;
            }
            for ((label, top), &p) in labels.iter_mut().zip(best.iter_mut()).zip(&projection) {
                if p > *top {
                    *top = p;
                    *label = c;
                }
            }
        }
        // t_svd = V_discrete^T V: row l sums the embedding rows labelled l.
        sums.fill(0.0);
        for (c, column) in v.chunks_exact(n).enumerate() {
            for (&label, x) in labels.iter().zip(column) {
                sums[label * k + c] += x;
            }
        }
        let t_svd = Mat::<f64>::from_fn(k, k, |l, c| sums[l * k + c]);
        let svd = t_svd.svd().map_err(|_| svd_failed())?;
        let singular_sum: f64 = (0..k).map(|i| svd.S().column_vector()[i]).sum();
        let ncut = 2.0 * (n as f64 - singular_sum);
        if (ncut - last_objective).abs() < f64::EPSILON || iteration > 20 {
            break;
        }
        last_objective = ncut;
        // rotation = Vh^T U^T = V U^T
        let (u, vv) = (svd.U(), svd.V());
        for c in 0..k {
            for r in 0..k {
                rotation[c * k + r] = (0..k).map(|t| vv[(r, t)] * u[(c, t)]).sum();
            }
        }
    }
    Ok(labels)
}

/// `out[i] = sum_r v[r * n + i] * weights[r]` for the column-major n x k
/// `v`: in vector lanes over i, each sum over r in order.
#[inline(always)]
fn project(v: &[f64], weights: &[f64], out: &mut [f64]) {
    out.fill(0.0);
    for (column, &w) in v.chunks_exact(out.len()).zip(weights) {
        out.iter_mut().zip(column).for_each(|(o, x)| *o += x * w);
    }
}

/// `sklearn.cluster._spectral.cluster_qr` (Damle, Minden & Ying 2019), on
/// the column-major embedding `maps`.
fn cluster_qr(maps: &[f64], n: usize, k: usize) -> Result<Vec<usize>> {
    // Row-major here (each step works on whole rows): v[i * k + c].
    let v: Vec<f64> = (0..n).flat_map(|i| (0..k).map(move |c| maps[c * n + i])).collect();
    // Column-pivoted QR of v^T: pick the k rows of v with the largest norm
    // remaining after projecting out the rows already picked.
    let mut residual = v.clone();
    let mut norms: Vec<f64> = residual.chunks_exact(k).map(|r| r.iter().map(|x| x * x).sum()).collect();
    let mut picked = Vec::with_capacity(k);
    for _ in 0..k {
        let mut p = 0;
        for i in 1..n {
            if norms[i] > norms[p] {
                p = i;
            }
        }
        picked.push(p);
        let length = norms[p].sqrt();
        if length == 0.0 {
            continue;
        }
        let q: Vec<f64> = residual[p * k..(p + 1) * k].iter().map(|x| x / length).collect();
        for i in 0..n {
            let row = &mut residual[i * k..(i + 1) * k];
            let r: f64 = row.iter().zip(&q).map(|(a, b)| a * b).sum();
            row.iter_mut().zip(&q).for_each(|(a, b)| *a -= r * b);
            norms[i] = row.iter().map(|x| x * x).sum();
        }
        norms[p] = -1.0;
    }
    // Polar factor U V^T of B = v[picked]^T (k x k).
    let b = Mat::<f64>::from_fn(k, k, |r, c| v[picked[c] * k + r]);
    let svd = b.svd().map_err(|_| svd_failed())?;
    let (u, vv) = (svd.U(), svd.V());
    // Column c of the polar factor is polar[c * k..(c + 1) * k].
    let polar: Vec<f64> =
        (0..k).flat_map(|c| (0..k).map(move |r| (r, c))).map(|(r, c)| (0..k).map(|t| u[(r, t)] * vv[(c, t)]).sum()).collect();
    let mut labels = vec![0usize; n];
    let mut projected = vec![0.0f64; k];
    for (row, label) in v.chunks_exact(k).zip(labels.iter_mut()) {
        for (p, column) in projected.iter_mut().zip(polar.chunks_exact(k)) {
            *p = dot_in_order(row, column).abs();
        }
        *label = argmax(&projected);
    }
    Ok(labels)
}
