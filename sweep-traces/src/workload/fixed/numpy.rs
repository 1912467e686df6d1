//! numpy's legacy global generator (`np.random.seed` / `np.random.randint`): MT19937 seeded by
//! `init_genrand`, and `randint`'s masked rejection sampling over 32-bit draws. InferenceX's
//! `benchmark_serving.py` draws every fixed-length request's input and output length and token
//! offset from it (seed 0), so the same seed gives the same lengths here as there.

const N: usize = 624;
const M: usize = 397;

/// `numpy.random.RandomState` with an integer seed (MT19937).
pub struct RandomState {
    key: [u32; N],
    pos: usize,
}

impl RandomState {
    /// `RandomState(seed)` / `np.random.seed(seed)` for a seed in 0..2³² (numpy's
    /// `mt19937_seed`, Matsumoto and Nishimura's `init_genrand`).
    pub fn new(seed: u32) -> Self {
        let mut key = [0u32; N];
        let mut s = seed;
        for (i, k) in key.iter_mut().enumerate() {
            *k = s;
            s = 1_812_433_253u32.wrapping_mul(s ^ (s >> 30)).wrapping_add(i as u32 + 1);
        }
        RandomState { key, pos: N }
    }

    fn twist(&mut self) {
        const UPPER: u32 = 0x8000_0000;
        const LOWER: u32 = 0x7fff_ffff;
        const MATRIX_A: u32 = 0x9908_b0df;
        for i in 0..N {
            let y = (self.key[i] & UPPER) | (self.key[(i + 1) % N] & LOWER);
            let mag = if y & 1 == 1 { MATRIX_A } else { 0 };
            self.key[i] = self.key[(i + M) % N] ^ (y >> 1) ^ mag;
        }
        self.pos = 0;
    }

    /// The next 32-bit output (`genrand_int32`).
    pub fn next_u32(&mut self) -> u32 {
        if self.pos >= N {
            self.twist();
        }
        let mut y = self.key[self.pos];
        self.pos += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// `randint(low, high, size=n)` (high exclusive) for ranges below 2³²: each value is a draw
    /// masked to the range's bit width, redrawn while above it (numpy's legacy
    /// `buffered_bounded_masked_uint32`).
    pub fn randint(&mut self, low: i64, high: i64, n: usize) -> Vec<i64> {
        assert!(high > low, "randint: empty range {low}..{high}");
        let rng = (high - 1 - low) as u64;
        assert!(rng <= u32::MAX as u64, "randint: ranges of 2^32 or more are not needed here");
        let rng = rng as u32;
        if rng == 0 {
            return vec![low; n];
        }
        let mask = u32::MAX >> rng.leading_zeros();
        (0..n)
            .map(|_| {
                if rng == u32::MAX {
                    return low + self.next_u32() as i64;
                }
                loop {
                    let v = self.next_u32() & mask;
                    if v <= rng {
                        return low + v as i64;
                    }
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values printed by numpy 2.x: `np.random.seed(0); np.random.randint(819, 1025, size=8)`
    /// twice, then `np.random.randint(0, 128000, size=8)`; and seed 7.
    #[test]
    fn draws_match_numpy() {
        let mut r = RandomState::new(0);
        assert_eq!(r.randint(819, 1025, 8), [991, 866, 936, 1011, 886, 1014, 922, 828]);
        assert_eq!(r.randint(819, 1025, 8), [840, 855, 906, 889, 907, 959, 877, 1012]);
        assert_eq!(r.randint(0, 128_000, 8), [32230, 18983, 108631, 116910, 89688, 101201, 124581, 82457]);
        let mut r = RandomState::new(7);
        assert_eq!(r.randint(6553, 8193, 5), [6728, 7773, 7090, 7055, 8156]);
        assert_eq!(r.randint(0, 1 << 31, 3), [2053951699, 959775639, 1956722279]);
    }

    #[test]
    fn a_one_value_range_draws_nothing() {
        let mut a = RandomState::new(3);
        assert_eq!(a.randint(5, 6, 4), [5, 5, 5, 5]);
        let mut b = RandomState::new(3);
        assert_eq!(a.next_u32(), b.next_u32());
    }
}
