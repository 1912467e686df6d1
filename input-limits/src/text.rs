//! What an error message quotes of its input: bounded excerpts, and the edit distance behind
//! "did you mean" hints.

/// Levenshtein distance, for "did you mean" hints (the harness's too). Words of very
/// different lengths are never close: their distance is given as the longer byte length (an
/// upper bound) at once, so a huge unknown word costs nothing per candidate instead of its
/// length times the candidate's.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    // `long` has at least len/4 characters, more than twice `short`'s plus 16.
    if long.len() > 8 * short.len() + 64 {
        return long.len();
    }
    strsim::levenshtein(a, b)
}

/// `message` with every quoted part (between a pair of `"` or `` ` ``, `\"` escaped inside)
/// longer than [`EXCERPT_CHARS`] cut by [`excerpt`]: parser messages quote the offending input
/// in full. Unquoted parts are prose, cut only past four times that, and the whole past twelve
/// (a quote inside the input itself can pair the wrong marks).
pub fn excerpt_quoted(message: &str) -> String {
    let cut = |s: &str, n: usize| match s.char_indices().nth(n) {
        None => s.to_string(),
        Some((at, _)) => format!("{}… ({} bytes)", &s[..at], s.len()),
    };
    let mut out = String::with_capacity(message.len().min(1024));
    let mut rest = message;
    while let Some(open) = rest.find(['"', '`']) {
        let q = rest.as_bytes()[open];
        out.push_str(&cut(&rest[..open], 4 * EXCERPT_CHARS));
        out.push(q as char);
        let Some(len) = closing(&rest.as_bytes()[open + 1..], q) else {
            out.push_str(&excerpt(&rest[open + 1..]));
            return cut(&out, 12 * EXCERPT_CHARS);
        };
        out.push_str(&excerpt(&rest[open + 1..open + 1 + len]));
        out.push(q as char);
        rest = &rest[open + 2 + len..];
    }
    out.push_str(&cut(rest, 4 * EXCERPT_CHARS));
    cut(&out, 12 * EXCERPT_CHARS)
}

/// The offset of the quote mark `q` that closes a quoted part, skipping backslash escapes.
fn closing(bytes: &[u8], q: u8) -> Option<usize> {
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b if b == q => return Some(i),
            _ => i += 1,
        }
    }
    None
}

/// How many characters of an input an error message quotes.
pub const EXCERPT_CHARS: usize = 80;

/// At most [`EXCERPT_CHARS`] characters of `s`; a longer text is cut and says how long it was,
/// so that an error never echoes a huge input.
pub fn excerpt(s: &str) -> String {
    match s.char_indices().nth(EXCERPT_CHARS) {
        None => s.to_string(),
        Some((at, _)) => format!("{}… ({} bytes)", &s[..at], s.len()),
    }
}
