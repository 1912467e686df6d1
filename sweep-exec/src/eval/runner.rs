//! Running gsm8k against an OpenAI-compatible server: lm-eval's `local-chat-completions` request
//! path as `run_lm_eval.sh` configures it — `num_concurrent` requests at once, each attempt
//! bounded by 1800 s, 5 attempts with tenacity's exponential wait (1, 1, 2, 4 s), a reply's
//! `content` (its `reasoning_content` when empty, as InferenceX's patch reads it). Answers are
//! scored and appended to `samples.jsonl` as they arrive, so an interrupted or killed run
//! resumes without asking again; the results are written once every question is answered.

use super::attempt::attempt;
use super::data::Gsm8k;
use super::record::{EvalRecord, EvalStatus, FilterPair, Meta, SAMPLES_FILE, Sample, read_samples};
use super::reply::{excerpt_of, reply_limit};
use super::{score, task, write};
use crate::targets::dialect::{Dialect, MaxTokensField};
use crate::targets::http::HttpTarget;
use futures_util::StreamExt;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// One eval against a server that is up (or coming up): what `sweep eval --url` and an eval
/// point of `sweep run` pass.
#[derive(Clone, Debug)]
pub struct EvalConfig {
    /// `http://host:port` of the OpenAI-compatible server (no `/v1`).
    pub base_url: String,
    /// The served model; `None`: the first `/v1/models` lists.
    pub model: Option<String>,
    /// Requests at once (`EVAL_CONCURRENT_REQUESTS`, lm-eval's `num_concurrent`).
    pub concurrency: usize,
    /// The first N questions only (a smoke run, never a full-n result).
    pub limit: Option<usize>,
    /// `EVAL_MAX_MODEL_LEN`: the output budget is derived from it ([`task::max_output_tokens`]).
    pub max_model_len: u64,
    /// The folder of the eval's files (created; a folder with samples resumes).
    pub out: PathBuf,
    /// The identity written to `meta_env.json` (`conc` is set to `concurrency`, `model` to the
    /// served model when empty).
    pub meta: Meta,
    /// How long the server may take to answer `/health`, list a model and one request.
    pub ready_timeout: Duration,
    /// One attempt's limit (`timeout=1800`).
    pub request_timeout: Duration,
    /// Attempts per question (`max_retries=5`).
    pub max_attempts: u32,
    /// What the image or build of the server is, when the caller knows it (recorded in
    /// `eval.json` `server.image`, compared by the verifier with the throughput run's).
    pub image: Option<String>,
}

impl EvalConfig {
    /// InferenceX's settings against `base_url`, writing into `out`.
    pub fn new(base_url: &str, out: &Path) -> EvalConfig {
        EvalConfig {
            base_url: base_url.trim_end_matches('/').to_string(),
            model: None,
            concurrency: task::DEFAULT_CONCURRENCY,
            limit: None,
            max_model_len: task::DEFAULT_MAX_MODEL_LEN,
            out: out.to_path_buf(),
            meta: Meta::default(),
            ready_timeout: crate::targets::http::READY_TIMEOUT,
            request_timeout: Duration::from_secs(task::REQUEST_TIMEOUT_S),
            max_attempts: task::MAX_ATTEMPTS,
            image: None,
        }
    }
}

/// Where an eval stands, for progress bars.
#[derive(Clone, Debug, Default)]
pub struct EvalProgress {
    /// Questions of this run (after `--limit`).
    pub total: usize,
    /// Answered and scored, those of an earlier run included.
    pub done: usize,
    /// Answered by an earlier run (not asked again).
    pub resumed: usize,
    /// Questions that failed past their retries.
    pub failed: usize,
    /// Attempts that are being retried.
    pub retries: usize,
    /// Sum of the strict and flexible scores so far.
    pub strict_sum: f64,
    pub flexible_sum: f64,
}

#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error(transparent)]
    Http(#[from] crate::targets::http::HttpError),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Record(#[from] super::record::RecordError),
    #[error("{out}: holds samples of another eval ({what}); resume it with the same settings, or choose another --out")]
    Mismatch { out: PathBuf, what: String },
    #[error("--concurrency must be at least 1")]
    Concurrency,
    #[error("interrupted while waiting for the server")]
    Interrupted,
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> EvalError + '_ {
    move |source| EvalError::Io { path: path.to_path_buf(), source }
}

/// What `/server_info` says about a simulated engine: the reference engine (`sweep engine
/// serve`) names itself simulated and carries its profiles.
pub fn simulated_engine(info: &Value) -> Option<String> {
    let engine = info["engine"].as_str().unwrap_or("");
    if engine.contains("simulated") || info.get("engine_info").is_some_and(Value::is_object) {
        return Some(if engine.is_empty() { "sweep reference engine".into() } else { engine.to_string() });
    }
    None
}

/// The parts of `/server_info` worth keeping with the eval: what the server is.
fn server_identity(info: Option<&Value>, image: Option<&str>) -> Option<Value> {
    let mut m = serde_json::Map::new();
    if let Some(info) = info {
        for k in ["version", "engine", "model_path", "served_model_name", "tp_size", "dp_size", "ep_size", "context_length"] {
            if let Some(v) = info.get(k).filter(|v| !v.is_null()) {
                m.insert(k.into(), v.clone());
            }
        }
    }
    if let Some(i) = image {
        m.insert("image".into(), i.into());
    }
    (!m.is_empty()).then_some(Value::Object(m))
}

/// tenacity's `wait_exponential(multiplier=0.5, min=1, max=10)` after the n-th failed attempt.
pub fn retry_wait(attempt: u32) -> Duration {
    let w = 0.5 * 2f64.powi(attempt.saturating_sub(1) as i32);
    Duration::from_secs_f64(w.clamp(1.0, 10.0))
}

struct Shared<'a> {
    data: &'a Gsm8k,
    client: reqwest::Client,
    url: String,
    key: String,
    model: String,
    max_tokens: u64,
    cfg: &'a EvalConfig,
    /// Set when a question fails past its retries: no new question is sent (lm-eval's run
    /// ends there), those in flight finish.
    stop_new: AtomicBool,
    retries: std::sync::atomic::AtomicUsize,
}

/// The gold answer of a worked answer: what follows its last `#### `.
pub fn gold(answer: &str) -> &str {
    answer.rsplit("#### ").next().unwrap_or(answer).trim()
}

/// Asks one question (with retries) and scores the answer; `None`: not sent (the run stopped).
async fn ask(sh: &Shared<'_>, p: task::Prompt) -> Option<Sample> {
    if sh.stop_new.load(Ordering::Relaxed) {
        return None;
    }
    let messages = p.messages(sh.data);
    let doc = &sh.data.test[p.doc_id];
    let body = task::request_body(&sh.model, &messages, sh.max_tokens);
    let mut sample = Sample {
        doc_id: p.doc_id,
        prompt_hash: task::prompt_hash(&messages),
        doc_hash: task::doc_hash(doc),
        target_hash: task::target_hash(doc),
        target: gold(&doc.answer).to_string(),
        response: None,
        from_reasoning: false,
        filtered_resps: None,
        exact_match: None,
        finish_reason: None,
        completion_tokens: None,
        error: None,
        attempts: 0,
        latency_s: 0.0,
    };
    let t0 = Instant::now();
    for n in 1..=sh.cfg.max_attempts.max(1) {
        sample.attempts = n;
        match attempt(&sh.client, &sh.url, &sh.key, &body, sh.cfg.request_timeout, reply_limit(sh.max_tokens)).await {
            Ok((text, from_reasoning, finish, tokens)) => {
                let s = score::score(&text, &doc.answer);
                sample.filtered_resps = Some(FilterPair { strict: s.strict, flexible: s.flexible });
                sample.exact_match = Some(FilterPair { strict: s.strict_match, flexible: s.flexible_match });
                sample.response = Some(excerpt_of(text));
                sample.from_reasoning = from_reasoning;
                sample.finish_reason = finish;
                sample.completion_tokens = tokens;
                sample.error = None;
                break;
            }
            Err(e) => {
                sample.error = Some(e.to_string());
                if n < sh.cfg.max_attempts {
                    sh.retries.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(retry_wait(n)).await;
                }
            }
        }
    }
    sample.latency_s = t0.elapsed().as_secs_f64();
    if sample.error.is_some() {
        sh.stop_new.store(true, Ordering::Relaxed);
    }
    Some(sample)
}

/// The samples log, appended to line by line.
struct Log {
    file: std::fs::File,
    path: PathBuf,
}

impl Log {
    fn open(path: &Path, keep: u64) -> Result<Log, EvalError> {
        let file = std::fs::OpenOptions::new().create(true).append(true).open(path).map_err(io_err(path))?;
        // A line cut short by a kill is dropped before anything is appended after it.
        file.set_len(keep).map_err(io_err(path))?;
        Ok(Log { file, path: path.to_path_buf() })
    }

    fn append(&mut self, s: &Sample) -> Result<(), EvalError> {
        let mut line = serde_json::to_vec(s).expect("a sample serializes");
        line.push(b'\n');
        // One write per line: a kill leaves at most the last line torn.
        self.file.write_all(&line).map_err(io_err(&self.path))
    }
}

/// Runs the eval (or, against a simulated engine, records it as not applicable) and writes its
/// files; `progress` is called after every answer. Stops early when `cancel` is set, keeping the
/// samples so far (the record says `interrupted`).
pub async fn run(
    cfg: &EvalConfig,
    data: &Gsm8k,
    cancel: &AtomicBool,
    mut progress: impl FnMut(&EvalProgress),
) -> Result<EvalRecord, EvalError> {
    if cfg.concurrency == 0 {
        return Err(EvalError::Concurrency);
    }
    std::fs::create_dir_all(&cfg.out).map_err(io_err(&cfg.out))?;
    let started_at = write::now_rfc3339();
    let t0 = Instant::now();
    let target = ready_target(cfg, cancel).await?;
    let model = match &cfg.model {
        Some(m) => m.clone(),
        None => target.discover_model().await?,
    };
    let info = target.server_info().await;
    let mut meta = cfg.meta.clone();
    meta.conc = cfg.concurrency as u32;
    if meta.model.is_empty() {
        meta.model = model.clone();
    }
    let max_tokens = task::max_output_tokens(cfg.max_model_len);
    let server = server_identity(info.as_ref(), cfg.image.as_deref());
    let prompts = task::prompts(data, cfg.limit.unwrap_or(data.test.len()));
    let mut rec = new_record(cfg, data, Some(model.clone()), meta, server);
    rec.started_at = started_at;
    if info.as_ref().and_then(simulated_engine).is_some() {
        // `server.engine` says which; the status names the reason alone, as InferenceX readers expect.
        return write::not_applicable(&cfg.out, rec, write::SIMULATED).map_err(io_err(&cfg.out));
    }

    // Resume: questions answered by an earlier run of the same eval are not asked again.
    let previous = super::record::read_eval_dir(&cfg.out).ok().filter(|r| r.status != EvalStatus::NotApplicable);
    if let Some(p) = &previous {
        check_same_eval(cfg, p, &model, max_tokens)?;
    }
    let samples_path = cfg.out.join(SAMPLES_FILE);
    let (old, keep) = read_samples(&samples_path)?;
    let done = resumable(old, &prompts, data);
    let mut log = Log::open(&samples_path, keep)?;
    write::record(&cfg.out, &rec).map_err(io_err(&cfg.out))?;

    let mut answers = Answers::resumed(done, prompts.len());
    progress(&answers.pg);
    let pending: Vec<task::Prompt> = prompts.iter().filter(|p| !answers.done.contains_key(&p.doc_id)).copied().collect();
    let sh = Shared {
        data,
        client: eval_client(cfg)?,
        url: format!("{}/v1/chat/completions", cfg.base_url),
        key: std::env::var("OPENAI_API_KEY").ok().filter(|k| !k.is_empty()).unwrap_or_else(|| "EMPTY".into()),
        model,
        max_tokens,
        cfg,
        stop_new: AtomicBool::new(false),
        retries: Default::default(),
    };
    let interrupted = ask_pending(&sh, pending, &mut log, &mut answers, cancel, &mut progress).await?;
    log.file.sync_all().map_err(io_err(&samples_path))?;
    rec.wall_s = t0.elapsed().as_secs_f64();
    conclude(cfg, rec, answers, interrupted, prompts.len(), previous.and_then(|p| p.results_file))
}

/// The server's target with lm-eval's request dialect, once it is ready; Ctrl-C while a server
/// is still loading stops the wait.
async fn ready_target(cfg: &EvalConfig, cancel: &AtomicBool) -> Result<HttpTarget, EvalError> {
    let mut target = HttpTarget::new(&cfg.base_url, "")?;
    // lm-eval's body carries `max_tokens`; servers that read only it (llama.cpp) answer the
    // readiness request briefly too.
    target.dialect = Arc::new(Dialect { max_tokens_field: MaxTokensField::MaxTokens, ignore_eos: false, ..Dialect::default() });
    {
        let ready = target.wait_ready(cfg.ready_timeout);
        tokio::pin!(ready);
        loop {
            tokio::select! {
                r = &mut ready => { r?; break; }
                _ = tokio::time::sleep(Duration::from_millis(200)) => {
                    if cancel.load(Ordering::SeqCst) {
                        return Err(EvalError::Interrupted);
                    }
                }
            }
        }
    }
    Ok(target)
}

/// Refuses to resume an earlier eval in `cfg.out` that asked another model or budget.
fn check_same_eval(cfg: &EvalConfig, previous: &EvalRecord, model: &str, max_tokens: u64) -> Result<(), EvalError> {
    let mut diff = Vec::new();
    if previous.model.as_deref() != Some(model) {
        diff.push(format!("model {:?}, not {model:?}", previous.model.as_deref().unwrap_or("?")));
    }
    if previous.max_tokens != max_tokens {
        diff.push(format!("max_tokens {}, not {max_tokens}", previous.max_tokens));
    }
    if !diff.is_empty() {
        return Err(EvalError::Mismatch { out: cfg.out.clone(), what: diff.join("; ") });
    }
    Ok(())
}

/// The logged samples an earlier run answered that this run need not ask again.
fn resumable(old: Vec<Sample>, prompts: &[task::Prompt], data: &Gsm8k) -> BTreeMap<usize, Sample> {
    let want: HashMap<usize, String> = prompts.iter().map(|p| (p.doc_id, task::prompt_hash(&p.messages(data)))).collect();
    let mut done = BTreeMap::new();
    for s in old {
        // Only answers to the very same prompt count; a logged failure is asked again.
        if s.error.is_none() && want.get(&s.doc_id) == Some(&s.prompt_hash) {
            done.insert(s.doc_id, s);
        }
    }
    done
}

/// The HTTP client of the eval's requests: one idle connection per concurrent request.
fn eval_client(cfg: &EvalConfig) -> Result<reqwest::Client, EvalError> {
    Ok(reqwest::Client::builder()
        .pool_max_idle_per_host(cfg.concurrency)
        .tcp_nodelay(true)
        .connect_timeout(Duration::from_secs(60))
        .build()
        .map_err(crate::targets::http::HttpError::Client)?)
}

/// The answers so far: those scored, by doc id, those that failed past their retries, and the
/// progress they add up to.
struct Answers {
    done: BTreeMap<usize, Sample>,
    failed: Vec<Sample>,
    pg: EvalProgress,
}

impl Answers {
    /// The answers of an earlier run, of `total` questions.
    fn resumed(done: BTreeMap<usize, Sample>, total: usize) -> Answers {
        let mut pg = EvalProgress { total, resumed: done.len(), ..Default::default() };
        for s in done.values() {
            pg.count_answer(s);
        }
        Answers { done, failed: Vec::new(), pg }
    }

    /// Adds a sample just logged: a failure, or a scored answer.
    fn add(&mut self, s: Sample) {
        if s.error.is_some() {
            self.pg.failed += 1;
            self.failed.push(s);
        } else {
            self.pg.count_answer(&s);
            self.done.insert(s.doc_id, s);
        }
    }
}

impl EvalProgress {
    /// Counts one answered question and its scores.
    fn count_answer(&mut self, s: &Sample) {
        self.done += 1;
        if let Some(e) = &s.exact_match {
            self.strict_sum += e.strict;
            self.flexible_sum += e.flexible;
        }
    }
}

/// Asks the `pending` questions, `cfg.concurrency` at once, logging and counting each answer as
/// it arrives; `true` when `cancel` stopped the run first.
async fn ask_pending(
    sh: &Shared<'_>,
    pending: Vec<task::Prompt>,
    log: &mut Log,
    answers: &mut Answers,
    cancel: &AtomicBool,
    progress: &mut impl FnMut(&EvalProgress),
) -> Result<bool, EvalError> {
    let mut stream = futures_util::stream::iter(pending.into_iter().map(|p| ask(sh, p))).buffer_unordered(sh.cfg.concurrency);
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    loop {
        tokio::select! {
            next = stream.next() => match next {
                Some(Some(s)) => {
                    log.append(&s)?;
                    answers.add(s);
                    answers.pg.retries = sh.retries.load(Ordering::Relaxed);
                    progress(&answers.pg);
                }
                Some(None) => {}
                None => return Ok(false),
            },
            _ = tick.tick() => {
                if cancel.load(Ordering::SeqCst) {
                    return Ok(true);
                }
                answers.pg.retries = sh.retries.load(Ordering::Relaxed);
                progress(&answers.pg);
            }
        }
    }
}

/// Writes the outcome of a run: failed, stopped short (to resume), or finished and scored.
fn conclude(
    cfg: &EvalConfig,
    mut rec: EvalRecord,
    answers: Answers,
    interrupted: bool,
    total: usize,
    old_results: Option<String>,
) -> Result<EvalRecord, EvalError> {
    let Answers { done, failed, .. } = answers;
    rec.n = done.len();
    rec.requests_failed = failed.len();
    if !failed.is_empty() {
        rec.status = EvalStatus::Failed;
        let last = failed.last().and_then(|s| s.error.clone()).unwrap_or_default();
        rec.reason = Some(format!(
            "{} question(s) failed after {} attempts (last: {last}); {} of {} answered — re-run to resume",
            failed.len(),
            cfg.max_attempts,
            done.len(),
            total
        ));
        write::record(&cfg.out, &rec).map_err(io_err(&cfg.out))?;
        return Ok(rec);
    }
    if interrupted || done.len() != total {
        rec.reason = Some(format!("{} of {} questions answered; re-run to resume", done.len(), total));
        write::record(&cfg.out, &rec).map_err(io_err(&cfg.out))?;
        return Ok(rec);
    }
    let samples: Vec<&Sample> = done.values().collect();
    write::finished(&cfg.out, rec, &samples, old_results).map_err(io_err(&cfg.out))
}

/// The record of an eval of `cfg` before anything is asked (status `interrupted` until it ends).
fn new_record(cfg: &EvalConfig, data: &Gsm8k, model: Option<String>, meta: Meta, server: Option<Value>) -> EvalRecord {
    EvalRecord {
        task: task::TASK.into(),
        status: EvalStatus::Interrupted,
        reason: Some("running, or stopped before it finished".into()),
        result_kind: "measured".into(),
        model,
        base_url: Some(cfg.base_url.clone()).filter(|u| !u.is_empty()),
        server,
        n: 0,
        n_total: data.test.len(),
        limit: cfg.limit,
        em_strict: None,
        em_strict_stderr: None,
        em_flexible: None,
        em_flexible_stderr: None,
        infrastructure_success: false,
        requests_failed: 0,
        concurrency: cfg.concurrency,
        max_tokens: task::max_output_tokens(cfg.max_model_len),
        max_model_len: cfg.max_model_len,
        data: data.source.clone(),
        started_at: write::now_rfc3339(),
        wall_s: 0.0,
        results_file: None,
        meta,
        producer: write::producer(),
    }
}

/// Records the eval of `cfg` as `not_applicable: simulated engine` without asking anything: an
/// eval point on the reference engine (virtual clock or `sweep engine serve`), `sweep eval
/// --engine`. `cfg.model` names the model (`cfg.base_url` may be empty); `engine` what the
/// target is, kept in `server.engine`.
pub fn record_simulated(cfg: &EvalConfig, data: &Gsm8k, engine: &str) -> Result<EvalRecord, EvalError> {
    let mut meta = cfg.meta.clone();
    meta.conc = cfg.concurrency as u32;
    if meta.model.is_empty()
        && let Some(m) = &cfg.model
    {
        meta.model = m.clone();
    }
    let mut server = serde_json::json!({"engine": engine});
    if let Some(i) = &cfg.image {
        server["image"] = i.clone().into();
    }
    let rec = new_record(cfg, data, cfg.model.clone(), meta, Some(server));
    write::not_applicable(&cfg.out, rec, write::SIMULATED).map_err(io_err(&cfg.out))
}

/// [`run`] on a runtime of its own (for callers outside async code).
pub fn run_blocking(
    cfg: &EvalConfig,
    data: &Gsm8k,
    cancel: &AtomicBool,
    progress: impl FnMut(&EvalProgress),
) -> Result<EvalRecord, EvalError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| EvalError::Io { path: cfg.out.clone(), source })?;
    rt.block_on(run(cfg, data, cancel, progress))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn waits_between_attempts_are_tenacitys() {
        let w: Vec<f64> = (1..=6).map(|n| retry_wait(n).as_secs_f64()).collect();
        assert_eq!(w, [1.0, 1.0, 2.0, 4.0, 8.0, 10.0]);
    }

    #[test]
    fn the_reference_engine_is_recognised_as_simulated() {
        let sim = json!({"engine": "sweep reference engine (simulated: timings are predicted, not measured)", "version": "0.5.23"});
        assert!(simulated_engine(&sim).unwrap().contains("simulated"));
        assert!(simulated_engine(&json!({"engine_info": {"model": "x"}})).is_some());
        assert_eq!(simulated_engine(&json!({"version": "0.5.6", "model_path": "deepseek-ai/DeepSeek-V3"})), None);
        assert_eq!(gold("a\n#### 1,600"), "1,600");
    }
}
