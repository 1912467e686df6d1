//! The prefix cache an infinite pool would hold: every unit ever inserted, never evicted.
//!
//! Used only to measure what eviction cost: a request's ideal hit is the prefix this
//! set holds at its first admission, its real hit what the radix tree still holds.
//! Unit keys are chained hashes, so the set is prefix-closed along any key (inserting
//! unit d of a key inserts units 0..d with it): the matched length is monotone and a
//! binary search finds it in O(log units) lookups.

use super::radix::{IdMap, UnitKey};

/// Units ever inserted on one rank.
#[derive(Debug, Default)]
pub struct IdealCache {
    units: IdMap<()>,
}

impl IdealCache {
    pub fn new() -> IdealCache {
        IdealCache::default()
    }

    /// Units held.
    pub fn len(&self) -> usize {
        self.units.len()
    }
    pub fn is_empty(&self) -> bool {
        self.units.is_empty()
    }

    /// Longest held prefix of `key`, at most `max_units`.
    pub fn matched(&self, key: &UnitKey, max_units: u32) -> u32 {
        let (mut lo, mut hi) = (0u32, max_units.min(key.units())); // answer in [lo, hi]
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if self.units.contains_key(&key.get(mid - 1)) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        lo
    }

    /// Records the first `n_units` of `key` as computed.
    pub fn insert(&mut self, key: &UnitKey, n_units: u32) {
        let n = n_units.min(key.units());
        for u in self.matched(key, n)..n {
            self.units.insert(key.get(u), ());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompt::Prompt;

    fn key(ids: &[u64]) -> UnitKey {
        UnitKey::new(Prompt::from_block_ids(ids, 1, ids.len() as u64).unwrap().blocks().clone(), None, 1)
    }

    #[test]
    fn matches_the_longest_inserted_prefix() {
        let mut c = IdealCache::new();
        c.insert(&key(&[1, 2, 3, 4]), 3);
        assert_eq!(c.matched(&key(&[1, 2, 3, 4, 5]), 5), 3);
        assert_eq!(c.matched(&key(&[1, 2, 9]), 3), 2);
        assert_eq!(c.matched(&key(&[1, 2, 3]), 1), 1, "bounded by max_units");
        assert_eq!(c.matched(&key(&[7]), 1), 0);
        c.insert(&key(&[1, 2, 9]), 3);
        assert_eq!(c.len(), 4, "only the new unit is added");
        assert_eq!(c.matched(&key(&[1, 2, 9, 9]), 4), 3);
    }
}
