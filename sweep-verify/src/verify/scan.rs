//! What a pull request's launches run, read two ways — a serving recipe's resolved points (this
//! project's layout) and a launch script's text (InferenceX's) — and the checks that scan the
//! diff's added lines: 8 (architecture hacks), 9 (chat templates for spec-decode benchmarks),
//! 10 (engine patches and the waiver rule).

use super::snapshot::Layout;
use super::{Check, Ctx, Finding};
use crate::golden_al::GoldenAl;
use crate::recipe::master::Entry;
use std::collections::BTreeMap;

/// One launch as the checks see it: its command line and effective environment (every layer a
/// point inherits, injected settings included), with where each variable is set.
#[derive(Clone, Debug, Default)]
pub struct LaunchView {
    /// `<config> <arm> c<conc>`, or the script's path.
    pub label: String,
    pub key: Option<String>,
    pub file: String,
    pub line: Option<usize>,
    pub argv: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub env_lines: BTreeMap<String, Option<usize>>,
    /// The model prefix (from the master entry, or a script's name).
    pub prefix: String,
    pub framework: String,
    pub agentic: bool,
}

/// A value shown in a finding: one line, at most 120 characters.
pub fn shown(s: &str) -> String {
    let t = s.trim();
    if t.chars().count() > 120 { format!("{}…", t.chars().take(119).collect::<String>()) } else { t.to_string() }
}

/// The golden curves the checks compare against: the head's (what `sweep plan` injects), else
/// the base's.
pub fn goldens<'a>(ctx: &'a Ctx) -> Vec<&'a GoldenAl> {
    // The head's curves first: they are what `sweep plan` injects (a moved golden value is a
    // finding of its own, `shared::shared_changes`).
    [ctx.head.golden.as_ref(), ctx.base.golden.as_ref()].into_iter().flatten().collect()
}

/// Every point of a config's serving recipe at the head, resolved as `sweep run` resolves it; a
/// point that does not resolve (a golden AL mismatch, a missing curve) is a finding.
pub fn recipe_launches(ctx: &Ctx, key: &str) -> Vec<Result<LaunchView, Finding>> {
    let (Some(r), Some(e)) = (ctx.head.recipes.get(key), ctx.head.master.get(key)) else { return Vec::new() };
    let file = r.file.display().to_string();
    let gs = goldens(ctx);
    let mut out = Vec::new();
    for (ai, a) in r.arms.iter().enumerate() {
        for (pi, p) in a.points.iter().enumerate() {
            let label = format!("{key} {} c{}", a.name, p.conc);
            let line = r.line(&p.path);
            let mut res = r.resolve(ai, pi, &e.model_prefix, gs.first().copied());
            if res.is_err() && gs.len() > 1 {
                res = r.resolve(ai, pi, &e.model_prefix, gs.get(1).copied());
            }
            match res {
                Ok(l) => {
                    let env_lines =
                        l.env.keys().map(|k| (k.clone(), r.env_path(ai, pi, k).and_then(|path| r.line(&path)).or(line))).collect();
                    out.push(Ok(LaunchView {
                        label,
                        key: Some(key.to_string()),
                        file: file.clone(),
                        line,
                        argv: l.worker_argv,
                        env: l.env,
                        env_lines,
                        prefix: e.model_prefix.clone(),
                        framework: e.framework.clone(),
                        agentic: e.has_agentic,
                    }))
                }
                Err(problems) => {
                    for p in problems.0 {
                        out.push(Err(Finding::new(p.file.display().to_string(), p.line.or(line), &label, p.message)));
                    }
                }
            }
        }
    }
    out
}

/// Logical lines of a shell or YAML text: continuation lines (`\` at the end) joined, each with
/// its first physical line number.
pub fn logical_lines(text: &str) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut cur: Option<(usize, String)> = None;
    for (i, l) in text.lines().enumerate() {
        let (body, cont) = match l.trim_end().strip_suffix('\\') {
            Some(b) => (b.to_string(), true),
            None => (l.to_string(), false),
        };
        let entry = cur.get_or_insert_with(|| (i + 1, String::new()));
        if !entry.1.is_empty() {
            entry.1.push(' ');
        }
        entry.1.push_str(body.trim());
        if !cont {
            out.push(cur.take().expect("set above"));
        }
    }
    out.extend(cur);
    out
}

/// Words of a logical line, split as a shell would (unbalanced quotes: on whitespace).
pub fn words(line: &str) -> Vec<String> {
    let code = if line.trim_start().starts_with('#') { "" } else { line };
    shlex::split(code).unwrap_or_else(|| code.split_whitespace().map(str::to_string).collect())
}

fn is_var(name: &str) -> bool {
    let mut c = name.chars();
    c.next().is_some_and(|f| f.is_ascii_alphabetic() || f == '_') && c.all(|x| x.is_ascii_alphanumeric() || x == '_')
}

/// Environment assignments in a script or YAML text: `export K=V`, `K=V`, `-e K=V`, `--env K=V`,
/// and YAML `K: V` for upper-case names (the `*_environment:` blocks of srt-slurm recipes).
pub fn assignments(text: &str) -> Vec<(String, String, usize)> {
    let mut out = Vec::new();
    for (ln, l) in logical_lines(text) {
        let t = l.trim();
        if t.starts_with('#') {
            continue;
        }
        if let Some((k, v)) = t.trim_start_matches("- ").split_once(':')
            && is_var(k.trim())
            && k.trim().chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
            && !v.trim().is_empty()
        {
            out.push((k.trim().to_string(), v.trim().trim_matches(['"', '\'']).to_string(), ln));
            continue;
        }
        let w = words(t);
        for (i, word) in w.iter().enumerate() {
            let prev = if i > 0 { w[i - 1].as_str() } else { "" };
            let positional = i == 0 || prev == "export" || prev == "-e" || prev == "--env" || prev == "env" || prev == "&&" || prev == ";";
            if let Some((k, v)) = word.split_once('=')
                && is_var(k)
                && (positional || w[..i].iter().all(|x| x.contains('=') && is_var(x.split('=').next().unwrap_or(""))))
            {
                out.push((k.to_string(), v.to_string(), ln));
            }
        }
    }
    out
}

/// A launch script's view: its server command's words (all words when no server command is
/// recognised) and its assignments.
pub fn script_view(path: &str, text: &str) -> LaunchView {
    let lines = logical_lines(text);
    let server = |l: &str| {
        l.contains("sglang.launch_server") || l.contains("vllm serve") || l.contains("trtllm-serve") || l.contains("launch_server")
    };
    let chosen: Vec<&(usize, String)> =
        if lines.iter().any(|(_, l)| server(l)) { lines.iter().filter(|(_, l)| server(l)).collect() } else { lines.iter().collect() };
    let argv: Vec<String> = chosen.iter().flat_map(|(_, l)| words(l)).collect();
    let mut env = BTreeMap::new();
    let mut env_lines = BTreeMap::new();
    for (k, v, ln) in assignments(text) {
        env.insert(k.clone(), v);
        env_lines.insert(k, Some(ln));
    }
    let name = path.rsplit('/').next().unwrap_or(path);
    LaunchView {
        label: path.to_string(),
        key: None,
        file: path.to_string(),
        line: chosen.first().map(|(l, _)| *l),
        argv,
        env,
        env_lines,
        prefix: name.split('_').next().unwrap_or("").to_string(),
        framework: if text.contains("vllm serve") {
            "vllm".into()
        } else if text.contains("trtllm") {
            "trt".into()
        } else {
            "sglang".into()
        },
        agentic: path.contains("/agentic/"),
    }
}

/// The view of a script at the head, when its text was loaded.
pub fn script_launch(ctx: &Ctx, path: &str) -> Option<LaunchView> {
    ctx.head_texts.get(path).map(|t| script_view(path, t))
}

/// The GPU SKU of a runner label (`cluster:gb300-nv` → `gb300`, `h200-dgxc` → `h200`).
pub fn sku(runner: &str) -> String {
    let r = runner.trim_start_matches("cluster:").to_ascii_lowercase();
    r.split(['-', '_']).next().unwrap_or("").to_string()
}

/// InferenceX launch scripts of a master entry, by the launcher's naming rule
/// `benchmarks/single_node/[agentic/|fixed_seq_len/]<prefix>_<precision>_<hw>[_<fw>][_trt][_mtp].sh`.
pub fn scripts_of(files: &std::collections::BTreeSet<String>, e: &Entry, agentic: bool, spec: bool) -> Vec<String> {
    let stem = format!("{}_{}_{}", e.model_prefix, e.precision, sku(&e.runner));
    files
        .iter()
        .filter(|f| f.starts_with("benchmarks/single_node/") && f.ends_with(".sh") && !f.contains("/deprecated/"))
        .filter(|f| f.contains("/agentic/") == agentic)
        .filter(|f| {
            let name = f.rsplit('/').next().unwrap_or("");
            name.starts_with(&format!("{stem}_")) || name == format!("{stem}.sh")
        })
        .filter(|f| f.ends_with("_mtp.sh") == spec)
        .cloned()
        .collect()
}

/// Keys the pull request adds or changes whose master entry runs speculative decoding.
pub fn spec_keys(ctx: &Ctx) -> Vec<String> {
    ctx.changed_keys.iter().filter(|k| ctx.head.master.get(k).is_some_and(is_spec)).cloned().collect()
}

pub fn is_spec(e: &Entry) -> bool {
    let rows = e.fixed.iter().flat_map(|b| &b.rows).chain(e.agentic.iter().flat_map(|b| &b.rows));
    rows.into_iter().any(|r| r.spec_decoding != "none") || e.key.ends_with("-mtp") || e.key.contains("eagle") || e.key.contains("dspark")
}

fn spec_text(t: &str) -> bool {
    t.contains("--speculative") || t.contains("speculative-config") || t.contains("speculative_config")
}

fn launch_files_changed(ctx: &Ctx) -> usize {
    ctx.changes.iter().filter(|c| ctx.benchmark_affecting(&c.path)).count()
}

const OVERRIDE_FLAGS: [&str; 6] = [
    "--hf-overrides",
    "--json-model-override-args",
    "hf_overrides",
    "hf-overrides",
    "json_model_override_args",
    "json-model-override-args",
];
/// Override keys that change context handling, not the computation per token.
const SAFE_OVERRIDE_KEYS: [&str; 4] = ["max_position_embeddings", "rope_scaling", "rope_theta", "max_model_len"];

/// The keys of a JSON-ish override value (`{"index_topk_freq": 4}` or `{index_topk_freq: 4}`).
fn override_keys(v: &str) -> Vec<String> {
    let mut out = Vec::new();
    let b = v.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b':' {
            let mut j = i;
            while j > 0 && (b[j - 1] == b' ' || b[j - 1] == b'"' || b[j - 1] == b'\'' || b[j - 1] == b'\\') {
                j -= 1;
            }
            let end = j;
            while j > 0 && (b[j - 1].is_ascii_alphanumeric() || b[j - 1] == b'_' || b[j - 1] == b'-') {
                j -= 1;
            }
            if j < end {
                let k = &v[j..end];
                if !k.chars().all(|c| c.is_ascii_digit()) && !out.iter().any(|x| x == k) {
                    out.push(k.to_string());
                }
            }
        }
        i += 1;
    }
    out
}

/// Check 8: no override that changes the model's architecture, no edit of its files.
pub fn architecture(ctx: &Ctx) -> Check {
    if launch_files_changed(ctx) == 0 && ctx.changed_keys.is_empty() {
        return Check::na(8, "the PR touches no server args (no launch script, recipe or master config changed)");
    }
    let mut bad = Vec::new();
    let mut benign = Vec::new();
    let lines: Vec<_> = ctx.added_in(|f| ctx.benchmark_affecting(f)).collect();
    for (i, a) in lines.iter().enumerate() {
        let t = a.text.trim();
        if t.starts_with('#') {
            continue;
        }
        if let Some(flag) = OVERRIDE_FLAGS.iter().find(|f| t.contains(*f)) {
            let mut value = t[t.find(flag).expect("found") + flag.len()..].trim_start_matches(['=', ':', ' ', ',', '"', '\'']).to_string();
            if !value.contains(':')
                && let Some(next) = lines.get(i + 1).filter(|n| n.file == a.file && n.line == a.line + 1)
            {
                value.push_str(next.text.trim());
            }
            let keys = override_keys(&value);
            let reducing: Vec<&String> = keys.iter().filter(|k| !SAFE_OVERRIDE_KEYS.contains(&k.as_str())).collect();
            if keys.is_empty() || !reducing.is_empty() {
                let what = if keys.is_empty() {
                    "keys not readable".to_string()
                } else {
                    reducing.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ")
                };
                bad.push(Finding::new(
                    &a.file,
                    Some(a.line),
                    shown(t),
                    format!("`{flag}` overrides the model's architecture ({what}): removing architecture FLOPs is not allowed"),
                ));
            } else {
                benign.push(format!("{flag} {} ({}:{})", keys.join(","), a.file, a.line));
            }
            continue;
        }
        let w = words(t);
        let edits = w.iter().any(|x| x == "sed") && w.iter().any(|x| x == "-i" || x.starts_with("-i") || x == "--in-place")
            || w.first().is_some_and(|x| x == "jq") && t.contains('>');
        let model_file =
            ["config.json", "$MODEL", "${MODEL", "MODEL_PATH", "snapshots/", "HF_HUB_CACHE", "/models/"].iter().any(|m| t.contains(m));
        if edits && model_file {
            bad.push(Finding::new(&a.file, Some(a.line), shown(t), "edits the model's files (sed/jq on its config)"));
        }
    }
    if bad.is_empty() {
        let note = if benign.is_empty() { String::new() } else { format!("; context-only overrides: {}", benign.join(", ")) };
        Check::pass(8, format!("no architecture-changing override or model-file edit in the changed launch files{note}"))
    } else {
        Check::from_findings(8, bad, "")
    }
}

/// Whether a benchmark client invocation drives the chat template.
fn chat_client(l: &str) -> bool {
    l.contains("--use-chat-template") || l.contains("openai-chat") || l.contains("oai-chat") || l.contains("chat/completions")
}

/// Check 9: spec-decode benchmarks drive the model through its chat template.
pub fn chat_templates(ctx: &Ctx) -> Check {
    let keys = spec_keys(ctx);
    let mut scripts: Vec<String> = ctx
        .changes
        .iter()
        .filter(|c| c.status != 'D' && c.path.starts_with("benchmarks/") && c.path.ends_with(".sh"))
        .filter(|c| c.path.ends_with("_mtp.sh") || ctx.head_texts.get(&c.path).is_some_and(|t| spec_text(t)))
        .map(|c| c.path.clone())
        .collect();
    if keys.is_empty() && scripts.is_empty() {
        return Check::na(9, "no speculative-decoding config added or changed");
    }
    let mut bad = Vec::new();
    let mut notes = Vec::new();
    if ctx.head.layout == Layout::Sweep {
        // This project replays AgentX sessions through /v1/chat/completions; it runs no
        // fixed-sequence-length load.
        return Check::pass(
            9,
            format!("{}: the AgentX replay sends chat completions (/v1/chat/completions, chat template applied)", keys.join(", ")),
        );
    }
    for k in &keys {
        let e = ctx.head.master.get(k).expect("changed keys exist at the head");
        if e.has_fixed && !e.multinode {
            let found = scripts_of(&ctx.head.files, e, false, true);
            if found.is_empty() {
                let (file, line) = ctx.master_line(k, "scenarios");
                bad.push(Finding::new(
                    file,
                    line,
                    k,
                    format!(
                        "no launch script found for {k} (benchmarks/single_node/**/{}_{}_{}*_mtp.sh)",
                        e.model_prefix,
                        e.precision,
                        sku(&e.runner)
                    ),
                ));
            }
            scripts.extend(found);
        }
        if e.has_agentic {
            notes.push(format!("{k} (AgentX replay: chat completions)"));
        }
    }
    scripts.sort();
    scripts.dedup();
    for s in &scripts {
        if s.contains("/agentic/") {
            notes.push(format!("{s} (AgentX replay: chat completions)"));
            continue;
        }
        let Some(text) = ctx.head_texts.get(s) else { continue };
        let clients: Vec<(usize, String)> =
            logical_lines(text).into_iter().filter(|(_, l)| l.contains("benchmark_serving") && !l.trim_start().starts_with('#')).collect();
        if clients.is_empty() {
            bad.push(Finding::new(
                s,
                None,
                "benchmark_serving",
                "no benchmark client invocation found, so its chat template cannot be verified",
            ));
        }
        for (ln, l) in clients {
            if !chat_client(&l) {
                bad.push(Finding::new(s, Some(ln), shown(&l), "spec-decode benchmark drives raw completions (no --use-chat-template)"));
            } else {
                notes.push(format!("{s}:{ln}"));
            }
        }
    }
    if bad.is_empty() { Check::pass(9, format!("chat template used: {}", notes.join(", "))) } else { Check::from_findings(9, bad, "") }
}

/// Packages of the serving stack (installing them replaces what the pinned image ships).
const ENGINE_PACKAGES: [&str; 12] = [
    "vllm",
    "sglang",
    "sgl-kernel",
    "sgl_kernel",
    "tensorrt_llm",
    "tensorrt-llm",
    "flashinfer",
    "flashinfer-python",
    "deep_gemm",
    "deep-gemm",
    "sglang-router",
    "xformers",
];
/// Where installed engine sources live.
const ENGINE_PATHS: [&str; 9] = [
    "site-packages",
    "dist-packages",
    "/sgl-workspace",
    "find_spec",
    "sglang/srt",
    "vllm/model_executor",
    "vllm/v1",
    "vllm/engine",
    "tensorrt_llm/",
];

fn engine_path(t: &str) -> bool {
    ENGINE_PATHS.iter().any(|m| t.contains(m))
        || (t.contains("__file__") && (t.contains("sglang") || t.contains("vllm") || t.contains("tensorrt_llm")))
}

/// The package name of a pip requirement word (`vllm==0.9`, `sglang[all]>=0.5`, `git+…/vllm`).
fn package(word: &str) -> String {
    let w = word.to_ascii_lowercase();
    if w.starts_with("git+") || w.contains("://") {
        return w.trim_end_matches(".git").rsplit('/').next().unwrap_or("").split('@').next().unwrap_or("").to_string();
    }
    w.split(['=', '<', '>', '[', '@', '~', '!', ';', ' ']).next().unwrap_or("").to_string()
}

/// Why a line patches the serving stack, if it does.
fn patching(t: &str) -> Option<&'static str> {
    let w = words(t);
    let has = |x: &str| w.iter().any(|y| y == x);
    let pos = |x: &str| w.iter().position(|y| y == x);
    if w.windows(2).any(|p| p[0] == "git" && (p[1] == "apply" || p[1] == "am")) {
        return Some("applies a patch (git apply)");
    }
    if let Some(i) = pos("patch")
        && (i == 0 || ["|", "&&", ";", "sudo"].contains(&w[i - 1].as_str()))
        && w.get(i + 1).is_some_and(|n| n.starts_with('-') || n.starts_with('<'))
    {
        return Some("applies a patch (patch)");
    }
    if has("sed") && w.iter().any(|x| x == "-i" || x.starts_with("-i") || x == "--in-place") && engine_path(t) {
        return Some("rewrites installed engine sources in place (sed -i)");
    }
    if t.contains("sitecustomize") {
        return Some("injects a sitecustomize hook (monkey-patching)");
    }
    if (has("cp") || has("mv") || has("ln") || has("install") || has("rsync"))
        && ["site-packages", "dist-packages", "/sgl-workspace"].iter().any(|m| t.contains(m))
    {
        return Some("overwrites files inside the image's serving stack");
    }
    if let Some(i) = pos("install")
        && i > 0
        && (w[i - 1] == "pip" || w[i - 1] == "pip3")
    {
        for arg in w[i + 1..].iter().take_while(|a| !["&&", "||", ";", "|"].contains(&a.as_str())).filter(|a| !a.starts_with('-')) {
            let p = package(arg);
            if arg.ends_with(".whl") || ENGINE_PACKAGES.contains(&p.as_str()) {
                return Some("installs an engine wheel over the pinned image");
            }
        }
    }
    None
}

/// The heredoc delimiter a line opens (`<<EOF`, `<<-'EOF'`, `<< "PY"`).
fn heredoc(t: &str) -> Option<String> {
    let i = t.find("<<")?;
    let rest = t[i + 2..].trim_start_matches('-').trim_start();
    if rest.starts_with('<') {
        return None; // `<<<` here-string
    }
    let d: String = rest.trim_start_matches(['\'', '"']).chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
    (!d.is_empty()).then_some(d)
}

/// Check 10: the pinned image runs as shipped, or a waiver filed in this PR covers the patch.
pub fn engine_patches(ctx: &Ctx) -> Check {
    if launch_files_changed(ctx) == 0 && ctx.changed_keys.is_empty() && !ctx.changes.iter().any(|c| is_patch_file(&c.path)) {
        return Check::na(10, "the PR touches no benchmark scripts, images or configs");
    }
    let mut bad = Vec::new();
    for c in ctx.changes.iter().filter(|c| c.status != 'D' && is_patch_file(&c.path)) {
        bad.push(Finding::new(&c.path, None, &c.path, "adds a patch file"));
    }
    let lines: Vec<_> = ctx.added_in(|f| ctx.benchmark_affecting(f)).collect();
    let mut i = 0;
    while i < lines.len() {
        let a = lines[i];
        let t = a.text.trim();
        if t.starts_with('#') {
            i += 1;
            continue;
        }
        if let Some(why) = patching(t) {
            bad.push(Finding::new(&a.file, Some(a.line), shown(t), why));
        } else if let Some(delim) = heredoc(t) {
            // The heredoc's body: the following added lines of the file, up to the delimiter.
            let mut body = String::new();
            let mut j = i + 1;
            while j < lines.len() && lines[j].file == a.file && lines[j].line == lines[j - 1].line + 1 && lines[j].text.trim() != delim {
                body.push_str(&lines[j].text);
                body.push('\n');
                j += 1;
            }
            let writes =
                body.contains("write") || body.contains("open(") || body.contains(".replace(") || t.contains("cat >") || t.contains("tee ");
            if (engine_path(&body) || engine_path(t)) && writes {
                bad.push(Finding::new(&a.file, Some(a.line), shown(t), "an inline patch (heredoc) rewrites installed engine sources"));
            }
            i = j;
        }
        i += 1;
    }
    if bad.is_empty() {
        return Check::pass(10, "no patching of the engine or serving stack in the changed files");
    }
    // The waiver: docs/waiver/<PR>.md, filed in this PR, covering the patch, linked in the sign-off.
    let Some(n) = ctx.pr_number else {
        let mut f = bad;
        f.push(Finding::new(
            "docs/waiver/",
            None,
            "<PR_NUMBER>.md",
            "the PR number is unknown (no pr-facts number, no single pr-link in the new changelog entries)",
        ));
        return Check::fail(10, format!("engine patching without a waiver: {}", super::summarise(&f)), f);
    };
    let path = format!("docs/waiver/{n}.md");
    let missing = |what: &str| format!("engine patching without a valid waiver ({what}): {}", super::summarise(&bad));
    if !ctx.head.files.contains(&path) {
        return Check::fail(10, missing(&format!("no {path}")), bad);
    }
    if ctx.base.files.contains(&path) {
        return Check::fail(10, missing(&format!("{path} predates this PR; a waiver is filed in the PR that introduces the patch")), bad);
    }
    let text = ctx.head_texts.get(&path).map(|t| t.to_ascii_lowercase()).unwrap_or_default();
    let needs = [
        ("what is patched", text.contains("patch")),
        ("why the upstream image cannot run it", text.contains("why") || text.contains("because") || text.contains("cannot")),
        ("the upstream PR/issue link", text.contains("https://") || text.contains("http://")),
        ("a removal plan", text.contains("remov")),
    ];
    let lacking: Vec<&str> = needs.iter().filter(|(_, ok)| !ok).map(|(w, _)| *w).collect();
    if !lacking.is_empty() {
        return Check::fail(10, missing(&format!("{path} does not state {}", lacking.join(", "))), bad);
    }
    match ctx.facts.and_then(|f| f.signoff.as_deref()) {
        Some(s) if s.contains(&path) || s.contains(&format!("waiver/{n}")) => {
            Check::pass(10, format!("engine patching covered by the waiver {path}, linked in the sign-off"))
        }
        Some(_) => Check::fail(10, missing(&format!("the sign-off does not link {path}")), bad),
        None => Check::fail(
            10,
            missing(&format!("{path} is filed, but its link in the sign-off is known only to the forge: pass --pr-facts")),
            bad,
        ),
    }
}

fn is_patch_file(p: &str) -> bool {
    p.ends_with(".patch") || p.ends_with(".diff")
}

#[cfg(test)]
#[path = "scan_tests.rs"]
mod tests;
