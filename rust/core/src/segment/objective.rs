//! The segmentation objective (see `contiguous` for what it is and why):
//! per-row evidence statistics, the score of every candidate segment, and a
//! direct evaluation for tests.

use std::borrow::Cow;

use ndarray::ArrayView2;

use super::matrix::{min_max_lanes, row_major, scan_square, square_size, sum_lanes, Real};
use super::windows::Windows;
use crate::{Error, Result};

pub(crate) const LENGTH_EXPONENT: f64 = 0.3;
pub(crate) const EVIDENCE_THRESHOLD: f64 = 0.5;
pub(crate) const SCALE_SHRINK: f64 = 0.3;

/// Per-row statistics that turn similarities into evidence `w(a, b)`.
pub(crate) struct Evidence {
    mean: Vec<f64>,
    inv_scale: Vec<f64>,
    /// Bound on any |w(a, b)|.
    bound: f64,
}

impl Evidence {
    fn new(sum: &[f64], sum_sq: &[f64], lowest: &[f64], highest: &[f64]) -> Self {
        let n = sum.len();
        let others = (n.saturating_sub(1)).max(1) as f64;
        let mean: Vec<f64> = sum.iter().map(|s| s / others).collect();
        let var: Vec<f64> = sum_sq.iter().zip(&mean).map(|(q, m)| (q / others - m * m).max(0.0)).collect();
        let average = var.iter().sum::<f64>() / n.max(1) as f64;
        let inv_scale = var
            .iter()
            .map(|v| {
                let scale = (v + SCALE_SHRINK * average).sqrt();
                if scale > 1e-12 {
                    1.0 / scale
                } else {
                    0.0
                }
            })
            .collect::<Vec<f64>>();
        let z = (0..n)
            .map(|a| (highest[a] - mean[a]).abs().max((lowest[a] - mean[a]).abs()) * inv_scale[a])
            .fold(0.0f64, f64::max);
        Self { mean, inv_scale, bound: z + EVIDENCE_THRESHOLD }
    }

    #[inline(always)]
    fn weight(&self, a: usize, b: usize, s: f64) -> f64 {
        let z = 0.5 * ((s - self.mean[a]) * self.inv_scale[a] + (s - self.mean[b]) * self.inv_scale[b]);
        z.max(0.0) - EVIDENCE_THRESHOLD
    }
}

/// The validated similarity (row-major, borrowed when the input is) and its
/// evidence statistics.
pub(crate) struct Prepared<'a, T: Clone> {
    pub n: usize,
    data: Cow<'a, [T]>,
    evidence: Evidence,
    /// inv_pow[l] = l^-LENGTH_EXPONENT.
    inv_pow: Vec<f64>,
}

impl<T: Real> Prepared<'_, T> {
    /// Bound on |objective| of any segmentation.
    pub fn bound(&self) -> f64 {
        (self.n as f64) * (self.n as f64) * self.evidence.bound
    }
}

pub(crate) fn prepare<'a, T: Real>(similarity: &ArrayView2<'a, T>) -> Result<Prepared<'a, T>> {
    let rows = square_size(similarity, "similarity")?;
    // Per row (off the diagonal): sum, sum of squares, smallest, largest.
    let mut stats = vec![[0.0f64; 4]; rows];
    let n = scan_square(similarity, "similarity", &mut stats, |i, row, out| {
        let (before, after) = (&row[..i], &row[i + 1..]);
        let (lo1, hi1) = min_max_lanes(before);
        let (lo2, hi2) = min_max_lanes(after);
        *out = [
            sum_lanes(before, |x| x) + sum_lanes(after, |x| x),
            sum_lanes(before, |x| x * x) + sum_lanes(after, |x| x * x),
            lo1.min(lo2),
            hi1.max(hi2),
        ];
        Ok(())
    })?;
    let column = |c: usize| stats.iter().map(|s| s[c]).collect::<Vec<f64>>();
    let (sum, sum_sq, lowest, highest) = (column(0), column(1), column(2), column(3));
    let data = match similarity.to_slice() {
        Some(slice) => Cow::Borrowed(slice),
        None => Cow::Owned(row_major(similarity)),
    };
    let inv_pow = (0..=n).map(|l| if l == 0 { 0.0 } else { (l as f64).powf(-LENGTH_EXPONENT) }).collect();
    Ok(Prepared { n, data, evidence: Evidence::new(&sum, &sum_sq, &lowest, &highest), inv_pow })
}

/// Segment scores generated end by end: `next(j)` (called for j = 1, 2,
/// ..., n in turn) gives the scores of the segments `[i, j)` for the starts
/// i the windows allow, limited to `max_len` blocks. Scores are recomputed
/// per pass instead of stored: an n^2 / 2 table would be written once and
/// read once per pass, more memory traffic than recomputing from the
/// similarity's lower triangle, and a pass limited to short segments then
/// only touches a band near the diagonal.
pub(crate) struct ScoreStream<'s, 'a, T: Clone> {
    p: &'s Prepared<'a, T>,
    windows: &'s Windows,
    max_len: usize,
    /// within[i] = sum of w over the ordered pairs of [i, j).
    within: Vec<f64>,
    w: Vec<f64>,
    scores: Vec<f64>,
}

impl<'s, 'a, T: Real> ScoreStream<'s, 'a, T> {
    pub fn new(p: &'s Prepared<'a, T>, windows: &'s Windows, max_len: usize) -> Self {
        let n = p.n;
        Self { p, windows, max_len, within: vec![0.0; n + 1], w: vec![0.0; n], scores: vec![0.0; n] }
    }

    /// `(first, scores)`: the scores of `[first + t, j)`.
    #[inline(always)]
    pub fn next(&mut self, j: usize) -> (usize, &[f64]) {
        let (p, n) = (self.p, self.p.n);
        let r = j - 1;
        let band = j.saturating_sub(self.max_len);
        let start = self.windows.cap_lo[j].max(band).min(r);
        let row = &p.data[r * n + start..r * n + r];
        let ev = &p.evidence;
        let (mean_r, inv_r) = (ev.mean[r], ev.inv_scale[r]);
        let (means, invs) = (&ev.mean[start..r], &ev.inv_scale[start..r]);
        let wr = &mut self.w[start..r];
        for (((wa, s), m), inv) in wr.iter_mut().zip(row).zip(means).zip(invs) {
            let s = s.to_f64();
            let z = 0.5 * ((s - mean_r) * inv_r + (s - m) * inv);
            *wa = z.max(0.0) - EVIDENCE_THRESHOLD;
        }
        let mut suffix = 0.0;
        for (acc, wa) in self.within[start..r].iter_mut().zip(wr.iter()).rev() {
            suffix += wa;
            *acc += 2.0 * suffix;
        }
        self.within[r] = 0.0;
        let (lo, len) = (self.windows.lo(j), self.windows.len(j));
        let first = lo.max(band);
        let end = lo + len;
        if first >= end {
            return (first, &[]);
        }
        let out = &mut self.scores[..end - first];
        for (t, o) in out.iter_mut().enumerate() {
            let i = first + t;
            *o = self.within[i] * p.inv_pow[j - i];
        }
        (first, out)
    }
}

/// The objective [`super::segment`] maximises, for the segmentation
/// `boundaries` (same format as its output), computed directly; for tests and
/// diagnostics.
pub fn segmentation_objective<T: Real>(similarity: ArrayView2<'_, T>, boundaries: &[usize]) -> Result<f64> {
    let p = prepare(&similarity)?;
    let n = p.n;
    let mut start = 0;
    let mut total = 0.0;
    for (s, &end) in boundaries.iter().chain(std::iter::once(&n)).enumerate() {
        if end <= start || end > n {
            return Err(Error::invalid("boundaries", format!("entry {s} = {end} is not increasing within 1..{n}")));
        }
        // Each unordered pair once, read from the later block's row (as the
        // DP does), counted for both orders.
        let mut within = 0.0;
        for a in start..end {
            for b in start..a {
                within += 2.0 * p.evidence.weight(a, b, p.data[a * n + b].to_f64());
            }
        }
        total += within * ((end - start) as f64).powf(-LENGTH_EXPONENT);
        start = end;
    }
    Ok(total)
}
