//! The GSM8K splits: the test split is scored, the train split gives the few-shot examples.
//!
//! A copy of both (openai/grade-school-math, MIT; `sweep-results/data/gsm8k/LICENSE`) is embedded,
//! gzip-compressed (1.6 MB), so `sweep eval` works on a fresh machine with no download; the
//! rows and their order are those of the `openai/gsm8k` `main` dataset lm-eval loads, which the
//! few-shot sampler depends on. `--gsm8k DIR` (or `SWEEP_GSM8K`) reads `test.jsonl` and
//! `train.jsonl` from a folder instead.

use std::io::Read;
use std::path::{Path, PathBuf};

/// One GSM8K problem: the question and the worked answer ending in `#### N`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Doc {
    pub question: String,
    pub answer: String,
}

/// Both splits and where they came from.
#[derive(Clone, Debug)]
pub struct Gsm8k {
    pub test: Vec<Doc>,
    pub train: Vec<Doc>,
    /// `embedded` or the folder read.
    pub source: String,
}

/// Rows in the real test split: a full-n eval scores all of them.
pub const TEST_ROWS: usize = 1319;
/// Rows in the real train split.
pub const TRAIN_ROWS: usize = 7473;

/// The environment variable naming a GSM8K folder (after `--gsm8k`, before the embedded copy).
pub const GSM8K_ENV: &str = "SWEEP_GSM8K";

/// A split file larger than this is not GSM8K (the train split is 4.2 MB).
const MAX_FILE_BYTES: u64 = 64 << 20;
/// A row longer than this is not a grade-school problem (the longest is under 2 KB).
const MAX_LINE_BYTES: usize = 1 << 20;

static TEST_GZ: &[u8] = include_bytes!("../../data/gsm8k/test.jsonl.gz");
static TRAIN_GZ: &[u8] = include_bytes!("../../data/gsm8k/train.jsonl.gz");

#[derive(Debug, thiserror::Error)]
pub enum DataError {
    #[error("{path}: {source}; --gsm8k names a folder holding GSM8K's test.jsonl and train.jsonl")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: {bytes} bytes is too large for a GSM8K split (at most {MAX_FILE_BYTES})")]
    TooLarge { path: PathBuf, bytes: u64 },
    #[error("{path}:{line}: {message}; each line is {{\"question\": \"…\", \"answer\": \"… #### N\"}}")]
    Row { path: String, line: usize, message: String },
    #[error("{path}: no rows; a GSM8K split has one JSON object per line")]
    Empty { path: String },
}

/// The GSM8K rows of one JSONL split (`name` labels errors).
pub fn parse_split(name: &str, text: &str) -> Result<Vec<Doc>, DataError> {
    let mut docs = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let row = |message: String| DataError::Row { path: name.to_string(), line: i + 1, message };
        if line.trim().is_empty() {
            continue;
        }
        if line.len() > MAX_LINE_BYTES {
            return Err(row(format!("a {} byte line is longer than any GSM8K row", line.len())));
        }
        // The parser's message quotes the input (an unknown key): an excerpt of it.
        let doc: Doc =
            serde_json::from_str(line).map_err(|e| row(format!("not a GSM8K row: {}", crate::problem::excerpt(&e.to_string()))))?;
        if !doc.answer.contains("#### ") {
            return Err(row("the answer has no final `#### N` line".into()));
        }
        docs.push(doc);
    }
    if docs.is_empty() {
        return Err(DataError::Empty { path: name.to_string() });
    }
    Ok(docs)
}

fn gunzip(bytes: &[u8]) -> String {
    let mut s = String::new();
    flate2::read::GzDecoder::new(bytes).read_to_string(&mut s).expect("the embedded GSM8K copy is valid gzip UTF-8");
    s
}

/// The embedded copy of both splits.
pub fn embedded() -> Gsm8k {
    let test = parse_split("embedded test.jsonl", &gunzip(TEST_GZ)).expect("embedded test split parses");
    let train = parse_split("embedded train.jsonl", &gunzip(TRAIN_GZ)).expect("embedded train split parses");
    Gsm8k { test, train, source: "embedded".into() }
}

/// One split file, read within the size limits.
pub fn read_split(path: &Path) -> Result<Vec<Doc>, DataError> {
    let io = |source| DataError::Io { path: path.to_path_buf(), source };
    let bytes = std::fs::metadata(path).map_err(io)?.len();
    if bytes > MAX_FILE_BYTES {
        return Err(DataError::TooLarge { path: path.to_path_buf(), bytes });
    }
    let text = std::fs::read_to_string(path).map_err(io)?;
    parse_split(&path.display().to_string(), &text)
}

/// `test.jsonl` and `train.jsonl` of a folder.
pub fn load_dir(dir: &Path) -> Result<Gsm8k, DataError> {
    Ok(Gsm8k {
        test: read_split(&dir.join("test.jsonl"))?,
        train: read_split(&dir.join("train.jsonl"))?,
        source: dir.display().to_string(),
    })
}

/// `--gsm8k DIR`, else `$SWEEP_GSM8K`, else the embedded copy.
pub fn locate(flag: Option<&Path>) -> Result<Gsm8k, DataError> {
    match flag.map(Path::to_path_buf).or_else(|| std::env::var_os(GSM8K_ENV).filter(|v| !v.is_empty()).map(PathBuf::from)) {
        Some(dir) => load_dir(&dir),
        None => Ok(embedded()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_copy_has_both_real_splits() {
        let d = embedded();
        assert_eq!((d.test.len(), d.train.len()), (TEST_ROWS, TRAIN_ROWS));
        assert!(d.test[0].question.starts_with("Janet\u{2019}s ducks lay 16 eggs"), "{:?}", d.test[0]);
        assert!(d.test[0].answer.ends_with("#### 18"));
    }

    #[test]
    fn bad_rows_name_the_line_and_the_shape() {
        let e = parse_split("t.jsonl", "{\"question\": \"q\", \"answer\": \"a #### 1\"}\n{\"question\": \"q\"}\n").unwrap_err();
        let m = e.to_string();
        assert!(m.starts_with("t.jsonl:2: not a GSM8K row") && m.contains("missing field `answer`"), "{m}");
        let m = parse_split("t.jsonl", "{\"question\": \"q\", \"answer\": \"no final line\"}").unwrap_err().to_string();
        assert!(m.contains("t.jsonl:1: the answer has no final `#### N` line"), "{m}");
        assert!(matches!(parse_split("t.jsonl", "\n\n"), Err(DataError::Empty { .. })));
        let m = load_dir(Path::new("/nonexistent-gsm8k")).unwrap_err().to_string();
        assert!(m.contains("/nonexistent-gsm8k/test.jsonl") && m.contains("--gsm8k"), "{m}");
    }
}
