//! Reading trace corpora: a file or a directory of files; `.json` (one trace, or an array),
//! `.jsonl`, either gzip-compressed (detected by magic bytes, so `.gz` naming is optional);
//! Weka / kv-cache-tester records or mooncake records (detected per file).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::{Trace, TraceError, lines, mooncake};
use crate::problem::{excerpt, excerpt_quoted};

pub use lines::open_maybe_gz;

/// Which record format a file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum TraceFormat {
    /// Detect per file from the first record (`requests` ⇒ Weka, `input_length`/`hash_ids` ⇒ mooncake).
    #[default]
    Auto,
    Weka,
    Mooncake,
}

/// How to read a corpus.
#[derive(Debug, Clone)]
pub struct ReadOptions {
    pub format: TraceFormat,
    /// Skip a malformed trace with a warning instead of failing the whole read.
    pub skip_invalid: bool,
    /// Block size (tokens) assumed for mooncake `hash_ids` (mooncake files do not say).
    pub mooncake_block_size: u32,
}

impl Default for ReadOptions {
    fn default() -> Self {
        Self { format: TraceFormat::Auto, skip_invalid: false, mooncake_block_size: mooncake::DEFAULT_BLOCK_SIZE }
    }
}

/// A read corpus: the traces in file order plus the warnings for any skipped trace.
#[derive(Debug, Default, Clone)]
pub struct TraceSet {
    pub traces: Vec<Trace>,
    pub warnings: Vec<String>,
    /// The files read, in order.
    pub files: Vec<PathBuf>,
}

/// Read every trace under `paths` (files or directories) into memory.
pub fn read_traces<P: AsRef<Path>>(paths: &[P], opts: &ReadOptions) -> Result<TraceSet, TraceError> {
    let mut set = TraceSet::default();
    let mut traces = Vec::new();
    let mut warnings = Vec::new();
    let files = for_each_trace(paths, opts, &mut warnings, |t| {
        traces.push(t);
        Ok(())
    })?;
    set.traces = traces;
    set.warnings = warnings;
    set.files = files;
    Ok(set)
}

/// Expand files and directories (directories: their `.json`, `.jsonl`, `.gz` files, sorted by name).
pub fn expand_paths<P: AsRef<Path>>(paths: &[P]) -> Result<Vec<PathBuf>, TraceError> {
    let mut out = Vec::new();
    for p in paths {
        let p = p.as_ref();
        let meta = std::fs::metadata(p).map_err(|e| io_err(p, e))?;
        if meta.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| io_err(p, e))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| {
                    let name = f.file_name().and_then(|n| n.to_str()).unwrap_or("");
                    f.is_file() && (name.ends_with(".json") || name.ends_with(".jsonl") || name.ends_with(".gz"))
                })
                .collect();
            files.sort();
            if files.is_empty() {
                return Err(TraceError::Empty { path: p.display().to_string() });
            }
            out.extend(files);
        } else {
            out.push(p.to_path_buf());
        }
    }
    Ok(out)
}

fn io_err(p: &Path, source: std::io::Error) -> TraceError {
    TraceError::Io { path: p.display().to_string(), source }
}

/// Stream every trace under `paths` to `f`, one at a time (bounded memory for large corpora).
/// Skipped traces (with `skip_invalid`) are reported in `warnings` and logged. Returns the files read.
pub fn for_each_trace<P: AsRef<Path>>(
    paths: &[P],
    opts: &ReadOptions,
    warnings: &mut Vec<String>,
    f: impl FnMut(Trace) -> Result<(), TraceError>,
) -> Result<Vec<PathBuf>, TraceError> {
    let files = expand_paths(paths)?;
    let mut set = SetReader { opts, warnings, seen: HashMap::new(), skipped: 0, accepted: 0, f };
    for file in &files {
        set.read_file(file)?;
    }
    if set.skipped > MAX_SKIP_WARNINGS {
        let more = set.skipped - MAX_SKIP_WARNINGS;
        set.warnings.push(format!("skipped {more} more invalid traces (the first {MAX_SKIP_WARNINGS} are listed)"));
    }
    if set.accepted == 0 {
        let shown: Vec<String> = files.iter().map(|p| p.display().to_string()).collect();
        return Err(TraceError::Empty { path: shown.join(", ") });
    }
    Ok(files)
}

/// Skipped traces listed one by one; past this many, a count (a file of junk lines must not
/// fill memory with warnings).
pub const MAX_SKIP_WARNINGS: usize = 100;

/// The largest `.json` document (one trace, or an array of traces) read: as large as a line.
pub const MAX_JSON_DOCUMENT_BYTES: u64 = lines::MAX_LINE_BYTES as u64;

/// One read of a trace set: the options, the warnings, and the ids seen so far.
struct SetReader<'a, F> {
    opts: &'a ReadOptions,
    warnings: &'a mut Vec<String>,
    /// Where each trace id was first read (`file:line`): ids name conversations, so a set may
    /// hold each once (as the reference replay requires).
    seen: HashMap<String, String>,
    skipped: usize,
    accepted: usize,
    f: F,
}

impl<F: FnMut(Trace) -> Result<(), TraceError>> SetReader<'_, F> {
    fn read_file(&mut self, path: &Path) -> Result<(), TraceError> {
        let mut reader = lines::open_maybe_gz(path)?;
        let shown = path.display().to_string();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let plain_name = name.strip_suffix(".gz").unwrap_or(name);
        // A `.json` file is one document (a trace, or an array of traces); everything else is JSONL.
        if !plain_name.ends_with(".json") {
            return self.records(&shown, lines::Records::new(reader, &shown));
        }
        let bytes = lines::read_document(&mut *reader, &shown, MAX_JSON_DOCUMENT_BYTES)?;
        let text = String::from_utf8(bytes).map_err(|e| {
            let at = e.utf8_error().valid_up_to();
            TraceError::Invalid {
                path: shown.clone(),
                line: e.as_bytes()[..at].iter().filter(|&&b| b == b'\n').count() + 1,
                trace_id: "?".into(),
                field: "(document)".into(),
                message: format!("not UTF-8 text (byte {at}); save the file as UTF-8"),
            }
        })?;
        let trimmed = text.trim_start();
        if trimmed.starts_with('[') {
            let values: Vec<serde_json::Value> = serde_json::from_str(&text).map_err(|e| TraceError::Invalid {
                path: shown.clone(),
                line: e.line(),
                trace_id: "?".into(),
                field: "(document)".into(),
                message: format!("not a JSON array of traces: {}", excerpt_quoted(&e.to_string())),
            })?;
            drop(text);
            let records = values.into_iter().enumerate().map(|(i, v)| Ok((i + 1, v.to_string())));
            return self.records(&shown, records);
        }
        if trimmed.starts_with('{') && serde_json::from_str::<serde::de::IgnoredAny>(&text).is_ok() {
            return self.records(&shown, std::iter::once(Ok((1, text))));
        }
        // Fall through: a `.json` file holding JSON lines.
        self.records(&shown, lines::Records::new(std::io::Cursor::new(text.into_bytes()), &shown))
    }

    fn records(&mut self, path: &str, records: impl Iterator<Item = Result<(usize, String), TraceError>>) -> Result<(), TraceError> {
        let mut format = self.opts.format;
        let mut moon = mooncake::Collector::new(path, self.opts.mooncake_block_size);
        for rec in records {
            let (line, text) = match rec {
                Ok(r) => r,
                Err(e) => {
                    self.reject(e)?;
                    continue;
                }
            };
            if format == TraceFormat::Auto {
                format = detect(&text);
            }
            match format {
                TraceFormat::Mooncake => {
                    if let Err(e) = moon.push(line, &text) {
                        self.reject(e)?;
                    }
                }
                _ => self.accept(path, line, parse_weka(path, line, &text))?,
            }
        }
        if format == TraceFormat::Mooncake {
            for (line, t) in moon.finish() {
                self.accept(path, line, Ok(t))?;
            }
        }
        Ok(())
    }

    /// Hands a parsed trace on unless its id was seen before in the set.
    fn accept(&mut self, path: &str, line: usize, parsed: Result<Trace, TraceError>) -> Result<(), TraceError> {
        let t = match parsed {
            Ok(t) => t,
            Err(e) => return self.reject(e),
        };
        if let Some(first) = self.seen.get(&t.id) {
            let e = TraceError::Invalid {
                path: path.to_string(),
                line,
                trace_id: excerpt(&t.id),
                field: "id".into(),
                message: format!(
                    "repeats the id of the trace at {first}: ids name conversations, so each may appear once in a trace set; rename or remove one"
                ),
            };
            return self.reject(e);
        }
        self.seen.insert(t.id.clone(), format!("{path}:{line}"));
        self.accepted += 1;
        (self.f)(t)
    }

    /// A bad trace fails the read, or is skipped with a warning under `skip_invalid`; errors
    /// about the file itself (reading, limits) always fail it.
    fn reject(&mut self, e: TraceError) -> Result<(), TraceError> {
        if !self.opts.skip_invalid || !matches!(e, TraceError::Invalid { .. }) {
            return Err(e);
        }
        self.skipped += 1;
        if self.skipped <= MAX_SKIP_WARNINGS {
            // Returned, not logged: each command prints its set's warnings once.
            self.warnings.push(format!("skipped: {e}"));
        }
        Ok(())
    }
}

fn detect(text: &str) -> TraceFormat {
    // Cheap key sniffing: a Weka trace always has "requests" and "hash_id_scope" at the top level.
    if text.contains("\"hash_id_scope\"") || text.contains("\"requests\"") {
        TraceFormat::Weka
    } else if text.contains("\"input_length\"") || text.contains("\"hash_ids\"") || text.contains("\"session_id\"") {
        TraceFormat::Mooncake
    } else {
        TraceFormat::Weka
    }
}

/// Parse one Weka trace (one JSON document) with a precise error: file, line, trace id, field path.
pub fn parse_weka(path: &str, line: usize, text: &str) -> Result<Trace, TraceError> {
    // The plain parser first (tracking the path costs about a third of reading a corpus); a
    // document it rejects is parsed again to name the field.
    let parsed: Result<Trace, _> = serde_json::from_str(text).or_else(|_| {
        let mut de = serde_json::Deserializer::from_str(text);
        serde_path_to_error::deserialize(&mut de)
    });
    match parsed {
        Ok(mut t) => {
            t.normalize().map_err(|fe| TraceError::Invalid {
                path: path.to_string(),
                line,
                trace_id: excerpt(&t.id),
                field: fe.field,
                message: fe.message,
            })?;
            Ok(t)
        }
        Err(e) => {
            let field = e.path().to_string();
            let inner = e.into_inner();
            Err(TraceError::Invalid {
                path: path.to_string(),
                line,
                trace_id: excerpt(&sniff_id(text)),
                field: if field.is_empty() || field == "." {
                    "(record)".into()
                } else {
                    field.split('.').map(excerpt).collect::<Vec<_>>().join(".")
                },
                message: explain(&excerpt_quoted(&inner.to_string())),
            })
        }
    }
}

fn explain(msg: &str) -> String {
    if msg.contains("unknown field") {
        format!("{msg} (the Weka schema is strict: remove or rename the field)")
    } else if msg.contains("unknown variant") {
        format!("{msg} (request `type` must be \"n\", \"s\" or \"subagent\")")
    } else if msg.contains("missing field") {
        format!("{msg} (add it: see docs/traces.md for the required fields)")
    } else {
        msg.to_string()
    }
}

/// Best-effort trace id of a record that failed to parse.
fn sniff_id(text: &str) -> String {
    #[derive(serde::Deserialize)]
    struct IdOnly {
        id: Option<serde_json::Value>,
    }
    match serde_json::from_str::<IdOnly>(text) {
        Ok(IdOnly { id: Some(serde_json::Value::String(s)) }) => s,
        Ok(IdOnly { id: Some(v) }) => v.to_string(),
        _ => "?".into(),
    }
}
