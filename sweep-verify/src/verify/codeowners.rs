//! CODEOWNERS: patterns (gitignore-style: `*`, `?`, `**`, a leading `/` anchors, a trailing `/`
//! is a folder) and owners; the last matching line wins and owners do not accumulate.

#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    pub line: usize,
    pub pattern: String,
    pub owners: Vec<String>,
}

impl Rule {
    /// `*` (or `**`, `/**`): the catch-all default owners.
    pub fn catch_all(&self) -> bool {
        matches!(self.pattern.trim_start_matches('/'), "*" | "**" | "**/*")
    }
}

pub fn parse(text: &str) -> Vec<Rule> {
    text.lines()
        .enumerate()
        .filter_map(|(i, l)| {
            let l = l.split(" #").next().unwrap_or("").trim();
            if l.is_empty() || l.starts_with('#') {
                return None;
            }
            let mut w = l.split_whitespace();
            let pattern = w.next()?.to_string();
            Some(Rule { line: i + 1, pattern, owners: w.map(str::to_string).collect() })
        })
        .collect()
}

/// The rule that decides `path`'s owners.
pub fn owner_rule<'a>(rules: &'a [Rule], path: &str) -> Option<&'a Rule> {
    rules.iter().rev().find(|r| matches(&r.pattern, path))
}

fn glob_segment(p: &str, s: &str) -> bool {
    crate::changelog::wildcard(p, s, true)
}

fn match_segments(p: &[&str], s: &[&str]) -> bool {
    match p.split_first() {
        None => s.is_empty(),
        Some((&"**", rest)) => (0..=s.len()).any(|k| match_segments(rest, &s[k..])),
        Some((first, rest)) => !s.is_empty() && glob_segment(first, s[0]) && match_segments(rest, &s[1..]),
    }
}

/// Whether a CODEOWNERS pattern covers a file path.
pub fn matches(pattern: &str, path: &str) -> bool {
    let dir_only = pattern.ends_with('/');
    let core = pattern.trim_end_matches('/');
    let anchored = core.starts_with('/') || core.contains('/');
    let core = core.trim_start_matches('/');
    if core.is_empty() {
        return true;
    }
    let mut pat: Vec<&str> = core.split('/').collect();
    if !anchored {
        pat.insert(0, "**");
    }
    let segs: Vec<&str> = path.split('/').collect();
    // The pattern names the file itself, or a folder above it (everything below a folder).
    (!dir_only && match_segments(&pat, &segs)) || (1..segs.len()).any(|k| match_segments(&pat, &segs[..k]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gitignore_style_matching() {
        assert!(matches("*", "a/b/c.sh"));
        assert!(matches("configs/nvidia-master.yaml", "configs/nvidia-master.yaml"));
        assert!(!matches("configs/nvidia-master.yaml", "x/configs/nvidia-master.yaml"));
        assert!(matches("*.md", "docs/x.md"));
        assert!(matches("/benchmarks/", "benchmarks/single_node/a.sh"));
        assert!(!matches("/benchmarks/", "benchmarks"));
        assert!(matches("benchmarks/**/amd_*.sh", "benchmarks/single_node/x/amd_y.sh"));
        assert!(matches("docs", "docs/waiver/1.md"));
        assert!(!matches("/docs", "x/docs"));
        assert!(matches("amd", "benchmarks/amd/x.sh"));
    }

    #[test]
    fn the_last_matching_line_wins() {
        let r = parse("# c\n* @org/all\nconfigs/nvidia-master.yaml @a @b\nconfigs/amd-master.yaml @c  # amd\n");
        assert_eq!(owner_rule(&r, "configs/nvidia-master.yaml").unwrap().owners, vec!["@a", "@b"]);
        assert_eq!(owner_rule(&r, "configs/amd-master.yaml").unwrap().owners, vec!["@c"]);
        assert!(owner_rule(&r, "README.md").unwrap().catch_all());
        assert_eq!(owner_rule(&r, "configs/amd-master.yaml").unwrap().line, 4);
    }
}
