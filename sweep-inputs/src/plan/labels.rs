//! PR labels → sweep policy (spec `inferencex.md` §4.3): exactly one primary label, modifiers.

use crate::problem::nearest;

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Primary {
    SweepEnabled,
    FullSweepFailFast,
    FullSweepEnabled,
    FullSweepFailFastNoCanary,
    NonCanaryFullSweepEnabled,
}

pub const PRIMARY: &[(&str, Primary)] = &[
    ("sweep-enabled", Primary::SweepEnabled),
    ("full-sweep-fail-fast", Primary::FullSweepFailFast),
    ("full-sweep-enabled", Primary::FullSweepEnabled),
    ("full-sweep-fail-fast-no-canary", Primary::FullSweepFailFastNoCanary),
    ("non-canary-full-sweep-enabled", Primary::NonCanaryFullSweepEnabled),
];
pub const MODIFIERS: &[&str] = &["all-evals", "evals-only", "agentx-fast"];

impl Primary {
    pub fn name(self) -> &'static str {
        PRIMARY.iter().find(|(_, p)| *p == self).map(|(n, _)| *n).expect("every primary is listed")
    }
    /// Canary first (PR labels `full-sweep-enabled` / `full-sweep-fail-fast`).
    pub fn canary(self) -> bool {
        matches!(self, Primary::FullSweepFailFast | Primary::FullSweepEnabled)
    }
    /// Matrix-scoped fail-fast.
    pub fn fail_fast(self) -> bool {
        matches!(self, Primary::FullSweepFailFast | Primary::FullSweepFailFastNoCanary)
    }
    /// `sweep-enabled` trims single-node rows to the minimum concurrency per recipe.
    pub fn trim_conc(self) -> bool {
        self == Primary::SweepEnabled
    }
}

/// Why PR labels select no sweep policy.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum LabelError {
    #[error("unknown label `{label}`{}; primary labels: {}; modifiers: {}", did_you_mean(.suggestion), primary_names(), MODIFIERS.join(", "))]
    Unknown { label: String, suggestion: Option<&'static str> },
    #[error("no primary label: exactly one of {} is required (modifiers alone start no sweep)", primary_names())]
    NoPrimary,
    #[error("{} primary labels given ({}): exactly one is allowed", .given.len(), .given.join(", "))]
    SeveralPrimaries { given: Vec<&'static str> },
}

fn primary_names() -> String {
    PRIMARY.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
}

fn did_you_mean(suggestion: &Option<&'static str>) -> String {
    suggestion.map(|n| format!(" (did you mean `{n}`?)")).unwrap_or_default()
}

#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Labels {
    pub primary: Primary,
    pub all_evals: bool,
    pub evals_only: bool,
    pub agentx_fast: bool,
}

impl Labels {
    /// Parses labels given as separate words and/or comma-separated lists.
    pub fn parse<S: AsRef<str>>(words: &[S]) -> Result<Labels, LabelError> {
        let mut primaries = Vec::new();
        let mut l = Labels { primary: Primary::FullSweepFailFast, all_evals: false, evals_only: false, agentx_fast: false };
        for w in words
            .iter()
            .flat_map(|w| w.as_ref().split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect::<Vec<_>>())
        {
            if let Some((_, p)) = PRIMARY.iter().find(|(n, _)| *n == w) {
                if !primaries.contains(p) {
                    primaries.push(*p);
                }
            } else {
                match w.as_str() {
                    "all-evals" => l.all_evals = true,
                    "evals-only" => l.evals_only = true,
                    "agentx-fast" => l.agentx_fast = true,
                    other => {
                        let all = PRIMARY.iter().map(|(n, _)| *n).chain(MODIFIERS.iter().copied());
                        return Err(LabelError::Unknown { label: other.to_string(), suggestion: nearest(other, all) });
                    }
                }
            }
        }
        match primaries.as_slice() {
            [p] => l.primary = *p,
            [] => return Err(LabelError::NoPrimary),
            many => return Err(LabelError::SeveralPrimaries { given: many.iter().map(|p| p.name()).collect() }),
        }
        Ok(l)
    }

    pub fn names(&self) -> Vec<&'static str> {
        let mut v = vec![self.primary.name()];
        if self.all_evals {
            v.push("all-evals");
        }
        if self.evals_only {
            v.push("evals-only");
        }
        if self.agentx_fast {
            v.push("agentx-fast");
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exactly_one_primary() {
        let l = Labels::parse(&["full-sweep-fail-fast,agentx-fast"]).unwrap();
        assert!(l.primary.canary() && l.primary.fail_fast() && l.agentx_fast);
        let e = Labels::parse(&["sweep-enabled", "full-sweep-enabled"]).unwrap_err().to_string();
        assert!(e.contains("sweep-enabled") && e.contains("full-sweep-enabled"), "{e}");
        assert!(Labels::parse(&["all-evals"]).unwrap_err().to_string().contains("no primary label"));
        assert!(Labels::parse(&["full-sweep-fail-fst"]).unwrap_err().to_string().contains("did you mean `full-sweep-fail-fast`"));
    }

    #[test]
    fn policy_table() {
        let p = |s: &str| Labels::parse(&[s]).unwrap().primary;
        assert!(p("sweep-enabled").trim_conc() && !p("sweep-enabled").canary() && !p("sweep-enabled").fail_fast());
        assert!(p("full-sweep-enabled").canary() && !p("full-sweep-enabled").fail_fast());
        assert!(!p("full-sweep-fail-fast-no-canary").canary() && p("full-sweep-fail-fast-no-canary").fail_fast());
        assert!(!p("non-canary-full-sweep-enabled").canary() && !p("non-canary-full-sweep-enabled").fail_fast());
    }
}
