//! Which segments the token limits allow: a segment ending before block j
//! may start at any i in one contiguous range `lo[j]..=hi[j]` (token counts
//! are >= 0, so prefix sums are monotone), and both ends of the range only
//! move forward as j grows.

pub(crate) struct Windows {
    /// First start the cap allows (ignoring the floor); non-decreasing.
    pub cap_lo: Vec<usize>,
    lo: Vec<usize>,
    hi: Vec<usize>,
    constrained: bool,
}

impl Windows {
    pub fn new(prefix: &[u64], min_tokens: u64, max_tokens: Option<u64>) -> Self {
        let n = prefix.len() - 1;
        let (mut lo, mut hi) = (vec![1usize; n + 1], vec![0usize; n + 1]);
        let mut cap_lo = vec![0usize; n + 1];
        let (mut l, mut h) = (0usize, 0usize);
        for j in 1..=n {
            if let Some(cap) = max_tokens {
                while prefix[j] - prefix[l] > cap {
                    l += 1;
                }
            }
            while h + 1 < j && prefix[h + 1] + min_tokens <= prefix[j] {
                h += 1;
            }
            cap_lo[j] = l;
            // Empty window (stored as 1..=0) when even [0, j) is too small or
            // the cap excludes every start.
            if prefix[h] + min_tokens <= prefix[j] && l <= h {
                lo[j] = l;
                hi[j] = h;
            }
        }
        Self { cap_lo, lo, hi, constrained: min_tokens > 0 || max_tokens.is_some() }
    }

    pub fn lo(&self, j: usize) -> usize {
        self.lo[j]
    }

    pub fn range(&self, j: usize) -> std::ops::RangeInclusive<usize> {
        self.lo[j]..=self.hi[j]
    }

    pub fn len(&self, j: usize) -> usize {
        (self.hi[j] + 1).saturating_sub(self.lo[j])
    }

    /// Whether any token limit applies (else every split is allowed).
    pub fn constrained(&self) -> bool {
        self.constrained
    }

    /// Fewest and most segments any feasible split has (None: no split).
    pub fn count_range(&self, n: usize) -> Option<(usize, usize)> {
        if !self.constrained {
            return Some((1, n));
        }
        let (mut fewest, mut most) = (vec![usize::MAX; n + 1], vec![0usize; n + 1]);
        fewest[0] = 0;
        for j in 1..=n {
            for i in self.range(j) {
                if fewest[i] != usize::MAX {
                    fewest[j] = fewest[j].min(fewest[i] + 1);
                    most[j] = most[j].max(most[i] + 1);
                }
            }
        }
        (fewest[n] != usize::MAX).then(|| (fewest[n], most[n]))
    }
}
