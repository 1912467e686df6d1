//! The per-play cache-bust marker.

use sha2::{Digest, Sha256};

use super::mix64;

/// The per-play cache-bust marker: the first 12 hex chars of SHA-256 over (run id, recycle pass,
/// lane, trace id).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Marker {
    pub digest: [u8; 6],
}

impl Marker {
    /// The reference replay's marker (agentx-harness `build_cache_bust_marker`): the first 12 hex
    /// digits of `sha256("{benchmark id}:{pass}:{lane}:{trace id}")`, where `pass` counts the
    /// markers minted for that trace in the run.
    pub fn new(benchmark_id: &str, pass: u64, lane: u32, trace_id: &str) -> Self {
        let base = trace_id.split("::").next().unwrap_or(trace_id);
        let d = Sha256::digest(format!("{benchmark_id}:{pass}:{lane}:{base}").as_bytes());
        Self { digest: d[..6].try_into().expect("6 bytes") }
    }
    /// The 12 lowercase hex chars.
    pub fn hex(&self) -> String {
        hex::encode(self.digest)
    }
    /// The text prepended to the first user message.
    pub fn text(&self) -> String {
        format!("[rid:{}]\n\n", self.hex())
    }
    pub(super) fn salt(&self) -> u64 {
        let mut b = [0u8; 8];
        b[..6].copy_from_slice(&self.digest);
        mix64(u64::from_le_bytes(b) ^ 0x5249_443a)
    }
}
