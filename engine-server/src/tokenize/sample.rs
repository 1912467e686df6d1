//! Deterministic agentic-coding-like conversations (code, logs, prose) for
//! benchmarks and load tests of the tokenizers and the server.

use super::template::{ChatMessage, Role};

const IDENTS: &[&str] = &[
    "request",
    "config",
    "buffer",
    "index",
    "token",
    "cache",
    "handler",
    "stream",
    "result",
    "session",
    "worker",
    "scheduler",
    "batch",
    "prefix",
    "engine",
    "metrics",
    "value",
    "error",
    "path",
    "length",
    "offset",
    "client",
    "server",
    "queue",
    "event",
    "state",
    "timer",
    "frame",
];
const WORDS: &[&str] = &[
    "the", "function", "returns", "when", "error", "because", "file", "we", "need", "to", "update", "test", "fails", "after", "change",
    "and", "then", "check", "that", "it", "works", "with", "input", "output", "line", "code", "build", "passes", "now", "should", "also",
    "handle",
];

struct SplitMix(u64);
impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[(self.next() % xs.len() as u64) as usize]
    }
    /// A made-up identifier (so the text is not a handful of repeated words, which
    /// would flatter tokenizers' word caches).
    fn ident(&mut self) -> String {
        const SYL: &[&str] = &[
            "ka", "ro", "mi", "te", "su", "lo", "vin", "dar", "pre", "qua", "zet", "ul", "ex", "bri", "no", "sha", "gor", "fi", "wen",
            "ty", "op", "ix", "cal", "dem",
        ];
        let n = 1 + self.next() % 3;
        let mut s = String::new();
        for _ in 0..n {
            s.push_str(self.pick(SYL));
        }
        if self.next().is_multiple_of(3) {
            s.push('_');
            s.push_str(self.pick(IDENTS));
        }
        s
    }
}

/// Text of about `bytes` bytes: Rust-like code lines, log lines and prose.
pub fn text(seed: u64, bytes: usize) -> String {
    let mut r = SplitMix(seed);
    let mut s = String::with_capacity(bytes + 128);
    while s.len() < bytes {
        match r.next() % 5 {
            4 => {
                let (a, b) = (r.ident(), r.ident());
                s.push_str(&format!(
                    "src/{a}/{b}.rs:{}:{}: warning: unused variable `{}` (hash {:016x})\n",
                    r.next() % 900,
                    r.next() % 80,
                    r.ident(),
                    r.next()
                ));
            }
            0 => {
                let (a, b, c) = (r.ident(), r.pick(IDENTS), r.ident());
                let n = r.next() % 4096;
                s.push_str(&format!("    let {a}_{n} = self.{b}.get({c}_{}).map(|x| x + {n})?;\n", n % 97));
            }
            1 => {
                let (a, b) = (r.ident(), r.pick(IDENTS));
                s.push_str(&format!("fn {a}_{b}(&mut self, {b}: &[u8]) -> Result<usize, Error> {{\n"));
            }
            2 => {
                let ts = 1_700_000_000 + r.next() % 1_000_000;
                let a = r.pick(IDENTS);
                s.push_str(&format!(
                    "[{ts}] INFO {a}: processed {} items in {}.{:03}s (ok={})\n",
                    r.next() % 10_000,
                    r.next() % 10,
                    r.next() % 1000,
                    r.next().is_multiple_of(2)
                ));
            }
            _ => {
                let n = 6 + r.next() % 14;
                for i in 0..n {
                    if i > 0 {
                        s.push(' ');
                    }
                    s.push_str(r.pick(WORDS));
                }
                s.push_str(".\n");
            }
        }
    }
    s
}

/// A conversation of `n` messages (system, then user / assistant / tool turns) of
/// about `bytes_per_message` each.
pub fn conversation(seed: u64, n: usize, bytes_per_message: usize) -> Vec<ChatMessage> {
    (0..n)
        .map(|i| {
            let role = if i == 0 { Role::System } else { [Role::User, Role::Assistant, Role::Tool][(i - 1) % 3] };
            ChatMessage::new(role, text(seed.wrapping_add(i as u64), bytes_per_message))
        })
        .collect()
}

/// Like [`conversation`], with as many messages as it takes for `count(text)` over
/// the messages to reach `target_tokens`.
pub fn conversation_of(seed: u64, target_tokens: usize, bytes_per_message: usize, count: impl Fn(&str) -> usize) -> Vec<ChatMessage> {
    let mut out = Vec::new();
    let mut total = 0;
    while total < target_tokens {
        let i = out.len();
        let m = conversation(seed.wrapping_add(i as u64), 1, bytes_per_message).pop().expect("one message");
        let role = if i == 0 { Role::System } else { [Role::User, Role::Assistant, Role::Tool][(i - 1) % 3] };
        total += count(&m.content) + 2;
        out.push(ChatMessage::new(role, m.content));
    }
    out
}
