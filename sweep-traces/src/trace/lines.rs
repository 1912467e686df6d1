//! Bounded reading of trace files: opening (gzip detected from the magic bytes, decompression
//! held to a ratio of the compressed input), and JSONL records read within a line-length limit
//! with blank lines skipped in bulk. A broken or hostile file gets a clear error early, with
//! memory bounded by the line limit, instead of a hang or an allocation failure.

use std::cell::Cell;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;
use std::rc::Rc;

use super::TraceError;

/// The longest JSONL line (one trace): the synthesized copy of the published 062126 corpus
/// (`gen --like`) has a 190 MB line (its longest session); the shared real traces, 4.2 MB.
pub const MAX_LINE_BYTES: usize = 1 << 30;

/// The longest trace, agent or session id: real ids are 36 characters at most; ids become
/// conversation ids, correlation headers and file names.
pub const MAX_ID_BYTES: usize = 256;

/// A gzip stream may expand to this many times the compressed bytes read so far: the real
/// 200-trace corpus expands 13.7×, a synthetic one 5.7×; deflate's worst case is ~1032×.
pub const DEFAULT_GZIP_MAX_RATIO: u64 = 100;

/// The environment variable that overrides [`DEFAULT_GZIP_MAX_RATIO`].
pub const GZIP_RATIO_ENV: &str = "SWEEP_GZIP_MAX_RATIO";

/// The ratio applies once this much has been decompressed, so small files of repetitive
/// records are never judged by it; a gzip bomb is stopped here, holding at most this much.
pub const GZIP_RATIO_FLOOR: u64 = 16 << 20;

/// The ratio in force: [`GZIP_RATIO_ENV`] when it holds a positive number, else the default.
pub fn gzip_max_ratio() -> u64 {
    std::env::var(GZIP_RATIO_ENV).ok().and_then(|v| v.trim().parse().ok()).filter(|&r| r > 0).unwrap_or(DEFAULT_GZIP_MAX_RATIO)
}

/// A gzip stream that expanded past the ratio limit (carried inside an `io::Error`).
#[derive(Debug)]
pub struct GzipRatioExceeded {
    pub decompressed: u64,
    pub compressed: u64,
    pub max_ratio: u64,
}

impl std::fmt::Display for GzipRatioExceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "gzip stream expands more than {}× ({} bytes from {} compressed bytes)",
            self.max_ratio, self.decompressed, self.compressed
        )
    }
}

impl std::error::Error for GzipRatioExceeded {}

/// Counts the bytes read through it (the compressed side of a gzip stream).
struct Counting<R> {
    inner: R,
    count: Rc<Cell<u64>>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.set(self.count.get() + n as u64);
        Ok(n)
    }
}

/// Fails once the decompressed output passes the ratio limit (past the floor).
struct RatioLimited<R> {
    inner: R,
    compressed: Rc<Cell<u64>>,
    decompressed: u64,
    max_ratio: u64,
}

impl<R: Read> Read for RatioLimited<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.decompressed += n as u64;
        let compressed = self.compressed.get().max(1);
        if self.decompressed > GZIP_RATIO_FLOOR && self.decompressed > compressed.saturating_mul(self.max_ratio) {
            let e = GzipRatioExceeded { decompressed: self.decompressed, compressed, max_ratio: self.max_ratio };
            return Err(io::Error::new(io::ErrorKind::InvalidData, e));
        }
        Ok(n)
    }
}

fn io_err(path: &Path, source: io::Error) -> TraceError {
    TraceError::Io { path: path.display().to_string(), source }
}

/// A buffered reader of a file, decompressed when it is gzip (detected from the magic bytes,
/// peeked without consuming them, so a pipe works too). Devices are refused: reading
/// `/dev/zero` or `/dev/urandom` as a trace only ends at a limit.
pub fn open_maybe_gz(path: &Path) -> Result<Box<dyn BufRead>, TraceError> {
    open_with_ratio(path, gzip_max_ratio())
}

/// [`open_maybe_gz`] with an explicit gzip ratio limit.
pub fn open_with_ratio(path: &Path, max_ratio: u64) -> Result<Box<dyn BufRead>, TraceError> {
    use std::os::unix::fs::FileTypeExt;
    let file = File::open(path).map_err(|e| io_err(path, e))?;
    let kind = file.metadata().map_err(|e| io_err(path, e))?.file_type();
    if kind.is_char_device() || kind.is_block_device() {
        return Err(TraceError::Limit {
            path: path.display().to_string(),
            line: 0,
            message: "is a device, not a trace file".into(),
            fix: "give a .json, .jsonl or .jsonl.gz file, a directory of them, or a pipe".into(),
        });
    }
    let count = Rc::new(Cell::new(0));
    let mut raw = BufReader::with_capacity(1 << 16, Counting { inner: file, count: count.clone() });
    let head = raw.fill_buf().map_err(|e| io_err(path, e))?;
    if head.starts_with(&[0x1f, 0x8b]) {
        let gz = flate2::bufread::MultiGzDecoder::new(raw);
        let limited = RatioLimited { inner: gz, compressed: count, decompressed: 0, max_ratio };
        Ok(Box::new(BufReader::with_capacity(1 << 20, limited)))
    } else {
        Ok(Box::new(BufReader::with_capacity(1 << 20, raw)))
    }
}

/// Maps a read error to a trace error: the gzip ratio limit becomes a limit error with its fix.
pub fn read_error(path: &str, line: usize, e: io::Error) -> TraceError {
    if let Some(g) = e.get_ref().and_then(|g| g.downcast_ref::<GzipRatioExceeded>()) {
        return TraceError::Limit {
            path: path.to_string(),
            line,
            message: g.to_string(),
            fix: format!(
                "this is not a trace corpus (a gzip bomb?); if it is one, raise {GZIP_RATIO_ENV} (default {DEFAULT_GZIP_MAX_RATIO})"
            ),
        };
    }
    TraceError::Io { path: path.to_string(), source: e }
}

/// The non-blank lines of a JSONL stream with their 1-based line numbers, each at most
/// `max_line` bytes; runs of blank lines are skipped a buffer at a time.
pub struct Records<R> {
    reader: R,
    path: String,
    max_line: usize,
    /// Newlines consumed so far.
    line: usize,
    /// The previous record's length: the next buffer starts that large.
    hint: usize,
    done: bool,
}

impl<R: BufRead> Records<R> {
    pub fn new(reader: R, path: &str) -> Self {
        Self::with_limit(reader, path, MAX_LINE_BYTES)
    }

    pub fn with_limit(reader: R, path: &str, max_line: usize) -> Self {
        Records { reader, path: path.to_string(), max_line, line: 0, hint: 0, done: false }
    }

    /// Consumes whitespace (blank lines included); false at the end of the stream.
    fn skip_blank(&mut self) -> io::Result<bool> {
        loop {
            let buf = self.reader.fill_buf()?;
            if buf.is_empty() {
                return Ok(false);
            }
            let n = buf.iter().position(|b| !matches!(b, b'\n' | b'\r' | b' ' | b'\t')).unwrap_or(buf.len());
            self.line += buf[..n].iter().filter(|&&b| b == b'\n').count();
            let more = n < buf.len();
            self.reader.consume(n);
            if more {
                return Ok(true);
            }
        }
    }

    fn next_record(&mut self) -> Result<Option<(usize, String)>, TraceError> {
        let at = self.line + 1;
        if !self.skip_blank().map_err(|e| read_error(&self.path, at, e))? {
            return Ok(None);
        }
        let at = self.line + 1;
        let mut buf = Vec::with_capacity(self.hint.min(self.max_line));
        let limit = self.max_line as u64 + 1;
        (&mut self.reader).take(limit).read_until(b'\n', &mut buf).map_err(|e| read_error(&self.path, at, e))?;
        if buf.last() == Some(&b'\n') {
            buf.pop();
            self.line += 1;
        } else if buf.len() as u64 == limit {
            return Err(TraceError::Limit {
                path: self.path.clone(),
                line: at,
                message: format!("is longer than the {} MiB limit for one trace line", self.max_line >> 20),
                fix: "give JSONL with one trace per line (the longest real traces take a few hundred MB)".into(),
            });
        }
        self.hint = buf.len();
        String::from_utf8(buf).map(|s| Some((at, s))).map_err(|e| TraceError::Invalid {
            path: self.path.clone(),
            line: at,
            trace_id: "?".into(),
            field: "(record)".into(),
            message: format!("not UTF-8 text (byte {} of the line); save the file as UTF-8", e.utf8_error().valid_up_to()),
        })
    }
}

impl<R: BufRead> Iterator for Records<R> {
    type Item = Result<(usize, String), TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let r = self.next_record().transpose();
        // A read or limit error ends the stream: what follows cannot be found reliably.
        if matches!(r, None | Some(Err(TraceError::Io { .. } | TraceError::Limit { .. }))) {
            self.done = true;
        }
        r
    }
}

/// Reads a whole JSON document (a `.json` file) of at most `max` bytes.
pub fn read_document(reader: &mut dyn BufRead, path: &str, max: u64) -> Result<Vec<u8>, TraceError> {
    let mut bytes = Vec::new();
    reader.take(max + 1).read_to_end(&mut bytes).map_err(|e| read_error(path, 1, e))?;
    if bytes.len() as u64 > max {
        return Err(TraceError::Limit {
            path: path.to_string(),
            line: 1,
            message: format!("is larger than the {} MiB limit for one .json document", max >> 20),
            fix: "write the traces as JSONL (one trace per line, name ending .jsonl): it has no such limit".into(),
        });
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Cursor, Write};

    fn records(text: &[u8], max_line: usize) -> Vec<Result<(usize, String), String>> {
        Records::with_limit(Cursor::new(text.to_vec()), "t.jsonl", max_line).map(|r| r.map_err(|e| e.to_string())).collect()
    }

    #[test]
    fn lines_are_numbered_and_blank_lines_skipped() {
        let got = records(b"\n\n{\"a\":1}\r\n  \n\t\n{\"b\":2}", 100);
        assert_eq!(got, vec![Ok((3, "{\"a\":1}\r".to_string())), Ok((6, "{\"b\":2}".to_string()))]);
    }

    #[test]
    fn a_line_over_the_limit_ends_the_stream_with_its_number() {
        let got = records(b"{}\n\n0123456789abc\n{}\n", 10);
        assert_eq!(got.len(), 2, "{got:?}");
        let e = got[1].as_ref().unwrap_err();
        assert!(e.starts_with("t.jsonl:3: is longer than"), "{e}");
        assert!(records(b"0123456789\n", 10)[0].is_ok(), "a line of exactly the limit is read");
    }

    /// 32 MiB of blank lines from 32 gzip members of 1 MiB each (about 1 KB compressed each).
    #[test]
    fn a_gzip_stream_over_the_ratio_is_stopped_early() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("blank.jsonl.gz");
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(&[b'\n'; 1 << 20]).unwrap();
        std::fs::write(&p, gz.finish().unwrap().repeat(32)).unwrap();
        let e = Records::new(open_with_ratio(&p, 100).unwrap(), "blank.jsonl.gz").find_map(Result::err).unwrap().to_string();
        assert!(e.starts_with("blank.jsonl.gz:1: gzip stream expands more than 100×") && e.contains(GZIP_RATIO_ENV), "{e}");
        // Within a larger ratio the stream is read to the end, every line blank.
        assert_eq!(Records::new(open_with_ratio(&p, 10_000).unwrap(), "x").count(), 0);
    }
}
