//! KV cache: the radix prefix tree (pool accounting lives with each scheduler rank)
//! and the never-evicting reference set that measures what eviction cost.

pub mod ideal;
pub mod radix;

pub use ideal::IdealCache;
pub use radix::{Match, NodeId, RadixTree, UnitKey};
