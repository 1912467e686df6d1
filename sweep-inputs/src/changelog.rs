//! `perf-changelog.yaml`: the entry schema, the append-only byte rules, selection of config keys
//! from added entries, and atomic appends (spec `inferencex.md` §5).

use crate::plan::matrix::Scenario;
use crate::problem::{Problem, Problems, atomic_write};
use crate::recipe::schema::Checker;
use crate::yaml::{self, YPath};
use serde_yaml_ng::Value;
use std::path::{Path, PathBuf};

#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub config_keys: Vec<String>,
    pub description: Vec<String>,
    pub pr_link: String,
    pub evals_only: bool,
    pub all_evals: bool,
    pub append_only: bool,
    pub eval_min_prefill_ep: Option<u32>,
    /// `None` = both scenarios.
    pub scenario_type: Option<Vec<Scenario>>,
    /// 1-based line of the entry's `- config-keys:`.
    pub line: usize,
    /// The entry as parsed, for `changelog_metadata`.
    pub raw: serde_json::Value,
}

impl Entry {
    pub fn scenarios(&self) -> Vec<Scenario> {
        self.scenario_type.clone().unwrap_or_else(|| vec![Scenario::FixedSeqLen, Scenario::AgenticCoding])
    }
}

#[derive(Clone, Debug)]
pub struct Changelog {
    pub file: PathBuf,
    pub text: String,
    pub entries: Vec<Entry>,
}

const ENTRY_KEYS: &[&str] =
    &["config-keys", "description", "pr-link", "evals-only", "all-evals", "append-only", "eval-min-prefill-ep", "scenario-type"];
const ENTRY_START: &str = "- config-keys:";

fn line_of_byte(bytes: &[u8], at: usize) -> usize {
    bytes[..at.min(bytes.len())].iter().filter(|&&b| b == b'\n').count() + 1
}

impl Changelog {
    pub fn load(file: &Path) -> Result<Changelog, Problems> {
        let bytes = yaml::read_bytes(file)?;
        Self::parse(file, &bytes)
    }

    /// Parses with the library rules: ends with `\n`; no CR, tab or NUL; UTF-8; duplicate keys
    /// rejected; root is a list; one `- config-keys:` line per entry; every entry valid.
    pub fn parse(file: &Path, bytes: &[u8]) -> Result<Changelog, Problems> {
        let mut problems = Problems::default();
        let p = |line: Option<usize>, msg: String, fix: &str| Problem::new(file, line, "", msg, fix);
        if let Some(i) = bytes.iter().position(|&b| b == b'\r' || b == b'\t' || b == 0) {
            let what = match bytes[i] {
                b'\r' => "a carriage return (CR)",
                b'\t' => "a tab",
                _ => "a NUL byte",
            };
            problems.push(p(Some(line_of_byte(bytes, i)), format!("contains {what}"), "use LF line endings and spaces only"));
        }
        let text = match std::str::from_utf8(bytes) {
            Ok(t) => t.to_string(),
            Err(e) => {
                problems.push(p(Some(line_of_byte(bytes, e.valid_up_to())), "is not valid UTF-8".into(), "save the file as UTF-8"));
                return Err(problems);
            }
        };
        if !text.is_empty() && !text.ends_with('\n') {
            problems.push(p(Some(text.lines().count()), "does not end with a newline".into(), "add a final newline"));
        }
        let doc = match yaml::parse(file, &text) {
            Ok(d) => d,
            Err(e) => {
                problems.extend(e);
                return Err(problems);
            }
        };
        let starts: Vec<usize> = text.lines().enumerate().filter(|(_, l)| l.starts_with(ENTRY_START)).map(|(i, _)| i + 1).collect();
        let mut c = Checker::new(&doc);
        let root = YPath::root();
        let mut entries = Vec::new();
        if let Some(seq) = c.sequence(&doc.value, &root, "perf-changelog.yaml") {
            if seq.len() != starts.len() {
                c.err(
                    &root,
                    format!("{} entries parsed but {} lines start with `{ENTRY_START}`", seq.len(), starts.len()),
                    "start every entry at column 0 with `- config-keys:`",
                );
            }
            for (i, v) in seq.iter().enumerate() {
                if let Some(e) = parse_entry(&mut c, v, &root.index(i), starts.get(i).copied().unwrap_or(0)) {
                    entries.push(e);
                }
            }
        }
        problems.extend(c.problems);
        problems.into_result(Changelog { file: file.to_path_buf(), text, entries })
    }
}

fn parse_entry(c: &mut Checker, v: &Value, p: &YPath, line: usize) -> Option<Entry> {
    let m = c.mapping(v, p, "a changelog entry")?;
    c.known_keys(m, p, ENTRY_KEYS, "a changelog entry");
    let list = |c: &mut Checker, key: &str| {
        let l = c.str_list(m, p, key);
        if l.is_empty() && m.get(key).is_some() {
            c.err(&p.key(key), format!("`{key}` is empty"), format!("list at least one item under `{key}`"));
        }
        if m.get(key).is_none() {
            c.err(&p.key(key), format!("missing required field `{key}`"), format!("add `{key}:` with at least one item"));
        }
        l
    };
    let config_keys = list(c, "config-keys");
    let description = list(c, "description");
    let pr_link = c.req_str(m, p, "pr-link").unwrap_or_default();
    let evals_only = c.opt_bool(m, p, "evals-only").unwrap_or(false);
    let all_evals = c.opt_bool(m, p, "all-evals").unwrap_or(false);
    let append_only = c.opt_bool(m, p, "append-only").unwrap_or(false);
    let eval_min_prefill_ep = m.get("eval-min-prefill-ep").and_then(|v| c.pos_int(v, &p.key("eval-min-prefill-ep"), "eval-min-prefill-ep"));
    let scenario_type = if m.get("scenario-type").is_some() {
        let raw = c.str_list(m, p, "scenario-type");
        let mut out = Vec::new();
        for (i, s) in raw.iter().enumerate() {
            match Scenario::parse(s) {
                Some(x) => out.push(x),
                None => {
                    c.err(&p.key("scenario-type").index(i), format!("unknown scenario-type `{s}`"), "use fixed-seq-len or agentic-coding")
                }
            }
        }
        if raw.is_empty() {
            c.err(&p.key("scenario-type"), "`scenario-type` is empty", "list fixed-seq-len and/or agentic-coding, or remove the field");
        }
        Some(out)
    } else {
        None
    };
    if append_only && (evals_only || all_evals || eval_min_prefill_ep.is_some()) {
        c.err(
            &p.key("append-only"),
            "`append-only: true` cannot be combined with evals-only, all-evals or eval-min-prefill-ep",
            "append-only entries run only newly added throughput points: drop the eval fields or append-only",
        );
    }
    let raw = serde_json::to_value(v).unwrap_or(serde_json::Value::Null);
    Some(Entry { config_keys, description, pr_link, evals_only, all_evals, append_only, eval_min_prefill_ep, scenario_type, line, raw })
}

/// A canonical PR link: `https://github.com/<owner>/<repo>/pull/<number>`.
pub fn is_canonical_pr_link(s: &str) -> bool {
    let Some(rest) = s.strip_prefix("https://github.com/") else { return false };
    let parts: Vec<&str> = rest.split('/').collect();
    parts.len() == 4
        && !parts[0].is_empty()
        && !parts[1].is_empty()
        && parts[2] == "pull"
        && !parts[3].is_empty()
        && parts[3].bytes().all(|b| b.is_ascii_digit())
}

/// What a head changelog adds to its base.
#[derive(Clone, Debug, PartialEq)]
pub struct Delta {
    pub appended: Vec<Entry>,
    /// PR-link-only corrections of historical entries.
    pub corrections: usize,
}

/// The append-only rules between a base and a head file (spec §5.3, byte-exact).
pub fn check_append(base: &Changelog, head: &Changelog) -> Result<Delta, Problems> {
    if head.text.as_bytes().starts_with(base.text.as_bytes()) { check_pure_append(base, head) } else { check_corrections(base, head) }
}

/// One problem at a line of the head file.
fn at_line(head: &Changelog, line: usize, msg: String, fix: &str) -> Problems {
    Problems::one(Problem::new(&head.file, Some(line), "", msg, fix))
}

/// The head is the base plus a suffix: the suffix must be whole entries, one blank line apart,
/// with canonical pr-links.
fn check_pure_append(base: &Changelog, head: &Changelog) -> Result<Delta, Problems> {
    let (b, h) = (base.text.as_bytes(), head.text.as_bytes());
    let suffix = &head.text[b.len()..];
    if suffix.is_empty() {
        return Ok(Delta { appended: Vec::new(), corrections: 0 });
    }
    let first_line = line_of_byte(h, b.len());
    let base_blank_end = base.text.ends_with("\n\n") || base.text.is_empty();
    let want = if base_blank_end { ENTRY_START.to_string() } else { format!("\n{ENTRY_START}") };
    if !suffix.starts_with(&want) {
        let msg = if base_blank_end {
            "appended text must start with `- config-keys:`"
        } else {
            "appended entries must be separated from the last entry by exactly one blank line"
        };
        return Err(at_line(head, first_line, msg.to_string(), "append at the physical end: one empty line, then `- config-keys:`"));
    }
    if head.text.ends_with("\n\n") {
        return Err(at_line(head, head.text.lines().count(), "the file ends with a blank line".into(), "remove trailing empty lines"));
    }
    let start_line = first_line + usize::from(!base_blank_end);
    check_separators(head, start_line)?;
    let appended: Vec<Entry> = head.entries.iter().filter(|e| e.line >= start_line).cloned().collect();
    if appended.len() != head.entries.len().saturating_sub(base.entries.len()) {
        return Err(at_line(
            head,
            first_line,
            "appended text does not parse into whole new entries".into(),
            "append complete entries only",
        ));
    }
    check_appended_pr_links(head, &appended)?;
    Ok(Delta { appended, corrections: 0 })
}

/// Exactly one empty line between appended entries (from `start_line` on), and no
/// whitespace-only lines.
fn check_separators(head: &Changelog, start_line: usize) -> Result<(), Problems> {
    let lines: Vec<&str> = head.text.lines().collect();
    for ln in start_line..=lines.len() {
        if ln > start_line && lines[ln - 1].starts_with(ENTRY_START) {
            let blank_before = ln >= 2 && lines[ln - 2].is_empty();
            let two_blank = ln >= 3 && lines[ln - 3].trim().is_empty();
            if !blank_before || two_blank {
                return Err(at_line(
                    head,
                    ln,
                    "appended entries must be separated by exactly one empty line".into(),
                    "leave exactly one empty line between entries",
                ));
            }
        }
        if ln > start_line && lines[ln - 1].trim().is_empty() && !lines[ln - 1].is_empty() {
            return Err(at_line(head, ln, "whitespace-only line in appended entries".into(), "make separator lines completely empty"));
        }
    }
    Ok(())
}

/// Every appended entry's pr-link is canonical (reported at its `pr-link:` line).
fn check_appended_pr_links(head: &Changelog, appended: &[Entry]) -> Result<(), Problems> {
    for e in appended {
        if !is_canonical_pr_link(&e.pr_link) {
            let ln = head
                .text
                .lines()
                .enumerate()
                .skip(e.line - 1)
                .find(|(_, l)| l.trim_start().starts_with("pr-link:"))
                .map(|(i, _)| i + 1)
                .unwrap_or(e.line);
            let msg = if e.pr_link.contains("XXX") {
                format!("pr-link `{}` is a placeholder", e.pr_link)
            } else {
                format!("pr-link `{}` is not a canonical pull-request link", e.pr_link)
            };
            return Err(at_line(head, ln, msg, "use https://github.com/<owner>/<repo>/pull/<number>"));
        }
    }
    Ok(())
}

/// Not a pure append: only pr-link-only corrections are allowed, with the same line count.
fn check_corrections(base: &Changelog, head: &Changelog) -> Result<Delta, Problems> {
    let bl: Vec<&str> = base.text.split('\n').collect();
    let hl: Vec<&str> = head.text.split('\n').collect();
    let first_diff = bl.iter().zip(hl.iter()).position(|(a, b)| a != b).unwrap_or(bl.len().min(hl.len()));
    let is_correction =
        |i: usize| bl.get(i).is_some_and(|a| a.starts_with("  pr-link:")) && hl.get(i).is_some_and(|b| b.starts_with("  pr-link:"));
    if bl.len() == hl.len() {
        let diffs: Vec<usize> = (0..bl.len()).filter(|&i| bl[i] != hl[i]).collect();
        if let Some(&bad) = diffs.iter().find(|&&i| !is_correction(i)) {
            return Err(at_line(
                head,
                bad + 1,
                format!("historical line {} changed: `{}` → `{}`", bad + 1, bl[bad], hl[bad]),
                "perf-changelog.yaml is append-only: restore the line byte-for-byte and add a new entry at the end",
            ));
        }
        for &i in &diffs {
            let link = hl[i].trim_start().trim_start_matches("pr-link:").trim();
            if !is_canonical_pr_link(link) {
                return Err(at_line(
                    head,
                    i + 1,
                    format!("pr-link correction `{link}` is not canonical"),
                    "use https://github.com/<owner>/<repo>/pull/<number>",
                ));
            }
        }
        return Ok(Delta { appended: Vec::new(), corrections: diffs.len() });
    }
    let shown_base = bl.get(first_diff).copied().unwrap_or("<end of file>");
    let shown_head = hl.get(first_diff).copied().unwrap_or("<end of file>");
    let msg = if is_correction(first_diff) {
        format!("line {} corrects a pr-link while entries are also appended or removed", first_diff + 1)
    } else {
        format!("historical line {} changed: `{shown_base}` → `{shown_head}`", first_diff + 1)
    };
    Err(at_line(
        head,
        first_diff + 1,
        msg,
        "perf-changelog.yaml is append-only: keep every existing byte and add new entries only at the end (pr-link corrections go in a separate change)",
    ))
}

/// Expands a changelog key pattern against master keys: `*` matches any run of characters and
/// the whole key must match; `?` is literal here (unlike the generator's `--config-keys`).
pub fn resolve_pattern<'a>(pattern: &str, keys: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    keys.into_iter().filter(|k| wildcard(pattern, k, false)).map(str::to_string).collect()
}

/// fnmatch-style matching of `*` (and `?` when `question` is set).
pub fn wildcard(pattern: &str, text: &str, question: bool) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == t[ti] || (question && p[pi] == '?')) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

/// A new entry's text (block style, double-quoted descriptions), without trailing blank line.
pub fn render_entry(e: &NewEntry) -> String {
    let q = |s: &str| serde_json::to_string(s).expect("strings serialise");
    let mut out = String::from("- config-keys:\n");
    for k in &e.config_keys {
        out.push_str(&format!("    - {k}\n"));
    }
    if let Some(st) = &e.scenario_type {
        out.push_str("  scenario-type:\n");
        for s in st {
            out.push_str(&format!("    - {}\n", s.name()));
        }
    }
    out.push_str("  description:\n");
    for d in &e.description {
        out.push_str(&format!("    - {}\n", q(d)));
    }
    out.push_str(&format!("  pr-link: {}\n", e.pr_link));
    for (flag, on) in [("evals-only", e.evals_only), ("all-evals", e.all_evals), ("append-only", e.append_only)] {
        if on {
            out.push_str(&format!("  {flag}: true\n"));
        }
    }
    out
}

#[derive(Clone, Debug, Default)]
pub struct NewEntry {
    pub config_keys: Vec<String>,
    pub description: Vec<String>,
    pub pr_link: String,
    pub scenario_type: Option<Vec<Scenario>>,
    pub evals_only: bool,
    pub all_evals: bool,
    pub append_only: bool,
}

/// Appends an entry atomically after checking that the result is a valid append of the file.
pub fn append(file: &Path, entry: &NewEntry) -> Result<Delta, Problems> {
    let base = Changelog::load(file)?;
    for k in &entry.config_keys {
        if k.trim().is_empty() || k.contains(char::is_whitespace) {
            return Err(Problems::one(Problem::new(
                file,
                None,
                "",
                format!("config key `{k}` is not a single word"),
                "pass config keys as separate words",
            )));
        }
    }
    if entry.config_keys.is_empty() || entry.description.is_empty() {
        return Err(Problems::one(Problem::new(
            file,
            None,
            "",
            "an entry needs at least one config key and one description line",
            "pass --config-keys and --description",
        )));
    }
    let sep = if base.text.is_empty() || base.text.ends_with("\n\n") { "" } else { "\n" };
    let new_text = format!("{}{sep}{}", base.text, render_entry(entry));
    let head = Changelog::parse(file, new_text.as_bytes())?;
    let delta = check_append(&base, &head)?;
    atomic_write(file, new_text.as_bytes()).map_err(|e| Problems::io(file, &e))?;
    Ok(delta)
}

/// Why `git show REV:PATH` gave no file.
#[derive(Debug, thiserror::Error)]
pub enum GitShowError {
    #[error("no file name")]
    NoFileName { path: PathBuf },
    #[error("cannot run git: {source}")]
    Spawn {
        #[source]
        source: std::io::Error,
    },
    #[error("git show {rev}:{}: {stderr}", .path.display())]
    Failed { rev: String, path: PathBuf, stderr: String },
}

/// `git show REV:PATH` from the repository containing `path`.
pub fn git_show(rev: &str, path: &Path) -> Result<Vec<u8>, GitShowError> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().ok_or_else(|| GitShowError::NoFileName { path: path.to_path_buf() })?.to_string_lossy().into_owned();
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .arg("show")
        .arg(format!("{rev}:./{name}"))
        .output()
        .map_err(|source| GitShowError::Spawn { source })?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        return Err(GitShowError::Failed { rev: rev.to_string(), path: path.to_path_buf(), stderr });
    }
    Ok(out.stdout)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "- config-keys:\n    - a-*\n  description:\n    - \"first\"\n  pr-link: https://github.com/o/r/pull/1\n\n- config-keys:\n    - b\n  scenario-type:\n    - agentic-coding\n  description:\n    - \"second\"\n  pr-link: https://github.com/o/r/pull/2\n";

    fn cl(t: &str) -> Changelog {
        Changelog::parse(Path::new("perf-changelog.yaml"), t.as_bytes()).unwrap()
    }

    const ADD: &str = "\n- config-keys:\n    - c\n  description:\n    - \"third\"\n  pr-link: https://github.com/o/r/pull/3\n";

    #[test]
    fn parses_entries_with_lines() {
        let c = cl(BASE);
        assert_eq!(c.entries.len(), 2);
        assert_eq!(c.entries[1].line, 7);
        assert_eq!(c.entries[1].scenario_type, Some(vec![Scenario::AgenticCoding]));
    }

    #[test]
    fn append_accepted_and_one_byte_change_rejected_with_line() {
        let d = check_append(&cl(BASE), &cl(&format!("{BASE}{ADD}"))).unwrap();
        assert_eq!(d.appended.len(), 1);
        assert_eq!(d.appended[0].config_keys, vec!["c"]);
        let changed = BASE.replace("\"second\"", "\"secont\"");
        let e = check_append(&cl(BASE), &cl(&format!("{changed}{ADD}"))).unwrap_err();
        assert_eq!(e.0[0].line, Some(12), "{e}");
        assert!(e.to_string().contains("append-only"));
    }

    #[test]
    fn separator_and_trailing_blank_rules() {
        let two_blank = format!("{BASE}\n{ADD}");
        assert!(check_append(&cl(BASE), &cl(&two_blank)).unwrap_err().to_string().contains("exactly one"));
        let no_blank = format!("{BASE}{}", &ADD[1..]);
        assert!(check_append(&cl(BASE), &cl(&no_blank)).is_err());
        let trailing = format!("{BASE}{ADD}\n");
        assert!(check_append(&cl(BASE), &cl(&trailing)).unwrap_err().to_string().contains("blank line"));
    }

    #[test]
    fn placeholder_pr_link_rejected() {
        let add = ADD.replace("pull/3", "pull/XXXX");
        let e = check_append(&cl(BASE), &cl(&format!("{BASE}{add}"))).unwrap_err();
        assert!(e.to_string().contains("placeholder"), "{e}");
        assert_eq!(e.0[0].line, Some(19));
    }

    #[test]
    fn pr_link_correction_alone_passes_but_not_mixed() {
        let base = BASE.replace("pull/2", "pull/XXX");
        let fixed = BASE.to_string();
        assert_eq!(check_append(&cl(&base), &cl(&fixed)).unwrap().corrections, 1);
        assert!(check_append(&cl(&base), &cl(&format!("{fixed}{ADD}"))).is_err());
    }

    #[test]
    fn byte_rules_tab_cr_dup_keys() {
        let p = Path::new("perf-changelog.yaml");
        assert!(Changelog::parse(p, BASE.replace("    - b", "\t- b").as_bytes()).unwrap_err().to_string().contains("tab"));
        assert!(Changelog::parse(p, BASE.replace("\n", "\r\n").as_bytes()).unwrap_err().to_string().contains("carriage return"));
        let dup = BASE.replace(
            "  pr-link: https://github.com/o/r/pull/2\n",
            "  pr-link: https://github.com/o/r/pull/2\n  pr-link: https://github.com/o/r/pull/2\n",
        );
        assert!(Changelog::parse(p, dup.as_bytes()).unwrap_err().to_string().contains("duplicate"));
        assert!(Changelog::parse(p, BASE.trim_end().as_bytes()).unwrap_err().to_string().contains("newline"));
    }

    #[test]
    fn append_only_with_evals_only_fails() {
        let t = BASE.replace(
            "  pr-link: https://github.com/o/r/pull/2\n",
            "  pr-link: https://github.com/o/r/pull/2\n  append-only: true\n  evals-only: true\n",
        );
        let e = Changelog::parse(Path::new("p.yaml"), t.as_bytes()).unwrap_err();
        assert!(e.to_string().contains("append-only"));
    }

    #[test]
    fn wildcards() {
        let keys = ["dsr1-fp4-b200-sglang", "dsr1-fp8-b200-sglang", "dsr1-fp8-h200-sglang"];
        assert_eq!(resolve_pattern("dsr1-*-b200-sglang", keys), vec!["dsr1-fp4-b200-sglang", "dsr1-fp8-b200-sglang"]);
        assert!(resolve_pattern("dsr1-fp?-b200-sglang", keys).is_empty());
        assert!(wildcard("dsr1-fp?-b200-sglang", "dsr1-fp4-b200-sglang", true));
        assert!(!wildcard("dsr1", "dsr1-fp4", false));
    }

    #[test]
    fn append_writes_a_valid_entry() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("perf-changelog.yaml");
        std::fs::write(&f, BASE).unwrap();
        let e = NewEntry {
            config_keys: vec!["x".into()],
            description: vec!["say \"hi\"".into()],
            pr_link: "https://github.com/o/r/pull/9".into(),
            ..Default::default()
        };
        let delta = append(&f, &e).unwrap();
        assert_eq!(delta.appended[0].description, vec!["say \"hi\""]);
        let after = Changelog::load(&f).unwrap();
        assert_eq!(after.entries.len(), 3);
        let bad = NewEntry { pr_link: "https://github.com/o/r/pull/XXX".into(), ..e };
        assert!(append(&f, &bad).is_err());
        assert_eq!(Changelog::load(&f).unwrap().entries.len(), 3, "a rejected append leaves the file unchanged");
    }
}
