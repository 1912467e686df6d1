//! All YAML access goes through this module: parsing (serde_yaml_ng, which rejects duplicate
//! mapping keys) and locating a YAML path's line (saphyr-parser events carry line marks, which
//! serde values do not), so every configuration error can name file, line and path.

use crate::problem::{Problem, Problems};
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
                Seg::Key(k) if i == 0 => write!(f, "{k}")?,
                Seg::Key(k) => write!(f, ".{k}")?,
                Seg::Index(n) => write!(f, "[{n}]")?,
            }
        }
        Ok(())
    }
}

/// Maps YAML paths to the 1-based line where the key (or sequence item) starts.
#[derive(Clone, Debug, Default)]
pub struct Locator {
    lines: HashMap<YPath, usize>,
}

enum Frame {
    Map { path: YPath, pending_key: Option<String>, expect_key: bool },
    Seq { path: YPath, next: usize },
}

impl Locator {
    /// Builds the index from the text; a text that does not parse yields an empty locator
    /// (the parse error itself is reported by [`parse`]).
    pub fn new(text: &str) -> Self {
        let mut lines = HashMap::new();
        let mut stack: Vec<Frame> = Vec::new();
        // Where the value that an event starts lives, and records its line.
        fn slot(stack: &mut [Frame], line: usize, lines: &mut HashMap<YPath, usize>) -> Option<YPath> {
            match stack.last_mut() {
                None => Some(YPath::root()),
                Some(Frame::Seq { path, next }) => {
                    let p = path.index(*next);
                    *next += 1;
                    lines.entry(p.clone()).or_insert(line);
                    Some(p)
                }
                Some(Frame::Map { path, pending_key, expect_key }) => {
                    if *expect_key {
                        None
                    } else {
                        *expect_key = true;
                        let k = pending_key.take().unwrap_or_default();
                        Some(path.key(&k))
                    }
                }
            }
        }
        for ev in Parser::new_from_str(text) {
            let Ok((ev, span)) = ev else { break };
            let line = span.start.line();
            match ev {
                Event::Scalar(s, ..) => {
                    if let Some(Frame::Map { path, pending_key, expect_key }) = stack.last_mut()
                        && *expect_key
                    {
                        lines.entry(path.key(&s)).or_insert(line);
                        *pending_key = Some(s.into_owned());
                        *expect_key = false;
                        continue;
                    }
                    slot(&mut stack, line, &mut lines);
                }
                Event::Alias(_) => {
                    slot(&mut stack, line, &mut lines);
                }
                Event::MappingStart(..) => {
                    let p = slot(&mut stack, line, &mut lines).unwrap_or_default();
                    stack.push(Frame::Map { path: p, pending_key: None, expect_key: true });
                }
                Event::SequenceStart(..) => {
                    let p = slot(&mut stack, line, &mut lines).unwrap_or_default();
                    stack.push(Frame::Seq { path: p, next: 0 });
                }
                Event::MappingEnd | Event::SequenceEnd => {
                    stack.pop();
                }
                _ => {}
            }
        }
        Locator { lines }
    }

    /// The line of `path`, or of its nearest located ancestor.
    pub fn line(&self, path: &YPath) -> Option<usize> {
        let mut p = path.0.clone();
        loop {
            if let Some(l) = self.lines.get(&YPath(p.clone())) {
                return Some(*l);
            }
            p.pop()?;
        }
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

/// Parses `text` (from `file`) as one YAML document. Duplicate mapping keys are errors.
pub fn parse(file: &Path, text: &str) -> Result<Doc, Problems> {
    match serde_yaml_ng::from_str::<Value>(text) {
        Ok(value) => Ok(Doc { file: file.to_path_buf(), value, loc: Locator::new(text) }),
        Err(e) => {
            let msg = e.to_string();
            // serde reports a duplicate at its mapping's start; point at the repeated key instead.
            let line = if msg.contains("duplicate") { duplicate_key_line(text) } else { None }.or_else(|| e.location().map(|l| l.line()));
            let fix = if msg.contains("duplicate") {
                "remove or rename the repeated key: each key may appear once per mapping"
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

/// Reads and parses a YAML file.
pub fn load(file: &Path) -> Result<Doc, Problems> {
    let bytes = std::fs::read(file).map_err(|e| Problems::io(file, &e))?;
    let text = std::str::from_utf8(&bytes).map_err(|e| Problems::not_utf8(file, &bytes, &e))?;
    parse(file, text)
}

/// Serialises a value as YAML text (used for writing recipes and plans).
pub fn to_string<T: serde::Serialize>(v: &T) -> Result<String, serde_yaml_ng::Error> {
    serde_yaml_ng::to_string(v)
}

/// Deserialises typed data from a YAML string (no locations needed).
pub fn from_str<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, serde_yaml_ng::Error> {
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
    fn duplicate_keys_are_rejected_with_line() {
        let err = parse(Path::new("x.yaml"), "a: 1\nb: 2\na: 3\n").expect_err("must fail");
        let s = err.to_string();
        assert!(s.contains("x.yaml:3"), "{s}");
        assert!(s.contains("duplicate"), "{s}");
    }
}
