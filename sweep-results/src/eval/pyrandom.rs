//! CPython's `random.Random` for an integer seed, as far as `Random.sample` needs it: lm-eval
//! draws the gsm8k few-shot examples with `Random(1234).sample(train, 5)`, one doc after another
//! from one generator, so the same examples need the same Mersenne Twister, the same seeding
//! (`init_by_array` over the seed's 32-bit words) and the same rejection sampling.

const N: usize = 624;
const M: usize = 397;

/// MT19937 as CPython's `_randommodule.c` seeds and reads it.
pub struct PyRandom {
    mt: [u32; N],
    index: usize,
}

impl PyRandom {
    /// `random.Random(seed)` for a non-negative integer below 2^64.
    pub fn new(seed: u64) -> PyRandom {
        // CPython splits abs(seed) into 32-bit words, least significant first; zero is one word.
        let key: Vec<u32> = if seed >> 32 == 0 { vec![seed as u32] } else { vec![seed as u32, (seed >> 32) as u32] };
        let mut r = PyRandom { mt: [0; N], index: N };
        r.init_by_array(&key);
        r
    }

    fn init_genrand(&mut self, s: u32) {
        self.mt[0] = s;
        for i in 1..N {
            let prev = self.mt[i - 1];
            self.mt[i] = 1_812_433_253u32.wrapping_mul(prev ^ (prev >> 30)).wrapping_add(i as u32);
        }
        self.index = N;
    }

    fn init_by_array(&mut self, key: &[u32]) {
        self.init_genrand(19_650_218);
        let (mut i, mut j) = (1usize, 0usize);
        for _ in 0..N.max(key.len()) {
            let prev = self.mt[i - 1];
            self.mt[i] = (self.mt[i] ^ (prev ^ (prev >> 30)).wrapping_mul(1_664_525)).wrapping_add(key[j]).wrapping_add(j as u32);
            i += 1;
            j += 1;
            if i >= N {
                self.mt[0] = self.mt[N - 1];
                i = 1;
            }
            if j >= key.len() {
                j = 0;
            }
        }
        for _ in 0..N - 1 {
            let prev = self.mt[i - 1];
            self.mt[i] = (self.mt[i] ^ (prev ^ (prev >> 30)).wrapping_mul(1_566_083_941)).wrapping_sub(i as u32);
            i += 1;
            if i >= N {
                self.mt[0] = self.mt[N - 1];
                i = 1;
            }
        }
        self.mt[0] = 0x8000_0000;
    }

    fn genrand_u32(&mut self) -> u32 {
        const MAG01: [u32; 2] = [0, 0x9908_b0df];
        if self.index >= N {
            for k in 0..N {
                let y = (self.mt[k] & 0x8000_0000) | (self.mt[(k + 1) % N] & 0x7fff_ffff);
                self.mt[k] = self.mt[(k + M) % N] ^ (y >> 1) ^ MAG01[(y & 1) as usize];
            }
            self.index = 0;
        }
        let mut y = self.mt[self.index];
        self.index += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// `getrandbits(k)` for 1 ≤ k ≤ 32.
    fn getrandbits(&mut self, k: u32) -> u32 {
        debug_assert!((1..=32).contains(&k));
        self.genrand_u32() >> (32 - k)
    }

    /// `_randbelow(n)` for 0 < n < 2^32: the smallest number of bits, redrawn until below n.
    pub fn randbelow(&mut self, n: u32) -> u32 {
        assert!(n > 0, "randbelow(0)");
        let k = 32 - n.leading_zeros();
        loop {
            let r = self.getrandbits(k);
            if r < n {
                return r;
            }
        }
    }

    /// The indices `Random.sample(range(n), k)` picks, in selection order.
    pub fn sample_indices(&mut self, n: usize, k: usize) -> Vec<usize> {
        assert!(k <= n, "sample larger than population");
        let n32 = u32::try_from(n).expect("population below 2^32");
        // CPython chooses between a pool and a set of picks by this size; both must be copied
        // because they consume the generator differently.
        let mut setsize = 21usize;
        if k > 5 {
            let l = ((k * 3) as f64).ln() / 4f64.ln();
            setsize += 4usize.pow(l.ceil() as u32);
        }
        if n <= setsize {
            let mut pool: Vec<usize> = (0..n).collect();
            (0..k)
                .map(|i| {
                    let j = self.randbelow(n32 - i as u32) as usize;
                    let picked = pool[j];
                    pool[j] = pool[n - i - 1];
                    picked
                })
                .collect()
        } else {
            let mut picked = Vec::with_capacity(k);
            for _ in 0..k {
                let mut j = self.randbelow(n32) as usize;
                while picked.contains(&j) {
                    j = self.randbelow(n32) as usize;
                }
                picked.push(j);
            }
            picked
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Expected values printed by CPython 3.11:
    //   r = random.Random(1234); [r.getrandbits(32) for _ in range(3)]
    //   random.Random(1234).sample(range(7473), 5)
    //   random.Random(42).sample(range(10), 3)
    #[test]
    fn matches_cpython() {
        let mut r = PyRandom::new(1234);
        let words: Vec<u32> = (0..3).map(|_| r.getrandbits(32)).collect();
        assert_eq!(words, PY_1234_WORDS);
        assert_eq!(PyRandom::new(1234).sample_indices(7473, 5), PY_1234_SAMPLE);
        assert_eq!(PyRandom::new(42).sample_indices(10, 3), PY_42_POOL_SAMPLE);
        assert_eq!(PyRandom::new(1 << 40).sample_indices(1000, 4), PY_2P40_SAMPLE);
    }

    const PY_1234_WORDS: [u32; 3] = [4_150_886_329, 3_342_196_574, 1_892_932_127];
    const PY_1234_SAMPLE: [usize; 5] = [6374, 3610, 957, 61, 742];
    const PY_42_POOL_SAMPLE: [usize; 3] = [1, 0, 4];
    const PY_2P40_SAMPLE: [usize; 4] = [106, 361, 686, 67];
}
