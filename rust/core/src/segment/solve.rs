//! Exact maximisation of a sum of segment scores over splits into exactly k
//! contiguous segments.
//!
//! - `layered`: the textbook DP over (segments used, end position),
//!   O(k * P) for P candidate segments, one pass over the scores.
//! - `lagrangian`: maximise `score - penalty * count` (O(P) per penalty) and
//!   search the penalty until the optimum has exactly k segments, which
//!   certifies it optimal for k (for any split x with k segments,
//!   `f(x) - penalty * k <= f(x*) - penalty * k`). It cannot reach a k that
//!   lies strictly inside an edge of the concave hull of "best score with c
//!   segments"; it then reports failure and the caller runs `layered`.
//!
//! Inner loops are compiled twice, for the baseline and for AVX2.

use super::matrix::Real;
use super::objective::{Prepared, ScoreStream};
use super::windows::Windows;

/// Boundaries found by following `back` from n.
fn trace(n: usize, mut step: impl FnMut(usize) -> usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut j = n;
    while j > 0 {
        let i = step(j);
        if i > 0 {
            out.push(i);
        }
        j = i;
    }
    out.reverse();
    out
}

/// Runs `$kernel(args)` compiled for AVX2 when the CPU has it.
macro_rules! dispatch {
    ($avx2:ident, $kernel:ident, $($arg:expr),*) => {{
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx2") {
                // SAFETY: the running CPU has AVX2, all the function is
                // compiled for; it is otherwise the same safe code.
                return unsafe { $avx2($($arg),*) };
            }
        }
        $kernel($($arg),*)
    }};
}

/// The exact K-layer DP; `None` if no split into k segments is feasible.
/// `best[c][i]`: the best score of c segments covering blocks 0..i.
pub(crate) fn layered<T: Real>(p: &Prepared<'_, T>, windows: &Windows, k: usize) -> Option<Vec<usize>> {
    let n = p.n;
    let width = n + 1;
    let mut best = vec![f64::NEG_INFINITY; (k + 1) * width];
    let mut back = vec![0u32; (k + 1) * width];
    best[0] = 0.0;
    layered_fill(p, windows, k, &mut best, &mut back);
    if best[k * width + n] == f64::NEG_INFINITY {
        return None;
    }
    let mut layer = k;
    Some(trace(n, |j| {
        let i = back[layer * width + j] as usize;
        layer -= 1;
        i
    }))
}

fn layered_fill<T: Real>(p: &Prepared<'_, T>, windows: &Windows, k: usize, best: &mut [f64], back: &mut [u32]) {
    dispatch!(layered_avx2, layered_kernel, p, windows, k, best, back)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn layered_avx2<T: Real>(p: &Prepared<'_, T>, windows: &Windows, k: usize, best: &mut [f64], back: &mut [u32]) {
    layered_kernel(p, windows, k, best, back)
}

#[inline(always)]
fn layered_kernel<T: Real>(p: &Prepared<'_, T>, windows: &Windows, k: usize, best: &mut [f64], back: &mut [u32]) {
    let n = p.n;
    let width = n + 1;
    let mut stream = ScoreStream::new(p, windows, n);
    for j in 1..=n {
        let (first, scores) = stream.next(j);
        // Layer c (c segments end at j) needs c <= j and room for k - c more.
        let c_lo = 1.max(k.saturating_sub(n - j));
        let c_hi = k.min(j);
        if c_lo > c_hi || scores.is_empty() {
            continue;
        }
        for c in c_lo..=c_hi {
            let prev = &best[(c - 1) * width + first..(c - 1) * width + first + scores.len()];
            let (top, at) = max_arg(prev, scores);
            if top > f64::NEG_INFINITY {
                best[c * width + j] = top;
                back[c * width + j] = (first + at) as u32;
            }
        }
    }
}

const LANES: usize = 8;

/// The largest `f[t] + g[t]` and the first t reaching it: max and arg-max
/// per lane (strict >, so the first index within each lane; vectorised),
/// then across lanes the largest value, ties to the smaller index.
#[inline(always)]
fn max_arg(f: &[f64], g: &[f64]) -> (f64, usize) {
    let mut value = [f64::NEG_INFINITY; LANES];
    let mut index = [0.0f64; LANES];
    let (fc, gc) = (f.chunks_exact(LANES), g.chunks_exact(LANES));
    let (fr, gr) = (fc.remainder(), gc.remainder());
    for (c, (fx, gx)) in fc.zip(gc).enumerate() {
        let base = (c * LANES) as f64;
        for l in 0..LANES {
            let v = fx[l] + gx[l];
            let take = v > value[l];
            value[l] = if take { v } else { value[l] };
            index[l] = if take { base + l as f64 } else { index[l] };
        }
    }
    let (mut top, mut at) = (f64::NEG_INFINITY, 0usize);
    for l in 0..LANES {
        let t = index[l] as usize;
        if value[l] > top || (value[l] == top && value[l] > f64::NEG_INFINITY && t < at) {
            top = value[l];
            at = t;
        }
    }
    let tail = f.len() - fr.len();
    for (t, (x, y)) in fr.iter().zip(gr).enumerate() {
        let v = x + y;
        if v > top {
            top = v;
            at = tail + t;
        }
    }
    (top, at)
}

/// One optimum of the penalised problem `max score - penalty * count`.
struct Penalised {
    penalty: f64,
    score: f64,
    count: usize,
    boundaries: Vec<usize>,
}

/// The penalised optimum over segments of at most `max_len` blocks.
fn penalised<T: Real>(p: &Prepared<'_, T>, windows: &Windows, penalty: f64, max_len: usize) -> Option<Penalised> {
    let n = p.n;
    let mut best = vec![f64::NEG_INFINITY; n + 1];
    let mut back = vec![0usize; n + 1];
    let mut taken = vec![0.0f64; n + 1];
    best[0] = 0.0;
    penalised_fill(p, windows, penalty, max_len, &mut best, &mut back, &mut taken);
    if best[n] == f64::NEG_INFINITY {
        return None;
    }
    let boundaries = trace(n, |j| back[j]);
    let score = boundaries.iter().chain(std::iter::once(&n)).map(|&end| taken[end]).sum();
    Some(Penalised { penalty, score, count: boundaries.len() + 1, boundaries })
}

#[allow(clippy::too_many_arguments)]
fn penalised_fill<T: Real>(
    p: &Prepared<'_, T>,
    windows: &Windows,
    penalty: f64,
    max_len: usize,
    best: &mut [f64],
    back: &mut [usize],
    taken: &mut [f64],
) {
    dispatch!(penalised_avx2, penalised_kernel, p, windows, penalty, max_len, best, back, taken)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(clippy::too_many_arguments)]
unsafe fn penalised_avx2<T: Real>(
    p: &Prepared<'_, T>,
    windows: &Windows,
    penalty: f64,
    max_len: usize,
    best: &mut [f64],
    back: &mut [usize],
    taken: &mut [f64],
) {
    penalised_kernel(p, windows, penalty, max_len, best, back, taken)
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn penalised_kernel<T: Real>(
    p: &Prepared<'_, T>,
    windows: &Windows,
    penalty: f64,
    max_len: usize,
    best: &mut [f64],
    back: &mut [usize],
    taken: &mut [f64],
) {
    let n = p.n;
    let mut stream = ScoreStream::new(p, windows, max_len);
    for j in 1..=n {
        let (first, g) = stream.next(j);
        if g.is_empty() {
            continue;
        }
        let (top, at) = max_arg(&best[first..first + g.len()], g);
        if top == f64::NEG_INFINITY {
            continue;
        }
        best[j] = top - penalty;
        back[j] = first + at;
        taken[j] = g[at];
    }
}

/// Searches the penalty for an optimum with exactly k segments; `Some` only
/// with that certificate of optimality.
///
/// The search itself runs on a relaxation that only considers segments up
/// to 4x the mean length (for k = 50 of n = 2,000: a band of 160 blocks
/// near the diagonal, which stays in cache); its penalty is then checked by
/// one pass over every candidate, which is what certifies the answer.
/// Optimal segments that long are rare, so the check usually passes; if not,
/// the search continues on the full problem from there.
pub(crate) fn lagrangian<T: Real>(p: &Prepared<'_, T>, windows: &Windows, k: usize) -> Option<Vec<usize>> {
    let n = p.n;
    let band = (4 * n).div_ceil(k).max(32);
    let mut known = None;
    if band < n {
        if let Some(found) = search(p, windows, k, band, None) {
            let full = penalised(p, windows, found.penalty, n)?;
            if full.count == k {
                return Some(full.boundaries);
            }
            known = Some(full);
        }
    }
    search(p, windows, k, n, known).map(|found| found.boundaries)
}

/// The penalty search over segments of at most `max_len` blocks, optionally
/// starting from a known optimum.
fn search<T: Real>(
    p: &Prepared<'_, T>,
    windows: &Windows,
    k: usize,
    max_len: usize,
    known: Option<Penalised>,
) -> Option<Penalised> {
    let n = p.n;
    let big = 2.0 * p.bound() + 1.0;
    // The extremes (fewest and most segments).
    let mut few = penalised(p, windows, big, max_len)?;
    let mut many = if max_len >= n || !windows.constrained() {
        // n singletons, score 0 each, when no limit forbids them.
        if windows.constrained() {
            penalised(p, windows, -big, max_len)?
        } else {
            Penalised { penalty: -big, score: 0.0, count: n, boundaries: (1..n).collect() }
        }
    } else {
        penalised(p, windows, -big, max_len)?
    };
    if let Some(known) = known {
        if known.count < k && known.count > few.count {
            few = known;
        } else if known.count > k && known.count < many.count {
            many = known;
        }
    }
    if few.count == k {
        return Some(few);
    }
    if many.count == k {
        return Some(many);
    }
    if !(few.count < k && k < many.count) {
        return None;
    }
    // The slope of the chord between the bracketing optima: its optimum is a
    // new vertex of the hull between them, or k is inside this hull edge.
    for _ in 0..n {
        let chord = (many.score - few.score) / (many.count - few.count) as f64;
        let mid = penalised(p, windows, chord, max_len)?;
        if mid.count == k {
            return Some(mid);
        }
        if mid.count <= few.count || mid.count >= many.count {
            return None;
        }
        if mid.count < k {
            few = mid;
        } else {
            many = mid;
        }
    }
    None
}
