//! The segmentation objective (see `contiguous` for what it is and why):
//! per-row evidence statistics, the score of every candidate segment, and a
//! direct evaluation for tests.

use std::borrow::Cow;

use ndarray::ArrayView2;

use super::windows::Windows;
use crate::linalg::{row_major, row_stats_lanes, scan_square, square_size, Real};
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
    /// start_cost[i]: subtracted from the score of every segment starting at
    /// block i > 0 (a boundary before block i); empty when none were given.
    start_cost: Vec<f64>,
}

impl<T: Real> Prepared<'_, T> {
    /// Bound on |objective| of any segmentation.
    pub fn bound(&self) -> f64 {
        let costs: f64 = self.start_cost.iter().map(|c| c.abs()).sum();
        (self.n as f64) * (self.n as f64) * self.evidence.bound + costs
    }

    /// Sets the cost of a boundary before each block (`costs[0]` is unused);
    /// one finite value per block.
    pub fn set_boundary_costs(&mut self, costs: &[f64]) -> Result<()> {
        if costs.len() != self.n {
            return Err(Error::invalid(
                "boundary_costs",
                format!("has {} entries but similarity has {} rows; pass one cost per block", costs.len(), self.n),
            ));
        }
        if let Some(i) = costs.iter().position(|c| !c.is_finite()) {
            return Err(Error::invalid("boundary_costs", format!("entry {i} is {}; costs must be finite", costs[i])));
        }
        self.start_cost = costs.to_vec();
        if let Some(first) = self.start_cost.first_mut() {
            *first = 0.0;
        }
        Ok(())
    }

    /// The objective of n singletons (each scores 0 less its boundary's cost).
    pub fn singletons_score(&self) -> f64 {
        -self.start_cost.iter().sum::<f64>()
    }

    /// The cost of a segment starting at block `start`.
    #[inline(always)]
    fn cost(&self, start: usize) -> f64 {
        self.start_cost.get(start).copied().unwrap_or(0.0)
    }
}

pub(crate) fn prepare<'a, T: Real>(similarity: &ArrayView2<'a, T>) -> Result<Prepared<'a, T>> {
    let rows = square_size(similarity, "similarity")?;
    // Per row (off the diagonal): sum, sum of squares, smallest, largest.
    let mut stats = vec![[0.0f64; 4]; rows];
    let n = scan_square(similarity, "similarity", &mut stats, |i, row, out| {
        let (b, a) = (row_stats_lanes(&row[..i]), row_stats_lanes(&row[i + 1..]));
        *out = [b[0] + a[0], b[1] + a[1], b[2].min(a[2]), b[3].max(a[3])];
        Ok(())
    })?;
    let column = |c: usize| stats.iter().map(|s| s[c]).collect::<Vec<f64>>();
    let (sum, sum_sq, lowest, highest) = (column(0), column(1), column(2), column(3));
    let data = match similarity.to_slice() {
        Some(slice) => Cow::Borrowed(slice),
        None => Cow::Owned(row_major(similarity)),
    };
    let inv_pow = (0..=n).map(|l| if l == 0 { 0.0 } else { (l as f64).powf(-LENGTH_EXPONENT) }).collect();
    Ok(Prepared { n, data, evidence: Evidence::new(&sum, &sum_sq, &lowest, &highest), inv_pow, start_cost: Vec::new() })
}

/// Rows of the similarity whose running sums are computed together (see
/// [`ScoreStream`]).
const BATCH: usize = 8;

/// Segment scores generated end by end: `next(j)` (called for j = 1, 2,
/// ..., n in turn) gives the scores of the segments `[i, j)` for the starts
/// i the windows allow, limited to `max_len` blocks. Scores are recomputed
/// per pass instead of stored: an n^2 / 2 table would be written once and
/// read once per pass, more memory traffic than recomputing from the
/// similarity's lower triangle, and a pass limited to short segments then
/// only touches a band near the diagonal.
///
/// Adding row r = j - 1 to the segment sums needs its suffix sums
/// `w(r-1, r) + ... + w(a, r)`, a chain of dependent additions (each waits
/// for the previous one). The chains of BATCH consecutive rows are
/// independent, so they run interleaved; every sum is still added in the
/// same order as one row at a time, so the scores are bit for bit the same.
pub(crate) struct ScoreStream<'s, 'a, T: Clone> {
    p: &'s Prepared<'a, T>,
    windows: &'s Windows,
    max_len: usize,
    /// within[i] = sum of w over the ordered pairs of [i, j).
    within: Vec<f64>,
    /// suffix[b * n + a]: for the row of end j0 + b of the current batch, the
    /// suffix sum from a (its w values before the chains run).
    suffix: Vec<f64>,
    /// First end of the current batch and its number of rows.
    batch: (usize, usize),
    starts: [usize; BATCH],
    /// rev_pow[n - l] = l^-LENGTH_EXPONENT, so a segment's factor is
    /// ascending in its start.
    rev_pow: Vec<f64>,
    scores: Vec<f64>,
}

impl<'s, 'a, T: Real> ScoreStream<'s, 'a, T> {
    pub fn new(p: &'s Prepared<'a, T>, windows: &'s Windows, max_len: usize) -> Self {
        let n = p.n;
        let rev_pow = (0..=n).map(|k| p.inv_pow[n - k]).collect();
        Self {
            p,
            windows,
            max_len,
            within: vec![0.0; n + 1],
            suffix: vec![0.0; BATCH * n],
            batch: (1, 0),
            starts: [0; BATCH],
            rev_pow,
            scores: vec![0.0; n],
        }
    }

    /// The first block row j - 1 contributes to (the band and the cap).
    #[inline(always)]
    fn row_start(&self, j: usize) -> usize {
        self.windows.cap_lo[j].max(j.saturating_sub(self.max_len)).min(j - 1)
    }

    /// w and then the suffix sums of the rows of ends j0..j0 + len.
    #[inline(always)]
    fn fill_batch(&mut self, j0: usize) {
        let (p, n) = (self.p, self.p.n);
        let len = BATCH.min(n + 1 - j0);
        let ev = &p.evidence;
        for b in 0..len {
            let r = j0 - 1 + b;
            let start = self.row_start(j0 + b);
            self.starts[b] = start;
            let row = &p.data[r * n + start..r * n + r];
            let (mean_r, inv_r) = (ev.mean[r], ev.inv_scale[r]);
            let (means, invs) = (&ev.mean[start..r], &ev.inv_scale[start..r]);
            let wr = &mut self.suffix[b * n + start..b * n + r];
            for (((wa, s), m), inv) in wr.iter_mut().zip(row).zip(means).zip(invs) {
                let s = s.to_f64();
                let z = 0.5 * ((s - mean_r) * inv_r + (s - m) * inv);
                *wa = z.max(0.0) - EVIDENCE_THRESHOLD;
            }
        }
        // Each row's range [start_b, r_b) splits into a top part above r_0
        // (rows differ), a common part all rows cover, and a bottom part
        // below the latest start; processed top down, each chain in order.
        let r0 = j0 - 1;
        let common_lo = self.starts[len - 1].min(r0);
        let mut sums = [0.0f64; BATCH];
        for (b, sum) in sums.iter_mut().enumerate().take(len) {
            let top = self.starts[b].max(r0);
            for x in self.suffix[b * n + top..b * n + r0 + b].iter_mut().rev() {
                *sum += *x;
                *x = *sum;
            }
        }
        if len == BATCH {
            for a in (common_lo..r0).rev() {
                for (b, sum) in sums.iter_mut().enumerate() {
                    let x = &mut self.suffix[b * n + a];
                    *sum += *x;
                    *x = *sum;
                }
            }
        } else {
            for (b, sum) in sums.iter_mut().enumerate().take(len) {
                for x in self.suffix[b * n + common_lo..b * n + r0].iter_mut().rev() {
                    *sum += *x;
                    *x = *sum;
                }
            }
        }
        for (b, sum) in sums.iter_mut().enumerate().take(len) {
            let bottom = common_lo.min(r0 + b);
            for x in self.suffix[b * n + self.starts[b]..b * n + bottom.max(self.starts[b])].iter_mut().rev() {
                *sum += *x;
                *x = *sum;
            }
        }
        self.batch = (j0, len);
    }

    /// `(first, scores)`: the scores of `[first + t, j)`.
    #[inline(always)]
    pub fn next(&mut self, j: usize) -> (usize, &[f64]) {
        let n = self.p.n;
        if j >= self.batch.0 + self.batch.1 {
            self.fill_batch(j);
        }
        let b = j - self.batch.0;
        let r = j - 1;
        let start = self.starts[b];
        for (acc, x) in self.within[start..r].iter_mut().zip(&self.suffix[b * n + start..b * n + r]) {
            *acc += 2.0 * x;
        }
        self.within[r] = 0.0;
        let band = j.saturating_sub(self.max_len);
        let (lo, len) = (self.windows.lo(j), self.windows.len(j));
        let first = lo.max(band);
        let end = lo + len;
        if first >= end {
            return (first, &[]);
        }
        let out = &mut self.scores[..end - first];
        let pows = &self.rev_pow[n - j + first..n - j + end];
        for ((o, w), f) in out.iter_mut().zip(&self.within[first..end]).zip(pows) {
            *o = w * f;
        }
        if !self.p.start_cost.is_empty() {
            for (o, c) in out.iter_mut().zip(&self.p.start_cost[first..end]) {
                *o -= c;
            }
        }
        (first, out)
    }
}

/// Anything that hands out the scores of the segments ending at j, for j =
/// 1, 2, ..., n in turn: `(first, scores)`, the scores of `[first + t, j)`.
pub(crate) trait ScoreSource {
    fn next(&mut self, j: usize) -> (usize, &[f64]);
}

impl<T: Real> ScoreSource for ScoreStream<'_, '_, T> {
    #[inline(always)]
    fn next(&mut self, j: usize) -> (usize, &[f64]) {
        ScoreStream::next(self, j)
    }
}

/// Every score of a pass limited to `max_len`, computed once and kept: the
/// Lagrangian search runs several passes over the same band of short
/// segments, which then only differ in the penalty (O(n * max_len) memory).
pub(crate) struct CachedScores {
    /// For end j: its first start, and its scores at `data[offset[j]..offset[j + 1]]`.
    first: Vec<usize>,
    offset: Vec<usize>,
    data: Vec<f64>,
}

impl CachedScores {
    pub fn new<T: Real>(p: &Prepared<'_, T>, windows: &Windows, max_len: usize) -> Self {
        let n = p.n;
        let mut stream = ScoreStream::new(p, windows, max_len);
        let (mut first, mut offset) = (vec![0usize; n + 1], vec![0usize; n + 2]);
        let mut data = Vec::with_capacity(n * max_len.min(n));
        for j in 1..=n {
            let (f, scores) = stream.next(j);
            first[j] = f;
            data.extend_from_slice(scores);
            offset[j + 1] = data.len();
        }
        Self { first, offset, data }
    }
}

impl ScoreSource for &CachedScores {
    #[inline(always)]
    fn next(&mut self, j: usize) -> (usize, &[f64]) {
        (self.first[j], &self.data[self.offset[j]..self.offset[j + 1]])
    }
}

/// The objective [`super::segment`] maximises, for the segmentation
/// `boundaries` (same format as its output), computed directly; for tests and
/// diagnostics.
pub fn segmentation_objective<T: Real>(similarity: ArrayView2<'_, T>, boundaries: &[usize]) -> Result<f64> {
    segmentation_objective_with_costs(similarity, boundaries, None)
}

/// [`segmentation_objective`] with `SegmentOptions::boundary_costs`: each
/// boundary's cost is subtracted.
pub fn segmentation_objective_with_costs<T: Real>(
    similarity: ArrayView2<'_, T>,
    boundaries: &[usize],
    boundary_costs: Option<&[f64]>,
) -> Result<f64> {
    let mut p = prepare(&similarity)?;
    if let Some(costs) = boundary_costs {
        p.set_boundary_costs(costs)?;
    }
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
        total += within * ((end - start) as f64).powf(-LENGTH_EXPONENT) - p.cost(start);
        start = end;
    }
    Ok(total)
}
