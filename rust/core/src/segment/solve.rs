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

use super::objective::{CachedScores, Prepared, ScoreSource, ScoreStream};
use super::windows::Windows;
use crate::linalg::Real;

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

/// Candidates per chunk of `max_arg`: the first pass keeps only each
/// chunk's maximum, the second looks for the arg-max in one chunk.
const CHUNK: usize = 64;

/// The largest `f[t] + g[t]` and the first t reaching it (`(-inf, 0)` when
/// every sum is -inf). Two passes, so the hot one is only adds and maxes (no
/// index bookkeeping): the maximum of every chunk of CHUNK candidates, the
/// first chunk holding the overall maximum, then the first position in that
/// chunk whose sum (the same f64 addition, so bit-identical) equals it.
#[inline(always)]
fn max_arg(f: &[f64], g: &[f64]) -> (f64, usize) {
    let len = f.len().min(g.len());
    let (f, g) = (&f[..len], &g[..len]);
    let mut top = f64::NEG_INFINITY;
    let mut found = None;
    for (c, (fc, gc)) in f.chunks(CHUNK).zip(g.chunks(CHUNK)).enumerate() {
        let m = chunk_max(fc, gc);
        if m > top {
            top = m;
            found = Some(c);
        }
    }
    let Some(c) = found else {
        return (f64::NEG_INFINITY, 0);
    };
    let base = c * CHUNK;
    let end = (base + CHUNK).min(len);
    let t = f[base..end].iter().zip(&g[base..end]).position(|(x, y)| x + y == top).unwrap_or(0);
    (top, base + t)
}

/// Independent running maxima in `chunk_max`, so the maxima do not wait on each other.
const MAX_LANES: usize = 8;

/// The largest `f[t] + g[t]`, in independent lanes so it vectorises (a
/// maximum is exact, so the lanes do not change the result).
#[inline(always)]
fn chunk_max(f: &[f64], g: &[f64]) -> f64 {
    let mut value = [f64::NEG_INFINITY; MAX_LANES];
    let (fc, gc) = (f.chunks_exact(MAX_LANES), g.chunks_exact(MAX_LANES));
    let (fr, gr) = (fc.remainder(), gc.remainder());
    for (fx, gx) in fc.zip(gc) {
        for l in 0..MAX_LANES {
            let v = fx[l] + gx[l];
            value[l] = if v > value[l] { v } else { value[l] };
        }
    }
    let mut top = value.iter().fold(f64::NEG_INFINITY, |m, &v| if v > m { v } else { m });
    for (x, y) in fr.iter().zip(gr) {
        let v = x + y;
        top = if v > top { v } else { top };
    }
    top
}

/// One optimum of the penalised problem `max score - penalty * count`.
struct Penalised {
    penalty: f64,
    score: f64,
    count: usize,
    boundaries: Vec<usize>,
}

/// Where a penalised pass takes its segment scores from.
#[derive(Clone, Copy)]
enum Scores<'c> {
    /// Computed on the fly, segments of at most this many blocks.
    Stream(usize),
    /// Kept from an earlier computation (a band of short segments).
    Cached(&'c CachedScores),
}

/// The penalised optimum over the segments `scores` offers.
fn penalised<T: Real>(p: &Prepared<'_, T>, windows: &Windows, penalty: f64, scores: Scores<'_>) -> Option<Penalised> {
    let n = p.n;
    let mut best = vec![f64::NEG_INFINITY; n + 1];
    let mut back = vec![0usize; n + 1];
    let mut taken = vec![0.0f64; n + 1];
    best[0] = 0.0;
    match scores {
        Scores::Stream(max_len) => {
            penalised_fill(ScoreStream::new(p, windows, max_len), n, penalty, &mut best, &mut back, &mut taken)
        }
        Scores::Cached(cached) => penalised_fill(cached, n, penalty, &mut best, &mut back, &mut taken),
    }
    if best[n] == f64::NEG_INFINITY {
        return None;
    }
    let boundaries = trace(n, |j| back[j]);
    let score = boundaries.iter().chain(std::iter::once(&n)).map(|&end| taken[end]).sum();
    Some(Penalised { penalty, score, count: boundaries.len() + 1, boundaries })
}

fn penalised_fill<S: ScoreSource>(
    source: S,
    n: usize,
    penalty: f64,
    best: &mut [f64],
    back: &mut [usize],
    taken: &mut [f64],
) {
    dispatch!(penalised_avx2, penalised_kernel, source, n, penalty, best, back, taken)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn penalised_avx2<S: ScoreSource>(
    source: S,
    n: usize,
    penalty: f64,
    best: &mut [f64],
    back: &mut [usize],
    taken: &mut [f64],
) {
    penalised_kernel(source, n, penalty, best, back, taken)
}

#[inline(always)]
fn penalised_kernel<S: ScoreSource>(
    mut source: S,
    n: usize,
    penalty: f64,
    best: &mut [f64],
    back: &mut [usize],
    taken: &mut [f64],
) {
    for j in 1..=n {
        let (first, g) = source.next(j);
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

/// Most band scores the Lagrangian search keeps (f64 each: 32 MB).
const CACHED_SCORES_MAX: usize = 1 << 22;

/// Searches the penalty for an optimum with exactly k segments; `Some` only
/// with that certificate of optimality.
///
/// The search itself runs on a relaxation that only considers segments up
/// to 4x the mean length (a band near the diagonal), whose scores are
/// computed once and kept (n * 4n / k values; recomputed per penalty above
/// CACHED_SCORES_MAX), so each penalty costs only the DP's maxima;
/// its penalty is then checked by one pass over every candidate, which is
/// what certifies the answer.
/// Optimal segments that long are rare, so the check usually passes; if not,
/// the search continues on the full problem from there.
pub(crate) fn lagrangian<T: Real>(p: &Prepared<'_, T>, windows: &Windows, k: usize) -> Option<Vec<usize>> {
    let n = p.n;
    let band = (4 * n).div_ceil(k).max(32);
    let mut known = None;
    if band < n {
        // Keep the band's scores when they fit in CACHED_SCORES_MAX values;
        // else recompute them per penalty.
        let cached = (n.saturating_mul(band) <= CACHED_SCORES_MAX).then(|| CachedScores::new(p, windows, band));
        let scores = cached.as_ref().map_or(Scores::Stream(band), Scores::Cached);
        if let Some(found) = search(p, windows, k, scores, band, None) {
            let full = penalised(p, windows, found.penalty, Scores::Stream(n))?;
            if full.count == k {
                return Some(full.boundaries);
            }
            known = Some(full);
        }
    }
    search(p, windows, k, Scores::Stream(n), n, known).map(|found| found.boundaries)
}

/// The penalty search over segments of at most `max_len` blocks, optionally
/// starting from a known optimum.
fn search<T: Real>(
    p: &Prepared<'_, T>,
    windows: &Windows,
    k: usize,
    scores: Scores<'_>,
    max_len: usize,
    known: Option<Penalised>,
) -> Option<Penalised> {
    let n = p.n;
    let big = 2.0 * p.bound() + 1.0;
    // The extremes (fewest and most segments).
    let mut few = penalised(p, windows, big, scores)?;
    let mut many = if max_len >= n || !windows.constrained() {
        // n singletons (score 0 each, less the boundary costs) when no limit forbids them.
        if windows.constrained() {
            penalised(p, windows, -big, scores)?
        } else {
            Penalised { penalty: -big, score: p.singletons_score(), count: n, boundaries: (1..n).collect() }
        }
    } else {
        penalised(p, windows, -big, scores)?
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
        let mid = penalised(p, windows, chord, scores)?;
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
