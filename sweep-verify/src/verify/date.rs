//! Calendar dates (UTC) for the review date and `MODELS.md`'s deprecations.

use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Date {
    pub y: u32,
    pub m: u32,
    pub d: u32,
}

const MONTHS: [&str; 12] =
    ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december"];

fn days_in(y: u32, m: u32) -> u32 {
    match m {
        2 if (y.is_multiple_of(4) && !y.is_multiple_of(100)) || y.is_multiple_of(400) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

impl Date {
    /// `YYYY-MM-DD`.
    pub fn parse(s: &str) -> Option<Date> {
        let mut it = s.trim().splitn(3, '-');
        let (y, m, d) = (it.next()?.parse().ok()?, it.next()?.parse().ok()?, it.next()?.parse().ok()?);
        (y >= 1000 && (1..=12).contains(&m) && d >= 1 && d <= days_in(y, m)).then_some(Date { y, m, d })
    }

    /// Today in UTC (the verifier's `date -u +%F`).
    pub fn today() -> Date {
        let now = humantime::format_rfc3339(std::time::SystemTime::now()).to_string();
        Date::parse(&now[..10]).expect("RFC 3339 starts with the date")
    }

    pub fn next_day(self) -> Date {
        if self.d < days_in(self.y, self.m) {
            Date { d: self.d + 1, ..self }
        } else if self.m < 12 {
            Date { m: self.m + 1, d: 1, ..self }
        } else {
            Date { y: self.y + 1, m: 1, d: 1 }
        }
    }

    /// The first `YYYY-MM-DD` in `text`.
    pub fn find_iso(text: &str) -> Option<Date> {
        let b = text.as_bytes();
        (0..b.len().saturating_sub(9)).find_map(|i| {
            let w = &text.get(i..i + 10)?;
            let shape = w.bytes().enumerate().all(|(j, c)| if j == 4 || j == 7 { c == b'-' } else { c.is_ascii_digit() });
            let bounded = (i == 0 || !b[i - 1].is_ascii_digit()) && b.get(i + 10).is_none_or(|c| !c.is_ascii_digit());
            if shape && bounded { Date::parse(w) } else { None }
        })
    }

    /// The first `Month D, YYYY` in `text` (e.g. "Monday, August 3, 2026").
    pub fn find_long(text: &str) -> Option<Date> {
        let words: Vec<String> = text
            .split(|c: char| c.is_whitespace() || c == ',' || c == '*')
            .filter(|w| !w.is_empty())
            .map(|w| w.to_ascii_lowercase())
            .collect();
        words.windows(3).find_map(|w| {
            let m = MONTHS.iter().position(|n| *n == w[0])? as u32 + 1;
            let d: u32 = w[1].parse().ok()?;
            let y: u32 = w[2].parse().ok()?;
            Date::parse(&format!("{y:04}-{m:02}-{d:02}"))
        })
    }
}

impl fmt::Display for Date {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04}-{:02}-{:02}", self.y, self.m, self.d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_steps() {
        let d = Date::parse("2026-08-03").unwrap();
        assert_eq!(d.next_day().to_string(), "2026-08-04");
        assert_eq!(Date::parse("2026-12-31").unwrap().next_day().to_string(), "2027-01-01");
        assert_eq!(Date::parse("2028-02-28").unwrap().next_day().to_string(), "2028-02-29");
        assert!(Date::parse("2026-02-30").is_none());
        assert_eq!(Date::find_iso("since 2026-07-17 ([#2263](…))"), Date::parse("2026-07-17"));
        assert_eq!(Date::find_long("### Monday, August 3, 2026"), Date::parse("2026-08-03"));
        assert_eq!(Date::find_long("**Thursday, August 6, 2026** is the last day"), Date::parse("2026-08-06"));
        assert!(Date::today() > Date::parse("2020-01-01").unwrap());
    }
}
