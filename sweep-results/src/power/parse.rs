//! Reading GPU telemetry text: the CSV records, which columns hold what, and the timestamp and
//! power cells.
//!
//! The CSV reader follows Python's `csv` module in its `excel` dialect with `skipinitialspace`
//! (what InferenceX reads the monitor's file with), so a ragged, quoted or blank-lined file
//! yields the same cells, and a cell over the module's field limit makes the file unreadable
//! from that record on, as it does there.

use super::LocalOffset;

/// Python's default `csv.field_size_limit()`: a longer cell is a read error, not a value.
pub const CSV_FIELD_LIMIT: usize = 131_072;

/// Why the telemetry text could not be read to its end.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CsvError {
    /// One cell is longer than `CSV_FIELD_LIMIT` characters (a corrupt or binary file).
    #[error("record {record}: a field is larger than the field limit ({CSV_FIELD_LIMIT} characters)")]
    FieldTooLarge { record: usize },
}

/// The records read before the end of the text or the first error.
#[derive(Clone, Debug, PartialEq)]
pub struct CsvRecords {
    /// Blank lines appear as empty records, as Python's reader yields them.
    pub records: Vec<Vec<String>>,
    /// Set when reading stopped early; `records` then holds what came before.
    pub error: Option<CsvError>,
}

#[derive(Clone, Copy, PartialEq)]
enum State {
    StartRecord,
    StartField,
    InField,
    InQuoted,
    QuoteInQuoted,
}

struct Reader {
    records: Vec<Vec<String>>,
    record: Vec<String>,
    field: String,
    field_len: usize,
}

impl Reader {
    fn push_char(&mut self, c: char) -> Result<(), CsvError> {
        if self.field_len >= CSV_FIELD_LIMIT {
            return Err(CsvError::FieldTooLarge { record: self.records.len() });
        }
        self.field.push(c);
        self.field_len += 1;
        Ok(())
    }
    fn save_field(&mut self) {
        self.record.push(std::mem::take(&mut self.field));
        self.field_len = 0;
    }
    fn end_record(&mut self) {
        self.records.push(std::mem::take(&mut self.record));
    }
}

/// Split CSV text into records like Python's `csv.reader(f, skipinitialspace=True)`.
pub fn read_csv(text: &str) -> CsvRecords {
    let mut r = Reader { records: Vec::new(), record: Vec::new(), field: String::new(), field_len: 0 };
    let error = read_into(&mut r, text).err();
    CsvRecords { records: r.records, error }
}

fn read_into(r: &mut Reader, text: &str) -> Result<(), CsvError> {
    let mut state = State::StartRecord;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let newline = c == '\n' || c == '\r';
        if newline && state != State::InQuoted {
            if state != State::StartRecord {
                r.save_field();
            }
            r.end_record();
            if c == '\r' && chars.peek() == Some(&'\n') {
                chars.next();
            }
            state = State::StartRecord;
            continue;
        }
        state = match state {
            State::StartRecord | State::StartField => match c {
                '"' => State::InQuoted,
                ' ' => State::StartField,
                ',' => {
                    r.save_field();
                    State::StartField
                }
                _ => {
                    r.push_char(c)?;
                    State::InField
                }
            },
            State::InField => {
                if c == ',' {
                    r.save_field();
                    State::StartField
                } else {
                    r.push_char(c)?;
                    State::InField
                }
            }
            State::InQuoted => {
                if c == '"' {
                    State::QuoteInQuoted
                } else {
                    r.push_char(c)?;
                    State::InQuoted
                }
            }
            State::QuoteInQuoted => match c {
                '"' => {
                    r.push_char(c)?;
                    State::InQuoted
                }
                ',' => {
                    r.save_field();
                    State::StartField
                }
                _ => {
                    r.push_char(c)?;
                    State::InField
                }
            },
        };
    }
    if state != State::StartRecord {
        r.save_field();
        r.end_record();
    }
    Ok(())
}

/// The columns of a telemetry header that carry the timestamp, the board power and the device.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Columns {
    pub timestamp: Option<String>,
    pub power: Option<String>,
    pub gpu: Option<String>,
}

fn contains_ci(haystack: &str, needle: &str) -> bool {
    haystack.to_ascii_lowercase().contains(needle)
}

/// The first column naming a time, the first naming power but no limit, cap, max or min (so
/// `power.limit` never passes for the draw), and the first that is exactly a device name
/// (`index`, `gpu`, `gpu_id`, `gpu_index`, `card`, `device`), all case-insensitive.
pub fn detect_columns<S: AsRef<str>>(header: &[S]) -> Columns {
    let names = || header.iter().map(AsRef::as_ref);
    let excluded = |c: &str| ["limit", "cap", "max", "min"].iter().any(|x| contains_ci(c, x));
    let device = |c: &str| {
        let c = c.trim().to_ascii_lowercase();
        ["index", "gpu", "gpu_id", "gpu_index", "card", "device"].contains(&c.as_str())
    };
    Columns {
        timestamp: names().find(|c| contains_ci(c, "time")).map(str::to_string),
        power: names().find(|c| contains_ci(c, "power") && !excluded(c)).map(str::to_string),
        gpu: names().find(|c| device(c)).map(str::to_string),
    }
}

/// The first number in a power cell (`412.34 W` from nvidia-smi, a bare number from amd-smi);
/// `None` for an empty or `[N/A]` cell or one with no number.
pub fn parse_power(value: &str) -> Option<f64> {
    let value = value.trim();
    if value.is_empty() || ["[n/a]", "n/a", "na"].contains(&value.to_lowercase().as_str()) {
        return None;
    }
    let b = value.as_bytes();
    (0..b.len()).find_map(|i| number_at(b, i)).and_then(|n| value[n].parse().ok())
}

/// The extent of `-?\d+(?:\.\d+)?` starting at `i`, if one starts there.
fn number_at(b: &[u8], i: usize) -> Option<std::ops::Range<usize>> {
    let digits = |from: usize| b[from.min(b.len())..].iter().take_while(|c| c.is_ascii_digit()).count();
    let int_start = if b[i] == b'-' { i + 1 } else { i };
    let int_len = digits(int_start);
    if int_len == 0 {
        return None;
    }
    let mut end = int_start + int_len;
    if b.get(end) == Some(&b'.') {
        let frac = digits(end + 1);
        if frac > 0 {
            end += 1 + frac;
        }
    }
    Some(i..end)
}

/// Unix seconds from a telemetry timestamp cell, or `None` when it is none of the known shapes.
///
/// A plain number is epoch seconds, or milliseconds above 1e12. Then nvidia-smi's
/// `YYYY/MM/DD HH:MM:SS[.ffffff]` and ISO 8601 (amd-smi). Timestamps without a zone are wall
/// clock at `local`, which InferenceX takes from the host that reads the file.
pub fn parse_timestamp(value: &str, local: LocalOffset) -> Option<f64> {
    let value = value.trim();
    if value.is_empty() {
        return None;
    }
    if number_at(value.as_bytes(), 0).is_some_and(|r| r.end == value.len()) {
        let n: f64 = value.parse().ok()?;
        return Some(if n > 1e12 { n / 1000.0 } else { n });
    }
    if let Some(dt) = parse_nvidia(value) {
        return Some(dt.naive_timestamp(local));
    }
    let iso = if value.contains(' ') && !value.contains('T') { value.replacen(' ', "T", 1) } else { value.to_string() };
    let (dt, offset) = parse_iso(&iso)?;
    Some(match offset {
        None => dt.naive_timestamp(local),
        Some(off_us) => (dt.micros_since_epoch() - off_us) as f64 / 1e6,
    })
}

/// A calendar date and time of day, microsecond resolution, no zone.
#[derive(Clone, Copy, Debug, PartialEq)]
struct DateTime {
    year: i64,
    month: i64,
    day: i64,
    hour: i64,
    minute: i64,
    second: i64,
    micro: i64,
}

impl DateTime {
    fn new(ymd: (i64, i64, i64), hms: (i64, i64, i64), micro: i64) -> Option<DateTime> {
        let (year, month, day) = ymd;
        let (hour, minute, second) = hms;
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
        let days_in_month = match month {
            1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
            4 | 6 | 9 | 11 => 30,
            2 if leap => 29,
            2 => 28,
            _ => return None,
        };
        let ok = (1..=9999).contains(&year)
            && (1..=days_in_month).contains(&day)
            && (0..24).contains(&hour)
            && (0..60).contains(&minute)
            && (0..60).contains(&second);
        ok.then_some(DateTime { year, month, day, hour, minute, second, micro })
    }

    /// Whole seconds since 1970-01-01T00:00 of the wall-clock reading.
    fn seconds_since_epoch(&self) -> i64 {
        // Days from civil (Howard Hinnant's algorithm).
        let y = if self.month <= 2 { self.year - 1 } else { self.year };
        let era = y.div_euclid(400);
        let yoe = y - era * 400;
        let mp = (self.month + 9) % 12;
        let doy = (153 * mp + 2) / 5 + self.day - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        let days = era * 146_097 + doe - 719_468;
        days * 86_400 + self.hour * 3600 + self.minute * 60 + self.second
    }

    fn micros_since_epoch(&self) -> i64 {
        self.seconds_since_epoch() * 1_000_000 + self.micro
    }

    /// Python's `datetime.timestamp()` of a naive value: whole local seconds, then the
    /// microseconds added as a float (its rounding, not an exact division).
    fn naive_timestamp(&self, local: LocalOffset) -> f64 {
        (self.seconds_since_epoch() - i64::from(local.0)) as f64 + self.micro as f64 / 1e6
    }
}

/// A run of ASCII digits at the start of `s`, with what follows it.
fn split_digits(s: &str) -> (&str, &str) {
    let n = s.bytes().take_while(u8::is_ascii_digit).count();
    s.split_at(n)
}

/// `strptime`'s 1-2 digit fields (`%m %d %H %M %S`): the run must be one or two digits.
fn short_field(s: &str) -> Option<(i64, &str)> {
    let (d, rest) = split_digits(s);
    ((1..=2).contains(&d.len())).then(|| (d.parse().ok(), rest)).and_then(|(v, r)| Some((v?, r)))
}

/// `%Y/%m/%d %H:%M:%S` with an optional `.%f` (1-6 digits), whitespace between date and time.
fn parse_nvidia(s: &str) -> Option<DateTime> {
    let (y, rest) = split_digits(s);
    if y.len() != 4 {
        return None;
    }
    let (m, rest) = short_field(rest.strip_prefix('/')?)?;
    let (d, rest) = short_field(rest.strip_prefix('/')?)?;
    let after_date = rest.trim_start();
    if after_date.len() == rest.len() || m == 0 || d == 0 {
        return None;
    }
    let (h, rest) = short_field(after_date)?;
    let (mi, rest) = short_field(rest.strip_prefix(':')?)?;
    let (sec, rest) = short_field(rest.strip_prefix(':')?)?;
    let micro = match rest.strip_prefix('.') {
        None if rest.is_empty() => 0,
        None => return None,
        Some(f) => fraction_micros(f, 6)?,
    };
    DateTime::new((y.parse().ok()?, m, d), (h, mi, sec), micro)
}

/// Microseconds from fraction digits: all must be digits, at most `max` of them (longer ones
/// truncated to six where `max` allows more).
fn fraction_micros(f: &str, max: usize) -> Option<i64> {
    if f.is_empty() || f.len() > max || !f.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let six: String = f.chars().chain(std::iter::repeat('0')).take(6).collect();
    six.parse().ok()
}

/// Two ASCII digits at the start of `s`.
fn two_digits(s: &str) -> Option<(i64, &str)> {
    let head = s.get(..2)?;
    head.bytes().all(|b| b.is_ascii_digit()).then(|| (head.parse().ok(), &s[2..])).and_then(|(v, r)| Some((v?, r)))
}

/// ISO 8601 as Python 3.11's `datetime.fromisoformat` reads it, extended date form: the date,
/// then any one separator and `HH[:MM[:SS[.f]]]` (or `HHMM[SS]`), then an optional `Z` or
/// `±HH[:MM[:SS[.f]]]`. Returns the reading and its UTC offset in microseconds, if any.
fn parse_iso(s: &str) -> Option<(DateTime, Option<i64>)> {
    let b = s.as_bytes();
    if b.len() < 10 || b[4] != b'-' || b[7] != b'-' || !s.is_char_boundary(10) {
        return None;
    }
    let year: i64 = s[..4].parse().ok().filter(|_| s[..4].bytes().all(|c| c.is_ascii_digit()))?;
    let (month, _) = two_digits(&s[5..7])?;
    let (day, _) = two_digits(&s[8..10])?;
    let mut chars = s[10..].chars();
    let Some(_separator) = chars.next() else {
        return Some((DateTime::new((year, month, day), (0, 0, 0), 0)?, None));
    };
    let time = chars.as_str();
    let tz_at = time.find(['Z', '+', '-']).unwrap_or(time.len());
    let (clock, zone) = time.split_at(tz_at);
    let ((h, mi, sec), micro) = parse_clock(clock.trim_end())?;
    let offset = if zone.is_empty() { None } else { Some(parse_zone(zone)?) };
    Some((DateTime::new((year, month, day), (h, mi, sec), micro)?, offset))
}

/// `HH`, `HH:MM`, `HH:MM:SS[.f]`, `HHMM` or `HHMMSS[.f]` (`,` also marks the fraction).
fn parse_clock(s: &str) -> Option<((i64, i64, i64), i64)> {
    let (main, frac) = match s.find(['.', ',']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let (h, rest) = two_digits(main)?;
    let colon = rest.starts_with(':');
    let (m, rest) = if rest.is_empty() { (0, rest) } else { two_digits(rest.strip_prefix(':').unwrap_or(rest))? };
    let (sec, rest) = if rest.is_empty() {
        (0, rest)
    } else {
        let r = if colon { rest.strip_prefix(':')? } else { rest };
        two_digits(r)?
    };
    if !rest.is_empty() {
        return None;
    }
    let micro = match frac {
        None => 0,
        Some(f) => fraction_micros(f, usize::MAX)?,
    };
    Some(((h, m, sec), micro))
}

/// `Z` or `±HH[:MM[:SS[.f]]]` (or without colons) as microseconds east of UTC.
fn parse_zone(s: &str) -> Option<i64> {
    if s == "Z" {
        return Some(0);
    }
    let sign = match s.as_bytes()[0] {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let ((h, m, sec), micro) = parse_clock(&s[1..])?;
    if h > 23 || m > 59 || sec > 59 {
        return None;
    }
    Some(sign * (((h * 60 + m) * 60 + sec) * 1_000_000 + micro))
}
