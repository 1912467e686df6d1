//! Limits on YAML inputs, checked before a document is deserialised: its size, then its syntax
//! and nesting depth in one linear pass of an event parser that stops at the first problem.
//!
//! Why before: serde_yaml_ng loads every event of a document before its own recursion limit
//! applies, and its scanner spends time proportional to the flow nesting depth on every token,
//! so a deeply nested file costs quadratic time (depth 40K: seconds; a 200 KB file at depth
//! 100K: tens of seconds). The pass here costs the same per byte at any depth. The engine's
//! profiles and the harness's `yaml` module share it.

use saphyr_parser::{Event, Parser};
use std::io::Read;
use std::path::Path;

/// The largest YAML input read: 40× the largest real one (InferenceX's `perf-changelog.yaml`,
/// 0.4 MB).
pub const MAX_BYTES: u64 = 16 << 20;

/// The deepest nesting of mappings and lists: real inputs nest 8 levels at most, and
/// serde_yaml_ng gives up at 128 with a less helpful message.
pub const MAX_DEPTH: usize = 64;

/// The most values (scalars, mappings, lists) in one input: 47× the largest real one
/// (InferenceX's `nvidia-master.yaml`, 21K). Bounds parse time and memory where a file of tiny
/// list items would reach ~120 bytes of memory per byte of input.
pub const MAX_NODES: usize = 1_000_000;

/// Why a YAML input was refused before deserialising it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LimitError {
    #[error("is {bytes} bytes, over the {} MiB limit for YAML inputs", MAX_BYTES >> 20)]
    TooLarge { bytes: u64 },
    #[error("nests mappings and lists deeper than {MAX_DEPTH} levels (the limit for YAML inputs)")]
    TooDeep { line: usize },
    #[error("holds more than {MAX_NODES} values (the limit for YAML inputs)")]
    TooMany { line: usize },
    #[error("not valid YAML: {message}")]
    Syntax { line: usize, message: String },
}

impl LimitError {
    /// The 1-based line the problem was found on, when it has one.
    pub fn line(&self) -> Option<usize> {
        match self {
            LimitError::TooLarge { .. } => None,
            LimitError::TooDeep { line } | LimitError::TooMany { line } | LimitError::Syntax { line, .. } => Some(*line),
        }
    }

    /// What the user can do about it.
    pub fn fix(&self) -> &'static str {
        match self {
            LimitError::TooLarge { .. } => "check that this is the intended file: real configs and changelogs are well under 1 MB",
            LimitError::TooDeep { .. } => "flatten the structure: configs nest a few levels (check for unclosed `[` or `{`)",
            LimitError::TooMany { .. } => "check that this is the intended file: real configs hold tens of thousands of values",
            LimitError::Syntax { .. } => "fix the YAML syntax at that line (indentation, quoting, a missing ':' or '-')",
        }
    }
}

/// Why a YAML file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("cannot read: {0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Limit(LimitError),
}

/// Reads at most [`MAX_BYTES`] of a file (a device or a pipe too, so `/dev/zero` ends quickly).
pub fn read(path: &Path) -> Result<Vec<u8>, ReadError> {
    let file = std::fs::File::open(path)?;
    let known = file.metadata().ok().filter(|m| m.is_file()).map(|m| m.len());
    if let Some(bytes) = known.filter(|&n| n > MAX_BYTES) {
        return Err(ReadError::Limit(LimitError::TooLarge { bytes }));
    }
    let mut bytes = Vec::with_capacity(known.unwrap_or(0) as usize);
    file.take(MAX_BYTES + 1).read_to_end(&mut bytes)?;
    check_size(bytes.len()).map_err(ReadError::Limit)?;
    Ok(bytes)
}

fn check_size(len: usize) -> Result<(), LimitError> {
    if len as u64 > MAX_BYTES { Err(LimitError::TooLarge { bytes: len as u64 }) } else { Ok(()) }
}

/// Walks the events of `text`, giving each to `on_event` with its 1-based line. Stops at the
/// first syntax error, at the first mapping or list nested deeper than [`MAX_DEPTH`] and at the
/// value after the first [`MAX_NODES`].
pub fn walk<'a>(text: &'a str, mut on_event: impl FnMut(Event<'a>, usize)) -> Result<(), LimitError> {
    check_size(text.len())?;
    let (mut depth, mut nodes) = (0usize, 0usize);
    for ev in Parser::new_from_str(text) {
        let (ev, span) = ev.map_err(|e| {
            let line = e.marker().line();
            // The parser's own flow-level cap (255) fires before any event of a deep `[[[…`.
            if e.info().contains("recursion limit") {
                LimitError::TooDeep { line }
            } else {
                LimitError::Syntax { line, message: format!("{} (line {}, column {})", e.info(), line, e.marker().col() + 1) }
            }
        })?;
        let line = span.start.line();
        match ev {
            Event::SequenceStart(..) | Event::MappingStart(..) => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(LimitError::TooDeep { line });
                }
                nodes += 1;
            }
            Event::SequenceEnd | Event::MappingEnd => depth = depth.saturating_sub(1),
            Event::Scalar(..) | Event::Alias(..) => nodes += 1,
            _ => {}
        }
        if nodes > MAX_NODES {
            return Err(LimitError::TooMany { line });
        }
        on_event(ev, line);
    }
    Ok(())
}

/// [`walk`] without a consumer: size, syntax and depth only.
pub fn check(text: &str) -> Result<(), LimitError> {
    walk(text, |_, _| {})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deep_flow_nesting_is_refused_with_its_line() {
        let deep = format!("a: 1\nb: {}{}\n", "[".repeat(40_000), "]".repeat(40_000));
        assert_eq!(check(&deep), Err(LimitError::TooDeep { line: 2 }));
        let deep_maps = format!("x:\n  y: {}1{}\n", "{a: ".repeat(1000), "}".repeat(1000));
        assert_eq!(check(&deep_maps), Err(LimitError::TooDeep { line: 2 }));
    }

    #[test]
    fn deep_block_nesting_is_refused_with_its_line() {
        let compact = format!("# deep\n{}x\n", "- ".repeat(10_000));
        assert_eq!(check(&compact), Err(LimitError::TooDeep { line: 2 }));
        let indented: String = (0..100).map(|i| format!("{}k{i}:\n", " ".repeat(i))).collect();
        assert_eq!(check(&indented), Err(LimitError::TooDeep { line: MAX_DEPTH + 1 }));
    }

    #[test]
    fn nesting_up_to_the_limit_is_accepted() {
        let d = MAX_DEPTH;
        let ok = format!("{}1{}\n", "[".repeat(d), "]".repeat(d));
        assert_eq!(check(&ok), Ok(()));
        let over = format!("{}1{}\n", "[".repeat(d + 1), "]".repeat(d + 1));
        assert_eq!(check(&over), Err(LimitError::TooDeep { line: 1 }));
    }

    #[test]
    fn too_many_values_are_refused_with_the_line() {
        let many = format!("a: 1\nb: [{}1]\n", "1,".repeat(MAX_NODES));
        assert_eq!(check(&many), Err(LimitError::TooMany { line: 2 }));
    }

    #[test]
    fn syntax_errors_name_their_line() {
        let e = check("a: 1\nb: [1, 2\nc: 3\n").unwrap_err();
        assert!(matches!(e, LimitError::Syntax { .. }), "{e:?}");
        assert!(e.line().is_some_and(|l| l >= 2), "{e:?}");
    }

    #[test]
    fn oversized_files_and_endless_devices_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("big.yaml");
        std::fs::write(&f, vec![b'#'; MAX_BYTES as usize + 1]).unwrap();
        let e = read(&f).unwrap_err();
        assert!(matches!(e, ReadError::Limit(LimitError::TooLarge { bytes }) if bytes == MAX_BYTES + 1), "{e:?}");
        let e = read(Path::new("/dev/zero")).unwrap_err();
        assert!(matches!(e, ReadError::Limit(LimitError::TooLarge { .. })), "{e:?}");
    }
}
