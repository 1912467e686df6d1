//! KV cache: the radix prefix tree (pool accounting lives with each scheduler rank).

pub mod radix;

pub use radix::{Match, NodeId, RadixTree, UnitKey};
