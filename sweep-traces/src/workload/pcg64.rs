//! numpy's `default_rng(seed)`, bit for bit: `SeedSequence` entropy mixing, the `PCG64`
//! (XSL-RR 128/64) bit generator seeded from it, and `Generator.uniform`.
//!
//! The reference replay (agentx-harness) draws each lane's start instant t* as
//! `np.random.default_rng(seed).uniform(lo, hi)`, with `seed` the first 8 bytes (big-endian) of
//! `sha256("{base_seed}:{trace id}:{lane}")`. Reimplementing the generator exactly is what lets
//! `sweep` replay the same sessions from the same instants; the fixture in
//! `sweep-traces/tests/fixtures/numpy_pcg64.json` holds vectors produced by numpy itself.

use sha2::{Digest, Sha256};

const INIT_A: u32 = 0x43b0_d7e5;
const MULT_A: u32 = 0x931e_8875;
const INIT_B: u32 = 0x8b51_f9dd;
const MULT_B: u32 = 0x58f3_8ded;
const MIX_MULT_L: u32 = 0xca01_f9dd;
const MIX_MULT_R: u32 = 0x4973_f715;
const XSHIFT: u32 = 16;
const POOL_SIZE: usize = 4;
const PCG_MULTIPLIER: u128 = 0x2360_ed05_1fc6_5da4_4385_df64_9fcc_f645;

/// numpy's `SeedSequence(entropy)` with no spawn key, for an integer entropy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeedSequence {
    pool: [u32; POOL_SIZE],
}

fn hashmix(value: u32, hash_const: &mut u32) -> u32 {
    let mut v = value ^ *hash_const;
    *hash_const = hash_const.wrapping_mul(MULT_A);
    v = v.wrapping_mul(*hash_const);
    v ^ (v >> XSHIFT)
}

fn mix(x: u32, y: u32) -> u32 {
    let r = MIX_MULT_L.wrapping_mul(x).wrapping_sub(MIX_MULT_R.wrapping_mul(y));
    r ^ (r >> XSHIFT)
}

impl SeedSequence {
    /// An integer seed is split into 32-bit words, least significant first (`0` is one word).
    pub fn new(entropy: u128) -> Self {
        let mut words = Vec::with_capacity(4);
        let mut n = entropy;
        loop {
            words.push(n as u32);
            n >>= 32;
            if n == 0 {
                break;
            }
        }
        let mut pool = [0u32; POOL_SIZE];
        let mut hc = INIT_A;
        for (i, slot) in pool.iter_mut().enumerate() {
            *slot = hashmix(words.get(i).copied().unwrap_or(0), &mut hc);
        }
        for src in 0..POOL_SIZE {
            for dst in 0..POOL_SIZE {
                if src != dst {
                    pool[dst] = mix(pool[dst], hashmix(pool[src], &mut hc));
                }
            }
        }
        for &w in words.iter().skip(POOL_SIZE) {
            for slot in pool.iter_mut() {
                *slot = mix(*slot, hashmix(w, &mut hc));
            }
        }
        Self { pool }
    }

    /// `generate_state(n, np.uint64)`: pairs of 32-bit words, low word first.
    pub fn generate_state_u64(&self, n: usize) -> Vec<u64> {
        let mut hc = INIT_B;
        let words: Vec<u32> = (0..2 * n)
            .map(|i| {
                let mut v = self.pool[i % POOL_SIZE] ^ hc;
                hc = hc.wrapping_mul(MULT_B);
                v = v.wrapping_mul(hc);
                v ^ (v >> XSHIFT)
            })
            .collect();
        words.chunks_exact(2).map(|w| u64::from(w[0]) | (u64::from(w[1]) << 32)).collect()
    }
}

/// numpy's `PCG64` bit generator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pcg64 {
    state: u128,
    inc: u128,
    /// The high half of the last 64-bit draw, kept for the next 32-bit draw (as numpy does).
    spare_u32: Option<u32>,
}

impl Pcg64 {
    /// `PCG64(seed)` (what `default_rng(seed)` wraps).
    pub fn from_seed(seed: u128) -> Self {
        let v = SeedSequence::new(seed).generate_state_u64(4);
        let initstate = (u128::from(v[0]) << 64) | u128::from(v[1]);
        let initseq = (u128::from(v[2]) << 64) | u128::from(v[3]);
        let mut rng = Self { state: 0, inc: (initseq << 1) | 1, spare_u32: None };
        rng.step();
        rng.state = rng.state.wrapping_add(initstate);
        rng.step();
        rng
    }

    fn step(&mut self) {
        self.state = self.state.wrapping_mul(PCG_MULTIPLIER).wrapping_add(self.inc);
    }

    /// The next 64 random bits (XSL-RR output of the advanced state).
    pub fn next_u64(&mut self) -> u64 {
        self.step();
        let s = self.state;
        (((s >> 64) as u64) ^ (s as u64)).rotate_right((s >> 122) as u32)
    }

    /// numpy's `next_uint32`: the low half of a 64-bit draw, then its high half.
    pub fn next_u32(&mut self) -> u32 {
        if let Some(v) = self.spare_u32.take() {
            return v;
        }
        let n = self.next_u64();
        self.spare_u32 = Some((n >> 32) as u32);
        n as u32
    }

    /// An integer in `[0, rng]` by Lemire's method, as `Generator.integers` (and so
    /// `Generator.choice` over a list) draws it for ranges below 2³².
    pub fn bounded_u32(&mut self, rng: u32) -> u32 {
        if rng == 0 {
            return 0;
        }
        if rng == u32::MAX {
            return self.next_u32();
        }
        let excl = rng + 1;
        let mut m = u64::from(self.next_u32()) * u64::from(excl);
        let mut leftover = m as u32;
        if leftover < excl {
            let threshold = (u32::MAX - rng) % excl;
            while leftover < threshold {
                m = u64::from(self.next_u32()) * u64::from(excl);
                leftover = m as u32;
            }
        }
        (m >> 32) as u32
    }

    /// `Generator.random()`: 53 random bits in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / 9_007_199_254_740_992.0)
    }

    /// `Generator.uniform(low, high)`: `low + (high − low)·u`.
    pub fn uniform(&mut self, low: f64, high: f64) -> f64 {
        let range = high - low;
        low + range * self.next_f64()
    }
}

/// The reference replay's per-(trace, lane) seed: the first 8 bytes, big-endian, of
/// `sha256("{base_seed}:{trace_id}:{lane}")`.
pub fn trace_lane_seed(base_seed: u64, trace_id: &str, lane: u32) -> u64 {
    let d = Sha256::digest(format!("{base_seed}:{trace_id}:{lane}").as_bytes());
    u64::from_be_bytes(d[..8].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize)]
    struct Fixture {
        seed_sequences: Vec<SeedCase>,
        t_star: Vec<TStarCase>,
        choice: Vec<ChoiceCase>,
    }
    #[derive(serde::Deserialize)]
    struct ChoiceCase {
        seed: String,
        /// `rng.choice(list(range(lo, lo + n)))`, drawn repeatedly from one generator.
        lo: u32,
        n: u32,
        draws: Vec<u32>,
    }
    #[derive(serde::Deserialize)]
    struct SeedCase {
        /// Decimal, since seeds exceed JSON's exact integers.
        seed: String,
        pool: Vec<u32>,
        state_u64: Vec<String>,
        next_u64: Vec<String>,
        random: Vec<f64>,
    }
    #[derive(serde::Deserialize)]
    struct TStarCase {
        base_seed: u64,
        trace_id: String,
        lane: u32,
        seed: String,
        lo: f64,
        hi: f64,
        t_star: f64,
    }

    fn fixture() -> Fixture {
        serde_json::from_str(include_str!("../../tests/fixtures/numpy_pcg64.json")).expect("fixture parses")
    }

    #[test]
    fn seed_sequence_and_pcg64_match_numpy_bit_for_bit() {
        let f = fixture();
        assert!(f.seed_sequences.len() >= 8);
        for c in &f.seed_sequences {
            let seed: u128 = c.seed.parse().expect("decimal seed");
            let ss = SeedSequence::new(seed);
            assert_eq!(ss.pool.to_vec(), c.pool, "pool of seed {seed}");
            let want: Vec<u64> = c.state_u64.iter().map(|s| s.parse().expect("u64")).collect();
            assert_eq!(ss.generate_state_u64(want.len()), want, "generate_state of seed {seed}");
            let mut rng = Pcg64::from_seed(seed);
            for (k, w) in c.next_u64.iter().enumerate() {
                assert_eq!(rng.next_u64(), w.parse::<u64>().expect("u64"), "draw {k} of seed {seed}");
            }
            let mut rng = Pcg64::from_seed(seed);
            for (k, &w) in c.random.iter().enumerate() {
                assert_eq!(rng.next_f64().to_bits(), w.to_bits(), "random() {k} of seed {seed}");
            }
        }
    }

    #[test]
    fn choice_over_a_list_matches_numpy() {
        let f = fixture();
        assert!(f.choice.len() >= 5);
        for c in &f.choice {
            let mut rng = Pcg64::from_seed(c.seed.parse().expect("decimal seed"));
            let got: Vec<u32> = c.draws.iter().map(|_| c.lo + rng.bounded_u32(c.n - 1)).collect();
            assert_eq!(got, c.draws, "choice over {} values from seed {}", c.n, c.seed);
        }
    }

    #[test]
    fn t_star_draws_match_the_reference_replay() {
        let f = fixture();
        assert!(!f.t_star.is_empty());
        for c in &f.t_star {
            let seed = trace_lane_seed(c.base_seed, &c.trace_id, c.lane);
            assert_eq!(seed.to_string(), c.seed, "seed of {}:{}", c.trace_id, c.lane);
            let t = Pcg64::from_seed(u128::from(seed)).uniform(c.lo, c.hi);
            assert_eq!(t.to_bits(), c.t_star.to_bits(), "t* of {}:{}: {t} vs {}", c.trace_id, c.lane, c.t_star);
        }
    }
}
