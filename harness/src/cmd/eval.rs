//! `sweep eval`: gsm8k against a server (`--url`) as InferenceX runs it, or recorded as not
//! applicable for the reference engine (`--engine`); results, reports and the threshold gate.

use super::select_args::Server;
use crate::eval::record::{EvalRecord, EvalStatus, Meta};
use crate::eval::runner::{EvalConfig, EvalProgress};
use crate::eval::{data, runner, task};
use crate::gate::{self, Thresholds};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub server: super::select_args::ServerArgs,
    /// The served model (default: the first one /v1/models lists).
    #[arg(long)]
    pub model: Option<String>,
    /// Output folder (default reports/<UTC timestamp>-eval-gsm8k); a folder with samples.jsonl
    /// resumes: questions already answered are not asked again.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Only the first N questions: a smoke run, marked limited, never a full-n result.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Requests at once (InferenceX's EVAL_CONCURRENT_REQUESTS: the row's eval concurrency).
    #[arg(long, default_value_t = task::DEFAULT_CONCURRENCY)]
    pub concurrency: usize,
    /// The eval context (EVAL_MAX_MODEL_LEN): max_tokens is this less 4096 (half of it up to
    /// 4096), at most 16384.
    #[arg(long, default_value_t = task::DEFAULT_MAX_MODEL_LEN, value_name = "TOKENS")]
    pub max_model_len: u64,
    /// A folder with GSM8K's test.jsonl and train.jsonl (default: $SWEEP_GSM8K, else the copy
    /// built into sweep).
    #[arg(long, value_name = "DIR")]
    pub gsm8k: Option<PathBuf>,
    /// The model prefix thresholds are looked up by (e.g. dsv4); written to meta_env.json.
    #[arg(long)]
    pub model_prefix: Option<String>,
    /// Eval thresholds in the InferenceX format (default: InferenceX's thresholds.yaml, embedded).
    #[arg(long, value_name = "FILE")]
    pub thresholds: Option<PathBuf>,
    /// A meta_env.json field, e.g. `--meta hw=b200 --meta tp=8 --meta framework=sglang`.
    #[arg(long, value_name = "KEY=VALUE")]
    pub meta: Vec<String>,
    /// The server's image or build (kept in eval.json, compared by the verifier).
    #[arg(long)]
    pub image: Option<String>,
    /// Exit with status 1 when the threshold gate fails (a score below it, a partial n, failed
    /// requests); without it the exit status says only whether the eval ran.
    #[arg(long)]
    pub gate: bool,
    /// Seconds to wait for the server (/health, a listed model, one answered request).
    #[arg(long, default_value_t = 600.0, value_name = "SECONDS")]
    pub ready_timeout: f64,
    /// Seconds one attempt may take (run_lm_eval.sh: timeout=1800).
    #[arg(long, default_value_t = task::REQUEST_TIMEOUT_S as f64, value_name = "SECONDS")]
    pub request_timeout: f64,
}

/// `meta` with `KEY=VALUE` settings applied (a field of meta_env.json; numbers and booleans as
/// such, the rest as text).
pub fn apply_meta(meta: Meta, settings: &[String]) -> anyhow::Result<Meta> {
    let mut v = serde_json::to_value(&meta)?;
    let obj = v.as_object_mut().expect("Meta is an object");
    let keys: Vec<String> = obj.keys().cloned().collect();
    for s in settings {
        let Some((k, val)) = s.split_once('=') else {
            anyhow::bail!("--meta {s:?}: expected KEY=VALUE, e.g. --meta hw=b200");
        };
        let Some(old) = obj.get(k) else {
            let hint =
                crate::problem::nearest(k, keys.iter().map(String::as_str)).map(|n| format!(" (did you mean `{n}`?)")).unwrap_or_default();
            anyhow::bail!("--meta {k}: not a meta_env.json field{hint}; fields: {}", keys.join(", "));
        };
        let new = match old {
            serde_json::Value::Number(_) => {
                serde_json::Value::from(val.parse::<u32>().map_err(|_| anyhow::anyhow!("--meta {k}={val}: expected a whole number"))?)
            }
            serde_json::Value::Bool(_) => match val.to_ascii_lowercase().as_str() {
                "true" | "1" | "yes" => true.into(),
                "false" | "0" | "no" => false.into(),
                _ => anyhow::bail!("--meta {k}={val}: expected true or false"),
            },
            _ => val.into(),
        };
        obj.insert(k.to_string(), new);
    }
    Ok(serde_json::from_value(v)?)
}

fn seconds(flag: &str, v: f64) -> anyhow::Result<Duration> {
    anyhow::ensure!(v > 0.0 && v.is_finite(), "{flag} {v}: must be a positive number of seconds");
    Ok(Duration::from_secs_f64(v))
}

/// The model an SGLang flag string serves (`--served-model-name`, else `--model-path`).
fn engine_model(argv: &[String]) -> Option<String> {
    let find = |flag: &str| {
        argv.iter().enumerate().find_map(|(i, a)| match a.strip_prefix(flag) {
            Some("") => argv.get(i + 1).cloned(),
            Some(rest) => rest.strip_prefix('=').map(str::to_string),
            None => None,
        })
    };
    find("--served-model-name").or_else(|| find("--model-path"))
}

/// A bar on a terminal; a plain line every 30 s otherwise (a CI log shows nothing of a bar).
struct Bar {
    bar: indicatif::ProgressBar,
    plain: bool,
    last: std::time::Instant,
}

impl Bar {
    fn new() -> Bar {
        use std::io::IsTerminal;
        let plain = !std::io::stderr().is_terminal();
        let bar = if plain { indicatif::ProgressBar::hidden() } else { indicatif::ProgressBar::new(0) };
        bar.set_style(
            indicatif::ProgressStyle::with_template("gsm8k {bar:30} {pos}/{len} [{elapsed_precise}<{eta_precise}] {msg}")
                .expect("template"),
        );
        Bar { bar, plain, last: std::time::Instant::now() }
    }

    fn show(&mut self, p: &EvalProgress) {
        let scores = if p.done > 0 {
            format!("strict {:.4} flexible {:.4}", p.strict_sum / p.done as f64, p.flexible_sum / p.done as f64)
        } else {
            String::new()
        };
        let extra = match (p.retries, p.failed, p.resumed) {
            (0, 0, 0) => String::new(),
            (r, f, s) => format!(" ({s} resumed, {r} retries, {f} failed)"),
        };
        self.bar.set_length(p.total as u64);
        self.bar.set_position(p.done as u64);
        self.bar.set_message(format!("{scores}{extra}"));
        if self.plain && (self.last.elapsed() >= Duration::from_secs(30) || p.done == p.total) {
            self.last = std::time::Instant::now();
            eprintln!("gsm8k {}/{} {scores}{extra}", p.done, p.total);
        }
    }
}

pub fn run(a: &Args) -> anyhow::Result<ExitCode> {
    let (thr, thr_source) = Thresholds::load_or_embedded(a.thresholds.as_deref()).map_err(anyhow::Error::msg)?;
    let mut meta = apply_meta(Meta::default(), &a.meta)?;
    if let Some(p) = &a.model_prefix {
        meta.infmax_model_prefix = p.clone();
    }
    meta.eval_suite = task::TASK.into();
    anyhow::ensure!(a.concurrency >= 1, "--concurrency {}: must be at least 1", a.concurrency);
    anyhow::ensure!(a.limit != Some(0), "--limit 0: give a positive number of questions, or leave --limit out for all of them");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let out = a.out.clone().unwrap_or_else(|| PathBuf::from("reports").join(format!("{}-eval-gsm8k", super::run::utc_stamp(now))));
    let rec = match a.server.server() {
        Server::Engine(flags) => engine_record(a, flags, meta, &out)?,
        Server::Url(url) => match url_record(a, url, meta, &out)? {
            Some(r) => r,
            None => return Ok(ExitCode::from(130)),
        },
    };
    let g = gate::check_eval(&rec, &rec.meta.label(), &thr, None);
    crate::report::eval::write_pages(&out, &rec, Some(&g)).map_err(|e| anyhow::anyhow!("{}: {e}", out.display()))?;
    crate::outln!("{}", summary_line(&rec));
    let verdict = match (g.applicable, g.check.passed) {
        (false, _) => "N/A",
        (true, true) => "PASS",
        (true, false) => "FAIL",
    };
    if rec.status == EvalStatus::Interrupted {
        crate::outln!("gate: not judged, the eval was interrupted (run it again with the same --out to resume)");
    } else {
        crate::outln!("gate {verdict}: {} (thresholds: {thr_source})", g.check.detail);
    }
    crate::outln!("wrote {}", out.display());
    Ok(match rec.status {
        EvalStatus::Interrupted => ExitCode::from(130),
        EvalStatus::Failed => ExitCode::FAILURE,
        _ if a.gate && !g.check.passed => ExitCode::FAILURE,
        _ => ExitCode::SUCCESS,
    })
}

/// The one-line summary of an eval.
pub fn summary_line(r: &EvalRecord) -> String {
    let se = |x: Option<f64>| x.map(|s| format!(" ± {s:.4}")).unwrap_or_default();
    match r.status {
        EvalStatus::Done => format!(
            "gsm8k: em_strict {:.4}{}, em_flexible {:.4}{}, n={}{} ({}, model {}, infrastructure_success: {})",
            r.em_strict.unwrap_or(f64::NAN),
            se(r.em_strict_stderr),
            r.em_flexible.unwrap_or(f64::NAN),
            se(r.em_flexible_stderr),
            r.n,
            r.limit.map(|l| format!(" (limited to the first {l})")).unwrap_or_default(),
            r.result_kind,
            r.model.as_deref().unwrap_or("?"),
            r.infrastructure_success
        ),
        _ => format!("gsm8k: {}; no score (n={} answered)", r.status_text(), r.n),
    }
}

/// The eval's settings from the command line (`base_url` empty for `--engine`).
fn config(a: &Args, url: &str, meta: Meta, out: &Path) -> anyhow::Result<EvalConfig> {
    let mut cfg = EvalConfig::new(url, out);
    cfg.model = a.model.clone();
    cfg.concurrency = a.concurrency;
    cfg.limit = a.limit;
    cfg.max_model_len = a.max_model_len;
    cfg.meta = meta;
    cfg.ready_timeout = seconds("--ready-timeout", a.ready_timeout)?;
    cfg.request_timeout = seconds("--request-timeout", a.request_timeout)?;
    cfg.image = a.image.clone();
    Ok(cfg)
}

/// `--engine`: the reference engine answers no math; the eval is recorded, not run.
fn engine_record(a: &Args, flags: &str, meta: Meta, out: &Path) -> anyhow::Result<EvalRecord> {
    let argv = super::replay::shell_split(flags)?;
    let mut cfg = config(a, "", meta, out)?;
    cfg.model = a.model.clone().or_else(|| engine_model(&argv));
    let d = data::locate(a.gsm8k.as_deref())?;
    Ok(runner::record_simulated(&cfg, &d, "sweep reference engine (simulated, virtual clock)")?)
}

/// `--url`: the eval against the server; `None` when interrupted before anything was recorded.
fn url_record(a: &Args, url: &str, meta: Meta, out: &Path) -> anyhow::Result<Option<EvalRecord>> {
    let d = data::locate(a.gsm8k.as_deref())?;
    let cfg = config(a, url, meta, out)?;
    let interrupt = Arc::new(AtomicBool::new(false));
    super::install_interrupt(interrupt.clone(), "stopping the eval; the answers so far stay in samples.jsonl and a re-run resumes");
    let mut bar = Bar::new();
    let r = runner::run_blocking(&cfg, &d, &interrupt, |p| bar.show(p));
    bar.bar.finish_and_clear();
    match r {
        Ok(rec) => Ok(Some(rec)),
        Err(e) if interrupt.load(std::sync::atomic::Ordering::SeqCst) => {
            eprintln!("interrupted before the eval started: {e}");
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_settings_are_checked_and_typed() {
        let m = apply_meta(Meta::default(), &["hw=b200".into(), "tp=8".into(), "dp_attention=true".into(), "isl=8192".into()]).unwrap();
        assert_eq!((m.hw.as_str(), m.tp, m.dp_attention, m.isl.as_str()), ("b200", 8, true, "8192"));
        let e = apply_meta(Meta::default(), &["hwx=b200".into()]).unwrap_err().to_string();
        assert!(e.contains("--meta hwx") && e.contains("did you mean `hw`"), "{e}");
        assert!(apply_meta(Meta::default(), &["tp=eight".into()]).unwrap_err().to_string().contains("whole number"));
        assert!(apply_meta(Meta::default(), &["tp".into()]).unwrap_err().to_string().contains("KEY=VALUE"));
    }

    #[test]
    fn the_served_model_is_read_from_engine_flags() {
        let argv = |s: &str| s.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        assert_eq!(engine_model(&argv("--model-path a/b --tp 8")).as_deref(), Some("a/b"));
        assert_eq!(engine_model(&argv("--model-path a/b --served-model-name=c")).as_deref(), Some("c"));
        assert_eq!(engine_model(&argv("--tp 8")), None);
    }
}
