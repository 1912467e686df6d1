//! Executing a plan: the selected points, the canary, each matrix's points on worker threads with
//! matrix-scoped fail-fast, and every point's files and the run summary written as they finish.

use super::identity::RunIdentity;
use super::{EvalJob, Job, Outcome, PointRunner, RunError, RunOptions, StartOrder, Turn, finalize, pending};
use crate::metrics;
use crate::noise::{self, SeedSample};
use crate::pareto::Samples;
use crate::plan::{Plan, PlanPoint};
use crate::records;
use crate::results::{EvalPointResult, PointResult, RunSummary, Status, point_dir, write_json};
use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Runs the plan's throughput points, then each eval point after the throughput points of its
/// server config (on the same server where the runner launches them), the rest at the end;
/// `interrupt` is the Ctrl-C flag.
pub fn execute(plan: &Plan, opts: &RunOptions, runner: &dyn PointRunner, interrupt: &Arc<AtomicBool>) -> Result<RunSummary, RunError> {
    if let Some(id) = &opts.identity {
        if opts.resume
            && let Some(old) = RunIdentity::load(&opts.out)?
        {
            old.check(id, &opts.out)?;
        }
        std::fs::create_dir_all(&opts.out).map_err(RunError::io(&opts.out))?;
        let path = RunIdentity::path(&opts.out);
        write_json(&path, id).map_err(RunError::io(&path))?;
    }
    std::fs::create_dir_all(&opts.out).map_err(RunError::io(&opts.out))?;
    let plan_json = opts.out.join("plan.json");
    write_json(&plan_json, plan).map_err(RunError::io(&plan_json))?;
    let sel = Selection::of(plan, opts)?;
    let run = Execution::start(opts, runner, interrupt, &sel);
    runner.keep_server_after(&sel.eval_after.keys().cloned().collect::<Vec<_>>());
    run.save()?;
    let canary_failed = match sel.canary {
        Some(c) => run.canary(c)?,
        None => None,
    };
    if let Some(reason) = canary_failed {
        // A failed canary blocks every matrix, the evals' too.
        run.mark_pending(&mut sel.order.iter(), Status::Cancelled { reason: reason.clone() });
        run.cancel_evals(&reason);
    } else if runner.matrices_at_once() {
        // A batch scheduler queues every matrix at once; fail-fast stays per matrix.
        let results: Vec<Result<(), RunError>> = std::thread::scope(|s| {
            let hs: Vec<_> = sel.matrices.iter().map(|m| s.spawn(|| run.matrix(m))).collect();
            hs.into_iter().map(|h| h.join().unwrap_or(Err(RunError::MatrixPanicked))).collect()
        });
        results.into_iter().collect::<Result<(), RunError>>()?;
    } else {
        for m in &sel.matrices {
            if interrupt.load(Ordering::Relaxed) {
                break;
            }
            run.matrix(m)?;
        }
    }
    if !interrupt.load(Ordering::Relaxed) {
        // Evals whose throughput twin did not run here (evals-only sweeps, another server
        // config, a cancelled point) run last, each on its own server.
        for e in &sel.evals {
            if interrupt.load(Ordering::Relaxed) {
                break;
            }
            run.run_eval(e)?;
        }
    }
    let summary = run.save()?;
    let samples = run.samples.lock().expect("lock").clone();
    finalize(summary, &samples, &opts.out)
}

/// One matrix's selected points.
struct Matrix<'p> {
    name: String,
    fail_fast: bool,
    points: Vec<&'p PlanPoint>,
}

/// The points this run covers (`--only`), in plan order: the canary, then each matrix's, then
/// the evals.
struct Selection<'p> {
    canary: Option<&'p PlanPoint>,
    matrices: Vec<Matrix<'p>>,
    /// Every selected throughput point's id, in plan order.
    order: Vec<String>,
    /// Selected eval points, in plan order.
    evals: Vec<&'p PlanPoint>,
    /// Evals that run right after a throughput point, on its server: the last selected
    /// throughput point of the same config and server launch.
    eval_after: BTreeMap<String, Vec<&'p PlanPoint>>,
}

impl<'p> Selection<'p> {
    fn of(plan: &'p Plan, opts: &RunOptions) -> Result<Self, RunError> {
        let selected = |p: &PlanPoint| opts.only.is_empty() || opts.only.iter().any(|o| o == &p.id);
        let canary = plan.canary.as_ref().filter(|p| selected(p));
        let matrices: Vec<Matrix> = plan
            .matrices
            .iter()
            .map(|m| Matrix { name: m.name.clone(), fail_fast: m.fail_fast, points: m.points.iter().filter(|p| selected(p)).collect() })
            .filter(|m| !m.points.is_empty())
            .collect();
        let order =
            canary.iter().map(|p| p.id.clone()).chain(matrices.iter().flat_map(|m| m.points.iter().map(|p| p.id.clone()))).collect();
        for id in &opts.only {
            if !plan.points().any(|p| &p.id == id) {
                return Err(RunError::UnknownPoint { id: id.clone() });
            }
        }
        let evals: Vec<&PlanPoint> = plan.evals.iter().flat_map(|m| m.points.iter()).filter(|p| selected(p)).collect();
        let throughput: Vec<&PlanPoint> = canary.into_iter().chain(matrices.iter().flat_map(|m| m.points.iter().copied())).collect();
        let mut eval_after: BTreeMap<String, Vec<&PlanPoint>> = BTreeMap::new();
        for e in &evals {
            if let Some(t) = throughput.iter().rev().find(|t| t.config_key == e.config_key && same_server(t, e)) {
                eval_after.entry(t.id.clone()).or_default().push(e);
            }
        }
        Ok(Selection { canary, matrices, order, evals, eval_after })
    }

    fn points(&self) -> impl Iterator<Item = &'p PlanPoint> + '_ {
        self.canary.into_iter().chain(self.matrices.iter().flat_map(|m| m.points.iter().copied()))
    }
}

/// Whether two points are served by the same server: the same resolved launch (worker and
/// router commands and environment). Points without a serving recipe never share.
fn same_server(a: &PlanPoint, b: &PlanPoint) -> bool {
    a.launch.is_some() && a.launch == b.launch
}

/// Shared state of one execution: every selected point's result so far and its samples.
struct Execution<'a> {
    opts: &'a RunOptions,
    runner: &'a dyn PointRunner,
    interrupt: &'a Arc<AtomicBool>,
    order: &'a [String],
    sel: &'a Selection<'a>,
    results: Mutex<BTreeMap<String, PointResult>>,
    evals: Mutex<BTreeMap<String, EvalPointResult>>,
    samples: Mutex<BTreeMap<String, Samples>>,
    /// Points finished so far (for the progress lines).
    done_count: AtomicUsize,
    start_order: Arc<StartOrder>,
}

/// A matrix in progress: its queue, its fail-fast flag, and what stopped it.
struct MatrixState<'p> {
    queue: Mutex<VecDeque<&'p PlanPoint>>,
    cancel: Arc<AtomicBool>,
    first_failure: Mutex<Option<String>>,
    error: Mutex<Option<RunError>>,
}

impl<'a> Execution<'a> {
    /// Every selected point pending, or finished already in `out` with `--resume`.
    fn start(opts: &'a RunOptions, runner: &'a dyn PointRunner, interrupt: &'a Arc<AtomicBool>, sel: &'a Selection) -> Self {
        let mut results = BTreeMap::new();
        let mut samples = BTreeMap::new();
        for p in sel.points() {
            let mut res = pending(p);
            if opts.resume
                && let Some((done, s)) = load_finished(&point_dir(&opts.out, &p.id), p.gpus)
            {
                res = done;
                samples.insert(p.id.clone(), s);
            }
            results.insert(p.id.clone(), res);
        }
        let mut evals = BTreeMap::new();
        for e in &sel.evals {
            let done = if opts.resume { load_finished_eval(&point_dir(&opts.out, &e.id)) } else { None };
            evals.insert(e.id.clone(), done.unwrap_or_else(|| pending_eval(e)));
        }
        Execution {
            opts,
            runner,
            interrupt,
            order: &sel.order,
            sel,
            results: Mutex::new(results),
            evals: Mutex::new(evals),
            samples: Mutex::new(samples),
            done_count: AtomicUsize::new(0),
            start_order: Arc::new(StartOrder::default()),
        }
    }

    /// Runs the canary; why the run stops, when it failed.
    fn canary(&self, c: &PlanPoint) -> Result<Option<String>, RunError> {
        if self.run_one(c, self.interrupt.clone(), self.start_order.take())? {
            return Ok(None);
        }
        let reason = match &self.results.lock().expect("lock")[&c.id].status {
            // An interrupted canary failed nothing: the points after it stay pending (a resume
            // runs them), the interrupt stops the run.
            Status::Interrupted { .. } => return Ok(None),
            Status::Failed { reason } => reason.clone(),
            other => format!("{other:?}"),
        };
        Ok(Some(format!("canary {} failed: {reason}", c.id)))
    }

    /// Runs a point unless it is finished already, records its result and the run summary;
    /// whether it succeeded.
    fn run_one(&self, p: &PlanPoint, cancel: Arc<AtomicBool>, turn: Turn) -> Result<bool, RunError> {
        if self.results.lock().expect("lock")[&p.id].status == Status::Done {
            return Ok(true);
        }
        let job = Job { point: p.clone(), dir: point_dir(&self.opts.out, &p.id), cancel, seed: self.opts.seed, turn: Some(turn) };
        let (mut res, samples) = self.runner.run_point(&job)?;
        if let Some(s) = &samples
            && res.ok()
            && self.opts.seed_replicates > 0
        {
            let j_out = res.summary.as_ref().and_then(|s| s.power.as_ref()).map(|p| p.joules_per_output_token);
            res.seeds = self.seed_samples(&job, s, j_out);
            write_in(&job.dir, "status.json", &res)?;
        }
        let ok = res.ok();
        if self.opts.verbose {
            self.print_finished(p, &res);
        }
        if let Some(s) = samples {
            self.samples.lock().expect("lock").insert(p.id.clone(), s);
        }
        self.results.lock().expect("lock").insert(p.id.clone(), res);
        self.save()?;
        if let Some(evals) = self.sel.eval_after.get(&p.id) {
            for e in evals {
                if self.interrupt.load(Ordering::Relaxed) {
                    break;
                }
                self.run_eval(e)?;
            }
        }
        Ok(ok)
    }

    /// Runs an eval point unless it has run already (here, or before with `--resume`).
    fn run_eval(&self, e: &PlanPoint) -> Result<(), RunError> {
        if self.evals.lock().expect("lock").get(&e.id).is_some_and(|r| r.status != Status::Pending) {
            return Ok(());
        }
        let dir = point_dir(&self.opts.out, &e.id);
        std::fs::create_dir_all(&dir).map_err(RunError::io(&dir))?;
        let job = EvalJob { point: e.clone(), dir: dir.clone(), cancel: self.interrupt.clone(), limit: self.opts.eval_limit };
        let t0 = std::time::Instant::now();
        let out = self.runner.run_eval(&job);
        let mut res = pending_eval(e);
        res.status = match out.status {
            Status::Failed { .. } if self.interrupt.load(Ordering::Relaxed) => {
                Status::Interrupted { reason: "interrupted (Ctrl-C or SIGTERM); --resume continues from its logged samples".into() }
            }
            s => s,
        };
        res.detail = out.detail;
        res.wall_s = t0.elapsed().as_secs_f64();
        write_in(&dir, "status.json", &res)?;
        if self.opts.verbose {
            self.progress(&e.id, &res.describe(), res.wall_s);
        }
        self.evals.lock().expect("lock").insert(e.id.clone(), res);
        self.save()?;
        Ok(())
    }

    /// Every eval not run yet is cancelled with `reason`.
    fn cancel_evals(&self, reason: &str) {
        for r in self.evals.lock().expect("lock").values_mut() {
            if r.status == Status::Pending {
                r.status = Status::Cancelled { reason: reason.to_string() };
            }
        }
    }

    /// Points (throughput and eval) this run covers.
    fn total(&self) -> usize {
        self.order.len() + self.sel.evals.len()
    }

    /// The point's metrics under the run's seed and each gate seed it could be replayed with;
    /// a replicate that does not finish (interrupt, fail-fast, a failure) is left out.
    fn seed_samples(&self, job: &Job, primary: &Samples, j_out: Option<f64>) -> Vec<SeedSample> {
        let (y, x) = primary.estimate();
        let mut out = vec![noise::sample(job.seed, y, &x, j_out)];
        for seed in noise::replicate_seeds(job.seed, self.opts.seed_replicates) {
            if job.cancel.load(Ordering::Relaxed) || self.interrupt.load(Ordering::Relaxed) {
                break;
            }
            let Some(o) = self.runner.replicate(job, seed) else { break };
            if o.status == Status::Done {
                let (y, x) = Samples::from_records(&o.records, job.point.gpus).estimate();
                out.push(noise::sample(seed, y, &x, joules_per_output_token(&o)));
            }
        }
        out
    }

    /// The progress line of a finished point.
    fn print_finished(&self, p: &PlanPoint, res: &PointResult) {
        let detail = match (&res.status, &res.summary) {
            (Status::Done, Some(s)) => format!(
                "{:>9} tok/s/GPU  P90 intvty {:>7.1}  TTFT p90 {:.2} s",
                crate::gate::fmt_num(s.tput_per_gpu),
                s.intvty_p90,
                s.ttft.p90
            ),
            (st, _) => format!("{st:?}"),
        };
        self.progress(&p.id, &detail, res.wall_s);
    }

    /// One progress line, its columns aligned over the whole run: the counter padded to the
    /// total's width, the id to the longest selected id's.
    fn progress(&self, id: &str, detail: &str, wall_s: f64) {
        let n = self.done_count.fetch_add(1, Ordering::Relaxed) + 1;
        let total = self.total();
        let id_w = self.order.iter().map(String::len).chain(self.sel.evals.iter().map(|e| e.id.len())).max().unwrap_or(0);
        let counter = format!("[{n:>w$}/{total}]", w = total.to_string().len());
        tracing::info!(target: crate::PROGRESS, "{counter} {id:<id_w$}  {detail}  ({wall_s:.1} s)");
    }

    /// Runs a matrix's points on up to the runner's parallelism of threads; a failure in a
    /// fail-fast matrix cancels the rest of it.
    fn matrix(&self, m: &Matrix) -> Result<(), RunError> {
        let state = MatrixState {
            queue: Mutex::new(m.points.iter().copied().collect()),
            cancel: Arc::new(AtomicBool::new(false)),
            first_failure: Mutex::new(None),
            error: Mutex::new(None),
        };
        let workers = self.runner.max_parallel().max(1).min(m.points.len());
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(|| self.matrix_worker(m, &state));
            }
        });
        if let Some(e) = state.error.into_inner().expect("lock") {
            return Err(e);
        }
        if let Some(f) = state.first_failure.into_inner().expect("lock") {
            self.cancel_after_failure(m, &f);
        }
        self.save()?;
        Ok(())
    }

    /// One worker thread of a matrix: points from its queue until it is empty, cancelled or
    /// interrupted.
    fn matrix_worker(&self, m: &Matrix, state: &MatrixState) {
        loop {
            if self.interrupt.load(Ordering::Relaxed) || state.cancel.load(Ordering::Relaxed) {
                break;
            }
            let (p, turn) = {
                let mut q = state.queue.lock().expect("lock");
                let Some(p) = q.pop_front() else { break };
                (p, self.start_order.take())
            };
            match self.run_watched(p, turn, &state.cancel) {
                Ok(true) => {}
                // A point the user stopped is not a failure of the matrix.
                Ok(false) if self.interrupt.load(Ordering::Relaxed) => {}
                Ok(false) => {
                    if m.fail_fast {
                        state.first_failure.lock().expect("lock").get_or_insert_with(|| p.id.clone());
                        state.cancel.store(true, Ordering::Relaxed);
                    }
                }
                Err(e) => {
                    *state.error.lock().expect("lock") = Some(e);
                    state.cancel.store(true, Ordering::Relaxed);
                }
            }
        }
    }

    /// Runs a point whose cancel flag a watcher raises on the matrix's fail-fast or Ctrl-C.
    fn run_watched(&self, p: &PlanPoint, turn: Turn, matrix_cancel: &Arc<AtomicBool>) -> Result<bool, RunError> {
        let cancel = Arc::new(AtomicBool::new(false));
        let watcher_stop = Arc::new(AtomicBool::new(false));
        let (c2, mc, it, ws) = (cancel.clone(), matrix_cancel.clone(), self.interrupt.clone(), watcher_stop.clone());
        let watcher = std::thread::spawn(move || {
            while !ws.load(Ordering::Relaxed) {
                if mc.load(Ordering::Relaxed) || it.load(Ordering::Relaxed) {
                    c2.store(true, Ordering::Relaxed);
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        });
        let r = self.run_one(p, cancel, turn);
        watcher_stop.store(true, Ordering::Relaxed);
        let _ = watcher.join();
        r
    }

    /// After `failed` failed in a fail-fast matrix, its points not run, or stopped mid-run, are
    /// cancelled (not failed).
    fn cancel_after_failure(&self, m: &Matrix, failed: &str) {
        let reason = format!("fail-fast: {failed} failed in matrix {}", m.name);
        let mut r = self.results.lock().expect("lock");
        for p in &m.points {
            if let Some(x) = r.get_mut(&p.id)
                && p.id != failed
                && matches!(x.status, Status::Pending | Status::Interrupted { .. })
            {
                x.status = Status::Cancelled { reason: reason.clone() };
            }
        }
    }

    /// Gives the points of `ids` still pending `status`.
    fn mark_pending(&self, ids: &mut dyn Iterator<Item = &String>, status: Status) {
        let mut r = self.results.lock().expect("lock");
        for id in ids {
            if let Some(x) = r.get_mut(id)
                && x.status == Status::Pending
            {
                x.status = status.clone();
            }
        }
    }

    /// Writes `summary.json` with every result so far, in plan order.
    fn save(&self) -> Result<RunSummary, RunError> {
        let opts = self.opts;
        let results = self.results.lock().expect("lock");
        let points: Vec<PointResult> = self.order.iter().filter_map(|id| results.get(id).cloned()).collect();
        let evals_map = self.evals.lock().expect("lock");
        let evals: Vec<EvalPointResult> = self.sel.evals.iter().filter_map(|e| evals_map.get(&e.id).cloned()).collect();
        let s = RunSummary {
            run_id: opts.run_id.clone(),
            labels: opts.labels.clone(),
            target: opts.target.clone(),
            created_unix: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
            seed: opts.seed,
            replicates: opts.replicates,
            points,
            curves: Vec::new(),
            evals,
        };
        s.save(&opts.out).map_err(RunError::io(&opts.out))?;
        Ok(s)
    }
}

/// A replicate's GPU energy per output token, as its aggregate would give it: a prediction's
/// energy over its successful profiling requests' output tokens directly (a full aggregate per
/// replicate would double the main job's time), telemetry through the aggregate's integration.
fn joules_per_output_token(o: &Outcome) -> Option<f64> {
    match o.ctx.power.as_ref()? {
        crate::power::PointPower::Predicted { total_gpu_energy_j, .. } => {
            let out: u64 = o
                .records
                .iter()
                .filter(|r| r.phase == crate::records::RecordPhase::Profiling && r.ok())
                .filter_map(|r| r.output_tokens)
                .sum();
            (out > 0).then(|| total_gpu_energy_j / out as f64)
        }
        crate::power::PointPower::Measured { .. } => {
            metrics::aggregate(&o.records, &o.ctx).ok()?.1.power.map(|p| p.joules_per_output_token)
        }
    }
}

/// Loads a finished point (for `--resume`): its status and its per-request samples.
fn load_finished(dir: &Path, gpus: u32) -> Option<(PointResult, Samples)> {
    let st: PointResult = serde_json::from_str(&std::fs::read_to_string(dir.join("status.json")).ok()?).ok()?;
    if st.status != Status::Done {
        return None;
    }
    let recs = records::read_jsonl(&records::export_path(dir)?).ok()?;
    Some((st, Samples::from_records(&recs, gpus)))
}

/// An eval point that has not run.
fn pending_eval(e: &PlanPoint) -> EvalPointResult {
    EvalPointResult {
        id: e.id.clone(),
        config_key: e.config_key.clone(),
        arm: e.arm.clone(),
        conc: e.conc,
        matrix: e.matrix.clone(),
        status: Status::Pending,
        detail: None,
        wall_s: 0.0,
    }
}

/// An eval point that finished in an earlier invocation (`--resume`).
fn load_finished_eval(dir: &Path) -> Option<EvalPointResult> {
    let r: EvalPointResult = serde_json::from_str(&std::fs::read_to_string(dir.join("status.json")).ok()?).ok()?;
    (r.status == Status::Done).then_some(r)
}

/// Writes a point's files atomically; returns its result.
pub(super) fn finish_point(job: &Job, out: Outcome, wall_s: f64) -> Result<(PointResult, Option<Samples>), RunError> {
    let p = &job.point;
    std::fs::create_dir_all(&job.dir).map_err(RunError::io(&job.dir))?;
    let mut res = pending(p);
    res.wall_s = wall_s;
    res.result_kind = out.ctx.result_kind.clone();
    res.profiles = out.ctx.profiles.clone();
    res.trace_set = out.ctx.trace_set.clone();
    res.status = out.status;
    let mut samples = None;
    if !out.records.is_empty() {
        let path = job.dir.join(records::EXPORT_GZ);
        records::write_jsonl_gz(&path, &out.records).map_err(RunError::io(&path))?;
        // A plain export of an earlier attempt (a run resumed from before compression) would
        // be read instead of nothing, but never instead of this one: remove it.
        let _ = std::fs::remove_file(job.dir.join(records::EXPORT));
    }
    if let Some(sm) = &out.ctx.server_metrics {
        write_in(&job.dir, "server_metrics.json", sm)?;
    }
    if let Some(ts) = &out.ctx.timeseries {
        write_in(&job.dir, "timeseries.json", ts)?;
    }
    if res.status == Status::Done {
        let (agg, summary) =
            metrics::aggregate(&out.records, &out.ctx).map_err(|source| RunError::Aggregate { point: p.id.clone(), source })?;
        write_in(&job.dir, "agg.json", &agg)?;
        // A fixed-length point's result as benchmark_serving writes it, for InferenceX's collectors.
        if let Some(bs) = agg.get("benchmark_serving") {
            write_in(&job.dir, "benchmark_serving.json", bs)?;
        }
        if !summary.valid {
            res.status = Status::Failed { reason: format!("invalid aggregate: {}", summary.invalid_reasons.join(", ")) };
        }
        samples = Some(Samples::from_records(&out.records, p.gpus));
        res.summary = Some(summary);
    }
    write_in(&job.dir, "status.json", &res)?;
    Ok((res, samples))
}

/// Writes `v` as the JSON file `name` of the point's folder `dir`.
fn write_in<T: serde::Serialize>(dir: &Path, name: &str, v: &T) -> Result<(), RunError> {
    let path = dir.join(name);
    write_json(&path, v).map_err(RunError::io(&path))
}
