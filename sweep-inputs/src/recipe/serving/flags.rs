//! Flags of a command line: split into (flag, value) items, merged with later values replacing
//! earlier ones in place, read by name, the parallel layout they give, concurrency ladders and
//! display quoting.

use super::ArgTopology;
use crate::recipe::master::Conc;

/// Splits argv into (flag, value) items: a `--flag` followed by a word that is not a flag takes
/// it as its value; `--flag=value` is one item.
pub fn flag_items(args: &[String]) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if let Some((f, v)) = a.split_once('=').filter(|_| a.starts_with("--")) {
            out.push((f.to_string(), Some(v.to_string())));
            i += 1;
        } else if a.starts_with("--") && args.get(i + 1).is_some_and(|n| !n.starts_with("--")) {
            out.push((a.clone(), Some(args[i + 1].clone())));
            i += 2;
        } else {
            out.push((a.clone(), None));
            i += 1;
        }
    }
    out
}

/// Appends `more` to `base`, replacing in place the value of a flag already present.
pub fn merge_args(base: &mut Vec<String>, more: &[String]) {
    let mut items = flag_items(base);
    for (f, v) in flag_items(more) {
        match items.iter_mut().find(|(bf, _)| *bf == f && f.starts_with("--")) {
            Some(slot) => slot.1 = v,
            None => items.push((f, v)),
        }
    }
    base.clear();
    for (f, v) in items {
        base.push(f);
        base.extend(v);
    }
}

/// The value of the first of `names` present in `args`.
pub fn flag_value<'a>(args: &'a [String], names: &[&str]) -> Option<&'a str> {
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        for n in names {
            if a == *n {
                return args.get(i + 1).map(|s| s.as_str());
            }
            if let Some(v) = a.strip_prefix(n).and_then(|r| r.strip_prefix('=')) {
                return Some(v);
            }
        }
        i += 1;
    }
    None
}

/// Reads tp / ep / DP attention from SGLang flags (both spellings).
pub fn arg_topology(args: &[String]) -> ArgTopology {
    let num = |names: &[&str]| flag_value(args, names).and_then(|v| v.parse::<u32>().ok());
    let tp = num(&["--tensor-parallel-size", "--tp-size", "--tp"]).unwrap_or(1);
    let ep = num(&["--expert-parallel-size", "--ep-size", "--ep"]).unwrap_or(1);
    let dp_attn = args.iter().any(|a| a == "--enable-dp-attention") || num(&["--attn-dp-size"]).is_some_and(|n| n > 1);
    ArgTopology { tp, ep, dp_attn }
}

/// Concurrency values of a row: a list verbatim, or a ×2 ladder clamped to the end.
pub fn expand_concs(c: &Conc) -> Vec<u32> {
    ladder(c, 2)
}

pub fn ladder(c: &Conc, step: u32) -> Vec<u32> {
    match c {
        Conc::List(v) => v.clone(),
        Conc::Range { start, end } => {
            let mut out = vec![*start];
            let mut x = *start;
            while x < *end {
                x = x.saturating_mul(step).min(*end);
                out.push(x);
            }
            out
        }
    }
}

/// Shell-style quoting for display only (launches never go through a shell): pasting it into a
/// shell gives back the same words.
pub fn shell_quote(words: &[String]) -> String {
    // Only a NUL byte cannot be quoted; argv strings never hold one.
    shlex::try_join(words.iter().map(String::as_str)).unwrap_or_else(|_| words.join(" "))
}
