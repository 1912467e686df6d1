//! Reading a repository at two revisions without a checkout: `git rev-parse`, `ls-tree -z`,
//! `cat-file --batch` by object id (every file a check needs in one process), `diff --name-status` and the
//! added lines of `diff -U0`, with the head's line numbers.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("cannot run git in {}: {source}", .dir.display())]
    Spawn { dir: PathBuf, source: std::io::Error },
    #[error("git {args} in {}: {stderr}", .dir.display())]
    Failed { dir: PathBuf, args: String, stderr: String },
    #[error("{rev}: not a commit in {} ({stderr}); pass a branch, tag or commit that exists there (fetch it first)", .dir.display())]
    BadRev { dir: PathBuf, rev: String, stderr: String },
}

/// A file's change between the two revisions (`git diff --name-status`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileChange {
    /// `A`, `M`, `D`, `R` (renamed), `C`, `T`.
    pub status: char,
    pub path: String,
    /// The old path of a rename or copy.
    pub from: Option<String>,
}

/// One line the head adds, with its line number in the head's file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddedLine {
    pub file: String,
    pub line: usize,
    pub text: String,
}

/// One entry of a tree: `100644`/`100755` files, `120000` symbolic links, `160000` submodules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeEntry {
    pub mode: String,
    pub kind: String,
    pub oid: String,
    /// Whether the name is valid UTF-8 (the path key is its lossy form otherwise).
    pub utf8: bool,
}

impl TreeEntry {
    pub fn is_file(&self) -> bool {
        self.kind == "blob" && (self.mode == "100644" || self.mode == "100755")
    }
    pub fn is_symlink(&self) -> bool {
        self.mode == "120000"
    }
    pub fn is_submodule(&self) -> bool {
        self.mode == "160000"
    }
}

/// A revision's tree, every entry by path.
#[derive(Clone, Debug, Default)]
pub struct Tree {
    pub rev: String,
    pub entries: BTreeMap<String, TreeEntry>,
}

impl Tree {
    /// The regular files' paths.
    pub fn files(&self) -> impl Iterator<Item = &String> {
        self.entries.iter().filter(|(_, e)| e.is_file()).map(|(p, _)| p)
    }
}

pub struct Git {
    dir: PathBuf,
}

impl Git {
    /// The repository containing `dir`.
    pub fn open(dir: &Path) -> Result<Git, GitError> {
        let g = Git { dir: dir.to_path_buf() };
        let top = g.run(&["rev-parse", "--show-toplevel"])?;
        Ok(Git { dir: PathBuf::from(String::from_utf8_lossy(&top).trim()) })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn command(&self) -> Command {
        let mut c = Command::new("git");
        // Paths as they are (no octal quoting), and no pager, colour or external diff tool.
        c.arg("-C").arg(&self.dir).args(["-c", "core.quotePath=false", "--no-pager"]);
        c
    }

    fn run(&self, args: &[&str]) -> Result<Vec<u8>, GitError> {
        let out = self.command().args(args).output().map_err(|source| GitError::Spawn { dir: self.dir.clone(), source })?;
        if !out.status.success() {
            return Err(GitError::Failed {
                dir: self.dir.clone(),
                args: args.join(" "),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        Ok(out.stdout)
    }

    /// The full commit id of `rev`.
    pub fn resolve(&self, rev: &str) -> Result<String, GitError> {
        match self.run(&["rev-parse", "--verify", "--quiet", "--end-of-options", &format!("{rev}^{{commit}}")]) {
            Ok(o) => Ok(String::from_utf8_lossy(&o).trim().to_string()),
            Err(GitError::Failed { stderr, .. }) => Err(GitError::BadRev { dir: self.dir.clone(), rev: rev.to_string(), stderr }),
            Err(e) => Err(e),
        }
    }

    /// The merge base of two commits (the fork point a pull request's diff starts from).
    pub fn merge_base(&self, a: &str, b: &str) -> Result<String, GitError> {
        self.run(&["merge-base", a, b]).map(|o| String::from_utf8_lossy(&o).trim().to_string())
    }

    /// The commits in `head` that `base` lacks, newest first.
    pub fn commits(&self, base: &str, head: &str) -> Result<Vec<String>, GitError> {
        let o = self.run(&["rev-list", &format!("{base}..{head}")])?;
        Ok(String::from_utf8_lossy(&o).lines().map(str::to_string).collect())
    }

    /// Every entry of the tree of `rev`, by path (`ls-tree -r -z --full-tree`: NUL-separated,
    /// so no file name can forge another entry).
    pub fn ls_tree(&self, rev: &str) -> Result<Tree, GitError> {
        let o = self.run(&["ls-tree", "-r", "-z", "--full-tree", rev])?;
        let mut entries = BTreeMap::new();
        for rec in o.split(|&b| b == 0).filter(|s| !s.is_empty()) {
            let bad = || GitError::Failed {
                dir: self.dir.clone(),
                args: format!("ls-tree {rev}"),
                stderr: format!("unreadable entry {:?}", String::from_utf8_lossy(rec)),
            };
            let tab = rec.iter().position(|&b| b == b'\t').ok_or_else(bad)?;
            let meta = String::from_utf8_lossy(&rec[..tab]).into_owned();
            let mut it = meta.split(' ');
            let (Some(mode), Some(kind), Some(oid)) = (it.next(), it.next(), it.next()) else { return Err(bad()) };
            let raw = &rec[tab + 1..];
            let path = String::from_utf8_lossy(raw).into_owned();
            let utf8 = std::str::from_utf8(raw).is_ok();
            entries.insert(path, TreeEntry { mode: mode.to_string(), kind: kind.to_string(), oid: oid.to_string(), utf8 });
        }
        Ok(Tree { rev: rev.to_string(), entries })
    }

    /// The contents of the regular files `paths` of `tree` (paths that are not regular files
    /// there are left out), through one `git cat-file --batch` asked by object id: a request
    /// line is a hex id, never a file name, and every answer must name the id it was asked.
    pub fn read_many(&self, tree: &Tree, paths: &[String]) -> Result<BTreeMap<String, Vec<u8>>, GitError> {
        let mut out = BTreeMap::new();
        let wanted: Vec<(&String, &str)> =
            paths.iter().filter_map(|p| tree.entries.get(p).filter(|e| e.is_file()).map(|e| (p, e.oid.as_str()))).collect();
        if wanted.is_empty() {
            return Ok(out);
        }
        let io = |source| GitError::Spawn { dir: self.dir.clone(), source };
        let mismatch = |what: String| GitError::Failed { dir: self.dir.clone(), args: "cat-file --batch".into(), stderr: what };
        let mut child = self
            .command()
            .args(["cat-file", "--batch"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(io)?;
        let mut stdin = child.stdin.take().expect("piped stdin");
        let requests: String = wanted.iter().map(|(_, oid)| format!("{oid}\n")).collect();
        // Written from a thread: git answers while it reads, and a full pipe would stall both.
        let writer = std::thread::spawn(move || stdin.write_all(requests.as_bytes()));
        let mut r = BufReader::new(child.stdout.take().expect("piped stdout"));
        for (path, oid) in &wanted {
            let mut header = String::new();
            if r.read_line(&mut header).map_err(io)? == 0 {
                return Err(mismatch(format!("no answer for {path} ({oid})")));
            }
            let parts: Vec<&str> = header.split_whitespace().collect();
            if parts.first() != Some(oid) || parts.len() != 3 || parts[1] != "blob" {
                return Err(mismatch(format!("asked for {path} ({oid}), answered {:?}", header.trim_end())));
            }
            let size: usize = parts[2].parse().map_err(|_| mismatch(format!("unreadable size in {:?}", header.trim_end())))?;
            let mut buf = vec![0u8; size + 1];
            r.read_exact(&mut buf).map_err(io)?;
            if buf.pop() != Some(b'\n') {
                return Err(mismatch(format!("the answer for {path} ({oid}) is not terminated")));
            }
            out.insert((*path).clone(), buf);
        }
        let _ = writer.join();
        let status = child.wait().map_err(io)?;
        if !status.success() {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            return Err(GitError::Failed { dir: self.dir.clone(), args: "cat-file --batch".into(), stderr: err.trim().to_string() });
        }
        Ok(out)
    }

    /// The files that differ between `base` and `head` (renames detected).
    pub fn name_status(&self, base: &str, head: &str) -> Result<Vec<FileChange>, GitError> {
        let o = self.run(&["diff", "--no-ext-diff", "--name-status", "-M", "-z", base, head])?;
        let mut it = o.split(|&b| b == 0).filter(|s| !s.is_empty()).map(|s| String::from_utf8_lossy(s).into_owned());
        let mut out = Vec::new();
        while let Some(st) = it.next() {
            let status = st.chars().next().unwrap_or('M');
            if status == 'R' || status == 'C' {
                let (Some(from), Some(to)) = (it.next(), it.next()) else { break };
                out.push(FileChange { status, path: to, from: Some(from) });
            } else if let Some(path) = it.next() {
                out.push(FileChange { status, path, from: None });
            }
        }
        Ok(out)
    }

    /// Every line the head adds to a text file, numbered as in the head.
    pub fn added_lines(&self, base: &str, head: &str) -> Result<Vec<AddedLine>, GitError> {
        let o = self.run(&["diff", "--no-ext-diff", "--no-color", "-M", "-U0", base, head])?;
        Ok(parse_added(&String::from_utf8_lossy(&o)))
    }
}

/// The added lines of a unified diff with zero context. Hunk headers give how many lines
/// follow, so a content line that looks like a header (`+++ x`) is still content.
pub fn parse_added(diff: &str) -> Vec<AddedLine> {
    let mut out = Vec::new();
    let mut file: Option<String> = None;
    let (mut next, mut old_left, mut new_left) = (0usize, 0usize, 0usize);
    let count = |s: &str| -> (usize, usize) {
        let mut it = s.split(',');
        let start = it.next().and_then(|n| n.parse().ok()).unwrap_or(0);
        (start, it.next().and_then(|n| n.parse().ok()).unwrap_or(1))
    };
    for l in diff.lines() {
        if old_left + new_left > 0 {
            if let Some(t) = l.strip_prefix('+') {
                if let Some(f) = &file {
                    out.push(AddedLine { file: f.clone(), line: next, text: t.to_string() });
                }
                next += 1;
                new_left = new_left.saturating_sub(1);
            } else if l.starts_with('-') {
                old_left = old_left.saturating_sub(1);
            }
            // `\ No newline at end of file` belongs to the line before it.
            continue;
        }
        if let Some(p) = l.strip_prefix("+++ ") {
            file = p.strip_prefix("b/").map(str::to_string);
        } else if let Some(h) = l.strip_prefix("@@ ") {
            let mut ws = h.split_whitespace();
            let old = ws.next().and_then(|w| w.strip_prefix('-')).map(count).unwrap_or((0, 0));
            let new = ws.next().and_then(|w| w.strip_prefix('+')).map(count).unwrap_or((0, 0));
            (next, old_left, new_left) = (new.0, old.1, new.1);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn added_lines_carry_head_line_numbers() {
        let d = "diff --git a/x.sh b/x.sh\n--- a/x.sh\n+++ b/x.sh\n@@ -3,0 +4,2 @@ fn\n+git apply p.patch\n+echo hi\n@@ -10 +12 @@\n-old\n+new\ndiff --git a/gone b/gone\n--- a/gone\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\ndiff --git a/y b/y\n--- a/y\n+++ b/y\n@@ -0,0 +1 @@\n+++ looks like a header\n";
        let a = parse_added(d);
        assert_eq!(a.len(), 4);
        assert_eq!((a[3].file.as_str(), a[3].line, a[3].text.as_str()), ("y", 1, "++ looks like a header"));
        assert_eq!((a[0].file.as_str(), a[0].line, a[0].text.as_str()), ("x.sh", 4, "git apply p.patch"));
        assert_eq!((a[1].line, a[2].line, a[2].text.as_str()), (5, 12, "new"));
    }
}
