//! One request's prompt: a turn of a conversation plan with the play's marker, laid out as a
//! stream of content atoms (system blocks, marker, named blocks, filler, tail) and its token ids.

use std::sync::Arc;

use super::vocab::TokenText;
use super::{ConversationPlan, MARKER_TOKENS, Marker, TurnShape, combine, mix64};

/// One request's prompt, compactly: a turn of a conversation plan and the play's marker. Cheap to clone.
#[derive(Debug, Clone)]
pub struct TurnPrompt {
    pub conversation: Arc<ConversationPlan>,
    pub turn: u32,
    pub marker: Option<Marker>,
}

/// One run of tokens with a content identity (see module docs).
#[derive(Debug, Clone, Copy)]
pub(super) struct Atom {
    /// Content identity: equal ids ⇒ equal tokens at equal offsets.
    pub(super) key: u64,
    pub(super) len: u32,
    /// Set for the marker (its tokens come from the vocabulary's marker ids).
    pub(super) marker: bool,
}

impl TurnPrompt {
    pub fn shape(&self) -> &TurnShape {
        &self.conversation.turns[self.turn as usize]
    }

    /// Recorded input tokens (blocks + filler + tail), without the marker.
    pub fn input_tokens(&self) -> u64 {
        self.shape().input_tokens
    }

    /// Tokens of the token-id form: `in` plus the marker.
    pub fn total_tokens(&self) -> u64 {
        self.input_tokens() + if self.marker.is_some() { MARKER_TOKENS as u64 } else { 0 }
    }

    /// (hit blocks, total blocks) of the theoretical prefix-cache hit rate.
    pub fn theoretical_hit(&self) -> (u32, u32) {
        let s = self.shape();
        (s.hit_blocks, s.total_blocks)
    }

    pub fn reset_context(&self) -> bool {
        self.shape().reset_context
    }

    pub(super) fn block_key(&self, id: u32) -> u64 {
        combine(self.conversation.trace_key, u64::from(id))
    }

    pub(super) fn filler_key(&self, pos: u32) -> u64 {
        combine(combine(self.conversation.conv_key, 0xF111_0000 | u64::from(self.turn)), u64::from(pos))
    }

    /// First token of block `pos` in the token-id form (the marker shifts blocks from the first
    /// user block on).
    fn block_token(&self, pos: u32) -> u64 {
        let s = self.shape();
        let shift = if self.marker.is_some() && pos >= s.first_user_block { MARKER_TOKENS as u64 } else { 0 };
        u64::from(pos) * u64::from(self.conversation.block_size) + shift
    }

    /// The token stream as atoms from the one holding token `start`; returns the atoms and the
    /// offset of `start` within the first.
    pub(super) fn atoms_from(&self, start: u64) -> (Vec<Atom>, u32) {
        let s = self.shape();
        let bs = u64::from(self.conversation.block_size);
        let fu = s.first_user_block;
        let b0 = match self.marker {
            Some(_) if start >= u64::from(fu) * bs + MARKER_TOKENS as u64 => {
                u64::from(fu) + (start - u64::from(fu) * bs - MARKER_TOKENS as u64) / bs
            }
            Some(_) if start >= u64::from(fu) * bs => u64::from(fu),
            _ => start / bs,
        }
        .min(u64::from(s.blocks)) as u32;
        let ids = self.conversation.block_ids_from(self.turn as usize, b0 as usize);
        let id_at = |pos: u32| ids[(pos - b0) as usize];
        let mut out = Vec::with_capacity((s.blocks - b0) as usize + 3);
        // The marker (emitted before block `fu`) comes first when `b0 ≤ fu`: blocks before it are unshifted.
        let first_token = if self.marker.is_some() && b0 <= fu { u64::from(b0) * bs } else { self.block_token(b0) };
        for pos in b0..s.blocks {
            if pos == fu
                && let Some(m) = self.marker
            {
                out.push(Atom { key: m.salt(), len: MARKER_TOKENS as u32, marker: true });
            }
            let key = if pos < s.named { self.block_key(id_at(pos)) } else { self.filler_key(pos) };
            out.push(Atom { key, len: self.conversation.block_size, marker: false });
        }
        if fu >= s.blocks
            && let Some(m) = self.marker
        {
            out.push(Atom { key: m.salt(), len: MARKER_TOKENS as u32, marker: true });
        }
        if s.tail_tokens > 0 {
            let key = if s.tail_named { self.block_key(id_at(s.named)) } else { self.filler_key(u32::MAX) };
            out.push(Atom { key, len: s.tail_tokens, marker: false });
        }
        // When b0 == blocks and the marker precedes the tail, `first_token` is the marker's start.
        let first_token = if b0 == s.blocks && fu >= s.blocks { u64::from(s.blocks) * bs } else { first_token };
        (out, start.saturating_sub(first_token) as u32)
    }

    /// The token ids of this prompt (marker ids from `vocab`).
    pub fn token_ids(&self, vocab: &dyn TokenText) -> Vec<u32> {
        let mut out = Vec::with_capacity(self.total_tokens() as usize);
        let hex = self.marker.map(|m| m.hex());
        for a in self.atoms_from(0).0 {
            push_atom(&mut out, &a, vocab, hex.as_deref());
        }
        out
    }
}

pub(super) fn push_atom(out: &mut Vec<u32>, a: &Atom, vocab: &dyn TokenText, hex: Option<&str>) {
    if a.marker {
        if let Some(h) = hex {
            out.extend(vocab.marker_ids(h));
        }
        return;
    }
    // Token i of a block is a function of (block key, i): a partial block is a prefix of the full one.
    for i in 0..a.len {
        out.push(vocab.content_token(mix64(a.key ^ (u64::from(i) << 40) ^ 0xB10C)));
    }
}
