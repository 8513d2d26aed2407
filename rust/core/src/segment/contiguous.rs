//! Contiguous topic segmentation: split blocks 0..n into consecutive segments
//! maximising a coherence objective over the similarity matrix, exactly, by
//! dynamic programming.
//!
//! The objective (chosen on Choi 3-11 and DialSeg711 with
//! `benches/eval_segmentation.py`):
//!
//! 1. Evidence that blocks a and b share a topic: the similarity as a z-score
//!    within each block's own row, averaged over the two rows, clipped at 0,
//!    minus a threshold:
//!    `w(a,b) = max(((s - mu_a) / sd_a + (s - mu_b) / sd_b) / 2, 0) - 0.5`,
//!    where mu_a, sd_a are the mean and standard deviation of row a off the
//!    diagonal (sd shrunk towards the average: `sd_a^2 + 0.3 * mean(sd^2)`).
//!    Why: raw cosines of sparse vectors are dominated by common words, so a
//!    0.05 means "related" for one sentence and "noise" for another; per-row
//!    standardisation (a global version of C99's local ranking) removes that,
//!    the clip stops a few unrelated pairs from outweighing the related ones,
//!    and the threshold makes unrelated pairs cost something, which is what
//!    stops segments from growing.
//! 2. A segment [i, j) of L = j - i blocks scores `sum_{a != b in [i,j)}
//!    w(a,b) / L^0.3`; a segmentation scores the sum over its segments. The
//!    exponent is the length prior: with 0 (plain correlation clustering)
//!    long segments collect evidence quadratically and win too often; larger
//!    exponents discount long segments more (towards equal lengths).
//!
//! Segment scores come from a running sum per end position (O(1) each after
//! O(n) per end), so there is no n x n prefix-sum table. With a fixed count K
//! the exact DP costs O(K * P) for P candidate segments (n^2 / 2 without
//! token caps). For K > 24 it first tries the Lagrangian relaxation (one
//! O(P) pass per penalty, walking the upper concave hull of "best score with
//! c segments"): a solution of that with exactly K segments is provably
//! optimal for K. Only when K lies strictly inside a hull edge (rare) does it
//! fall back to the K-layer DP (see `solve`).
//!
//! Where the time goes (and what keeps it low; none of it changes a result,
//! every sum is added in the same order as a plain loop would):
//! - validating and summarising the matrix (`linalg::scan_square`): one
//!   tiled pass, the mirror of each 64-row step read along its rows, steps
//!   on rayon's threads;
//! - the running sums: the suffix sums of 8 consecutive rows are
//!   independent chains of additions, run interleaved (`objective`);
//! - the DP's arg-max: a max-only vector pass per chunk of 64 candidates,
//!   then the first position reaching the maximum in the best chunk;
//! - the Lagrangian search scores a band of short segments once and reuses
//!   it for every penalty; one full pass certifies the answer.
//!
//! Knuth/SMAWK-style monotonicity is not used: it needs Monge scores, but
//! `W(a,d) + W(b,c) - W(a,c) - W(b,d)` (W the within-segment evidence sums,
//! a < b < c < d) is twice the evidence between [a,b) and [c,d), of either
//! sign, so the optimal split points need not move monotonically.

use ndarray::ArrayView2;

use super::objective::prepare;
use super::solve::{lagrangian, layered};
use super::windows::Windows;
use crate::linalg::Real;
use crate::{Error, Result};

/// Up to this many segments the K-layer DP (one pass, k comparisons per
/// candidate) runs directly; beyond, the Lagrangian search (a few passes over
/// a band of short segments, then one full pass) is cheaper.
const LAYERED_MAX_K: usize = 24;

/// What decides the number and size of segments; see [`segment`].
#[derive(Debug, Clone, Default)]
pub struct SegmentOptions<'a> {
    /// Token count of each block (default: 1 per block).
    pub tokens: Option<&'a [i64]>,
    /// Exactly this many segments.
    pub n_segments: Option<usize>,
    /// About this many tokens per segment: `round(total / target_tokens)`
    /// segments, moved into the range `min_tokens` / `max_tokens` allow.
    pub target_tokens: Option<u64>,
    /// No segment has fewer tokens.
    pub min_tokens: u64,
    /// No segment has more tokens (a hard cap).
    pub max_tokens: Option<u64>,
    /// Cost of a boundary before each block, one per block (entry 0 unused),
    /// in the objective's units: subtracted once per boundary placed there
    /// (negative: a bonus). A prior on where topics change that the
    /// similarities cannot see, e.g. not right after a question.
    pub boundary_costs: Option<&'a [f64]>,
}

/// Contiguous topic segmentation of the n blocks whose pairwise similarities
/// are `similarity` (square, symmetric, finite; e.g. cosine similarities of
/// sentence or message embeddings; the diagonal is ignored).
///
/// Returns the boundaries: the index of the first block of every segment
/// except the first, increasing (so `K` segments give `K - 1` boundaries, and
/// segment s is `blocks[b[s-1]:b[s]]` with `b[-1] = 0`, `b[K-1] = n`).
///
/// The number of segments is `n_segments` if given, else
/// `round(total tokens / target_tokens)` moved into the feasible range, else
/// (only `max_tokens` given) the fewest segments that respect the caps.
/// Every segment has between `min_tokens` and `max_tokens` tokens; the split
/// maximises the objective described in the module docs exactly (ties go to
/// the earliest boundary positions found by the DP).
pub fn segment<T: Real>(similarity: ArrayView2<'_, T>, options: &SegmentOptions<'_>) -> Result<Vec<usize>> {
    let mut p = prepare(&similarity)?;
    if let Some(costs) = options.boundary_costs {
        p.set_boundary_costs(costs)?;
    }
    let n = p.n;
    let tokens = block_tokens(options.tokens, n)?;
    let mut prefix = vec![0u64; n + 1];
    for (i, t) in tokens.iter().enumerate() {
        prefix[i + 1] = prefix[i]
            .checked_add(*t)
            .ok_or_else(|| Error::invalid("tokens", "the total overflows a 64-bit integer"))?;
    }
    if let Some(cap) = options.max_tokens {
        if options.min_tokens > cap {
            return Err(Error::invalid(
                "min_tokens",
                format!("min_tokens={} is larger than max_tokens={cap}", options.min_tokens),
            ));
        }
    }
    let windows = Windows::new(&prefix, options.min_tokens, options.max_tokens);
    let (fewest, most) = windows.count_range(n).ok_or_else(|| infeasible(&tokens, options))?;
    let k = segment_count(options, prefix[n], n, fewest, most)?;
    if k == 1 {
        return Ok(Vec::new());
    }
    if k > LAYERED_MAX_K {
        if let Some(found) = lagrangian(&p, &windows, k) {
            return Ok(found);
        }
    }
    layered(&p, &windows, k).ok_or_else(|| {
        Error::invalid("n_segments", format!("no split into {k} segments satisfies min_tokens / max_tokens"))
    })
}

fn block_tokens(tokens: Option<&[i64]>, n: usize) -> Result<Vec<u64>> {
    match tokens {
        None => Ok(vec![1; n]),
        Some(t) => {
            if t.len() != n {
                return Err(Error::invalid(
                    "tokens",
                    format!("has {} entries but similarity has {n} rows; pass one count per block", t.len()),
                ));
            }
            t.iter()
                .enumerate()
                .map(|(i, &v)| {
                    u64::try_from(v)
                        .map_err(|_| Error::invalid("tokens", format!("entry {i} is {v}; token counts must be >= 0")))
                })
                .collect()
        }
    }
}

fn infeasible(tokens: &[u64], options: &SegmentOptions<'_>) -> Error {
    let total: u64 = tokens.iter().sum();
    if let Some(cap) = options.max_tokens {
        if let Some((i, t)) = tokens.iter().enumerate().find(|(_, &t)| t > cap) {
            return Error::invalid(
                "max_tokens",
                format!("block {i} alone has {t} tokens > max_tokens={cap}; raise max_tokens or split that block"),
            );
        }
    }
    if total < options.min_tokens {
        return Error::invalid(
            "min_tokens",
            format!("the blocks hold {total} tokens in all, fewer than min_tokens={}", options.min_tokens),
        );
    }
    Error::invalid(
        "max_tokens",
        format!(
            "no split has every segment within min_tokens={} and max_tokens={}; loosen one of them",
            options.min_tokens,
            options.max_tokens.map_or("None".to_string(), |c| c.to_string())
        ),
    )
}

fn segment_count(options: &SegmentOptions<'_>, total: u64, n: usize, fewest: usize, most: usize) -> Result<usize> {
    match (options.n_segments, options.target_tokens) {
        (Some(_), Some(_)) => Err(Error::invalid("n_segments", "pass n_segments or target_tokens, not both")),
        (Some(k), None) => {
            if k == 0 || k > n {
                return Err(Error::invalid(
                    "n_segments",
                    format!("must be between 1 and {n} (the number of blocks), got {k}"),
                ));
            }
            if k < fewest {
                return Err(Error::invalid(
                    "n_segments",
                    format!("{k} segments cannot respect max_tokens: the {total} tokens need at least {fewest}"),
                ));
            }
            if k > most {
                return Err(Error::invalid(
                    "n_segments",
                    format!(
                        "{k} segments cannot respect min_tokens: at most {most} segments of >= {} tokens fit",
                        options.min_tokens
                    ),
                ));
            }
            Ok(k)
        }
        (None, Some(target)) => {
            if target == 0 {
                return Err(Error::invalid("target_tokens", "must be >= 1"));
            }
            let k = ((total as f64 / target as f64).round() as usize).max(1);
            Ok(k.max(fewest).min(most))
        }
        (None, None) => match options.max_tokens {
            Some(_) => Ok(fewest),
            None => Err(Error::invalid(
                "n_segments",
                "pass n_segments, target_tokens or max_tokens to decide how many segments",
            )),
        },
    }
}
