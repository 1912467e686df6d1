//! Seeded mutations of an input's bytes: each takes the input and the generator and returns
//! the mutated bytes. Structure-aware ones (keys, values, numbers, nesting) work on YAML and on
//! JSON text alike by looking for `key:` / `"key":` shapes, not by parsing.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// One mutation: its name (printed in findings) and the function.
type Mutation = (&'static str, fn(&[u8], &mut ChaCha8Rng) -> Vec<u8>);

pub const MUTATIONS: &[Mutation] = &[
    ("flip-bytes", flip_bytes),
    ("truncate", truncate),
    ("duplicate-line", duplicate_line),
    ("delete-line", delete_line),
    ("deep-nesting", deep_nesting),
    ("huge-number", huge_number),
    ("rename-key", rename_key),
    ("swap-values", swap_values),
    ("invalid-utf8", invalid_utf8),
    ("long-string", long_string),
    ("newline-flood", newline_flood),
    ("splice", splice),
];

/// The largest mutant: the limits under test start at 16 MiB, and larger inputs would only
/// measure the fuzzer's own copies of them.
pub const MAX_INPUT: usize = 32 << 20;

/// Applies one mutation (most often: a lightly changed input reaches the deeper checks) to
/// three; returns the result, cut at [`MAX_INPUT`], and their names.
pub fn mutate(data: &[u8], rng: &mut ChaCha8Rng) -> (Vec<u8>, Vec<&'static str>) {
    let mut out = data.to_vec();
    let mut names = Vec::new();
    let n = if rng.random_bool(0.6) { 1 } else { rng.random_range(2..=3) };
    for _ in 0..n {
        let (name, f) = MUTATIONS[rng.random_range(0..MUTATIONS.len())];
        out = f(&out, rng);
        out.truncate(MAX_INPUT);
        names.push(name);
    }
    (out, names)
}

fn pos(data: &[u8], rng: &mut ChaCha8Rng) -> usize {
    rng.random_range(0..=data.len())
}

fn insert(data: &[u8], at: usize, what: &[u8]) -> Vec<u8> {
    [&data[..at], what, &data[at..]].concat()
}

/// Line spans `(start, end)` without their newline.
fn lines(data: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, &b) in data.iter().enumerate() {
        if b == b'\n' {
            out.push((start, i));
            start = i + 1;
        }
    }
    if start < data.len() {
        out.push((start, data.len()));
    }
    out
}

fn flip_bytes(data: &[u8], rng: &mut ChaCha8Rng) -> Vec<u8> {
    let mut out = data.to_vec();
    if out.is_empty() {
        return out;
    }
    for _ in 0..rng.random_range(1..=8) {
        let i = rng.random_range(0..out.len());
        out[i] ^= rng.random_range(1..=255u8);
    }
    out
}

fn truncate(data: &[u8], rng: &mut ChaCha8Rng) -> Vec<u8> {
    data[..pos(data, rng)].to_vec()
}

fn duplicate_line(data: &[u8], rng: &mut ChaCha8Rng) -> Vec<u8> {
    let ls = lines(data);
    if ls.is_empty() {
        return data.to_vec();
    }
    let (s, e) = ls[rng.random_range(0..ls.len())];
    let copies = if rng.random_bool(0.1) && e - s < 4096 { 1000 } else { rng.random_range(1..=3) };
    let mut line = data[s..e].to_vec();
    line.push(b'\n');
    insert(data, s, &line.repeat(copies))
}

fn delete_line(data: &[u8], rng: &mut ChaCha8Rng) -> Vec<u8> {
    let ls = lines(data);
    if ls.is_empty() {
        return data.to_vec();
    }
    let (s, e) = ls[rng.random_range(0..ls.len())];
    [&data[..s], &data[(e + 1).min(data.len())..]].concat()
}

fn deep_nesting(data: &[u8], rng: &mut ChaCha8Rng) -> Vec<u8> {
    let n = [10, 100, 1000, 100_000][rng.random_range(0..4)];
    let (open, close): (&[u8], &[u8]) = match rng.random_range(0..4) {
        0 => (b"[", b"]"),
        1 => (b"{a: ", b"}"),
        2 => (b"{\"a\":", b"}"),
        _ => (b"- ", b""),
    };
    let mut nest = open.repeat(n);
    nest.extend_from_slice(b"1");
    nest.extend_from_slice(&close.repeat(n));
    // At a value's place when there is one (after `: `), else anywhere.
    let colons: Vec<usize> = data.windows(2).enumerate().filter(|(_, w)| w[0] == b':').map(|(i, _)| i + 1).collect();
    let at = if colons.is_empty() { pos(data, rng) } else { colons[rng.random_range(0..colons.len())] };
    insert(data, at, &nest)
}

const HUGE: &[&str] = &[
    "1e308",
    "1.8e309",
    "-1",
    "0",
    "-0.0",
    "4294967296",
    "18446744073709551616",
    "99999999999999999999999999999",
    "1e-320",
    "NaN",
    ".inf",
    "-.inf",
    "9223372036854775807",
];

fn huge_number(data: &[u8], rng: &mut ChaCha8Rng) -> Vec<u8> {
    let mut runs = Vec::new();
    let mut i = 0;
    while i < data.len() {
        if data[i].is_ascii_digit() {
            let s = i;
            while i < data.len() && (data[i].is_ascii_digit() || data[i] == b'.') {
                i += 1;
            }
            runs.push((s, i));
        }
        i += 1;
    }
    if runs.is_empty() {
        return data.to_vec();
    }
    let (s, e) = runs[rng.random_range(0..runs.len())];
    let with = HUGE[rng.random_range(0..HUGE.len())].as_bytes();
    [&data[..s], with, &data[e..]].concat()
}

/// Spans of keys: the word before a `:` (quoted or not).
fn keys(data: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for (i, &b) in data.iter().enumerate() {
        if b != b':' || i == 0 {
            continue;
        }
        let end = if data[i - 1] == b'"' { i - 1 } else { i };
        let start = data[..end].iter().rposition(|c| !(c.is_ascii_alphanumeric() || *c == b'-' || *c == b'_')).map_or(0, |p| p + 1);
        if start < end {
            out.push((start, end));
        }
    }
    out
}

fn rename_key(data: &[u8], rng: &mut ChaCha8Rng) -> Vec<u8> {
    let ks = keys(data);
    if ks.is_empty() {
        return data.to_vec();
    }
    let (s, e) = ks[rng.random_range(0..ks.len())];
    let mut key = data[s..e].to_vec();
    match rng.random_range(0..4) {
        0 => key.push(b'x'),
        1 => {
            key.remove(rng.random_range(0..key.len()));
        }
        2 => key.make_ascii_uppercase(),
        _ => key = b"zz-unknown".to_vec(),
    }
    [&data[..s], &key, &data[e..]].concat()
}

/// The value after a key: up to the end of the line, a `,` or a closing bracket at its level.
fn value_after(data: &[u8], colon: usize) -> (usize, usize) {
    let start = colon + 1;
    let mut depth = 0i32;
    let mut i = start;
    while i < data.len() {
        match data[i] {
            b'[' | b'{' => depth += 1,
            b']' | b'}' if depth == 0 => break,
            b']' | b'}' => depth -= 1,
            b',' | b'\n' if depth == 0 => break,
            _ => {}
        }
        i += 1;
    }
    (start, i)
}

fn swap_values(data: &[u8], rng: &mut ChaCha8Rng) -> Vec<u8> {
    let ks = keys(data);
    if ks.len() < 2 {
        return data.to_vec();
    }
    let colon = |k: (usize, usize)| if data.get(k.1) == Some(&b'"') { k.1 + 1 } else { k.1 };
    let mut a = value_after(data, colon(ks[rng.random_range(0..ks.len())]));
    let mut b = value_after(data, colon(ks[rng.random_range(0..ks.len())]));
    if a.0 > b.0 {
        std::mem::swap(&mut a, &mut b);
    }
    if a.1 > b.0 {
        return data.to_vec();
    }
    [&data[..a.0], &data[b.0..b.1], &data[a.1..b.0], &data[a.0..a.1], &data[b.1..]].concat()
}

fn invalid_utf8(data: &[u8], rng: &mut ChaCha8Rng) -> Vec<u8> {
    let bad: &[&[u8]] = &[b"\xff", b"\xfe\xff", b"\xc3", b"\xe2\x82", b"\x00", b"\r", b"\t"];
    insert(data, pos(data, rng), bad[rng.random_range(0..bad.len())])
}

fn long_string(data: &[u8], rng: &mut ChaCha8Rng) -> Vec<u8> {
    let n = [300, 1 << 16, 1 << 20][rng.random_range(0..3)];
    // Inside a quoted string when there is one, so ids and values grow.
    let quotes: Vec<usize> = data.iter().enumerate().filter(|&(_, &b)| b == b'"').map(|(i, _)| i + 1).collect();
    let at = if quotes.is_empty() { pos(data, rng) } else { quotes[rng.random_range(0..quotes.len())] };
    insert(data, at, &b"a".repeat(n))
}

fn newline_flood(data: &[u8], rng: &mut ChaCha8Rng) -> Vec<u8> {
    let n = [1000, 1 << 20][rng.random_range(0..2)];
    insert(data, pos(data, rng), &b"\n".repeat(n))
}

/// A chunk of the input copied elsewhere in it.
fn splice(data: &[u8], rng: &mut ChaCha8Rng) -> Vec<u8> {
    let a = pos(data, rng);
    let b = pos(data, rng);
    let (s, e) = (a.min(b), a.max(b).min(a.min(b) + 4096));
    insert(data, pos(data, rng), &data[s..e])
}
