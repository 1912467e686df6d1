//! Scoring gsm8k as lm-eval does with InferenceX's task file: two filters pick the answer out of
//! a response (`strict-match`: the number after the last `#### `; `flexible-extract`: the last
//! number-like token), `exact_match` compares it with the gold answer after the task's
//! normalisation, and each filter's scores are averaged with the standard error of the mean.
//! Pure functions: no I/O.

use regex::Regex;
use std::sync::LazyLock;

/// What a filter yields when its pattern finds nothing (lm-eval's `RegexFilter` fallback).
pub const INVALID: &str = "[invalid]";
pub const STRICT: &str = "strict-match";
pub const FLEXIBLE: &str = "flexible-extract";

/// The task's patterns, as written in gsm8k.yaml (Rust's leftmost-first matching finds the
/// same matches as Python's `re` for them: no look-around, no back-references).
pub const STRICT_PATTERN: &str = r"#### (\-?[0-9\.\,]+)";
pub const FLEXIBLE_PATTERN: &str = r"(-?[$0-9.,]{2,})|(-?[0-9]+)";
/// `regexes_to_ignore`, in order (the last one, `\.$`, is applied with Python's `$`, see
/// [`normalize`]).
pub const REGEXES_TO_IGNORE: [&str; 4] = [",", "\\$", "(?s).*#### ", "\\.$"];

static STRICT_RE: LazyLock<Regex> = LazyLock::new(|| Regex::new(STRICT_PATTERN).expect("strict pattern"));
static FLEXIBLE_RE: LazyLock<Regex> = LazyLock::new(|| Regex::new(FLEXIBLE_PATTERN).expect("flexible pattern"));

/// `regex` with `group_select: -1`, then `take_first`: the last match's first non-empty group,
/// stripped, else [`INVALID`].
fn last_group(re: &Regex, response: &str) -> String {
    // The matches are found without their groups (the fast engines); only the last one is
    // searched again for its groups: the leftmost-first match from its start is itself.
    let Some(m) = re.find_iter(response).last() else { return INVALID.into() };
    let Some(c) = re.captures_at(response, m.start()) else { return INVALID.into() };
    match c.iter().skip(1).flatten().find(|m| !m.as_str().is_empty()) {
        Some(m) => m.as_str().trim().to_string(),
        None => INVALID.into(),
    }
}

/// The `strict-match` filter: the number after the last `#### `.
pub fn strict_match(response: &str) -> String {
    last_group(&STRICT_RE, response)
}

/// The `flexible-extract` filter: the last number-like token.
pub fn flexible_extract(response: &str) -> String {
    last_group(&FLEXIBLE_RE, response)
}

/// `exact_match`'s normalisation of both sides: `regexes_to_ignore` removed in order, then
/// `ignore_case` (`ignore_punctuation` is off).
pub fn normalize(s: &str) -> String {
    let mut t: String = s.chars().filter(|c| *c != ',' && *c != '$').collect();
    // `(?s).*#### `: greedy, so everything up to the end of the last `#### `.
    if let Some(i) = t.rfind("#### ") {
        t.drain(..i + 5);
    }
    // `\.$` in Python: a dot at the very end, or just before a final newline.
    if t.ends_with('.') {
        t.pop();
    } else if t.ends_with(".\n") {
        t.remove(t.len() - 2);
    }
    t.to_lowercase()
}

/// lm-eval's `exact_match` of one filtered answer against the gold answer (the whole worked
/// answer: its normalisation keeps what follows `#### `).
pub fn exact_match(prediction: &str, gold: &str) -> bool {
    normalize(prediction) == normalize(gold)
}

/// One response scored by both filters.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Scored {
    pub strict: String,
    pub flexible: String,
    pub strict_match: f64,
    pub flexible_match: f64,
}

pub fn score(response: &str, gold: &str) -> Scored {
    let strict = strict_match(response);
    let flexible = flexible_extract(response);
    let one = |p: &str| if exact_match(p, gold) { 1.0 } else { 0.0 };
    Scored { strict_match: one(&strict), flexible_match: one(&flexible), strict, flexible }
}

/// A metric's mean and the standard error of the mean (sample standard deviation over √n);
/// `stderr` is `None` below two samples, where lm-eval writes `"N/A"`.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Mean {
    pub value: f64,
    pub stderr: Option<f64>,
}

/// lm-eval's `mean` and `mean_stderr`, computed in the same order.
pub fn mean_stderr(xs: &[f64]) -> Option<Mean> {
    if xs.is_empty() {
        return None;
    }
    let n = xs.len() as f64;
    let mu = xs.iter().sum::<f64>() / n;
    let stderr = (xs.len() > 1).then(|| (xs.iter().map(|x| (x - mu).powi(2)).sum::<f64>() / (n - 1.0)).sqrt() / n.sqrt());
    Some(Mean { value: mu, stderr })
}

/// Both filters' means over the scored samples.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Scores {
    pub n: usize,
    pub strict: Mean,
    pub flexible: Mean,
}

pub fn aggregate<'a>(samples: impl IntoIterator<Item = &'a Scored>) -> Option<Scores> {
    let (s, f): (Vec<f64>, Vec<f64>) = samples.into_iter().map(|x| (x.strict_match, x.flexible_match)).unzip();
    Some(Scores { n: s.len(), strict: mean_stderr(&s)?, flexible: mean_stderr(&f)? })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(response, gold, strict answer, strict score, flexible answer, flexible score)` as
    /// lm-eval 0.4.13's own `RegexFilter`, `TakeFirstFilter` and `exact_match_hf_evaluate` give
    /// them with InferenceX's gsm8k.yaml settings (printed by
    /// `scripts/eval/lm_eval_score_table.py`; do not edit by hand).
    const LM_EVAL_TABLE: &[(&str, &str, &str, f64, &str, f64)] = &[
        ("Let me think.\n#### 18", "She makes 9 * 2 = $<<9*2=18>>18.\n#### 18", "18", 1.0, "18", 1.0),
        ("#### 18", "#### 18", "18", 1.0, "18", 1.0),
        ("#### 18.", "#### 18", "18.", 1.0, "18.", 1.0),
        ("#### 18\n", "#### 18", "18", 1.0, "18", 1.0),
        ("#### $18", "#### 18", "[invalid]", 0.0, "$18", 1.0),
        ("The answer is $18.", "#### 18", "[invalid]", 0.0, "$18.", 1.0),
        ("#### 1,600", "#### 1,600", "1,600", 1.0, "1,600", 1.0),
        ("#### 1600", "#### 1,600", "1600", 1.0, "1600", 1.0),
        ("#### 1,600", "#### 1600", "1,600", 1.0, "1,600", 1.0),
        ("#### 16,00", "#### 1600", "16,00", 1.0, "16,00", 1.0),
        ("#### -18", "#### 18", "-18", 0.0, "-18", 0.0),
        ("#### -18", "#### -18", "-18", 1.0, "-18", 1.0),
        ("#### 18.0", "#### 18", "18.0", 0.0, "18.0", 0.0),
        ("#### 1.8", "#### 18", "1.8", 0.0, "1.8", 0.0),
        ("#### 0.5", "#### .5", "0.5", 0.0, "0.5", 0.0),
        ("18", "#### 18", "[invalid]", 0.0, "18", 1.0),
        ("7 apples and 18", "#### 18", "[invalid]", 0.0, "18", 1.0),
        ("#### 18\nWait, it is 20", "#### 18", "18", 1.0, "20", 0.0),
        ("#### 18 #### 19", "#### 18", "19", 0.0, "19", 0.0),
        ("####18", "#### 18", "[invalid]", 0.0, "18", 1.0),
        ("#### ...", "#### 18", "...", 0.0, "...", 0.0),
        ("#### -", "#### 18", "[invalid]", 0.0, "[invalid]", 0.0),
        ("", "#### 18", "[invalid]", 0.0, "[invalid]", 0.0),
        ("No number here.", "#### 18", "[invalid]", 0.0, "[invalid]", 0.0),
        ("#### 5", "#### 5", "5", 1.0, "5", 1.0),
        ("It is 5", "#### 5", "[invalid]", 0.0, "5", 1.0),
        ("It is -5", "#### -5", "[invalid]", 0.0, "-5", 1.0),
        ("It costs $1,234.50 in total.", "#### 1234.50", "[invalid]", 0.0, "$1,234.50", 1.0),
        ("#### 1,234.50", "#### 1234.5", "1,234.50", 0.0, "1,234.50", 0.0),
        ("The answer is 18.\n\n", "#### 18", "[invalid]", 0.0, "18.", 1.0),
        ("ANSWER: #### 18", "#### 18", "18", 1.0, "18", 1.0),
        ("#### 18 dollars", "#### 18", "18", 1.0, "18", 1.0),
        ("#### 18.\nQuestion: next 7", "#### 18", "18.", 1.0, "7", 0.0),
        ("#### 3.\n", "#### 3", "3.", 1.0, "3.", 1.0),
        ("#### -.5", "#### -0.5", "-.5", 0.0, "-.5", 0.0),
        ("#### 1e3", "#### 1000", "1", 0.0, "3", 0.0),
        ("#### 2/3", "#### 2", "2", 1.0, "3", 0.0),
        ("#### ١٨", "#### 18", "[invalid]", 0.0, "[invalid]", 0.0),
        ("#### 18", "#### 18\n", "18", 0.0, "18", 0.0),
        ("$$", "#### 18", "[invalid]", 0.0, "$$", 0.0),
        ("#### 10,", "#### 10", "10,", 1.0, "10,", 1.0),
        ("The result: 4.2.", "#### 4.2", "[invalid]", 0.0, "4.2.", 1.0),
    ];

    #[test]
    fn filters_and_exact_match_agree_with_lm_eval_case_by_case() {
        for &(response, gold, strict, strict_em, flexible, flexible_em) in LM_EVAL_TABLE {
            let s = score(response, gold);
            assert_eq!(
                (s.strict.as_str(), s.strict_match, s.flexible.as_str(), s.flexible_match),
                (strict, strict_em, flexible, flexible_em),
                "response {response:?}, gold {gold:?}"
            );
        }
    }

    #[test]
    fn every_gold_answer_scores_one_written_as_a_model_would() {
        let d = crate::eval::data::embedded();
        let scored: Vec<Scored> = d
            .test
            .iter()
            .map(|doc| {
                let n = doc.answer.rsplit("#### ").next().unwrap();
                score(&format!("Working it through step by step.\nThe answer is {n}.\n#### {n}"), &doc.answer)
            })
            .collect();
        let bad: Vec<_> = scored.iter().zip(&d.test).filter(|(s, _)| s.strict_match != 1.0 || s.flexible_match != 1.0).collect();
        assert!(bad.is_empty(), "{} gold answers not scored 1: {:?}", bad.len(), bad.first());
        let a = aggregate(&scored).unwrap();
        assert_eq!((a.n, a.strict.value, a.flexible.value, a.strict.stderr), (1319, 1.0, 1.0, Some(0.0)));
    }

    /// The last match's groups, found the slow way (every match with its groups).
    fn last_group_slow(re: &Regex, response: &str) -> String {
        let Some(c) = re.captures_iter(response).last() else { return INVALID.into() };
        c.iter().skip(1).flatten().find(|m| !m.as_str().is_empty()).map(|m| m.as_str().trim().to_string()).unwrap_or_else(|| INVALID.into())
    }

    /// Responses made of the pieces the patterns care about.
    fn responses() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let piece = prop_oneof![
            Just("#### "),
            Just("###"),
            Just("$"),
            Just("-"),
            Just("."),
            Just(","),
            Just("1"),
            Just("23"),
            Just(" "),
            Just("a"),
            Just("\n")
        ];
        proptest::collection::vec(piece, 0..16).prop_map(|v| v.concat())
    }

    proptest::proptest! {
        #[test]
        fn the_fast_search_finds_the_same_last_match(response in responses()) {
            proptest::prop_assert_eq!(strict_match(&response), last_group_slow(&STRICT_RE, &response));
            proptest::prop_assert_eq!(flexible_extract(&response), last_group_slow(&FLEXIBLE_RE, &response));
        }
    }

    #[test]
    fn the_mean_and_its_standard_error_are_lm_evals() {
        // lm-eval's results for 7 samples, 3 right: 0.42857142857142855 ± 0.2020305089104421.
        let m = mean_stderr(&[1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0]).unwrap();
        assert_eq!(m.value, 0.42857142857142855);
        assert!((m.stderr.unwrap() - 0.2020305089104421).abs() < 1e-15, "{m:?}");
        assert_eq!(mean_stderr(&[1.0]).unwrap().stderr, None, "one sample: lm-eval writes N/A");
        assert_eq!(mean_stderr(&[]), None);
    }
}
