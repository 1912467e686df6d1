//! Tests of the radix tree (`radix.rs`).
use super::*;
use crate::prompt::Prompt;

fn key(p: &Prompt) -> UnitKey {
    UnitKey::new(p.blocks().clone(), None, 1)
}

#[test]
fn match_insert_split_and_lru_eviction() {
    let mut t = RadixTree::new();
    let a = Prompt::from_block_ids(&[1, 2, 3, 4, 5, 6], 1, 6).unwrap();
    let b = Prompt::from_block_ids(&[1, 2, 3, 9, 9], 1, 5).unwrap();
    assert_eq!(t.insert(&key(&a), 6).units, 0);
    assert_eq!(t.total_units(), 6);
    let m = t.match_prefix(&key(&b), 5, true);
    assert_eq!(m.units, 3, "diverges after the third block");
    let ins = t.insert(&key(&b), 5);
    assert_eq!(ins.units, 3);
    assert_eq!(t.total_units(), 8);
    t.check_invariants();
    // lock b's path; a's tail is the only evictable leaf
    t.lock(ins.node);
    assert_eq!(t.protected_units(), 5);
    assert_eq!(t.evictable_units(), 3);
    assert_eq!(t.evict(100), 3);
    assert_eq!(t.total_units(), 5);
    t.check_invariants();
    assert!(!t.flush(), "locked tree cannot be flushed");
    t.unlock(ins.node);
    t.check_invariants();
    assert_eq!(t.evict(1), 2, "whole leaf node goes");
    assert_eq!(t.evict(10), 3, "then its parent, now a leaf");
    assert_eq!(t.total_units(), 0);
    t.check_invariants();
}

#[test]
fn lru_order_follows_last_match() {
    let mut t = RadixTree::new();
    let p1 = Prompt::unique(1, 1, 10);
    let p2 = Prompt::unique(2, 1, 10);
    t.insert(&key(&p1), 10);
    t.insert(&key(&p2), 10);
    t.match_prefix(&key(&p1), 10, true); // p1 now most recent
    t.evict(1);
    assert_eq!(t.match_prefix(&key(&p1), 10, false).units, 10);
    assert_eq!(t.match_prefix(&key(&p2), 10, false).units, 0);
}

mod props {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    /// Prompts from a few families sharing prefixes of random lengths.
    fn prompt(family: u64, split: u64, len: u64) -> Prompt {
        let ids: Vec<u64> =
            (0..len).map(|i| if i < split { family * 1000 + i } else { 7_000_000 + family * 1000 + split * 37 + i }).collect();
        Prompt::from_block_ids(&ids, 1, len).unwrap()
    }

    proptest! {
        #[test]
        fn matches_equal_brute_force_and_invariants_hold(ops in prop::collection::vec((0u8..4, 0u64..3, 0u64..30, 1u64..40), 1..120)) {
            let mut t = RadixTree::new();
            let mut present: HashSet<u64> = HashSet::new();
            let mut evicted_any = false;
            let mut locks: Vec<NodeId> = Vec::new();
            for (op, fam, split, len) in ops {
                let p = prompt(fam, split, len);
                let k = key(&p);
                match op {
                    0 => {
                        t.insert(&k, k.units());
                        present.extend(p.blocks().iter().copied());
                    }
                    1 => {
                        let m = t.match_prefix(&k, k.units(), true);
                        if !evicted_any {
                            let want = p.blocks().iter().take_while(|h| present.contains(h)).count() as u32;
                            prop_assert_eq!(m.units, want);
                        }
                    }
                    2 => {
                        let m = t.match_prefix(&k, k.units(), true);
                        if m.units > 0 {
                            t.lock(m.node);
                            locks.push(m.node);
                        }
                    }
                    _ => {
                        if let Some(n) = locks.pop() {
                            t.unlock(n);
                        }
                        let before = t.total_units();
                        let protected = t.protected_units();
                        let freed = t.evict(len);
                        evicted_any |= freed > 0;
                        prop_assert_eq!(t.total_units(), before - freed);
                        prop_assert_eq!(t.protected_units(), protected, "locked units never evicted");
                    }
                }
                t.check_invariants();
            }
            for n in locks {
                t.unlock(n);
            }
            t.check_invariants();
            prop_assert_eq!(t.protected_units(), 0);
            t.evict(u64::MAX);
            prop_assert_eq!(t.total_units(), 0);
            prop_assert_eq!(t.node_count(), 0);
        }
    }
}

#[test]
fn strided_units_match_at_page_granularity() {
    // 4 blocks per unit: a shared prefix of 6 blocks matches 1 unit (4 blocks)
    let a = Prompt::from_block_ids(&[1, 2, 3, 4, 5, 6, 7, 8], 64, 512).unwrap();
    let b = Prompt::from_block_ids(&[1, 2, 3, 4, 5, 6, 0, 0], 64, 512).unwrap();
    let mut t = RadixTree::new();
    t.insert(&UnitKey::new(a.blocks().clone(), None, 4), 2);
    let m = t.match_prefix(&UnitKey::new(b.blocks().clone(), None, 4), 2, true);
    assert_eq!(m.units, 1);
}
