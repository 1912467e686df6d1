//! The built-in deterministic vocabulary: no files, exact round trips.
//!
//! Every token is a fixed byte string computed from its id, so the vocabulary needs
//! no data and is the same forever. Ids:
//!
//! | ids | tokens |
//! |---|---|
//! | 0, 1, 2 | `<｜begin▁of▁sentence｜>`, `<｜end▁of▁sentence｜>`, `<｜▁pad▁｜>` |
//! | 3 ..= 258 | one raw byte each (the fallback for anything else) |
//! | [`SPACE_WORDS`] | `" "` + 1–3 lowercase ASCII letters (`" a"` … `" zzz"`) |
//! | then | 1–3 lowercase letters without the space |
//! | then | `" "` + an uppercase letter + 0–2 lowercase letters |
//! | then | an uppercase letter + 0–2 lowercase letters |
//! | then | 1–3 decimal digits (`"0"` … `"999"`, leading zeros kept) |
//! | then | chat-template markers ([`SPECIAL_TOKENS`]) |
//!
//! Encoding is greedy and deterministic: a special marker where one starts, else the
//! longest letter / digit token at that position, else one byte. So
//! `decode(encode(t)) == t` for every text, and `encode(decode(ids)) == ids` for every
//! sequence of [`is_free`] ids — which is how prompt synthesis makes a text of
//! exactly N tokens (see [`synthesize`]).

use std::ops::Range;
use std::sync::OnceLock;

/// Letter strings of length 1..=3 over 26 letters.
const LETTER_WORDS: u32 = 26 + 26 * 26 + 26 * 26 * 26;
const DIGIT_WORDS: u32 = 10 + 100 + 1000;

pub const BOS: u32 = 0;
pub const EOS: u32 = 1;
pub const PAD: u32 = 2;
const BYTE_BASE: u32 = 3;
const SPACE_LOWER_BASE: u32 = BYTE_BASE + 256;
const LOWER_BASE: u32 = SPACE_LOWER_BASE + LETTER_WORDS;
const SPACE_CAP_BASE: u32 = LOWER_BASE + LETTER_WORDS;
const CAP_BASE: u32 = SPACE_CAP_BASE + LETTER_WORDS;
const DIGIT_BASE: u32 = CAP_BASE + LETTER_WORDS;
const SPECIAL_BASE: u32 = DIGIT_BASE + DIGIT_WORDS;

/// Ids of `" "` + lowercase word tokens: any sequence of them round-trips.
pub const SPACE_WORDS: Range<u32> = SPACE_LOWER_BASE..LOWER_BASE;

/// Chat-template markers of every supported family, in id order after the digits.
pub const SPECIAL_TOKENS: &[&str] = &[
    "<｜User｜>",
    "<｜Assistant｜>",
    "<think>",
    "</think>",
    "<｜tool▁calls▁begin｜>",
    "<｜tool▁calls▁end｜>",
    "<｜tool▁call▁begin｜>",
    "<｜tool▁call▁end｜>",
    "<｜tool▁outputs▁begin｜>",
    "<｜tool▁outputs▁end｜>",
    "<｜tool▁output▁begin｜>",
    "<｜tool▁output▁end｜>",
    "<｜tool▁sep｜>",
    "<|im_start|>",
    "<|im_end|>",
    "<|endoftext|>",
];

const BOS_TEXT: &str = "<｜begin▁of▁sentence｜>";
const EOS_TEXT: &str = "<｜end▁of▁sentence｜>";
const PAD_TEXT: &str = "<｜▁pad▁｜>";

/// Size of the built-in vocabulary.
pub const VOCAB_SIZE: u32 = SPECIAL_BASE + SPECIAL_TOKENS.len() as u32;

/// Every marker the encoder recognises, with its id (all start with `<`).
fn markers() -> impl Iterator<Item = (&'static str, u32)> {
    [(BOS_TEXT, BOS), (EOS_TEXT, EOS), (PAD_TEXT, PAD)]
        .into_iter()
        .chain(SPECIAL_TOKENS.iter().enumerate().map(|(i, s)| (*s, SPECIAL_BASE + i as u32)))
}

/// Whether `id` round-trips in any sequence of such ids: `" "` + lowercase words and
/// single ASCII punctuation / whitespace bytes (never letters, digits or `<`).
pub fn is_free(id: u32) -> bool {
    if SPACE_WORDS.contains(&id) {
        return true;
    }
    if (BYTE_BASE..SPACE_LOWER_BASE).contains(&id) {
        let b = (id - BYTE_BASE) as u8;
        return b.is_ascii() && !b.is_ascii_alphanumeric() && b != b'<' && b != b' ';
    }
    false
}

/// The id of a marker string (BOS, EOS, pad or a chat-template marker).
pub fn marker_id(text: &str) -> Option<u32> {
    markers().find(|(s, _)| *s == text).map(|(_, id)| id)
}

fn letter_index(word: &[u8]) -> u32 {
    // Offsets by length, then the base-26 value of the lowercase letters.
    let offset = match word.len() {
        1 => 0,
        2 => 26,
        _ => 26 + 26 * 26,
    };
    let mut v = 0u32;
    for &c in word {
        v = v * 26 + (c.to_ascii_lowercase() - b'a') as u32;
    }
    offset + v
}

fn letter_word(mut index: u32, capital: bool) -> Vec<u8> {
    let len = if index < 26 {
        1
    } else if index < 26 + 676 {
        index -= 26;
        2
    } else {
        index -= 26 + 676;
        3
    };
    let mut out = vec![b'a'; len];
    for slot in out.iter_mut().rev() {
        *slot = b'a' + (index % 26) as u8;
        index /= 26;
    }
    if capital {
        out[0] = out[0].to_ascii_uppercase();
    }
    out
}

fn token_bytes(id: u32) -> Vec<u8> {
    match id {
        BOS => BOS_TEXT.as_bytes().to_vec(),
        EOS => EOS_TEXT.as_bytes().to_vec(),
        PAD => PAD_TEXT.as_bytes().to_vec(),
        i if i < SPACE_LOWER_BASE => vec![(i - BYTE_BASE) as u8],
        i if i < LOWER_BASE => {
            let mut v = vec![b' '];
            v.extend(letter_word(i - SPACE_LOWER_BASE, false));
            v
        }
        i if i < SPACE_CAP_BASE => letter_word(i - LOWER_BASE, false),
        i if i < CAP_BASE => {
            let mut v = vec![b' '];
            v.extend(letter_word(i - SPACE_CAP_BASE, true));
            v
        }
        i if i < DIGIT_BASE => letter_word(i - CAP_BASE, true),
        i if i < SPECIAL_BASE => {
            let mut i = i - DIGIT_BASE;
            let len = if i < 10 {
                1
            } else if i < 110 {
                i -= 10;
                2
            } else {
                i -= 110;
                3
            };
            let mut out = vec![b'0'; len];
            for slot in out.iter_mut().rev() {
                *slot = b'0' + (i % 10) as u8;
                i /= 10;
            }
            out
        }
        i if i < VOCAB_SIZE => SPECIAL_TOKENS[(i - SPECIAL_BASE) as usize].as_bytes().to_vec(),
        _ => Vec::new(),
    }
}

/// Token id → bytes, computed once.
fn table() -> &'static [Box<[u8]>] {
    static TABLE: OnceLock<Vec<Box<[u8]>>> = OnceLock::new();
    TABLE.get_or_init(|| (0..VOCAB_SIZE).map(|id| token_bytes(id).into_boxed_slice()).collect())
}

/// The bytes of one token (empty for ids outside the vocabulary).
pub fn token(id: u32) -> &'static [u8] {
    table().get(id as usize).map(|b| &b[..]).unwrap_or(&[])
}

/// Encodes `text` (never fails; see the module docs for the rules).
pub fn encode(text: &str) -> Vec<u32> {
    let b = text.as_bytes();
    // ~4 bytes per token for prose; reserve generously to avoid regrowth.
    let mut out = Vec::with_capacity(b.len() / 3 + 4);
    encode_into(b, &mut out);
    out
}

/// Encodes into `out` (appending).
pub fn encode_into(b: &[u8], out: &mut Vec<u32>) {
    let n = b.len();
    let mut i = 0;
    while i < n {
        let c = b[i];
        if c == b'<'
            && let Some((s, id)) = markers().find(|(s, _)| b[i..].starts_with(s.as_bytes()))
        {
            out.push(id);
            i += s.len();
            continue;
        }
        let (space, start) = if c == b' ' && i + 1 < n && b[i + 1].is_ascii_alphabetic() { (true, i + 1) } else { (false, i) };
        let first = b[start];
        if first.is_ascii_alphabetic() {
            // First letter of either case, then up to two lowercase letters.
            let mut end = start + 1;
            while end < n && end - start < 3 && b[end].is_ascii_lowercase() {
                end += 1;
            }
            let idx = letter_index(&b[start..end]);
            let base = match (space, first.is_ascii_uppercase()) {
                (true, false) => SPACE_LOWER_BASE,
                (false, false) => LOWER_BASE,
                (true, true) => SPACE_CAP_BASE,
                (false, true) => CAP_BASE,
            };
            out.push(base + idx);
            i = end;
        } else if first.is_ascii_digit() {
            let mut end = start + 1;
            while end < n && end - start < 3 && b[end].is_ascii_digit() {
                end += 1;
            }
            let mut v = 0u32;
            for &d in &b[start..end] {
                v = v * 10 + (d - b'0') as u32;
            }
            let offset = match end - start {
                1 => 0,
                2 => 10,
                _ => 110,
            };
            out.push(DIGIT_BASE + offset + v);
            i = end;
        } else {
            out.push(BYTE_BASE + c as u32);
            i += 1;
        }
    }
}

/// Decodes ids to text (ids outside the vocabulary decode to nothing; invalid UTF-8
/// from stray byte tokens is replaced by U+FFFD).
pub fn decode(ids: &[u32]) -> String {
    let mut bytes = Vec::with_capacity(ids.len() * 4);
    for &id in ids {
        bytes.extend_from_slice(token(id));
    }
    match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
}

/// Appends the text of `n` free word tokens drawn from `next_u64` and returns their
/// ids: the text encodes to exactly those ids.
pub fn synthesize(n: usize, mut next_u64: impl FnMut() -> u64) -> (String, Vec<u32>) {
    let width = SPACE_WORDS.end - SPACE_WORDS.start;
    let ids: Vec<u32> = (0..n).map(|_| SPACE_WORDS.start + (next_u64() % width as u64) as u32).collect();
    (decode(&ids), ids)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn layout_is_contiguous_and_distinct() {
        let mut seen = std::collections::HashSet::new();
        for id in 0..VOCAB_SIZE {
            let t = token(id);
            assert!(!t.is_empty(), "id {id} has no text");
            // Raw bytes deliberately duplicate one-letter / one-digit words.
            if id >= SPACE_LOWER_BASE {
                assert!(seen.insert(t.to_vec()), "id {id} duplicates another token");
            }
        }
        assert_eq!(token(VOCAB_SIZE), b"");
    }

    #[test]
    fn every_token_encodes_to_itself() {
        for id in 0..VOCAB_SIZE {
            // Byte tokens for letters and digits are only a fallback: the word wins.
            let fallback = (BYTE_BASE..SPACE_LOWER_BASE).contains(&id) && ((id - BYTE_BASE) as u8).is_ascii_alphanumeric();
            if fallback {
                continue;
            }
            let text = std::str::from_utf8(token(id));
            if let Ok(text) = text {
                assert_eq!(encode(text), vec![id], "token {id} {text:?}");
            }
        }
    }

    #[test]
    fn known_encodings() {
        let ids = encode("Hello world, 2026!");
        assert_eq!(decode(&ids), "Hello world, 2026!");
        // "Hel" "lo" " wor" "ld" "," " " "202" "6" "!"
        assert_eq!(ids.len(), 9);
        assert_eq!(encode("<｜User｜>hi"), vec![SPECIAL_BASE, LOWER_BASE + 26 + 7 * 26 + 8]);
        assert_eq!(marker_id("</think>"), Some(SPECIAL_BASE + 3));
    }

    #[test]
    fn synthesized_text_has_exactly_n_tokens() {
        let mut x = 42u64;
        let (text, ids) = synthesize(10_000, || {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            x >> 11
        });
        assert_eq!(encode(&text), ids);
    }

    proptest! {
        #[test]
        fn any_text_round_trips(s in "\\PC{0,200}") {
            prop_assert_eq!(decode(&encode(&s)), s);
        }

        #[test]
        fn free_sequences_round_trip(raw in proptest::collection::vec(0u32..VOCAB_SIZE, 0..300)) {
            let ids: Vec<u32> = raw.into_iter().filter(|&i| is_free(i)).collect();
            prop_assert_eq!(encode(&decode(&ids)), ids);
        }
    }
}
