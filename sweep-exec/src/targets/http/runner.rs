//! Plan points run against a server over HTTP: an existing one, or the point's own, launched for
//! it by the run (`run::launcher`); here it is only driven.

use std::sync::Arc;

use serde_json::Value;

use super::{HttpError, HttpTarget, replay};
use crate::metrics::PointContext;
use crate::results::Status;
use crate::run::launcher::{Endpoint, LaunchError};
use crate::run::{EvalJob, EvalOutcome, Job, Outcome as PointOutcome, PointRunner};
use crate::targets::gpu_monitor::{Monitor, is_loopback};

/// Runs plan points against a server over HTTP: an existing one, or the point's own, started by
/// its [`PointLauncher`](crate::run::launcher::PointLauncher).
pub struct HttpRunner {
    /// Where each point's server is.
    pub endpoint: Endpoint,
    /// The trace set each point replays.
    pub pools: Arc<crate::targets::pools::PointPools>,
    pub duration_s: Option<f64>,
    /// The client's flags (tokenizer, timeouts, readiness, dialect); a point's recipe
    /// `client-args` apply under them.
    pub client: super::ClientOptions,
    /// Launched servers an eval of the same server config runs on next.
    pub warm: WarmServers,
}

/// The throughput points whose launched server stays up for an eval, and the one kept.
#[derive(Default)]
pub struct WarmServers {
    keep_after: std::sync::Mutex<Vec<String>>,
    kept: std::sync::Mutex<Option<(Option<crate::recipe::serving::Launch>, crate::run::launcher::PointServers)>>,
}

impl WarmServers {
    /// The kept server when it serves `launch`; any other kept server is stopped (one server
    /// holds the GPUs at a time).
    fn take_for(&self, launch: &Option<crate::recipe::serving::Launch>) -> Option<crate::run::launcher::PointServers> {
        let kept = self.kept.lock().expect("lock").take()?;
        if &kept.0 == launch {
            return Some(kept.1);
        }
        kept.1.stop();
        None
    }
}

impl HttpRunner {
    /// Replays a point against `base_url`; `worker_url` is the server itself when `base_url` is a
    /// router in front of it (its `/server_info` identifies the engine).
    fn live(
        &self,
        job: &Job,
        base_url: &str,
        worker_url: &str,
        launched: bool,
        mut alive: impl FnMut() -> Result<(), LaunchError>,
    ) -> PointOutcome {
        let p = &job.point;
        let monitor = Monitor::start(self.client.gpu_monitor, launched || is_loopback(worker_url), &job.dir);
        let cpu0 = crate::targets::scrape::process_cpu_seconds();
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
            Err(e) => {
                return PointOutcome { status: Status::Failed { reason: HttpError::Runtime(e).to_string() }, records: Vec::new(), ctx };
            }
        };
        let mut cfg = crate::targets::sim::workload_config(p, job.seed, self.duration_s);
        cfg.run_id = crate::workload::random_benchmark_id();
        ctx.benchmark_id = cfg.run_id.clone();
        let recipe_args = p.launch.as_ref().map(|l| l.client_args.as_slice()).unwrap_or_default();
        let opts = match self.client.for_point(recipe_args) {
            Ok(o) => o,
            Err(e) => return PointOutcome { status: Status::Failed { reason: e.to_string() }, records: Vec::new(), ctx },
        };
        let res = rt.block_on(async {
            let mut t = HttpTarget::connect(base_url, worker_url, &opts, &mut ctx).await?;
            let mut wl: Box<dyn crate::workload::Machine> = match crate::targets::fixed::point_config(p) {
                Some(fixed) => Box::new(t.fixed_workload(fixed.map_err(HttpError::Fixed)?, &mut ctx)?),
                None => {
                    let set = self.pools.pool_for(p)?;
                    ctx.trace_set = set.trace_set.clone();
                    Box::new(t.workload(cfg, &set.plans, &mut ctx)?)
                }
            };
            // Behind a router the engine's metrics are the worker's.
            let w = worker_url.trim_end_matches('/').to_string();
            if !t.metrics_urls.contains(&w) {
                t.metrics_urls.push(w);
            }
            // A line a minute: `sweep run` prints a line per finished point, and a live point is long.
            let mut lines = crate::targets::ledger::ProgressLines::new(p.id.clone(), std::time::Duration::from_secs(60));
            let (t0, scale) = (std::time::Instant::now(), t.time_scale);
            Ok::<_, HttpError>(
                replay(&t, wl.as_mut(), &job.cancel, &mut alive, |pr| {
                    lines.update(pr, t0.elapsed().as_secs_f64() * scale);
                })
                .await,
            )
        });
        let run = match res {
            Ok(r) => r,
            Err(e) => return PointOutcome { status: Status::Failed { reason: e.to_string() }, records: Vec::new(), ctx },
        };
        let scale = ctx.profiles["time_scale"].as_f64().unwrap_or(1.0);
        ctx.power = monitor.finish(ctx.result_kind == "predicted", scale);
        let export = run.fill(&mut ctx);
        // The point's share of the process from its start: connecting, compiling its traces, the loop.
        ctx.client_cpu_seconds = Some(crate::targets::scrape::process_cpu_seconds() - cpu0);
        if let Some(export) = export
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

impl HttpRunner {
    /// gsm8k against `base_url`, files into the eval's folder.
    fn eval(&self, job: &EvalJob, base_url: &str) -> EvalOutcome {
        crate::eval::point::run(job, base_url)
    }
}

impl PointRunner for HttpRunner {
    fn max_parallel(&self) -> usize {
        1
    }

    fn run(&self, job: &Job) -> PointOutcome {
        let launcher = match &self.endpoint {
            Endpoint::Url(url) => return self.live(job, url, url, false, || Ok(())),
            Endpoint::Launch(l) => l,
        };
        let mut servers = match launcher.launch(job) {
            Ok(s) => s,
            Err(e) => {
                return PointOutcome {
                    status: Status::Failed { reason: e.to_string() },
                    records: Vec::new(),
                    ctx: PointContext { identity: crate::run::identity(&job.point), num_gpus: job.point.gpus.max(1), ..Default::default() },
                };
            }
        };
        let (base, worker) = (servers.base_url().to_string(), servers.worker_url().to_string());
        let out = self.live(job, &base, &worker, true, || servers.alive());
        if self.warm.keep_after.lock().expect("lock").contains(&job.point.id) && out.status == crate::results::Status::Done {
            // An eval of this server config runs next, on this server.
            *self.warm.kept.lock().expect("lock") = Some((job.point.launch.clone(), servers));
        } else {
            servers.stop();
        }
        out
    }

    fn keep_server_after(&self, point_ids: &[String]) {
        self.warm.keep_after.lock().expect("lock").extend(point_ids.iter().cloned());
    }

    fn run_eval(&self, job: &EvalJob) -> EvalOutcome {
        let launcher = match &self.endpoint {
            Endpoint::Url(url) => return self.eval(job, url),
            Endpoint::Launch(l) => l,
        };
        let servers = match self.warm.take_for(&job.point.launch) {
            Some(s) => s,
            None => {
                let as_point = Job { point: job.point.clone(), dir: job.dir.clone(), cancel: job.cancel.clone(), seed: 0, turn: None };
                match launcher.launch(&as_point) {
                    Ok(s) => s,
                    Err(e) => return EvalOutcome { status: Status::Failed { reason: e.to_string() }, detail: None },
                }
            }
        };
        let out = self.eval(job, servers.base_url());
        servers.stop();
        out
    }
}
