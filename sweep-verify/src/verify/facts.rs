//! `--pr-facts FILE`: what only the forge knows about a pull request (the sign-off, its author,
//! CODEOWNERS teams, check runs, comments, upstream recipe links), written down by whoever runs
//! `sweep verify` (a CI step with `gh api`, or a person). YAML or JSON; unknown keys are errors.
//! The format is documented in `docs/verify.md`.

use crate::problem::Problems;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrFacts {
    /// The pull request's number (names the waiver `docs/waiver/<number>.md`).
    pub number: Option<u64>,
    /// The commit the sign-off was posted for; a different `--head` is reported.
    pub head_sha: Option<String>,
    /// The sign-off author's login, without `@`.
    pub signer: Option<String>,
    /// The sign-off text: the checklist and its "Additional detail section".
    pub signoff: Option<String>,
    /// CODEOWNERS text (default: the base revision's `.github/CODEOWNERS`).
    pub codeowners: Option<String>,
    /// Members of teams named in CODEOWNERS (`"@org/team": [login, …]`).
    #[serde(default)]
    pub teams: BTreeMap<String, Vec<String>>,
    /// The pull request's labels (select eval rows as the sweep did: `all-evals`, `evals-only`).
    #[serde(default)]
    pub labels: Vec<String>,
    /// The commits currently in the pull request (default: `git rev-list base..head`).
    pub commits: Option<Vec<String>>,
    /// Check runs per commit.
    #[serde(default)]
    pub check_runs: Vec<CheckRun>,
    /// Conversation comments (absent: not known; `[]`: none were posted).
    pub comments: Option<Vec<Comment>>,
    /// Upstream recipe links of the sign-off, with what the forge says of them.
    #[serde(default)]
    pub recipe_links: Vec<RecipeLink>,
    /// Exceptions the sign-off documents, by check number (`"6": "new hardware: …"`).
    #[serde(default)]
    pub exceptions: BTreeMap<String, String>,
    /// The current checklist template (default: the base revision's `docs/PR_REVIEW_CHECKLIST.md`).
    pub checklist_template: Option<String>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckRun {
    pub sha: String,
    pub name: String,
    /// `success`, `failure`, `skipped`, `cancelled`, … (`null` while running).
    pub conclusion: Option<String>,
    pub details_url: Option<String>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Comment {
    pub user: String,
    /// GitHub's `author_association`: `OWNER`, `MEMBER`, `COLLABORATOR`, `CONTRIBUTOR`, …
    pub association: String,
    pub body: String,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecipeLink {
    pub url: String,
    /// For a pull request: `MERGED`, `OPEN`, `CLOSED`; for a published page: `PUBLISHED`.
    pub state: String,
    pub merged_at: Option<String>,
    /// The recipe's server command line (its flags), for the major-argument match.
    pub args: Option<Vec<String>>,
}

impl PrFacts {
    pub fn load(file: &Path) -> Result<PrFacts, Problems> {
        crate::yaml::load_typed(file)
    }

    /// The documented exception for check `id`, if any.
    pub fn exception(&self, id: u8) -> Option<&str> {
        self.exceptions.get(&id.to_string()).map(String::as_str).filter(|s| !s.trim().is_empty())
    }

    /// The sign-off's "Additional detail section" (the text after that heading), when present.
    pub fn detail_section(&self) -> Option<&str> {
        let s = self.signoff.as_deref()?;
        let i = s.to_ascii_lowercase().find("additional detail section")?;
        let rest = &s[i..];
        Some(rest.split_once('\n').map(|(_, r)| r).unwrap_or(""))
    }
}
