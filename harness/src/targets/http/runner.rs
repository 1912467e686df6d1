//! Plan points run against a server over HTTP: an existing one, or one started per point.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::{HttpTarget, replay};
use crate::metrics::PointContext;
use crate::results::Status;
use crate::run::launcher::{Server, free_port};
use crate::run::{Job, Outcome as PointOutcome, PointRunner};

/// Runs plan points against a server over HTTP: an existing one (`url`) or one started per
/// point from its resolved command (`local`).
pub struct HttpRunner {
    /// `Some(url)`: an existing server; `None`: start each point's command.
    pub url: Option<String>,
    /// Replace the recipe's program with `sweep engine serve` (the reference engine's live twin).
    pub engine_twin: bool,
    /// The trace set each point replays.
    pub pools: Arc<crate::targets::pools::PointPools>,
    pub duration_s: Option<f64>,
    pub health_timeout: Duration,
    /// Profiles of the reference engine when `engine_twin` (default: from the point's runner and model).
    pub profiles: crate::targets::sim::ProfileChoice,
    /// Synthesis tokenizer (`tokenizer.json`); default: what the server reports, see [`HttpTarget::identify`].
    pub tokenizer: Option<std::path::PathBuf>,
}

impl HttpRunner {
    /// Replays a point against `base_url`; `worker_url` is the server itself when `base_url` is a
    /// router in front of it (its `/server_info` identifies the engine).
    fn live(&self, job: &Job, base_url: &str, worker_url: &str, mut alive: impl FnMut() -> Result<(), String>) -> PointOutcome {
        let p = &job.point;
        let mut ctx = PointContext {
            identity: crate::run::identity(p),
            num_gpus: p.gpus.max(1),
            result_kind: "measured".into(),
            profiles: Value::Null,
            target: base_url.to_string(),
            seed: job.seed,
            concurrency: p.conc,
            profile_duration_s: 0.0,
            ..Default::default()
        };
        // One thread for the I/O (synthesis runs on the blocking pool): cross-thread wake-ups for
        // every streamed chunk cost about 40 % of the client's CPU.
        let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(r) => r,
            Err(e) => return PointOutcome { status: Status::Failed { reason: format!("runtime: {e}") }, records: Vec::new(), ctx },
        };
        let mut cfg = crate::targets::sim::workload_config(p, job.seed, self.duration_s);
        cfg.run_id = crate::workload::random_benchmark_id();
        ctx.benchmark_id = cfg.run_id.clone();
        let res = rt.block_on(async {
            let mut t = HttpTarget::new(base_url, "")?;
            t.identify(&mut ctx, self.tokenizer.as_deref(), worker_url).await?;
            let set = self.pools.pool_for(p)?;
            ctx.trace_set = set.trace_set.clone();
            let mut wl = t.workload(cfg, &set.plans, &mut ctx)?;
            // Behind a router the engine's metrics are the worker's.
            let w = worker_url.trim_end_matches('/').to_string();
            if !t.metrics_urls.contains(&w) {
                t.metrics_urls.push(w);
            }
            Ok::<_, String>(replay(&t, &mut wl, &job.cancel, &mut alive, |_| {}).await)
        });
        let run = match res {
            Ok(r) => r,
            Err(e) => return PointOutcome { status: Status::Failed { reason: e }, records: Vec::new(), ctx },
        };
        if let Some(export) = run.fill(&mut ctx)
            && let Err(e) = crate::results::write_json(&job.dir.join("server_metrics_export.json"), &export)
        {
            tracing::warn!("server_metrics_export.json: {e}");
        }
        let status = if let Some(s) = &run.stopped {
            Status::Failed { reason: s.clone() }
        } else {
            crate::targets::point_status(run.interrupted, run.outcome.as_ref(), &mut ctx, "the workload stopped before finishing")
        };
        PointOutcome { status, records: run.records, ctx }
    }
}

impl PointRunner for HttpRunner {
    fn max_parallel(&self) -> usize {
        1
    }

    fn run(&self, job: &Job) -> PointOutcome {
        if let Some(url) = &self.url {
            return self.live(job, url, url, || Ok(()));
        }
        let failed = |reason: String| PointOutcome {
            status: Status::Failed { reason },
            records: Vec::new(),
            ctx: PointContext { identity: crate::run::identity(&job.point), num_gpus: job.point.gpus.max(1), ..Default::default() },
        };
        let Some(launch) = &job.point.launch else { return failed("point has no resolved server command".into()) };
        if let Err(e) = std::fs::create_dir_all(&job.dir) {
            return failed(format!("{}: {e}", job.dir.display()));
        }
        let argv = match self.worker_argv(job, launch) {
            Ok(a) => a,
            Err(e) => return failed(e),
        };
        let env: Vec<(String, String)> = launch.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        let mut worker = match start_healthy(argv, &env, &job.dir.join("server.log"), self.health_timeout, &job.cancel) {
            Ok(s) => s,
            Err(e) => return failed(e),
        };
        // A real recipe's router goes in front of the worker (`<worker>` is the worker's URL); the
        // reference engine models the router in process instead (`--router-args`).
        let mut router = None;
        if let Some(r) = launch.router_argv.as_ref().filter(|_| !self.engine_twin) {
            let argv = r.iter().map(|a| a.replace("<worker>", &worker.base_url)).collect();
            let env: Vec<(String, String)> = launch.router_env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            match start_healthy(argv, &env, &job.dir.join("router.log"), self.health_timeout, &job.cancel) {
                Ok(s) => router = Some(s),
                Err(e) => {
                    worker.stop(Duration::from_secs(5));
                    return failed(format!("router: {e}"));
                }
            }
        }
        let base = router.as_ref().unwrap_or(&worker).base_url.clone();
        let worker_url = worker.base_url.clone();
        let procs = std::sync::Mutex::new((worker, router));
        let out = self.live(job, &base, &worker_url, || {
            let mut g = procs.lock().expect("lock");
            g.0.alive()?;
            match g.1.as_mut() {
                Some(r) => r.alive().map_err(|e| format!("router: {e}")),
                None => Ok(()),
            }
        });
        let (mut worker, router) = procs.into_inner().expect("lock");
        if let Some(mut r) = router {
            r.stop(Duration::from_secs(10));
        }
        worker.stop(Duration::from_secs(10));
        out
    }
}

impl HttpRunner {
    /// The worker's argv: the recipe's command, or the same flags served by `sweep engine serve`
    /// with the point's hardware and model profiles and the recipe's router flags.
    fn worker_argv(&self, job: &Job, launch: &crate::recipe::serving::Launch) -> Result<Vec<String>, String> {
        let mut argv = launch.worker_argv.clone();
        if self.engine_twin {
            let flags_at = argv.iter().position(|a| a.starts_with("--")).unwrap_or(argv.len());
            let exe = std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_else(|_| "sweep".into());
            argv.splice(..flags_at, [exe, "engine".into(), "serve".into()]);
            let hardware = match (&self.profiles.hardware, job.point.row.get("runner").and_then(Value::as_str)) {
                (Some(h), _) => h.clone(),
                // The same best profile the virtual clock would use for this model.
                (None, Some(r)) => {
                    crate::targets::sim::best_for_runner(r, crate::targets::pools::point_model(&job.point).as_ref())
                        .map_err(|e| e.to_string())?
                        .name
                }
                (None, None) => return Err("no hardware: the point has no `runner`; pass --hardware NAME".into()),
            };
            argv.push(format!("--hardware={hardware}"));
            if let Some(m) = &self.profiles.model {
                argv.push(format!("--engine-model={m}"));
            }
            if let Some(r) = &launch.router_argv {
                argv.push(format!("--router-args={}", crate::targets::sim::flags_only(r).join(" ")));
            }
        }
        Ok(argv)
    }
}

/// Starts a server on a free loopback port (`--host`/`--port` appended) and waits for `/health`.
fn start_healthy(
    mut argv: Vec<String>,
    env: &[(String, String)],
    log: &std::path::Path,
    timeout: Duration,
    cancel: &Arc<std::sync::atomic::AtomicBool>,
) -> Result<Server, String> {
    let port = free_port().map_err(|e| format!("no free port: {e}"))?;
    argv.extend(["--host".into(), "127.0.0.1".into(), "--port".into(), port.to_string()]);
    let mut server = Server::start(&argv, env, log, format!("http://127.0.0.1:{port}")).map_err(|e| e.to_string())?;
    if let Err(e) = server.wait_healthy(timeout, log, cancel) {
        server.stop(Duration::from_secs(5));
        return Err(e.to_string());
    }
    Ok(server)
}
