//! What is fuzzed: each kind of input, its seeds, and the loaders it goes through (the same
//! functions `sweep validate`, `sweep plan` and trace loading call), with the checks on their
//! result: an error names the file.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use harness::cmd::{RepoArgs, plan, validate};
use harness::problem::Problems;
use harness::trace::{ReadOptions, read_traces};

/// One kind of input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// `recipes/master.yaml` of a repository: `validate` and `plan`.
    Master,
    /// `perf-changelog.yaml` of a repository: `validate` and `plan`.
    Changelog,
    /// A serving recipe of a repository: `validate` and `plan`.
    Recipe,
    /// `recipes/runners.yaml` of a repository: `validate`.
    Runners,
    /// A golden AL curve of a repository: `validate`.
    GoldenAl,
    /// InferenceX's master config, changelog, thresholds and trace statistics, loaded alone.
    SharedYaml,
    /// Engine profiles (`--model x.yaml`, `--hardware x.yaml`).
    ModelProfile,
    HardwareProfile,
    /// Weka JSONL, its gzip, a `.json` document, mooncake JSONL: read, then stats and replay plans.
    TraceJsonl,
    TraceGz,
    TraceJson,
    Mooncake,
    /// An InferenceX-style agentic aggregate (`agg.json`): `sweep import`'s artifact reader.
    Aggregate,
    /// A GSM8K split (`sweep eval --gsm8k DIR`).
    Gsm8k,
    /// An eval's `samples.jsonl` (read back when `sweep eval` resumes).
    EvalSamples,
    /// `sweep verify --pr-facts`: what the forge knows of a pull request.
    PrFacts,
    /// Eval results a run holds (an lm-eval result beside `meta_env.json`, `agg_eval_all.json`),
    /// read by `sweep verify --run`.
    EvalResult,
    /// A chat-completions reply body as `sweep eval` reads it.
    EvalReply,
    /// A file name a change commits beside a change `sweep verify` must reject.
    VerifyName,
}

/// A seed input: its kind, its file name and its bytes.
pub struct Seed {
    pub kind: Kind,
    pub name: String,
    pub bytes: Vec<u8>,
}

impl Kind {
    pub fn ext(self, name: &str) -> String {
        match self {
            Kind::TraceGz => "jsonl.gz".into(),
            Kind::TraceJson | Kind::Aggregate => "json".into(),
            Kind::TraceJsonl | Kind::Mooncake | Kind::Gsm8k | Kind::EvalSamples => "jsonl".into(),
            _ => name.rsplit('.').next().unwrap_or("yaml").to_string(),
        }
    }
}

const SUBAGENT_TRACE: &str = r#"{"id":"s1","block_size":64,"hash_id_scope":"local","tool_tokens":100,"requests":[{"t":0,"type":"s","model":"m","in":640,"out":5,"hash_ids":[1,2,3],"api_time":1.5,"ttft":0.3},{"t":2,"type":"subagent","agent_id":"sa_1","subagent_type":"Subagent","duration_ms":3000,"requests":[{"t":0,"type":"n","in":200,"out":4,"hash_ids":[1,9],"api_time":1},{"t":1.5,"type":"n","in":260,"out":4,"hash_ids":[1,9,10],"api_time":1}]},{"t":6,"type":"s","model":"m","in":700,"out":9,"hash_ids":[1,2,3,4],"api_time":2,"think_time":0.5}]}"#;

const MOONCAKE: &str = "{\"session_id\": \"a\", \"timestamp\": 0, \"input_length\": 1000, \"output_length\": 10, \"hash_ids\": [1, 2]}\n\
{\"session_id\": \"b\", \"timestamp\": 5, \"input_length\": 600, \"output_length\": 3, \"hash_ids\": [7]}\n\
{\"session_id\": \"a\", \"delay\": 1500, \"input_length\": 1600, \"output_length\": 12, \"hash_ids\": [1, 2, 3]}\n\
{\"timestamp\": 9, \"input_length\": 655, \"output_length\": 52, \"hash_ids\": [46, 47]}\n";

/// The seeds: this repository's inputs, the shared InferenceX inputs and small real traces.
pub fn seeds(workspace: &Path, shared: Option<&Path>) -> Vec<Seed> {
    let mut out = Vec::new();
    let mut add = |kind: Kind, path: &Path| {
        if let Ok(bytes) = std::fs::read(path) {
            out.push(Seed { kind, name: path.file_name().unwrap().to_string_lossy().into_owned(), bytes });
        }
    };
    add(Kind::Master, &workspace.join("recipes/master.yaml"));
    add(Kind::Changelog, &workspace.join("perf-changelog.yaml"));
    add(Kind::Runners, &workspace.join("recipes/runners.yaml"));
    for e in sorted_files(&workspace.join("recipes")) {
        if e.file_name().is_some_and(|n| n != "master.yaml" && n != "runners.yaml") {
            add(Kind::Recipe, &e);
        }
    }
    for e in sorted_files(&workspace.join("golden_al")) {
        add(Kind::GoldenAl, &e);
    }
    for e in sorted_files(&workspace.join("engine/profiles/hardware")) {
        add(Kind::HardwareProfile, &e);
    }
    for e in sorted_files(&workspace.join("engine/profiles/models")) {
        add(Kind::ModelProfile, &e);
    }
    if let Some(s) = shared {
        for f in ["nvidia-master.yaml", "perf-changelog.yaml", "thresholds.yaml"] {
            add(Kind::SharedYaml, &s.join("inferencex").join(f));
        }
        add(Kind::SharedYaml, &s.join("agentx-traces/cc-traces-weka-062126.stats.yaml"));
        add(Kind::SharedYaml, &s.join("published/points.yaml"));
    }
    let mut traces = vec![SUBAGENT_TRACE.to_string()];
    if let Some(s) = shared {
        traces.extend(small_real_traces(&s.join("agentx-traces/kv-cache-tester-200.jsonl.gz"), 4, 10_000));
    }
    for (i, t) in traces.iter().enumerate() {
        for kind in [Kind::TraceJsonl, Kind::TraceGz, Kind::TraceJson] {
            out.push(Seed { kind, name: format!("trace{i}"), bytes: format!("{t}\n").into_bytes() });
        }
    }
    out.push(Seed { kind: Kind::TraceJsonl, name: "all".into(), bytes: (traces.join("\n") + "\n").into_bytes() });
    out.push(Seed { kind: Kind::Mooncake, name: "mooncake".into(), bytes: MOONCAKE.as_bytes().to_vec() });
    // A point's aggregate as InferenceX publishes it (sweep's own fields removed).
    out.push(Seed { kind: Kind::Aggregate, name: "agg.json".into(), bytes: include_bytes!("agg_seed.json").to_vec() });
    let gsm8k = harness::eval::data::embedded();
    let rows: String = gsm8k.test.iter().take(20).map(|d| serde_json::to_string(d).unwrap() + "\n").collect();
    out.push(Seed { kind: Kind::Gsm8k, name: "gsm8k".into(), bytes: rows.into_bytes() });
    out.push(Seed { kind: Kind::EvalSamples, name: "samples".into(), bytes: EVAL_SAMPLES.as_bytes().to_vec() });
    out.push(Seed { kind: Kind::PrFacts, name: "pr-facts.yaml".into(), bytes: PR_FACTS.as_bytes().to_vec() });
    out.push(Seed { kind: Kind::EvalResult, name: "results_2026-12-01T10-00-00.json".into(), bytes: LM_EVAL_RESULT.as_bytes().to_vec() });
    out.push(Seed { kind: Kind::EvalResult, name: "agg_eval_all.json".into(), bytes: AGG_EVAL_ALL.as_bytes().to_vec() });
    for (i, r) in EVAL_REPLIES.iter().enumerate() {
        out.push(Seed { kind: Kind::EvalReply, name: format!("reply{i}.json"), bytes: r.as_bytes().to_vec() });
    }
    for n in ["notes.md", "recipes/notes.yaml", "golden_al/extra.yaml", "docs/waiver/7.md"] {
        out.push(Seed { kind: Kind::VerifyName, name: n.replace('/', "_"), bytes: n.as_bytes().to_vec() });
    }
    out
}

const EVAL_REPLIES: [&str; 3] = [
    r#"{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"She makes 9 * 2 = 18.\n#### 18"},"finish_reason":"stop"}],"usage":{"prompt_tokens":90,"completion_tokens":17}}"#,
    r#"{"choices":[{"index":0,"message":{"role":"assistant","content":null,"reasoning_content":"2 + 1 = 3\n#### 3"},"finish_reason":"length"}],"usage":{"completion_tokens":512}}"#,
    r#"{"choices":[{"index":0,"message":{"content":""},"finish_reason":"stop"},{"index":1,"message":{"content":"so #### 4"}}]}"#,
];

const EVAL_SAMPLES: &str = r##"{"doc_id":0,"prompt_hash":"880e5df301f84a9712e6225a7d85c57a0d9f18d9dda47182fb63896631042aa2","doc_hash":"986c19252f3c7f6eaeff2229e9a5777f96a85c0ceea931a92d2289084dfd518c","target_hash":"623a0fbdf774fcb55e485a3e6b012e6c3965616af5b8eb9b9aebd2f6712be2eb","target":"18","response":"She makes 9 * 2 = 18.\n#### 18","filtered_resps":{"strict-match":"18","flexible-extract":"18"},"exact_match":{"strict-match":1.0,"flexible-extract":1.0},"finish_reason":"stop","completion_tokens":17,"attempts":1,"latency_s":1.5}
{"doc_id":1,"prompt_hash":"e1ded8b7e77cca4c717340bd77b042d449085ef7a9192b61f93624243550403c","doc_hash":"00f836ab1a16e62131c59e2c6ce14552295991067d5b9f912f47449305e3b9e1","target_hash":"x","target":"3","error":"HTTP 503: overloaded","attempts":5,"latency_s":8.1}
"##;

/// A GSM8K split as `sweep eval --gsm8k` reads it: refused with an error naming the file.
pub fn run_gsm8k(path: &Path) -> Outcome {
    match harness::eval::data::read_split(path) {
        Ok(_) => Outcome::Accepted,
        Err(e) if e.to_string().contains(&path.display().to_string()) => too_long(&e.to_string()).unwrap_or(Outcome::Refused),
        Err(e) => Outcome::Finding(format!("the error does not name the file: {e}")),
    }
}

/// An eval's samples log as a resumed `sweep eval` reads it; what loads is scored.
pub fn run_eval_samples(path: &Path) -> Outcome {
    match harness::eval::record::read_samples(path) {
        Ok((samples, _)) => {
            let scored: Vec<_> = samples.iter().filter_map(|s| s.scored()).collect();
            let _ = harness::eval::score::aggregate(&scored);
            Outcome::Accepted
        }
        Err(e) if e.to_string().contains(&path.display().to_string()) => too_long(&e.to_string()).unwrap_or(Outcome::Refused),
        Err(e) => Outcome::Finding(format!("the error does not name the file: {e}")),
    }
}

const PR_FACTS: &str = "number: 7\nsigner: alice\nsignoff: |\n  - [x] Verified evals\n  ### Additional detail section:\n  - https://docs.sglang.io/cookbook/x\ncodeowners: \"* @org/all\\n/recipes/ @alice\\n\"\nteams:\n  \"@org/all\": [alice]\nlabels: [full-sweep-fail-fast]\ncheck_runs:\n  - {sha: abc, name: \"eval / x\", conclusion: success, details_url: \"https://github.com/o/r/actions/runs/1/job/2\"}\ncomments:\n  - {user: bob, association: MEMBER, body: \"/reuse-sweep-run 1\"}\nrecipe_links:\n  - {url: \"https://docs.sglang.io/cookbook/x\", state: PUBLISHED, args: [--tp-size, \"8\"]}\nexceptions:\n  \"6\": new hardware\n";

const META_ENV: &str = r#"{"framework": "sglang", "precision": "fp4", "tp": 2, "ep": 2, "dp_attention": "false", "conc": 32, "infmax_model_prefix": "dsv41flash", "hw": "gb300"}"#;

const LM_EVAL_RESULT: &str = r#"{"lm_eval_version": "0.4.9", "results": {"gsm8k": {"exact_match,strict-match": 0.975, "exact_match_stderr,strict-match": 0.004, "exact_match,flexible-extract": 0.97}}, "configs": {"gsm8k": {"metric_list": [{"metric": "exact_match"}], "filter_list": [{"name": "strict-match"}, {"name": "flexible-extract"}]}}, "n-samples": {"gsm8k": {"original": 1319, "effective": 1319}}}"#;

const AGG_EVAL_ALL: &str = r#"[{"model_prefix": "dsv41flash", "hw": "GB300", "tp": 2, "ep": 2, "conc": 32, "dp_attention": "false", "task": "gsm8k", "em_strict": 0.975, "em_flexible": 0.97, "n_eff": 1319, "score": 0.975, "source": "results.json", "image": "lmsysorg/sglang:x", "infrastructure_success": true}]"#;

fn sorted_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir).into_iter().flatten().filter_map(|e| e.ok().map(|e| e.path())).collect();
    v.retain(|p| p.extension().is_some_and(|x| x == "yaml"));
    v.sort();
    v
}

/// The first `n` lines shorter than `max` bytes of a gzip JSONL corpus.
fn small_real_traces(path: &Path, n: usize, max: usize) -> Vec<String> {
    let Ok(f) = std::fs::File::open(path) else { return Vec::new() };
    let mut r = std::io::BufReader::new(flate2::read::MultiGzDecoder::new(std::io::BufReader::new(f)));
    let mut out = Vec::new();
    let mut line = Vec::new();
    while out.len() < n && r.read_until(b'\n', &mut line).is_ok_and(|k| k > 0) {
        if line.len() < max {
            out.push(String::from_utf8_lossy(&line).trim_end().to_string());
        }
        line.clear();
    }
    out
}

/// What one input did: accepted, or refused with an error that names its file.
pub enum Outcome {
    Accepted,
    Refused,
    /// An error without the file's name, or another broken expectation.
    Finding(String),
}

/// The longest one error may be: messages quote at most an excerpt of the input.
const MAX_MESSAGE: usize = 4096;

/// An error too long to be read: it echoes its input.
fn too_long(e: &str) -> Option<Outcome> {
    (e.len() > MAX_MESSAGE).then(|| Outcome::Finding(format!("a {}-byte error message: {}…", e.len(), harness::problem::excerpt(e))))
}

/// Checks that every problem names a file (the one given when `must` is set) and is short.
fn problems_name_files(p: &Problems, must: Option<&Path>) -> Outcome {
    if let Some(bad) = p.0.iter().find(|q| q.file.as_os_str().is_empty()) {
        return Outcome::Finding(format!("a problem names no file: {bad}"));
    }
    if let Some(long) = p.0.iter().find_map(|q| too_long(&q.to_string())) {
        return long;
    }
    if let Some(f) = must
        && !p.to_string().contains(&f.display().to_string())
    {
        return Outcome::Finding(format!("the error does not name {}:\n{p}", f.display()));
    }
    Outcome::Refused
}

fn repo_args(root: &Path) -> RepoArgs {
    RepoArgs { root: Some(root.to_path_buf()), master: Vec::new(), runners: None, changelog: None, golden_al: None }
}

/// `sweep validate`, then `sweep plan full-sweep-fail-fast`, on the repository at `root`.
pub fn run_repo(root: &Path, with_plan: bool) -> Outcome {
    if let Err(p) = validate::check(&validate::Args { repo: repo_args(root) }) {
        return problems_name_files(&p, None);
    }
    if !with_plan {
        return Outcome::Accepted;
    }
    let args = plan::Args {
        select: harness::cmd::select_args::LabelArgs { labels: vec!["full-sweep-fail-fast".into()], base: None, no_evals: false },
        format: plan::Format::Table,
        show_commands: false,
        repo: repo_args(root),
    };
    match plan::load(&args) {
        Ok(Ok(p)) => {
            let _ = plan::table(&p, true);
            Outcome::Accepted
        }
        Ok(Err(p)) => problems_name_files(&p, None),
        Err(e) => Outcome::Finding(format!("plan failed outside its problems: {e}")),
    }
}

/// A shared InferenceX file or stats file loaded alone, by the loader its name (the seed's file
/// name, at its end) calls for.
pub fn run_shared(path: &Path, name: &str) -> Outcome {
    let named = |e: String| {
        if !e.contains(&path.display().to_string()) {
            return Outcome::Finding(format!("the error does not name the file:\n{e}"));
        }
        too_long(&e).unwrap_or(Outcome::Refused)
    };
    let loader = ["nvidia-master.yaml", "perf-changelog.yaml", "thresholds.yaml", "points.yaml"].into_iter().find(|n| name.ends_with(n));
    let r: Result<(), Outcome> = match loader.unwrap_or("stats") {
        "nvidia-master.yaml" => {
            harness::recipe::Master::load(&[path.to_path_buf()]).map(|_| ()).map_err(|p| problems_name_files(&p, Some(path)))
        }
        "perf-changelog.yaml" => harness::changelog::Changelog::load(path).map(|_| ()).map_err(|p| problems_name_files(&p, Some(path))),
        "thresholds.yaml" => harness::gate::Thresholds::load(path).map(|_| ()).map_err(|e| named(e.to_string())),
        // Published points (`sweep predict --points`).
        "points.yaml" => harness::published::load(path).map(|_| ()).map_err(|p| problems_name_files(&p, Some(path))),
        _ => harness::trace::published::PublishedStats::load(path).map(|_| ()).map_err(|p| problems_name_files(&p, Some(path))),
    };
    r.err().unwrap_or(Outcome::Accepted)
}

/// A pr-facts file, as `sweep verify --pr-facts` loads it.
pub fn run_pr_facts(path: &Path) -> Outcome {
    match harness::verify::PrFacts::load(path) {
        Ok(_) => Outcome::Accepted,
        Err(p) => problems_name_files(&p, Some(path)),
    }
}

/// Eval results in a run folder (the mutant beside a fixed `meta_env.json`), as `sweep verify
/// --run` reads them.
pub fn run_eval_result(path: &Path) -> Outcome {
    let dir = path.parent().expect("a folder");
    if std::fs::write(dir.join("meta_env.json"), META_ENV).is_err() {
        return Outcome::Finding("cannot write meta_env.json".into());
    }
    match harness::verify::RunArtifacts::load(dir) {
        Ok(_) => Outcome::Accepted,
        Err(e) if e.to_string().contains(&path.display().to_string()) => too_long(&e.to_string()).unwrap_or(Outcome::Refused),
        Err(e) => Outcome::Finding(format!("the error does not name the file: {e}")),
    }
}

/// An engine profile: the model loader or the hardware loader, by its folder.
pub fn run_profile(path: &Path, model: bool) -> Outcome {
    let r = if model { engine::ModelSpec::from_file(path).map(|_| ()) } else { engine::GpuSpec::from_file(path).map(|_| ()) };
    match r {
        Ok(()) => Outcome::Accepted,
        Err(e) if e.to_string().contains(&path.display().to_string()) => too_long(&e.to_string()).unwrap_or(Outcome::Refused),
        Err(e) => Outcome::Finding(format!("the error does not name the file: {e}")),
    }
}

/// A trace file read strictly and skipping invalid traces; what loads goes on to statistics and
/// replay plans, as `sweep trace stats` and `sweep trace conversations` take it.
pub fn run_traces(path: &Path) -> Outcome {
    let shown = path.display().to_string();
    let strict = read_traces(&[path], &ReadOptions::default());
    let skipping = read_traces(&[path], &ReadOptions { skip_invalid: true, ..ReadOptions::default() });
    for r in [&strict, &skipping] {
        if let Err(e) = r {
            if !e.to_string().contains(&shown) {
                return Outcome::Finding(format!("the error does not name the file: {e}"));
            }
            if let Some(long) = too_long(&e.to_string()) {
                return long;
            }
        }
        if let Ok(set) = r
            && let Some(w) = set.warnings.iter().find(|w| !w.contains(&shown) && !w.starts_with("skipped ") || w.len() > MAX_MESSAGE)
        {
            return Outcome::Finding(format!("a warning does not name the file, or is too long: {}", harness::problem::excerpt(w)));
        }
    }
    let Ok(set) = skipping else { return Outcome::Refused };
    let mut stats = harness::trace::stats::Collector::default();
    for t in &set.traces {
        stats.add(t);
        let _ = harness::workload::TracePlan::build(t, 0);
    }
    let _ = stats.finish("fuzz");
    if strict.is_ok() { Outcome::Accepted } else { Outcome::Refused }
}

/// An aggregate imported as `sweep import` reads an InferenceX result folder: the input becomes
/// the `agg.json` of a point folder beside it.
pub fn run_aggregate(path: &Path) -> Outcome {
    let dir = path.with_extension("point");
    let _ = std::fs::remove_dir_all(&dir);
    if std::fs::create_dir_all(&dir).and_then(|()| std::fs::copy(path, dir.join("agg.json"))).is_err() {
        return Outcome::Finding(format!("could not set up {}", dir.display()));
    }
    let agg = dir.join("agg.json").display().to_string();
    let root = dir.parent().unwrap_or(Path::new("."));
    let out = match harness::store::import::aggregate_file(&dir) {
        // Not an aggregate at all (no `request_metrics` object): the reader skips it.
        None => Outcome::Refused,
        Some(_) => match harness::store::import::read_artifacts(root, std::slice::from_ref(&dir), &Default::default()) {
            Ok(_) => Outcome::Accepted,
            Err(e) if !e.to_string().contains(&agg) => Outcome::Finding(format!("the error does not name {agg}: {e}")),
            Err(e) => too_long(&e.to_string()).unwrap_or(Outcome::Refused),
        },
    };
    let _ = std::fs::remove_dir_all(&dir);
    out
}

/// Writes a trace input: gzip-compressed for that kind (its compressed bytes sometimes
/// mutated too, by the caller's choice).
pub fn write_input(path: &Path, kind: Kind, bytes: &[u8]) -> std::io::Result<()> {
    if kind != Kind::TraceGz {
        return std::fs::write(path, bytes);
    }
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(bytes)?;
    std::fs::write(path, gz.finish()?)
}
