//! The verdict as the verifier posts it (hidden marker, verdict header, one row per check), as
//! JSON, and as GitHub workflow annotations.

use super::{Report, Status};

fn emoji(s: Status) -> &'static str {
    match s {
        Status::Pass => "✅",
        Status::Fail => "❌",
        Status::NotApplicable => "➖",
    }
}

/// The verifier's comment: the marker, the header, (when rejected) the blocking line naming the
/// sign-off author, then `<emoji> Check N (<name>): <STATUS> — <reason>` per check.
pub fn text(r: &Report) -> String {
    let mut o = format!("<!-- codeowner-signoff-verify sha={} -->\n", r.head);
    if r.passed {
        o.push_str("## ✅✅✅ **Verdict: PASS** ✅✅✅\n");
    } else {
        o.push_str("## ❌❌❌ **REJECTED** ❌❌❌\n");
        let failing: Vec<String> =
            r.checks.iter().filter(|c| c.status == Status::Fail).map(|c| format!("Check {} ({})", c.id, c.name)).collect();
        let who = r.signer.as_deref().map(|s| format!("@{} ", s.trim_start_matches('@'))).unwrap_or_default();
        o.push_str(&format!("{who}Blocking: {}.\n", failing.join(", ")));
    }
    for c in &r.checks {
        o.push_str(&format!("{} Check {} ({}): {} — {}\n", emoji(c.status), c.id, c.name, c.status.word(), one_line(&c.reason)));
    }
    o
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

pub fn json(r: &Report) -> String {
    serde_json::to_string_pretty(r).expect("the report serialises")
}

/// GitHub's escaping of an annotation's message.
fn esc_data(s: &str) -> String {
    s.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A")
}

/// … and of its properties.
fn esc_prop(s: &str) -> String {
    esc_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// `::error file=…,line=…,title=…::…` per failing finding (a failing check without findings:
/// one error without a file), `::notice` for the other checks, and the verdict last.
pub fn github(r: &Report) -> String {
    let mut o = String::new();
    for c in &r.checks {
        let title = esc_prop(&format!("Check {} ({})", c.id, c.name));
        match c.status {
            Status::Fail if !c.findings.is_empty() => {
                for f in &c.findings {
                    let line = f.line.map(|l| format!(",line={l}")).unwrap_or_default();
                    o.push_str(&format!(
                        "::error file={}{line},title={title}::{}\n",
                        esc_prop(&f.file),
                        esc_data(&format!("{} [{}]", f.message, f.value))
                    ));
                }
            }
            Status::Fail => o.push_str(&format!("::error title={title}::{}\n", esc_data(&c.reason))),
            s => o.push_str(&format!("::notice title={title}::{}\n", esc_data(&format!("{} — {}", s.word(), c.reason)))),
        }
    }
    let verdict = if r.passed { "::notice title=sweep verify::Verdict: PASS" } else { "::error title=sweep verify::REJECTED" };
    o.push_str(verdict);
    o.push('\n');
    o
}

#[cfg(test)]
mod tests {
    use super::super::{Check, Finding, Report};
    use super::*;

    fn report(fail: bool) -> Report {
        let mut checks: Vec<Check> = (0..14).map(|i| Check::na(i, "n/a here")).collect();
        checks[2] = Check::pass(2, "gsm8k em_strict 0.9750 (TP2/EP2 C32)");
        if fail {
            checks[8] = Check::fail(8, "bad", vec![Finding::new("b/x.sh", Some(4), "--hf-overrides {}", "hack, really")]);
        }
        Report {
            base: "b".into(),
            head: "abc".into(),
            review_date: "2026-12-01".into(),
            signer: Some("alice".into()),
            passed: !fail,
            verdict: if fail { "REJECTED" } else { "PASS" },
            checks,
        }
    }

    #[test]
    fn verdict_format() {
        let t = text(&report(false));
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "<!-- codeowner-signoff-verify sha=abc -->");
        assert_eq!(lines[1], "## ✅✅✅ **Verdict: PASS** ✅✅✅");
        assert_eq!(lines[4], "✅ Check 2 (Evals): PASS — gsm8k em_strict 0.9750 (TP2/EP2 C32)");
        assert_eq!(lines.len(), 16);
        let t = text(&report(true));
        assert!(t.contains("## ❌❌❌ **REJECTED** ❌❌❌\n@alice Blocking: Check 8 (Architecture hacks).\n"), "{t}");
        assert!(t.contains("❌ Check 8 (Architecture hacks): FAIL — bad\n"));
        assert!(t.contains("➖ Check 0 (CODEOWNER sign-off): N/A — n/a here\n"));
    }

    #[test]
    fn annotations_escape() {
        let g = github(&report(true));
        assert!(g.contains("::error file=b/x.sh,line=4,title=Check 8 (Architecture hacks)::hack, really [--hf-overrides {}]\n"), "{g}");
        assert!(g.ends_with("::error title=sweep verify::REJECTED\n"));
        assert_eq!(esc_prop("a:b,c%"), "a%3Ab%2Cc%25");
    }
}
