//! A prompt as chat messages: planned messages with content identities, their token ids, text
//! and the JSON a chat request carries.

use super::turn::{Atom, push_atom};
use super::vocab::TokenText;
use super::{ChatMessage, Marker, Role, Segment, TurnPrompt, combine};

impl TurnPrompt {
    /// the start of the first user message, ending with a user message.
    pub fn messages(&self, vocab: &dyn TokenText) -> Vec<ChatMessage> {
        self.message_ids(vocab).into_iter().map(|(role, ids)| ChatMessage { role, content: vocab.decode(&ids) }).collect()
    }

    /// Messages as (role, token ids) — what `messages` decodes.
    pub fn message_ids(&self, vocab: &dyn TokenText) -> Vec<(Role, Vec<u32>)> {
        let ids = self.conversation.block_ids(self.turn as usize);
        self.message_plans(&ids).iter().map(|m| (m.role, self.message_tokens(m, &ids, vocab))).collect()
    }

    /// The messages before synthesis, each with a content identity (see [`MessagePlan`]).
    /// `ids`: the turn's block ids ([`ConversationPlan::block_ids`]), which synthesis needs too.
    pub fn message_plans(&self, ids: &[u32]) -> Vec<MessagePlan> {
        let s = self.shape();
        let segs = self.conversation.segments(self.turn as usize);
        let bs = self.conversation.block_size;
        let mut out = Vec::with_capacity(segs.len());
        let mut marked = false;
        let last = segs.len().saturating_sub(1);
        for (i, seg) in segs.iter().enumerate() {
            let marker = if seg.role == Role::User && !marked { self.marker } else { None };
            marked |= marker.is_some();
            let tail = i == last && s.tail_tokens > 0;
            // A zero-length segment (a turn that added no tokens of its own) would be an empty
            // message, which OpenAI-compatible front ends such as sglang-router reject.
            if seg.start == seg.end && marker.is_none() && i != last {
                continue;
            }
            let mut key = combine(0x4D53_4700 | seg.role as u64, u64::from(bs));
            if let Some(m) = marker {
                key = combine(key, m.salt());
            }
            for pos in seg.start..seg.end {
                key = combine(key, self.position_key(pos, ids));
            }
            if tail {
                key = combine(combine(key, self.tail_key(ids)), u64::from(s.tail_tokens));
            }
            out.push(MessagePlan { role: seg.role, seg: *seg, marker, tail, key });
        }
        out
    }

    /// The token ids of one planned message; `ids` are the turn's block ids
    /// ([`ConversationPlan::block_ids`]).
    pub fn message_tokens(&self, m: &MessagePlan, ids: &[u32], vocab: &dyn TokenText) -> Vec<u32> {
        let bs = self.conversation.block_size;
        let mut toks =
            Vec::with_capacity(((m.seg.end - m.seg.start) * bs) as usize + if m.tail { self.shape().tail_tokens as usize } else { 0 });
        if let Some(mk) = m.marker {
            toks.extend(vocab.marker_ids(&mk.hex()));
        }
        for pos in m.seg.start..m.seg.end {
            push_atom(&mut toks, &Atom { key: self.position_key(pos, ids), len: bs, marker: false }, vocab, None);
        }
        if m.tail {
            push_atom(&mut toks, &Atom { key: self.tail_key(ids), len: self.shape().tail_tokens, marker: false }, vocab, None);
        }
        toks
    }

    /// One planned message as the JSON object a chat request carries (`{"role":…,"content":…}`,
    /// as serde writes a [`ChatMessage`]). A concatenative vocabulary writes the content tokens
    /// straight into the string; any other decodes the message first.
    pub fn message_json(&self, m: &MessagePlan, ids: &[u32], vocab: &dyn TokenText) -> Vec<u8> {
        let ser = |content: String| serde_json::to_vec(&ChatMessage { role: m.role, content }).expect("a message of strings serializes");
        if !vocab.write_escaped_content(0, 0, &mut Vec::new()) {
            return ser(vocab.decode(&self.message_tokens(m, ids, vocab)));
        }
        // `{"role":"…","content":"` and `"}` around the content.
        let empty = ser(String::new());
        let (open, close) = empty.split_at(empty.len() - 2);
        let bs = self.conversation.block_size;
        let tail = if m.tail { self.shape().tail_tokens } else { 0 };
        let mut out = Vec::with_capacity(open.len() + 2 + 6 * ((m.seg.end - m.seg.start) * bs + tail) as usize);
        out.extend_from_slice(open);
        if let Some(mk) = m.marker {
            let text = serde_json::to_vec(&vocab.decode(&vocab.marker_ids(&mk.hex()))).expect("a string serializes");
            out.extend_from_slice(&text[1..text.len() - 1]);
        }
        let atoms = (m.seg.start..m.seg.end).map(|pos| (self.position_key(pos, ids), bs)).chain(m.tail.then(|| (self.tail_key(ids), tail)));
        for (key, len) in atoms {
            vocab.write_escaped_content(key, len, &mut out);
        }
        out.extend_from_slice(close);
        // The message is kept (cached) for the conversation's later turns: with at most as much
        // spare room again (trimming closer measured slower: a 793K-token body 2.8 -> 5.6 ms).
        if out.capacity() > 2 * out.len() {
            out.shrink_to_fit();
        }
        out
    }

    /// Content key of the block at `pos` (named, else this turn's filler).
    fn position_key(&self, pos: u32, ids: &[u32]) -> u64 {
        if pos < self.shape().named { self.block_key(ids[pos as usize]) } else { self.filler_key(pos) }
    }

    /// Content key of the partial tail (a named partial block, else filler).
    fn tail_key(&self, ids: &[u32]) -> u64 {
        let s = self.shape();
        if s.tail_named { self.block_key(ids[s.named as usize]) } else { self.filler_key(u32::MAX) }
    }
}

/// One message of a prompt before synthesis: its role, blocks, whether the play's marker opens it
/// and the partial tail closes it, and its content identity. Equal keys mean equal text (the key
/// chains every block's content key, so a block that changed changes it): consecutive turns of a
/// conversation share all but their newest messages, which a client can then reuse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessagePlan {
    pub role: Role,
    seg: Segment,
    marker: Option<Marker>,
    tail: bool,
    pub key: u64,
}
