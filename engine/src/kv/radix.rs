//! Page-granular radix prefix cache over chained hashes.
//!
//! Keys are sequences of *units* (one unit = one KV page, or one prompt block when
//! blocks are larger than pages); a unit's key is the chained hash of the last block
//! it covers, so equal keys at depth d mean equal prefixes through unit d. A node
//! covers a contiguous unit range of one key (shared `Arc`, no copying), matching a
//! node costs O(1) when it matches whole and O(log len) when it diverges, so match
//! and insert cost O(nodes on the path), independent of prompt length.
//!
//! Semantics follow SGLang's radix cache: matches split nodes, matching touches the
//! path (LRU clock), in-use paths are locked (ref-counted, never evicted), eviction
//! removes unlocked leaves least-recently-used first and a parent that becomes an
//! unlocked leaf becomes evictable in turn.

use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

/// The keys are already uniformly distributed hashes: hash them by identity.
#[derive(Default)]
pub(crate) struct IdHasher(u64);
impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ b as u64;
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}
pub(crate) type IdMap<V> = HashMap<u64, V, BuildHasherDefault<IdHasher>>;

/// A unit-strided view of a chained block sequence, optionally continued by a
/// second array (generated tokens' blocks after the prompt's).
#[derive(Clone, Debug)]
pub struct UnitKey {
    a: Arc<[u64]>,
    b: Option<Arc<[u64]>>,
    stride: u32,
    units: u32,
}

impl UnitKey {
    /// `stride` = blocks per unit (≥ 1).
    pub fn new(a: Arc<[u64]>, b: Option<Arc<[u64]>>, stride: u32) -> UnitKey {
        let stride = stride.max(1);
        let blocks = a.len() + b.as_ref().map_or(0, |b| b.len());
        UnitKey { a, b, stride, units: (blocks / stride as usize) as u32 }
    }
    /// Units available in this key.
    pub fn units(&self) -> u32 {
        self.units
    }
    #[inline]
    pub fn get(&self, unit: u32) -> u64 {
        let j = (unit as usize + 1) * self.stride as usize - 1;
        if j < self.a.len() { self.a[j] } else { self.b.as_ref().expect("unit within key")[j - self.a.len()] }
    }
}

pub type NodeId = u32;
pub const ROOT: NodeId = 0;

#[derive(Debug)]
struct Node {
    parent: NodeId,
    children: Vec<(u64, NodeId)>,
    key: Option<UnitKey>,
    start: u32,
    len: u32,
    /// Key of the node's last unit, kept inline so a whole-node match needs no
    /// access to the shared key array (the common case when walking a path).
    end_hash: u64,
    last_access: u64,
    lock: u32,
    alive: bool,
    /// A cached sequence ended here with its sliding-window KV (SGLang's SWA radix cache keeps
    /// the window only at such tails; see [`RadixTree::match_tail_hinted`]).
    tail: bool,
}

/// Result of a prefix match: matched units and the node the match ends on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Match {
    pub units: u32,
    pub node: NodeId,
}

/// The radix tree. Sizes are in units; the owner converts to tokens.
#[derive(Debug)]
pub struct RadixTree {
    nodes: Vec<Node>,
    free: Vec<NodeId>,
    root_children: IdMap<NodeId>,
    /// Unlocked, childless, non-root nodes ordered by (last access, id).
    leaves: BTreeSet<(u64, NodeId)>,
    clock: u64,
    total: u64,
    evictable: u64,
    protected: u64,
}

impl Default for RadixTree {
    fn default() -> Self {
        Self::new()
    }
}

impl RadixTree {
    pub fn new() -> RadixTree {
        RadixTree {
            nodes: vec![Node {
                parent: ROOT,
                children: Vec::new(),
                key: None,
                start: 0,
                len: 0,
                end_hash: 0,
                last_access: 0,
                lock: 1, // the root is never evictable
                alive: true,
                tail: true,
            }],
            free: Vec::new(),
            root_children: IdMap::default(),
            leaves: BTreeSet::new(),
            clock: 0,
            total: 0,
            evictable: 0,
            protected: 0,
        }
    }

    /// Units stored.
    pub fn total_units(&self) -> u64 {
        self.total
    }
    /// Units in unlocked nodes (reclaimable by eviction).
    pub fn evictable_units(&self) -> u64 {
        self.evictable
    }
    /// Units in locked (in-use) nodes.
    pub fn protected_units(&self) -> u64 {
        self.protected
    }
    /// Live nodes, root excluded.
    pub fn node_count(&self) -> usize {
        self.nodes.len() - 1 - self.free.len()
    }

    /// Parent of a live non-root node.
    pub fn parent(&self, node: NodeId) -> Option<NodeId> {
        (node != ROOT && self.nodes[node as usize].alive).then(|| self.nodes[node as usize].parent)
    }

    fn child(&self, node: NodeId, h: u64) -> Option<NodeId> {
        if node == ROOT {
            self.root_children.get(&h).copied()
        } else {
            self.nodes[node as usize].children.iter().find(|(k, _)| *k == h).map(|&(_, c)| c)
        }
    }
    fn set_child(&mut self, node: NodeId, h: u64, c: NodeId) {
        if node == ROOT {
            self.root_children.insert(h, c);
        } else {
            let ch = &mut self.nodes[node as usize].children;
            if let Some(e) = ch.iter_mut().find(|(k, _)| *k == h) {
                e.1 = c;
            } else {
                ch.push((h, c));
            }
        }
    }
    fn remove_child(&mut self, node: NodeId, h: u64) {
        if node == ROOT {
            self.root_children.remove(&h);
        } else {
            let ch = &mut self.nodes[node as usize].children;
            if let Some(i) = ch.iter().position(|(k, _)| *k == h) {
                ch.swap_remove(i);
            }
        }
    }
    fn has_children(&self, node: NodeId) -> bool {
        if node == ROOT { !self.root_children.is_empty() } else { !self.nodes[node as usize].children.is_empty() }
    }
    fn is_evictable_leaf(&self, id: NodeId) -> bool {
        let n = &self.nodes[id as usize];
        id != ROOT && n.alive && n.lock == 0 && n.children.is_empty()
    }
    fn touch(&mut self, id: NodeId, clock: u64) {
        let was_leaf = self.is_evictable_leaf(id);
        let n = &mut self.nodes[id as usize];
        if n.last_access == clock {
            return;
        }
        if was_leaf {
            self.leaves.remove(&(n.last_access, id));
        }
        n.last_access = clock;
        if was_leaf {
            self.leaves.insert((clock, id));
        }
    }

    fn alloc(&mut self, node: Node) -> NodeId {
        if let Some(id) = self.free.pop() {
            self.nodes[id as usize] = node;
            id
        } else {
            self.nodes.push(node);
            (self.nodes.len() - 1) as NodeId
        }
    }

    /// Splits `id` so that it keeps only its last `len − j` units; returns the new
    /// parent node holding the first `j` units.
    fn split(&mut self, id: NodeId, j: u32) -> NodeId {
        let (parent, key, start, last_access, lock) = {
            let n = &self.nodes[id as usize];
            (n.parent, n.key.clone().expect("non-root"), n.start, n.last_access, n.lock)
        };
        let first = key.get(start);
        let rest = key.get(start + j);
        let end_hash = key.get(start + j - 1);
        let new = self.alloc(Node {
            parent,
            children: vec![(rest, id)],
            key: Some(key),
            start,
            len: j,
            end_hash,
            last_access,
            lock,
            alive: true,
            // The window KV is at the end of the sequence: it stays with the lower half.
            tail: false,
        });
        self.set_child(parent, first, new);
        let n = &mut self.nodes[id as usize];
        n.parent = new;
        n.start += j;
        n.len -= j;
        new
    }

    /// Longest cached prefix of `key` (at most `max_units`), splitting the node the
    /// match ends in. With `touch`, the matched path becomes most recently used.
    ///
    /// Only the node the match ends on is stamped: an ancestor's recency matters
    /// only once it is a leaf, i.e. after all its descendants were evicted, and
    /// eviction hands each evicted node's stamp to its parent, so the LRU order is
    /// the one of stamping the whole path (SGLang), at O(1) instead of O(depth).
    pub fn match_prefix(&mut self, key: &UnitKey, max_units: u32, touch: bool) -> Match {
        self.match_from(key, max_units, ROOT, 0, touch)
    }

    /// Like [`match_prefix`](Self::match_prefix), resuming from an earlier match of
    /// the same key when it is still valid (a hint costs O(1) to check), so that
    /// re-matching a queued request each pass does not walk its whole path.
    pub fn match_prefix_hinted(&mut self, key: &UnitKey, max_units: u32, hint: Match, touch: bool) -> Match {
        let max = max_units.min(key.units());
        if hint.node != ROOT && hint.units > 0 && hint.units <= max {
            let n = &self.nodes[hint.node as usize];
            if n.alive && n.start + n.len == hint.units && n.key.as_ref().is_some_and(|k| k.get(hint.units - 1) == key.get(hint.units - 1))
            {
                return self.match_from(key, max_units, hint.node, hint.units, touch);
            }
        }
        self.match_from(key, max_units, ROOT, 0, touch)
    }

    fn match_from(&mut self, key: &UnitKey, max_units: u32, start: NodeId, start_d: u32, touch: bool) -> Match {
        let max = max_units.min(key.units());
        let clock = if touch {
            self.clock += 1;
            self.clock
        } else {
            0
        };
        let mut node = start;
        let mut d = start_d;
        while d < max {
            let Some(c) = self.child(node, key.get(d)) else {
                break;
            };
            let (ckey, cstart, clen, cend) = {
                let n = &self.nodes[c as usize];
                (n.key.as_ref().expect("non-root"), n.start, n.len, n.end_hash)
            };
            let lim = clen.min(max - d);
            // Chained keys: equality at offset i implies equality before i.
            let q = key.get(d + lim - 1);
            let j = if (lim == clen && cend == q) || ckey.get(cstart + lim - 1) == q {
                lim
            } else {
                let (mut lo, mut hi) = (1u32, lim - 1); // eq(lo-1) true, answer in [lo, hi]
                while lo < hi {
                    let mid = (lo + hi).div_ceil(2);
                    if ckey.get(cstart + mid - 1) == key.get(d + mid - 1) {
                        lo = mid;
                    } else {
                        hi = mid - 1;
                    }
                }
                lo
            };
            let c = if j < clen { self.split(c, j) } else { c };
            node = c;
            d += j;
            if j < clen {
                break;
            }
        }
        if touch && node != ROOT {
            self.touch(node, clock);
        }
        Match { units: d, node }
    }

    /// Like [`match_prefix_hinted`](Self::match_prefix_hinted), for a model whose sliding-window
    /// layers keep their KV only at the tails of cached sequences (SGLang's SWA radix cache
    /// tombstones the window KV of every token a request's window has left): the match ends at
    /// the deepest cached sequence end on its path, as a prefix is reusable only where the last
    /// window's KV is still there.
    pub fn match_tail_hinted(&mut self, key: &UnitKey, max_units: u32, hint: Match, touch: bool) -> Match {
        let m = self.match_prefix_hinted(key, max_units, hint, touch);
        let mut node = m.node;
        while node != ROOT && !self.nodes[node as usize].tail {
            node = self.nodes[node as usize].parent;
        }
        if node == m.node {
            return m;
        }
        let n = &self.nodes[node as usize];
        Match { units: if node == ROOT { 0 } else { n.start + n.len }, node }
    }

    /// Marks the end of a cached sequence (a finished request's prompt and output): its window
    /// KV stays, so a later prefix match may end here.
    pub fn mark_tail(&mut self, node: NodeId) {
        self.nodes[node as usize].tail = true;
    }

    /// Inserts the first `n_units` of `key`; returns how many were already cached
    /// and the node holding the last unit.
    pub fn insert(&mut self, key: &UnitKey, n_units: u32) -> Match {
        self.insert_hinted(key, n_units, Match { units: 0, node: ROOT })
    }

    /// [`insert`](Self::insert) resuming from an earlier match of the same key
    /// (e.g. the node a request holds locked).
    pub fn insert_hinted(&mut self, key: &UnitKey, n_units: u32, hint: Match) -> Match {
        let n_units = n_units.min(key.units());
        let m = self.match_prefix_hinted(key, n_units, hint, true);
        if m.units >= n_units {
            return m;
        }
        let parent = m.node;
        let parent_was_leaf = self.is_evictable_leaf(parent);
        let len = n_units - m.units;
        let id = self.alloc(Node {
            parent,
            children: Vec::new(),
            key: Some(key.clone()),
            start: m.units,
            len,
            end_hash: key.get(n_units - 1),
            last_access: self.clock,
            lock: 0,
            alive: true,
            tail: false,
        });
        self.set_child(parent, key.get(m.units), id);
        if parent_was_leaf {
            let la = self.nodes[parent as usize].last_access;
            self.leaves.remove(&(la, parent));
        }
        self.leaves.insert((self.clock, id));
        self.total += len as u64;
        self.evictable += len as u64;
        Match { units: m.units, node: id }
    }

    /// Locks the path from `node` to the root (in use by a request).
    pub fn lock(&mut self, mut node: NodeId) {
        while node != ROOT {
            let leaf = self.is_evictable_leaf(node);
            let n = &mut self.nodes[node as usize];
            if n.lock == 0 {
                self.evictable -= n.len as u64;
                self.protected += n.len as u64;
                if leaf {
                    self.leaves.remove(&(n.last_access, node));
                }
            }
            n.lock += 1;
            node = n.parent;
        }
    }

    /// Releases a lock taken with [`lock`](Self::lock) on the same node.
    pub fn unlock(&mut self, mut node: NodeId) {
        while node != ROOT {
            let n = &mut self.nodes[node as usize];
            debug_assert!(n.lock > 0, "unlock of an unlocked node");
            n.lock -= 1;
            let parent = n.parent;
            if n.lock == 0 {
                self.evictable += n.len as u64;
                self.protected -= n.len as u64;
                if n.children.is_empty() {
                    let la = n.last_access;
                    self.leaves.insert((la, node));
                }
            }
            node = parent;
        }
    }

    /// Evicts unlocked leaves, least recently used first, until at least `units`
    /// were freed or nothing is evictable. Returns the units freed.
    pub fn evict(&mut self, units: u64) -> u64 {
        let mut freed = 0u64;
        while freed < units {
            let Some((_, id)) = self.leaves.pop_first() else {
                break;
            };
            let (parent, first, len, stamp) = {
                let n = &self.nodes[id as usize];
                let k = n.key.as_ref().expect("non-root");
                (n.parent, k.get(n.start), n.len, n.last_access)
            };
            self.remove_child(parent, first);
            // The parent inherits the recency of its subtree (see `match_prefix`).
            let p = &mut self.nodes[parent as usize];
            p.last_access = p.last_access.max(stamp);
            let n = &mut self.nodes[id as usize];
            n.alive = false;
            n.key = None;
            n.children = Vec::new();
            self.free.push(id);
            self.total -= len as u64;
            self.evictable -= len as u64;
            freed += len as u64;
            if parent != ROOT && !self.has_children(parent) && self.nodes[parent as usize].lock == 0 {
                let la = self.nodes[parent as usize].last_access;
                self.leaves.insert((la, parent));
            }
        }
        freed
    }

    /// Empties the tree; refused (returns false) while anything is locked.
    pub fn flush(&mut self) -> bool {
        if self.protected > 0 {
            return false;
        }
        *self = RadixTree::new();
        true
    }

    /// Checks internal invariants (tests and debug builds).
    pub fn check_invariants(&self) {
        let mut total = 0u64;
        let mut evictable = 0u64;
        let mut protected = 0u64;
        let mut leaves = 0usize;
        for (i, n) in self.nodes.iter().enumerate().skip(1) {
            if !n.alive {
                continue;
            }
            total += n.len as u64;
            if n.lock == 0 {
                evictable += n.len as u64;
            } else {
                protected += n.len as u64;
            }
            if self.is_evictable_leaf(i as NodeId) {
                leaves += 1;
                assert!(self.leaves.contains(&(n.last_access, i as NodeId)));
            }
            let p = &self.nodes[n.parent as usize];
            assert!(p.alive);
            assert!(n.lock <= p.lock || n.parent == ROOT, "child locked more than parent");
        }
        assert_eq!(total, self.total);
        assert_eq!(evictable, self.evictable);
        assert_eq!(protected, self.protected);
        assert_eq!(leaves, self.leaves.len());
    }
}

#[cfg(test)]
#[path = "radix_tests.rs"]
mod tests;
