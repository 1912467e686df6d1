//! Actionable problems: every configuration error names the file, line, YAML path and the fix.

use std::fmt;
use std::path::{Path, PathBuf};

/// One problem found in an input file.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub file: PathBuf,
    pub line: Option<usize>,
    /// YAML path (`key.scenarios.agentic-coding[0].search-space[1].tp`), empty when not applicable.
    pub path: String,
    pub message: String,
    pub fix: String,
}

impl Problem {
    pub fn new(file: &Path, line: Option<usize>, path: impl Into<String>, message: impl Into<String>, fix: impl Into<String>) -> Self {
        Problem { file: file.to_path_buf(), line, path: path.into(), message: message.into(), fix: fix.into() }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
        }
        write!(f, ": ")?;
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        write!(f, "{}", shown(&self.message))?;
        if !self.fix.is_empty() {
            write!(f, "\n    fix: {}", shown(&self.fix))?;
        }
        Ok(())
    }
}

/// A non-empty list of problems; the error type of every loader and validator.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Problems(pub Vec<Problem>);

impl Problems {
    pub fn one(p: Problem) -> Self {
        Problems(vec![p])
    }
    pub fn io(file: &Path, e: &std::io::Error) -> Self {
        use std::io::ErrorKind as K;
        let fix = match e.kind() {
            K::NotFound => "check the path (relative paths are resolved from the current directory)",
            K::PermissionDenied => "check the file's permissions",
            K::IsADirectory => "name a file, not a folder",
            _ => "check that the path names a readable file",
        };
        Problems::one(Problem::new(file, None, "", format!("cannot read: {e}"), fix))
    }

    /// A text file that is not UTF-8: the line of the first bad byte.
    pub fn not_utf8(file: &Path, bytes: &[u8], e: &std::str::Utf8Error) -> Self {
        let line = bytes[..e.valid_up_to()].iter().filter(|&&b| b == b'\n').count() + 1;
        Problems::one(Problem::new(
            file,
            Some(line),
            "",
            format!("not UTF-8 text: byte {} is not valid UTF-8", e.valid_up_to()),
            "save the file as UTF-8",
        ))
    }
    pub fn push(&mut self, p: Problem) {
        self.0.push(p);
    }
    pub fn extend(&mut self, other: Problems) {
        self.0.extend(other.0);
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// `Ok(v)` when empty, else `Err(self)`.
    pub fn into_result<T>(self, v: T) -> Result<T, Problems> {
        if self.0.is_empty() { Ok(v) } else { Err(self) }
    }
    /// Collects the problems of a fallible step, returning its value when it succeeded.
    pub fn take<T>(&mut self, r: Result<T, Problems>) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(e) => {
                self.extend(e);
                None
            }
        }
    }
}

impl fmt::Display for Problems {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.len();
        for (i, p) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "error: {p}")?;
        }
        if n > 1 {
            write!(f, "\n{n} problems")?;
        }
        Ok(())
    }
}

impl std::error::Error for Problems {}

/// Writes `bytes` to `path` atomically: a temporary file in the same directory, fsync, rename.
pub fn atomic_write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    atomic_write_with(path, |f| f.write_all(bytes).map_err(|e| naming(path, e)))
}

/// An I/O error that names the file (a full disk says which file it could not write).
fn naming(path: &Path, e: std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// [`atomic_write`] for a writer that streams (a corpus, a Parquet table): `body` writes the
/// temporary file, which is then synced and renamed over `path`.
pub fn atomic_write_with<E: From<std::io::Error>>(path: &Path, body: impl FnOnce(&mut std::fs::File) -> Result<(), E>) -> Result<(), E> {
    atomic_replace(path, |tmp| {
        let mut f = std::fs::File::create(tmp).map_err(|e| naming(path, e))?;
        body(&mut f)?;
        f.sync_all().map_err(|e| naming(path, e))?;
        Ok(())
    })
}

/// The one write-then-rename of the project, for writers that need a path (an image encoder):
/// `write` makes the temporary file whole and synced (see [`sync_file`]); it is then renamed over
/// `path`. Every writer of results goes through here, so a crash or Ctrl-C leaves either the
/// old file or the new one, never half of one, and no temporary file behind.
pub fn atomic_replace<E: From<std::io::Error>>(path: &Path, write: impl FnOnce(&Path) -> Result<(), E>) -> Result<(), E> {
    use std::sync::atomic::{AtomicU64, Ordering};
    // Threads of one process may write files at once: each write has its own temporary name.
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let named = |e: std::io::Error| naming(path, e);
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(named)?;
    // The extension stays last: an encoder that picks its format by the name (PNG) still does.
    let stem = path.file_stem().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let ext = path.extension().map(|e| format!(".{}", e.to_string_lossy())).unwrap_or_default();
    let tmp = dir.join(format!(".{stem}.tmp-{}-{}{ext}", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed)));
    let written = write(&tmp).and_then(|()| std::fs::rename(&tmp, path).map_err(|e| E::from(named(e))));
    // No temporary file is left behind, whatever failed.
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Flushes a file that was written by path (for [`atomic_replace`]) to the disk.
pub fn sync_file(path: &Path) -> std::io::Result<()> {
    std::fs::File::open(path)?.sync_all()
}

/// How many characters of an input an error message quotes, and the cut itself (shared with the
/// engine's flag errors).
pub use input_limits::text::{EXCERPT_CHARS, excerpt, excerpt_quoted};

/// `text` with each whitespace-separated word cut by [`excerpt`] (a command line quoted whole).
pub fn excerpt_words(text: &str) -> String {
    text.split(' ').map(excerpt).collect::<Vec<_>>().join(" ")
}

/// A message or fix as shown: one of ordinary length unchanged; a long one (a value quoted whole
/// by whatever built it) with its quoted parts cut, and cut itself past a dozen lines.
fn shown(message: &str) -> std::borrow::Cow<'_, str> {
    if message.len() <= 1000 { message.into() } else { excerpt_quoted(message).into() }
}

/// The closest candidate by edit distance, for "did you mean" hints.
pub fn nearest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (input_limits::text::edit_distance(word, c), c))
        .filter(|(d, c)| *d <= (c.len().max(word.len()) / 3).max(2))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_suggests_close_words_only() {
        let c = ["conc-list", "conc-start", "conc-end", "spec-decoding"];
        assert_eq!(nearest("conc-lst", c), Some("conc-list"));
        assert_eq!(nearest("spec-decode", c), Some("spec-decoding"));
        assert_eq!(nearest("zzzzzz", c), None);
    }

    #[test]
    fn excerpts_cut_long_text_and_say_its_length() {
        assert_eq!(excerpt("short"), "short");
        let long = "é".repeat(100);
        assert_eq!(excerpt(&long), format!("{}… (200 bytes)", "é".repeat(EXCERPT_CHARS)));
        let p =
            Problem::new(Path::new("m.yaml"), Some(3), "k", format!("unknown spec `{}` and {}", "a".repeat(5000), "b ".repeat(3000)), "");
        let shown = p.to_string();
        assert!(shown.len() < 2500 && shown.contains("… (5000 bytes)`") && shown.ends_with("bytes)"), "{shown}");
        assert_eq!(excerpt_words("python3 -m x --a b"), "python3 -m x --a b");
    }

    #[test]
    fn atomic_write_replaces_whole_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a.json");
        atomic_write(&p, b"first").unwrap();
        atomic_write(&p, b"second").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"second");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1, "no temp file left behind");
    }

    #[test]
    fn display_names_file_line_path_and_fix() {
        let p = Problem::new(Path::new("m.yaml"), Some(7), "k.tp", "tp must be > 0", "set tp: 1 or more");
        assert_eq!(p.to_string(), "m.yaml:7: k.tp: tp must be > 0\n    fix: set tp: 1 or more");
    }

    /// A full disk (a real 64 KiB tmpfs): the error names the file and no temporary file stays.
    /// Needs root to mount; `.ci/run` runs it.
    #[test]
    #[ignore = "mounts a tmpfs (root): .ci/run runs it"]
    fn a_full_disk_names_the_file_and_leaves_no_temporary() {
        let mnt = tempfile::tempdir().unwrap();
        let m = mnt.path().to_str().unwrap();
        let ok = std::process::Command::new("mount").args(["-t", "tmpfs", "-o", "size=64k", "tmpfs", m]).status().unwrap();
        assert!(ok.success(), "mount a tmpfs at {m} (needs root)");
        let path = mnt.path().join("summary.json");
        let e = atomic_write(&path, &vec![b'x'; 256 * 1024]).unwrap_err();
        let listing: Vec<String> =
            std::fs::read_dir(mnt.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        std::process::Command::new("umount").arg(m).status().unwrap();
        assert_eq!(e.kind(), std::io::ErrorKind::StorageFull, "{e}");
        assert!(e.to_string().contains(&path.display().to_string()), "{e}");
        assert!(listing.is_empty(), "left behind: {listing:?}");
    }

    #[test]
    fn a_yaml_file_that_is_not_utf8_names_the_line_and_the_fix() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("master.yaml");
        std::fs::write(&f, b"a: 1\nb: 2\nc: caf\xe9\n").unwrap();
        let e = crate::yaml::load(&f).unwrap_err().to_string();
        assert!(e.contains("master.yaml:3") && e.contains("not UTF-8") && e.contains("save the file as UTF-8"), "{e}");
        assert!(!e.contains("permissions"), "{e}");
        let e = crate::yaml::load(d.path()).unwrap_err().to_string();
        assert!(e.contains("name a file, not a folder"), "{e}");
    }
}
