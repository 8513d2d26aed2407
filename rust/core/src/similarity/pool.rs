//! A worker's candidates for the top k: the k largest lower bounds seen and
//! the rows whose upper bound can still reach them.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

/// Rows per unit of parallel work: large enough to amortise scheduling,
/// small enough to balance two to eight workers over 100,000 rows.
pub(super) const BLOCK: usize = 2048;

/// f64 ordered by `total_cmp`, for the heap.
#[derive(Clone, Copy, PartialEq)]
struct Key(f64);
impl Eq for Key {}
impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Key {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// One worker's state: the k largest lower bounds seen (their minimum is a
/// floor that only rises) and the rows whose upper bound reached the floor
/// when they were seen, pruned as the floor rises.
pub(super) struct Pool {
    k: usize,
    lowers: BinaryHeap<Reverse<Key>>,
    candidates: Vec<(usize, f64)>,
    prune_at: usize,
}

impl Pool {
    pub(super) fn new(k: usize) -> Self {
        let prune_at = 4 * k + 256;
        Pool { k, lowers: BinaryHeap::with_capacity(k + 1), candidates: Vec::with_capacity(prune_at), prune_at }
    }

    pub(super) fn floor(&self) -> f64 {
        match self.lowers.peek() {
            Some(Reverse(Key(v))) if self.lowers.len() >= self.k => *v,
            _ => f64::NEG_INFINITY,
        }
    }

    #[inline]
    pub(super) fn offer(&mut self, i: usize, lower: f64, upper: f64) {
        if upper < self.floor() {
            return;
        }
        self.candidates.push((i, upper));
        if self.lowers.len() < self.k {
            self.lowers.push(Reverse(Key(lower)));
        } else if lower > self.floor() {
            self.lowers.pop();
            self.lowers.push(Reverse(Key(lower)));
        }
        if self.candidates.len() >= self.prune_at {
            self.prune();
        }
    }

    /// How many rows are held as candidates (survivors and not yet pruned).
    pub(super) fn candidate_count(&self) -> usize {
        self.candidates.len()
    }

    /// The rows that may still be in the top k: each needs exact rescoring.
    pub(super) fn survivors(&self) -> impl Iterator<Item = usize> + '_ {
        let floor = self.floor();
        self.candidates.iter().filter(move |c| c.1 >= floor).map(|c| c.0)
    }

    fn prune(&mut self) {
        let floor = self.floor();
        self.candidates.retain(|c| c.1 >= floor);
        self.prune_at = (2 * self.candidates.len()).max(4 * self.k + 256);
    }

    pub(super) fn merge(mut self, other: Pool) -> Pool {
        for Reverse(Key(v)) in other.lowers {
            if self.lowers.len() < self.k {
                self.lowers.push(Reverse(Key(v)));
            } else if v > self.floor() {
                self.lowers.pop();
                self.lowers.push(Reverse(Key(v)));
            }
        }
        self.candidates.extend(other.candidates);
        self.prune();
        self
    }
}
