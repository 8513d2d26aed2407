//! numpy's legacy `RandomState` stream (MT19937), only as far as
//! scikit-learn's spectral clustering draws from it: seeding with an int, the
//! ARPACK start vector `uniform(-1, 1, n)` (drawn even though we never use
//! it, because it moves the stream), and the masked-rejection `randint(n)`
//! that picks discretisation's first rotation row. Matching the stream makes
//! `seed=s` here pick the same row as `random_state=s` there.

const N: usize = 624;
const M: usize = 397;

pub struct Mt19937 {
    state: [u32; N],
    pos: usize,
}

impl Mt19937 {
    /// `numpy.random.RandomState(seed)` for an int seed (`init_genrand`).
    pub fn new(seed: u32) -> Self {
        let mut state = [0u32; N];
        state[0] = seed;
        for i in 1..N {
            let prev = state[i - 1];
            state[i] = 1_812_433_253u32.wrapping_mul(prev ^ (prev >> 30)).wrapping_add(i as u32);
        }
        Self { state, pos: N }
    }

    fn twist(&mut self) {
        for i in 0..N {
            let y = (self.state[i] & 0x8000_0000) | (self.state[(i + 1) % N] & 0x7fff_ffff);
            let mut next = self.state[(i + M) % N] ^ (y >> 1);
            if y & 1 != 0 {
                next ^= 0x9908_b0df;
            }
            self.state[i] = next;
        }
        self.pos = 0;
    }

    pub fn next_u32(&mut self) -> u32 {
        if self.pos >= N {
            self.twist();
        }
        let mut y = self.state[self.pos];
        self.pos += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// A double in [0, 1) from two draws (numpy's `random_sample`).
    pub fn next_f64(&mut self) -> f64 {
        let a = f64::from(self.next_u32() >> 5);
        let b = f64::from(self.next_u32() >> 6);
        (a * 67_108_864.0 + b) / 9_007_199_254_740_992.0
    }

    /// `uniform(low, high, count)`, discarding the values.
    pub fn skip_uniform(&mut self, count: usize) {
        for _ in 0..count {
            self.next_f64();
        }
    }

    /// `randint(high)` for `high >= 1` (legacy masked rejection sampling;
    /// `high` up to 2^32).
    pub fn randint(&mut self, high: u64) -> u64 {
        let range = high.saturating_sub(1);
        if range == 0 {
            return 0;
        }
        if range >= u64::from(u32::MAX) {
            // Beyond what any affinity matrix in memory can need.
            return u64::from(self.next_u32()) % high;
        }
        let mask = u64::MAX >> (range.leading_zeros());
        loop {
            let value = u64::from(self.next_u32()) & mask;
            if value <= range {
                return value;
            }
        }
    }
}
