//! All eigenpairs of a small dense symmetric matrix (the Rayleigh-Ritz step
//! of the eigenvector iteration): Householder reduction to tridiagonal form,
//! then the implicit QL algorithm with Wilkinson-type shifts (EISPACK's tred2
//! and tql2, as JAMA writes them).
//!
//! Why not faer's `self_adjoint_eigen`: its blocked, dispatching code is
//! built for large matrices and is slower on small ones. faer stays the
//! reference this is tested against, and takes over from FAER_FROM.

use crate::linalg::dot;

/// Sweeps of the QL iteration allowed per eigenvalue before giving up
/// (EISPACK allows 30).
const MAX_SWEEPS: usize = 60;

/// Eigenvalues in increasing order, and the eigenvectors: `vector(c)` is
/// the unit eigenvector of `values[c]`.
pub(crate) struct SmallEigen {
    // The iteration needs only the order, which `vector` follows; the
    // values are checked by the tests.
    #[cfg_attr(not(test), allow(dead_code))]
    pub values: Vec<f64>,
    /// Column c is eigenvector c (m x m, column-major).
    vectors: Vec<f64>,
    m: usize,
}

impl SmallEigen {
    pub fn vector(&self, c: usize) -> &[f64] {
        &self.vectors[c * self.m..(c + 1) * self.m]
    }
}

/// The eigendecomposition of the symmetric m x m matrix with entries
/// `entry(i, j)` (only `i >= j` is read); `None` if the QL iteration does
/// not converge (only non-finite input does that in practice).
pub(crate) fn symmetric_eigen(m: usize, entry: impl Fn(usize, usize) -> f64) -> Option<SmallEigen> {
    if m == 0 {
        return Some(SmallEigen { values: Vec::new(), vectors: Vec::new(), m });
    }
    if m >= FAER_FROM {
        return faer_eigen(m, entry);
    }
    // Column-major (the matrix is symmetric, so it is also row-major):
    // every inner loop of both stages then runs down a contiguous column.
    let v: Vec<f64> = (0..m * m).map(|p| (p / m, p % m)).map(|(i, j)| entry(i.max(j), i.min(j))).collect();
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the running CPU has AVX2, all `decompose_avx2` is
            // compiled for.
            return unsafe { decompose_avx2(v, m) };
        }
    }
    decompose(v, m)
}

/// From this size faer's blocked decomposition is the faster. Only many
/// clusters make the Rayleigh-Ritz matrix this large.
const FAER_FROM: usize = 224;

fn faer_eigen(m: usize, entry: impl Fn(usize, usize) -> f64) -> Option<SmallEigen> {
    let a = faer::Mat::<f64>::from_fn(m, m, |i, j| entry(i.max(j), i.min(j)));
    let evd = a.self_adjoint_eigen(faer::Side::Lower).ok()?;
    let (u, s) = (evd.U(), evd.S());
    let values: Vec<f64> = (0..m).map(|c| s[c]).collect();
    let vectors = (0..m * m).map(|p| u[(p % m, p / m)]).collect();
    values.iter().all(|x| x.is_finite()).then_some(SmallEigen { values, vectors, m })
}

/// The column loops in 4-lane vectors.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn decompose_avx2(v: Vec<f64>, m: usize) -> Option<SmallEigen> {
    decompose(v, m)
}

#[inline(always)]
fn decompose(mut v: Vec<f64>, m: usize) -> Option<SmallEigen> {
    let mut d = vec![0.0f64; m];
    let mut e = vec![0.0f64; m];
    tridiagonalize(&mut v, &mut d, &mut e, m);
    diagonalize(&mut v, &mut d, &mut e, m)?;
    Some(sorted(v, d, m))
}

/// tred2: `v` (column-major, symmetric) becomes the orthogonal Q of the
/// reduction `A = Q T Q^T`, with the diagonal of T in `d` and its
/// subdiagonal in `e[1..]`. Written with `v[(k, j)]` as `v[j * n + k]`.
#[inline(always)]
fn tridiagonalize(v: &mut [f64], d: &mut [f64], e: &mut [f64], n: usize) {
    let at = |k: usize, j: usize| j * n + k;
    for (j, x) in d.iter_mut().enumerate() {
        *x = v[at(n - 1, j)];
    }
    for i in (1..n).rev() {
        // Scaled against under- and overflow.
        let scale: f64 = d[..i].iter().map(|x| x.abs()).sum();
        let mut h = 0.0;
        if scale == 0.0 {
            e[i] = d[i - 1];
            for j in 0..i {
                d[j] = v[at(i - 1, j)];
                v[at(i, j)] = 0.0;
                v[at(j, i)] = 0.0;
            }
        } else {
            // The Householder vector.
            for x in &mut d[..i] {
                *x /= scale;
                h += *x * *x;
            }
            let f = d[i - 1];
            let g = if f > 0.0 { -h.sqrt() } else { h.sqrt() };
            e[i] = scale * g;
            h -= f * g;
            d[i - 1] = f - g;
            e[..i].fill(0.0);
            // The similarity transformation of the remaining columns: the
            // lower triangle of column j times d, and column j's
            // contribution to the rows below it.
            v[at(0, i)..at(i, i)].copy_from_slice(&d[..i]);
            for j in 0..i {
                let column = &v[at(j, j)..at(i, j)];
                let f = d[j];
                e[j] += dot(column, &d[j..i]);
                for (x, &c) in e[j + 1..i].iter_mut().zip(&column[1..]) {
                    *x += c * f;
                }
            }
            let mut f = 0.0;
            for j in 0..i {
                e[j] /= h;
                f += e[j] * d[j];
            }
            let hh = f / (h + h);
            for j in 0..i {
                e[j] -= hh * d[j];
            }
            for j in 0..i {
                let (f, g) = (d[j], e[j]);
                for ((x, &ek), &dk) in v[at(j, j)..at(i, j)].iter_mut().zip(&e[j..i]).zip(&d[j..i]) {
                    *x -= f * ek + g * dk;
                }
                d[j] = v[at(i - 1, j)];
                v[at(i, j)] = 0.0;
            }
        }
        d[i] = h;
    }
    // Accumulate the transformations.
    for i in 0..n - 1 {
        v[at(n - 1, i)] = v[at(i, i)];
        v[at(i, i)] = 1.0;
        let h = d[i + 1];
        let (head, next) = v.split_at_mut(at(0, i + 1));
        let next = &mut next[..=i];
        if h != 0.0 {
            for (x, &q) in d[..=i].iter_mut().zip(next.iter()) {
                *x = q / h;
            }
            for j in 0..=i {
                let column = &mut head[at(0, j)..=at(i, j)];
                let g = dot(next, column);
                for (x, &dk) in column.iter_mut().zip(&d[..=i]) {
                    *x -= g * dk;
                }
            }
        }
        next.fill(0.0);
    }
    for j in 0..n {
        d[j] = v[at(n - 1, j)];
        v[at(n - 1, j)] = 0.0;
    }
    v[at(n - 1, n - 1)] = 1.0;
    e[0] = 0.0;
}

/// `sqrt(a^2 + b^2)`; `hypot` (a libm call, without the overflow) only when
/// the squares would under- or overflow.
#[inline(always)]
fn radius(a: f64, b: f64) -> f64 {
    let r = (a * a + b * b).sqrt();
    if r > 1e-150 && r < 1e150 {
        r
    } else {
        a.hypot(b)
    }
}

/// tql2: the tridiagonal (d, e[1..]) diagonalised by implicit QL steps, the
/// rotations applied to the columns of `z` (column-major; Q in, the
/// eigenvectors out); the eigenvalues are left in `d`, unsorted.
#[inline(always)]
fn diagonalize(z: &mut [f64], d: &mut [f64], e: &mut [f64], n: usize) -> Option<()> {
    e.copy_within(1.., 0);
    e[n - 1] = 0.0;
    let mut shift = 0.0f64;
    let mut largest = 0.0f64;
    for l in 0..n {
        // The first negligible subdiagonal entry at or after l.
        largest = largest.max(d[l].abs() + e[l].abs());
        let m = (l..n).find(|&m| e[m].abs() <= f64::EPSILON * largest).unwrap_or(n - 1);
        let mut sweeps = 0;
        while m > l && e[l].abs() > f64::EPSILON * largest {
            sweeps += 1;
            if sweeps > MAX_SWEEPS {
                return None;
            }
            // The implicit shift.
            let g = d[l];
            let p = (d[l + 1] - g) / (2.0 * e[l]);
            let r = if p < 0.0 { -radius(p, 1.0) } else { radius(p, 1.0) };
            d[l] = e[l] / (p + r);
            d[l + 1] = e[l] * (p + r);
            let dl1 = d[l + 1];
            let h = g - d[l];
            d[l + 2..].iter_mut().for_each(|x| *x -= h);
            shift += h;
            // The implicit QL transformation.
            let mut p = d[m];
            let (mut c, mut c2, mut c3) = (1.0f64, 1.0f64, 1.0f64);
            let el1 = e[l + 1];
            let (mut s, mut s2) = (0.0f64, 0.0f64);
            for i in (l..m).rev() {
                c3 = c2;
                c2 = c;
                s2 = s;
                let g = c * e[i];
                let h = c * p;
                let r = radius(p, e[i]);
                e[i + 1] = s * r;
                s = e[i] / r;
                c = p / r;
                p = c * d[i] - s * g;
                d[i + 1] = h + s * (c * g + s * d[i]);
                rotate(z, n, i, c, s);
            }
            p = -s * s2 * c3 * el1 * e[l] / dl1;
            e[l] = s * p;
            d[l] = c * p;
        }
        d[l] += shift;
        e[l] = 0.0;
    }
    // NaN fails every comparison above, so it would pass through silently.
    d.iter().all(|x| x.is_finite()).then_some(())
}

/// Columns i and i + 1 of z: (z_i, z_i1) <- (c z_i - s z_i1, s z_i + c z_i1).
#[inline(always)]
fn rotate(z: &mut [f64], n: usize, i: usize, c: f64, s: f64) {
    let (head, tail) = z.split_at_mut((i + 1) * n);
    let (zi, zi1) = (&mut head[i * n..], &mut tail[..n]);
    for (a, b) in zi.iter_mut().zip(zi1.iter_mut()) {
        let h = *b;
        *b = s * *a + c * h;
        *a = c * *a - s * h;
    }
}

/// Eigenvalues in increasing order, each column of `z` with its value.
fn sorted(z: Vec<f64>, d: Vec<f64>, m: usize) -> SmallEigen {
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&x, &y| d[x].total_cmp(&d[y]));
    let values = order.iter().map(|&c| d[c]).collect();
    let vectors = order.iter().flat_map(|&c| z[c * m..(c + 1) * m].iter().copied()).collect();
    SmallEigen { values, vectors, m }
}

#[cfg(test)]
mod tests {
    use super::*;
    use faer::{Mat, Side};

    fn random_symmetric(m: usize, seed: u64) -> Mat<f64> {
        let mut s = seed;
        let mut next = || {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (s >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        };
        let b = Mat::<f64>::from_fn(m, m, |_, _| next());
        Mat::from_fn(m, m, |i, j| b[(i, j)] + b[(j, i)])
    }

    /// Eigenvalues as faer's, each pair's residual and the vectors'
    /// orthonormality at rounding level.
    fn check(a: &Mat<f64>) {
        let m = a.nrows();
        let (ours, reference) = (symmetric_eigen(m, |i, j| a[(i, j)]), a.self_adjoint_eigen(Side::Lower));
        assert!(ours.is_some() && reference.is_ok(), "m={m}: no convergence");
        let (Some(ours), Ok(reference)) = (ours, reference) else { return };
        let scale = 1.0 + (0..m).map(|c| reference.S()[c].abs()).fold(0.0, f64::max);
        for c in 0..m {
            assert!((ours.values[c] - reference.S()[c]).abs() < 1e-12 * scale, "m={m} value {c}");
            let u = ours.vector(c);
            let residual: f64 = (0..m)
                .map(|i| ((0..m).map(|j| a[(i, j)] * u[j]).sum::<f64>() - ours.values[c] * u[i]).powi(2))
                .sum::<f64>()
                .sqrt();
            assert!(residual < 1e-12 * scale, "m={m} residual {c}: {residual}");
            for c2 in 0..=c {
                let dot: f64 = u.iter().zip(ours.vector(c2)).map(|(x, y)| x * y).sum();
                let expected = if c2 == c { 1.0 } else { 0.0 };
                assert!((dot - expected).abs() < 1e-12, "m={m} vectors {c}, {c2}: {dot}");
            }
        }
    }

    #[test]
    fn matches_faer_on_random_matrices() {
        for m in 1..=40 {
            check(&random_symmetric(m, m as u64));
        }
    }

    #[test]
    fn large_matrices_go_to_faer_with_the_same_layout() {
        check(&random_symmetric(FAER_FROM + 3, 11));
    }

    #[test]
    fn handles_repeated_and_zero_eigenvalues() {
        // Block diagonal with equal blocks (every eigenvalue repeated), a
        // zero matrix, the identity, and a rank-one matrix.
        let block = random_symmetric(5, 7);
        check(&Mat::from_fn(15, 15, |i, j| if i / 5 == j / 5 { block[(i % 5, j % 5)] } else { 0.0 }));
        check(&Mat::zeros(9, 9));
        check(&Mat::from_fn(9, 9, |i, j| f64::from(u8::from(i == j))));
        check(&Mat::from_fn(12, 12, |i, j| (i as f64 + 1.0) * (j as f64 + 1.0)));
        // Tridiagonal and banded (the Rayleigh-Ritz matrices are block
        // tridiagonal), and tiny entries next to large ones.
        check(&Mat::from_fn(30, 30, |i, j| if i.abs_diff(j) <= 1 { 1.0 / (1.0 + (i + j) as f64) } else { 0.0 }));
        check(&Mat::from_fn(20, 20, |i, j| if i == j { 10f64.powi(i as i32 - 10) } else { 1e-13 }));
    }

    #[test]
    fn non_finite_input_is_refused() {
        assert!(symmetric_eigen(4, |i, j| if i == 2 && j == 1 { f64::NAN } else { 1.0 }).is_none());
    }
}
