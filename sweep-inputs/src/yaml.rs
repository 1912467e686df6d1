//! All YAML access goes through this module: parsing (serde_yaml_ng, which rejects duplicate
//! mapping keys) and locating a YAML path's line (saphyr-parser events carry line marks, which
//! serde values do not), so every configuration error can name file, line and path.

use crate::problem::{Problem, Problems, excerpt};
use input_limits::yaml::{self as yaml_limits, LimitError, ReadError};
use saphyr_parser::{Event, Parser};
use serde_yaml_ng::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// One step of a YAML path: a mapping key or a sequence index.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Seg {
    Key(String),
    Index(usize),
}

/// A YAML path such as `dsr1-fp4-b200-sglang.scenarios.fixed-seq-len[0].search-space[1].tp`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct YPath(pub Vec<Seg>);

impl YPath {
    pub fn root() -> Self {
        YPath(Vec::new())
    }
    pub fn key(&self, k: &str) -> Self {
        let mut v = self.0.clone();
        v.push(Seg::Key(k.to_string()));
        YPath(v)
    }
    pub fn index(&self, i: usize) -> Self {
        let mut v = self.0.clone();
        v.push(Seg::Index(i));
        YPath(v)
    }
}

impl std::fmt::Display for YPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_empty() {
            return write!(f, "(document root)");
        }
        for (i, s) in self.0.iter().enumerate() {
            match s {
                Seg::Key(k) if i == 0 => write!(f, "{}", excerpt(k))?,
                Seg::Key(k) => write!(f, ".{}", excerpt(k))?,
                Seg::Index(n) => write!(f, "[{n}]")?,
            }
        }
        Ok(())
    }
}

/// Maps YAML paths to the 1-based line where the key (or sequence item) starts.
///
/// Stored as a tree (node, step) → (child node, line) rather than one full path per node, so
/// building it costs the same per node at any depth.
#[derive(Clone, Debug, Default)]
pub struct Locator {
    children: HashMap<(u32, Seg), (u32, usize)>,
}

/// The node id of the document root; ids of located nodes count up from 1.
const ROOT: u32 = 0;
/// The node of a value that cannot be addressed by a YAML path (inside a complex key).
const NOWHERE: u32 = u32::MAX;

enum Frame {
    Map { id: u32, pending: u32, expect_key: bool },
    Seq { id: u32, next: usize },
}

impl Locator {
    /// Builds the index from the text; a text that does not parse (or breaks a limit) yields the
    /// part before the problem (the problem itself is reported by [`parse`]).
    pub fn new(text: &str) -> Self {
        Self::build(text).0
    }

    /// The index, and whether the text kept within the limits (checked in the same pass).
    fn build(text: &str) -> (Self, Result<(), LimitError>) {
        let mut loc = Locator::default();
        let mut stack: Vec<Frame> = Vec::new();
        let checked = yaml_limits::walk(text, |ev, line| match ev {
            Event::Scalar(s, ..) => {
                if let Some(Frame::Map { id, pending, expect_key }) = stack.last_mut()
                    && *expect_key
                {
                    *pending = loc.child(*id, Seg::Key(s.into_owned()), line);
                    *expect_key = false;
                    return;
                }
                loc.slot(&mut stack, line);
            }
            Event::Alias(_) => {
                loc.slot(&mut stack, line);
            }
            Event::MappingStart(..) => {
                let id = loc.slot(&mut stack, line);
                stack.push(Frame::Map { id, pending: NOWHERE, expect_key: true });
            }
            Event::SequenceStart(..) => {
                let id = loc.slot(&mut stack, line);
                stack.push(Frame::Seq { id, next: 0 });
            }
            Event::MappingEnd | Event::SequenceEnd => {
                stack.pop();
            }
            _ => {}
        });
        (loc, checked)
    }

    /// Records `parent`'s child at `seg` (the first occurrence wins) and returns its node id.
    fn child(&mut self, parent: u32, seg: Seg, line: usize) -> u32 {
        if parent == NOWHERE {
            return NOWHERE;
        }
        let next = self.children.len() as u32 + 1;
        self.children.entry((parent, seg)).or_insert((next, line)).0
    }

    /// The node a value that starts on `line` fills: the document root, the next item of a
    /// sequence, or the value of the pending key of a mapping.
    fn slot(&mut self, stack: &mut [Frame], line: usize) -> u32 {
        match stack.last_mut() {
            None => ROOT,
            Some(Frame::Seq { id, next }) => {
                let (parent, i) = (*id, *next);
                *next += 1;
                self.child(parent, Seg::Index(i), line)
            }
            // A mapping or list as a key (`? [a, b]`): nothing inside it has a YAML path.
            Some(Frame::Map { expect_key, .. }) if *expect_key => {
                *expect_key = false;
                NOWHERE
            }
            Some(Frame::Map { pending, expect_key, .. }) => {
                *expect_key = true;
                std::mem::replace(pending, NOWHERE)
            }
        }
    }

    /// The line of `path`, or of its nearest located ancestor.
    pub fn line(&self, path: &YPath) -> Option<usize> {
        let mut node = ROOT;
        let mut found = None;
        for seg in &path.0 {
            let Some(&(id, line)) = self.children.get(&(node, seg.clone())) else { break };
            node = id;
            found = Some(line);
        }
        found
    }
}

/// A parsed YAML document with its origin, for precise errors.
#[derive(Clone, Debug)]
pub struct Doc {
    pub file: PathBuf,
    pub value: Value,
    pub loc: Locator,
}

impl Doc {
    pub fn problem(&self, path: &YPath, message: impl Into<String>, fix: impl Into<String>) -> Problem {
        Problem { file: self.file.clone(), line: self.loc.line(path), path: path.to_string(), message: message.into(), fix: fix.into() }
    }
}

/// Parses `text` (from `file`) as one YAML document. Duplicate mapping keys are errors; so are
/// a text over the size limit and nesting over the depth limit, found before deserialising (see
/// [`input_limits::yaml`]: deserialising a deep document costs quadratic time).
pub fn parse(file: &Path, text: &str) -> Result<Doc, Problems> {
    let (loc, checked) = Locator::build(text);
    checked.map_err(|e| limit_problem(file, &e))?;
    match serde_yaml_ng::from_str::<Value>(text) {
        Ok(value) => Ok(Doc { file: file.to_path_buf(), value, loc }),
        Err(e) => {
            let msg = e.to_string();
            // serde reports a duplicate at its mapping's start; point at the repeated key instead.
            let line = if msg.contains("duplicate") { duplicate_key_line(text) } else { None }.or_else(|| e.location().map(|l| l.line()));
            let fix = if msg.contains("duplicate") {
                "remove or rename the repeated key: each key may appear once per mapping"
            } else if msg.contains("repetition limit") || msg.contains("recursion limit") {
                "use fewer aliases (`*name`) and less nesting: the document expands too far"
            } else {
                "fix the YAML syntax at that line (indentation, quoting, a missing ':' or '-')"
            };
            Err(Problems(vec![Problem {
                file: file.to_path_buf(),
                line,
                path: String::new(),
                message: format!("not valid YAML: {msg}"),
                fix: fix.to_string(),
            }]))
        }
    }
}

/// A limit broken before parsing, as a problem naming the file, the line and the fix.
fn limit_problem(file: &Path, e: &LimitError) -> Problems {
    Problems::one(Problem::new(file, e.line(), "", e.to_string(), e.fix()))
}

/// The line of the first key that repeats an earlier key of the same mapping.
pub fn duplicate_key_line(text: &str) -> Option<usize> {
    // One frame per open container: Some(keys seen, expecting a key) for mappings, None for sequences.
    let mut stack: Vec<Option<(std::collections::HashSet<String>, bool)>> = Vec::new();
    let value_done = |stack: &mut Vec<Option<(std::collections::HashSet<String>, bool)>>| {
        if let Some(Some((_, expect_key))) = stack.last_mut() {
            *expect_key = true;
        }
    };
    for ev in Parser::new_from_str(text) {
        let Ok((ev, span)) = ev else { return None };
        match ev {
            Event::Scalar(s, ..) => match stack.last_mut() {
                Some(Some((seen, expect_key))) if *expect_key => {
                    if !seen.insert(s.into_owned()) {
                        return Some(span.start.line());
                    }
                    *expect_key = false;
                }
                _ => value_done(&mut stack),
            },
            Event::Alias(_) => value_done(&mut stack),
            Event::MappingStart(..) => stack.push(Some((Default::default(), true))),
            Event::SequenceStart(..) => stack.push(None),
            Event::MappingEnd | Event::SequenceEnd => {
                stack.pop();
                value_done(&mut stack);
            }
            _ => {}
        }
    }
    None
}

/// Reads a YAML file's bytes, at most the size limit (a device such as `/dev/zero` ends there).
pub fn read_bytes(file: &Path) -> Result<Vec<u8>, Problems> {
    yaml_limits::read(file).map_err(|e| match e {
        ReadError::Io(e) => Problems::io(file, &e),
        ReadError::Limit(e) => limit_problem(file, &e),
    })
}

/// Reads and parses a YAML file.
pub fn load(file: &Path) -> Result<Doc, Problems> {
    let bytes = read_bytes(file)?;
    let text = std::str::from_utf8(&bytes).map_err(|e| Problems::not_utf8(file, &bytes, &e))?;
    parse(file, text)
}

/// Reads a YAML file into typed data (no locations needed), within the same limits.
pub fn load_typed<T: serde::de::DeserializeOwned>(file: &Path) -> Result<T, Problems> {
    let bytes = read_bytes(file)?;
    let text = std::str::from_utf8(&bytes).map_err(|e| Problems::not_utf8(file, &bytes, &e))?;
    parse_typed(file, text)
}

/// Parses `text` (from `file`) into typed data within the limits (JSON is YAML too).
pub fn parse_typed<T: serde::de::DeserializeOwned>(file: &Path, text: &str) -> Result<T, Problems> {
    yaml_limits::check(text).map_err(|e| limit_problem(file, &e))?;
    serde_yaml_ng::from_str(text).map_err(|e| {
        let line = e.location().map(|l| l.line());
        Problems::one(Problem::new(
            file,
            line,
            "",
            format!("not the expected YAML: {e}"),
            "compare the file with its format in docs/formats.md",
        ))
    })
}

/// Serialises a value as YAML text (used for writing recipes and plans).
pub fn to_string<T: serde::Serialize>(v: &T) -> Result<String, serde_yaml_ng::Error> {
    serde_yaml_ng::to_string(v)
}

/// Deserialises typed data from a YAML string (no locations needed), within the same limits.
pub fn from_str<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, serde_yaml_ng::Error> {
    yaml_limits::check(text).map_err(|e| {
        let at = e.line().map(|l| format!(" at line {l}")).unwrap_or_default();
        <serde_yaml_ng::Error as serde::de::Error>::custom(format!("{e}{at}; {}", e.fix()))
    })?;
    serde_yaml_ng::from_str(text)
}

/// A short, user-facing description of a YAML value's type.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "an integer",
        Value::Number(_) => "a float",
        Value::String(_) => "a string",
        Value::Sequence(_) => "a list",
        Value::Mapping(_) => "a mapping",
        Value::Tagged(_) => "a tagged value",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locator_finds_keys_and_items() {
        let text = "a:\n  b:\n    - {x: 1, y: 2}\n    - x: 3\n      y: 4\nc: [1, 2]\n";
        let loc = Locator::new(text);
        let p = YPath::root().key("a").key("b").index(1).key("y");
        assert_eq!(loc.line(&p), Some(5));
        assert_eq!(loc.line(&YPath::root().key("a").key("b").index(0).key("y")), Some(3));
        assert_eq!(loc.line(&YPath::root().key("c")), Some(6));
        // Unknown leaf falls back to the nearest ancestor.
        assert_eq!(loc.line(&YPath::root().key("a").key("zzz")), Some(1));
        assert_eq!(p.to_string(), "a.b[1].y");
    }

    #[test]
    fn locator_skips_complex_keys() {
        let loc = Locator::new("? [a, b]\n: 1\nc:\n  - x\n");
        assert_eq!(loc.line(&YPath::root().key("c").index(0)), Some(4));
    }

    /// Deserialising this took seconds (quadratic in the depth); it is refused before, at its line.
    #[test]
    fn deep_nesting_is_refused_before_parsing_with_its_line() {
        let deep = format!("a: 1\nb: {}{}\n", "[".repeat(40_000), "]".repeat(40_000));
        let e = parse(Path::new("m.yaml"), &deep).unwrap_err().to_string();
        assert!(e.contains("m.yaml:2") && e.contains("deeper than 64 levels"), "{e}");
        assert!(e.contains("fix: flatten"), "{e}");
        let e = from_str::<Value>(&deep).unwrap_err().to_string();
        assert!(e.contains("deeper than 64 levels") && e.contains("at line 2"), "{e}");
    }

    #[test]
    fn oversized_and_endless_files_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("big.yaml");
        std::fs::write(&f, vec![b'#'; yaml_limits::MAX_BYTES as usize + 1]).unwrap();
        let e = load(&f).unwrap_err().to_string();
        assert!(e.contains("big.yaml") && e.contains("over the 16 MiB limit"), "{e}");
        let e = load(Path::new("/dev/zero")).unwrap_err().to_string();
        assert!(e.contains("/dev/zero") && e.contains("limit"), "{e}");
    }

    #[test]
    fn long_keys_are_cut_in_paths() {
        let p = YPath::root().key(&"k".repeat(1000)).key("tp");
        assert_eq!(p.to_string(), format!("{}… (1000 bytes).tp", "k".repeat(crate::problem::EXCERPT_CHARS)));
    }

    #[test]
    fn duplicate_keys_are_rejected_with_line() {
        let err = parse(Path::new("x.yaml"), "a: 1\nb: 2\na: 3\n").expect_err("must fail");
        let s = err.to_string();
        assert!(s.contains("x.yaml:3"), "{s}");
        assert!(s.contains("duplicate"), "{s}");
    }
}
