//! Reading trace corpora: a file or a directory of files; `.json` (one trace, or an array),
//! `.jsonl`, either gzip-compressed (detected by magic bytes, so `.gz` naming is optional);
//! Weka / kv-cache-tester records or mooncake records (detected per file).

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use super::{Trace, TraceError, mooncake};

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
    mut f: impl FnMut(Trace) -> Result<(), TraceError>,
) -> Result<Vec<PathBuf>, TraceError> {
    let files = expand_paths(paths)?;
    let mut total = 0usize;
    for file in &files {
        total += read_file(file, opts, warnings, &mut f)?;
    }
    if total == 0 {
        let shown: Vec<String> = files.iter().map(|p| p.display().to_string()).collect();
        return Err(TraceError::Empty { path: shown.join(", ") });
    }
    Ok(files)
}

/// A buffered reader of a file, decompressed when it is gzip (detected from the magic bytes).
pub fn open_maybe_gz(path: &Path) -> Result<Box<dyn BufRead>, TraceError> {
    let mut file = File::open(path).map_err(|e| io_err(path, e))?;
    let mut magic = [0u8; 2];
    let n = file.read(&mut magic).map_err(|e| io_err(path, e))?;
    let file = File::open(path).map_err(|e| io_err(path, e))?;
    if n == 2 && magic == [0x1f, 0x8b] {
        Ok(Box::new(BufReader::with_capacity(1 << 20, flate2::read::MultiGzDecoder::new(BufReader::new(file)))))
    } else {
        Ok(Box::new(BufReader::with_capacity(1 << 20, file)))
    }
}

fn read_file(
    path: &Path,
    opts: &ReadOptions,
    warnings: &mut Vec<String>,
    f: &mut impl FnMut(Trace) -> Result<(), TraceError>,
) -> Result<usize, TraceError> {
    let mut reader = open_maybe_gz(path)?;
    let shown = path.display().to_string();
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let plain_name = name.strip_suffix(".gz").unwrap_or(name);
    // A `.json` file is one document (a trace, or an array of traces); everything else is JSONL.
    if plain_name.ends_with(".json") {
        let mut text = String::new();
        reader.read_to_string(&mut text).map_err(|e| io_err(path, e))?;
        let trimmed = text.trim_start();
        if trimmed.starts_with('[') {
            let values: Vec<serde_json::Value> = serde_json::from_str(&text).map_err(|e| TraceError::Invalid {
                path: shown.clone(),
                line: e.line(),
                trace_id: "?".into(),
                field: "(document)".into(),
                message: format!("not a JSON array of traces: {e}"),
            })?;
            let mut lines = Vec::with_capacity(values.len());
            for v in values {
                lines.push(v.to_string());
            }
            return handle_records(&shown, opts, warnings, f, lines.into_iter().enumerate().map(|(i, l)| Ok((i + 1, l))));
        }
        if trimmed.starts_with('{') && serde_json::from_str::<serde::de::IgnoredAny>(&text).is_ok() {
            return handle_records(&shown, opts, warnings, f, std::iter::once(Ok((1, text))));
        }
        // Fall through: a `.json` file holding JSON lines.
        let lines: Vec<String> = text.lines().map(str::to_string).collect();
        return handle_records(&shown, opts, warnings, f, lines.into_iter().enumerate().map(|(i, l)| Ok((i + 1, l))));
    }
    let mut lineno = 0usize;
    let iter = std::iter::from_fn(move || {
        let mut buf = String::new();
        match reader.read_line(&mut buf) {
            Ok(0) => None,
            Ok(_) => {
                lineno += 1;
                Some(Ok((lineno, buf)))
            }
            Err(e) => Some(Err(e)),
        }
    });
    handle_records(&shown, opts, warnings, f, iter)
}

fn handle_records(
    path: &str,
    opts: &ReadOptions,
    warnings: &mut Vec<String>,
    f: &mut impl FnMut(Trace) -> Result<(), TraceError>,
    records: impl Iterator<Item = std::io::Result<(usize, String)>>,
) -> Result<usize, TraceError> {
    let mut format = opts.format;
    let mut count = 0usize;
    let mut moon = mooncake::Collector::new(path, opts.mooncake_block_size);
    for rec in records {
        let (line, text) = rec.map_err(|e| TraceError::Io { path: path.to_string(), source: e })?;
        if text.trim().is_empty() {
            continue;
        }
        if format == TraceFormat::Auto {
            format = detect(&text);
        }
        match format {
            TraceFormat::Mooncake => {
                moon.push(line, &text)?;
            }
            _ => match parse_weka(path, line, &text) {
                Ok(t) => {
                    count += 1;
                    f(t)?;
                }
                Err(e) if opts.skip_invalid => {
                    // Returned, not logged: each command prints its set's warnings once.
                    warnings.push(format!("skipped: {e}"));
                }
                Err(e) => return Err(e),
            },
        }
    }
    if format == TraceFormat::Mooncake {
        for t in moon.finish() {
            count += 1;
            f(t)?;
        }
    }
    Ok(count)
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
                trace_id: t.id.clone(),
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
                trace_id: sniff_id(text),
                field: if field.is_empty() || field == "." { "(record)".into() } else { field },
                message: explain(&inner.to_string()),
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
