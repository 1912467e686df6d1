//! Strict field access over a YAML mapping: typed getters that record precise problems
//! (file, line, YAML path, fix) instead of failing on the first one.

use crate::problem::{Problems, excerpt, nearest};
use crate::yaml::{Doc, YPath, type_name};
use serde_yaml_ng::{Mapping, Value};

pub struct Checker<'a> {
    pub doc: &'a Doc,
    pub problems: Problems,
}

impl<'a> Checker<'a> {
    pub fn new(doc: &'a Doc) -> Self {
        Checker { doc, problems: Problems::default() }
    }

    pub fn err(&mut self, path: &YPath, message: impl Into<String>, fix: impl Into<String>) {
        let p = self.doc.problem(path, message, fix);
        self.problems.push(p);
    }

    pub fn mapping<'v>(&mut self, v: &'v Value, path: &YPath, what: &str) -> Option<&'v Mapping> {
        match v {
            Value::Mapping(m) => Some(m),
            other => {
                self.err(
                    path,
                    format!("{what} must be a mapping, found {}", type_name(other)),
                    format!("write {what} as `key: value` lines"),
                );
                None
            }
        }
    }

    pub fn sequence<'v>(&mut self, v: &'v Value, path: &YPath, what: &str) -> Option<&'v Vec<Value>> {
        match v {
            Value::Sequence(s) => Some(s),
            other => {
                self.err(
                    path,
                    format!("{what} must be a list, found {}", type_name(other)),
                    format!("write {what} as a YAML list (`- item` lines or `[a, b]`)"),
                );
                None
            }
        }
    }

    /// Rejects keys outside `allowed`, suggesting the nearest allowed key.
    pub fn known_keys(&mut self, m: &Mapping, path: &YPath, allowed: &[&str], what: &str) {
        for k in m.keys() {
            let Some(name) = k.as_str() else {
                self.err(path, format!("{what} has a non-string key {}", excerpt(&format!("{k:?}"))), "use plain string keys");
                continue;
            };
            if !allowed.contains(&name) {
                let fix = match nearest(name, allowed.iter().copied()) {
                    Some(n) => format!("did you mean `{n}`? allowed keys: {}", allowed.join(", ")),
                    None => format!("remove it; allowed keys: {}", allowed.join(", ")),
                };
                self.err(&path.key(name), format!("unknown key `{}` in {what}", excerpt(name)), fix);
            }
        }
    }

    pub fn req_str(&mut self, m: &Mapping, path: &YPath, key: &str) -> Option<String> {
        match m.get(key) {
            None => {
                self.err(&path.key(key), format!("missing required field `{key}`"), format!("add `{key}: <string>`"));
                None
            }
            Some(v) => self.str_value(v, &path.key(key), key),
        }
    }

    pub fn opt_str(&mut self, m: &Mapping, path: &YPath, key: &str) -> Option<String> {
        m.get(key).and_then(|v| self.str_value(v, &path.key(key), key))
    }

    pub fn str_value(&mut self, v: &Value, path: &YPath, key: &str) -> Option<String> {
        match v {
            Value::String(s) if !s.is_empty() => Some(s.clone()),
            Value::String(_) => {
                self.err(path, format!("`{key}` must not be empty"), format!("give `{key}` a value"));
                None
            }
            other => {
                self.err(
                    path,
                    format!("`{key}` must be a string, found {}", type_name(other)),
                    format!("quote the value: `{key}: \"...\"`"),
                );
                None
            }
        }
    }

    pub fn req_bool(&mut self, m: &Mapping, path: &YPath, key: &str) -> Option<bool> {
        match m.get(key) {
            None => {
                self.err(&path.key(key), format!("missing required field `{key}`"), format!("add `{key}: false` or `{key}: true`"));
                None
            }
            Some(_) => self.opt_bool(m, path, key),
        }
    }

    pub fn opt_bool(&mut self, m: &Mapping, path: &YPath, key: &str) -> Option<bool> {
        match m.get(key)? {
            Value::Bool(b) => Some(*b),
            other => {
                self.err(
                    &path.key(key),
                    format!("`{key}` must be a boolean, found {}", type_name(other)),
                    format!("write `{key}: true` or `{key}: false` (unquoted)"),
                );
                None
            }
        }
    }

    /// A strict positive integer (booleans, strings and floats are rejected).
    pub fn pos_int(&mut self, v: &Value, path: &YPath, key: &str) -> Option<u32> {
        // YAML 1.1 (PyYAML, which InferenceX uses) reads `3_095_781` as an integer.
        let yaml11 = v.as_str().filter(|s| {
            s.contains('_') && s.starts_with(|c: char| c.is_ascii_digit()) && s.chars().all(|c| c.is_ascii_digit() || c == '_')
        });
        if let Some(s) = yaml11 {
            return self.pos_int(&Value::Number(s.replace('_', "").parse::<u64>().ok()?.into()), path, key);
        }
        match v.as_u64() {
            Some(n) if n > 0 && n <= u32::MAX as u64 => Some(n as u32),
            Some(_) => {
                self.err(path, format!("`{key}` must be an integer > 0, found {}", fmt_value(v)), format!("set `{key}` to 1 or more"));
                None
            }
            None => {
                let found = match v {
                    Value::Number(_) => fmt_value(v),
                    other => type_name(other).to_string(),
                };
                self.err(
                    path,
                    format!("`{key}` must be an integer > 0, found {found}"),
                    format!("write `{key}` as a plain integer such as 1"),
                );
                None
            }
        }
    }

    pub fn req_pos_int(&mut self, m: &Mapping, path: &YPath, key: &str) -> Option<u32> {
        match m.get(key) {
            None => {
                self.err(&path.key(key), format!("missing required field `{key}`"), format!("add `{key}: <integer>`"));
                None
            }
            Some(v) => self.pos_int(v, &path.key(key), key),
        }
    }

    /// An optional strict positive integer with a default.
    pub fn int_or(&mut self, m: &Mapping, path: &YPath, key: &str, default: u32) -> u32 {
        match m.get(key) {
            None => default,
            Some(v) => self.pos_int(v, &path.key(key), key).unwrap_or(default),
        }
    }

    pub fn opt_f64(&mut self, m: &Mapping, path: &YPath, key: &str) -> Option<f64> {
        let v = m.get(key)?;
        match v.as_f64() {
            Some(x) => Some(x),
            None => {
                self.err(
                    &path.key(key),
                    format!("`{key}` must be a number, found {}", type_name(v)),
                    format!("write `{key}` as a number such as 0.8"),
                );
                None
            }
        }
    }

    pub fn str_list(&mut self, m: &Mapping, path: &YPath, key: &str) -> Vec<String> {
        let Some(v) = m.get(key) else { return Vec::new() };
        let p = path.key(key);
        let Some(seq) = self.sequence(v, &p, key) else { return Vec::new() };
        let mut out = Vec::new();
        for (i, item) in seq.iter().enumerate() {
            if let Some(s) = self.str_value(item, &p.index(i), key) {
                out.push(s);
            }
        }
        out
    }
}

pub fn fmt_value(v: &Value) -> String {
    match v {
        Value::String(s) => format!("\"{}\"", excerpt(s)),
        other => excerpt(serde_yaml_ng::to_string(other).map(|s| s.trim().to_string()).unwrap_or_default().as_str()),
    }
}
