//! Executing a plan: canary first (its failure stops everything), then each matrix with
//! matrix-scoped fail-fast, points in parallel where the target allows, results written
//! atomically per point so an interrupted run stays consistent and `--resume` skips finished
//! points; then Pareto analysis with bootstrap uncertainty over every finished point.

pub mod collect;
pub mod launcher;
pub mod slurm;
pub mod twin;

use crate::metrics::{self, PointContext};
use crate::pareto::{self, Samples};
use crate::plan::{Plan, PlanPoint};
use crate::records::{self, Record};
use crate::results::{PointResult, RunSummary, Status, point_dir, write_json};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

/// One point to run.
pub struct Job {
    pub point: PlanPoint,
    pub dir: PathBuf,
    /// Set when the point must stop early (fail-fast of its matrix, Ctrl-C).
    pub cancel: Arc<AtomicBool>,
    pub seed: u64,
    /// The point's place in plan order, for runners that hand points to a queue elsewhere.
    pub turn: Option<Turn>,
}

/// Plan order across worker threads. A batch scheduler starts jobs in submission order, so a
/// runner that submits waits for its [`Turn`]: every point taken from the queue before it has
/// been submitted or has given up its turn. Otherwise the threads race to `sbatch` and a
/// low-concurrency point (or the one whose failure fail-fast is waiting for) can queue behind
/// points that hold the cluster for hours.
#[derive(Default)]
pub struct StartOrder {
    issued: AtomicU64,
    /// The next sequence number whose turn it is, and later ones already released out of order.
    state: Mutex<(u64, BTreeSet<u64>)>,
    cv: Condvar,
}

impl StartOrder {
    /// The next turn; taken in the same critical section as the point it orders.
    pub fn take(self: &Arc<Self>) -> Turn {
        Turn { order: self.clone(), seq: self.issued.fetch_add(1, Ordering::Relaxed), released: AtomicBool::new(false) }
    }
}

/// A point's place in a [`StartOrder`]; released when dropped if not before.
pub struct Turn {
    order: Arc<StartOrder>,
    seq: u64,
    released: AtomicBool,
}

impl Turn {
    /// Blocks until every earlier turn has been released.
    pub fn wait(&self) {
        let mut g = self.order.state.lock().unwrap_or_else(|e| e.into_inner());
        while g.0 < self.seq {
            g = self.order.cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Lets the next point go (once submitted, or when this one never will be).
    pub fn release(&self) {
        if self.released.swap(true, Ordering::Relaxed) {
            return;
        }
        let mut g = self.order.state.lock().unwrap_or_else(|e| e.into_inner());
        g.1.insert(self.seq);
        loop {
            let next = g.0;
            if !g.1.remove(&next) {
                break;
            }
            g.0 += 1;
        }
        self.order.cv.notify_all();
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.release();
    }
}

/// What a runner returns for a point.
pub struct Outcome {
    pub status: Status,
    pub records: Vec<Record>,
    pub ctx: PointContext,
}

/// Runs single points against one kind of target.
pub trait PointRunner: Sync {
    /// How many points may run at once (virtual clock: one per core; a GPU server: one).
    fn max_parallel(&self) -> usize;
    fn run(&self, job: &Job) -> Outcome;
    /// Runs a point and writes its folder (`status.json`, records, `agg.json`). By default the
    /// point runs here through [`PointRunner::run`]; a batch scheduler overrides this to gather
    /// the finished folder its job wrote elsewhere.
    fn run_point(&self, job: &Job) -> Result<(PointResult, Option<Samples>), String> {
        let t0 = Instant::now();
        let out = self.run(job);
        finish_point(job, out, t0.elapsed().as_secs_f64())
    }
    /// Whether every matrix may run at the same time (a batch scheduler queues them all).
    fn matrices_at_once(&self) -> bool {
        false
    }
}

#[derive(Clone, Debug)]
pub struct RunOptions {
    pub run_id: String,
    pub labels: Vec<String>,
    pub target: String,
    pub out: PathBuf,
    /// Reuse finished points found in `out`.
    pub resume: bool,
    /// Run only these point ids (others are left out of this run).
    pub only: Vec<String>,
    pub seed: u64,
    /// Bootstrap replicates for intervals and frontier probabilities.
    pub replicates: usize,
    /// Print a line per finished point.
    pub verbose: bool,
}

/// Shared state of one execution.
struct State {
    results: Mutex<BTreeMap<String, PointResult>>,
    samples: Mutex<BTreeMap<String, Samples>>,
}

fn pending(p: &PlanPoint) -> PointResult {
    PointResult {
        id: p.id.clone(),
        config_key: p.config_key.clone(),
        arm: p.arm.clone(),
        conc: p.conc,
        gpus: p.gpus,
        matrix: p.matrix.clone(),
        status: Status::Pending,
        result_kind: String::new(),
        profiles: serde_json::Value::Null,
        trace_set: String::new(),
        summary: None,
        pareto: None,
        launch: p.launch.clone(),
        seeds: Vec::new(),
        wall_s: 0.0,
    }
}

/// The InferenceX identity fields of a point's aggregate, from its matrix row.
pub fn identity(p: &PlanPoint) -> serde_json::Map<String, serde_json::Value> {
    let r = &p.row;
    let mut m = serde_json::Map::new();
    let copy = |m: &mut serde_json::Map<String, serde_json::Value>, from: &str, to: &str| {
        if let Some(v) = r.get(from) {
            m.insert(to.into(), v.clone());
        }
    };
    m.insert("hw".into(), r.get("runner").cloned().unwrap_or_default());
    m.insert("conc".into(), serde_json::json!(p.conc));
    for (from, to) in [
        ("image", "image"),
        ("recipe-fingerprint", "recipe_fingerprint"),
        ("model", "model"),
        ("model-prefix", "infmax_model_prefix"),
        ("framework", "framework"),
        ("precision", "precision"),
        ("spec-decoding", "spec_decoding"),
        ("disagg", "disagg"),
        ("tp", "tp"),
        ("ep", "ep"),
        ("pp", "pp"),
        ("dcp-size", "dcp_size"),
        ("pcp-size", "pcp_size"),
        ("kv-offloading", "kv_offloading"),
        ("kv-offload-backend", "kv_offload_backend"),
        ("total-cpu-dram-gb", "allocated_cpu_dram_gb"),
        ("router", "router"),
        ("kv-p2p-transfer", "kv_p2p_transfer"),
    ] {
        copy(&mut m, from, to);
    }
    m.insert("is_multinode".into(), serde_json::json!(r.contains_key("prefill")));
    if let Some(d) = r.get("dp-attn") {
        m.insert("dp_attention".into(), serde_json::json!(d.as_bool().map(|b| b.to_string()).unwrap_or_default()));
    }
    m.insert("point_id".into(), serde_json::json!(p.id));
    m.insert("arm".into(), serde_json::json!(p.arm));
    m
}

/// Loads a finished point (for `--resume`): its status and its per-request samples.
fn load_finished(dir: &Path, gpus: u32) -> Option<(PointResult, Samples)> {
    let st: PointResult = serde_json::from_str(&std::fs::read_to_string(dir.join("status.json")).ok()?).ok()?;
    if st.status != Status::Done {
        return None;
    }
    let recs = records::read_jsonl(&dir.join("profile_export.jsonl")).ok()?;
    Some((st, Samples::from_records(&recs, gpus)))
}

/// Writes a point's files atomically; returns its result.
fn finish_point(job: &Job, out: Outcome, wall_s: f64) -> Result<(PointResult, Option<Samples>), String> {
    let p = &job.point;
    std::fs::create_dir_all(&job.dir).map_err(|e| format!("{}: {e}", job.dir.display()))?;
    let mut res = pending(p);
    res.wall_s = wall_s;
    res.result_kind = out.ctx.result_kind.clone();
    res.profiles = out.ctx.profiles.clone();
    res.trace_set = out.ctx.trace_set.clone();
    res.status = out.status;
    let mut samples = None;
    if !out.records.is_empty() {
        records::write_jsonl(&job.dir.join("profile_export.jsonl"), &out.records).map_err(|e| e.to_string())?;
    }
    if let Some(sm) = &out.ctx.server_metrics {
        write_json(&job.dir.join("server_metrics.json"), sm).map_err(|e| e.to_string())?;
    }
    if res.status == Status::Done {
        let (agg, summary) = metrics::aggregate(&out.records, &out.ctx).map_err(|e| format!("{}: aggregate: {e}", p.id))?;
        write_json(&job.dir.join("agg.json"), &agg).map_err(|e| e.to_string())?;
        if !summary.valid {
            res.status = Status::Failed { reason: format!("invalid aggregate: {}", summary.invalid_reasons.join(", ")) };
        }
        samples = Some(Samples::from_records(&out.records, p.gpus));
        res.summary = Some(summary);
    }
    write_json(&job.dir.join("status.json"), &res).map_err(|e| e.to_string())?;
    Ok((res, samples))
}

fn save_summary(opts: &RunOptions, state: &State, order: &[String]) -> Result<RunSummary, String> {
    let results = state.results.lock().expect("lock");
    let points: Vec<PointResult> = order.iter().filter_map(|id| results.get(id).cloned()).collect();
    let s = RunSummary {
        run_id: opts.run_id.clone(),
        labels: opts.labels.clone(),
        target: opts.target.clone(),
        created_unix: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
        seed: opts.seed,
        replicates: opts.replicates,
        points,
        curves: Vec::new(),
    };
    s.save(&opts.out).map_err(|e| format!("{}: {e}", opts.out.display()))?;
    Ok(s)
}

/// Runs the plan's throughput points; `interrupt` is the Ctrl-C flag.
pub fn execute(plan: &Plan, opts: &RunOptions, runner: &dyn PointRunner, interrupt: &Arc<AtomicBool>) -> Result<RunSummary, String> {
    std::fs::create_dir_all(&opts.out).map_err(|e| format!("{}: {e}", opts.out.display()))?;
    write_json(&opts.out.join("plan.json"), plan).map_err(|e| e.to_string())?;
    let selected = |p: &PlanPoint| opts.only.is_empty() || opts.only.iter().any(|o| o == &p.id);
    let canary: Option<&PlanPoint> = plan.canary.as_ref().filter(|p| selected(p));
    let matrices: Vec<(String, bool, Vec<&PlanPoint>)> = plan
        .matrices
        .iter()
        .map(|m| (m.name.clone(), m.fail_fast, m.points.iter().filter(|p| selected(p)).collect::<Vec<_>>()))
        .filter(|(_, _, v)| !v.is_empty())
        .collect();
    let order: Vec<String> =
        canary.iter().map(|p| p.id.clone()).chain(matrices.iter().flat_map(|(_, _, v)| v.iter().map(|p| p.id.clone()))).collect();
    for id in &opts.only {
        if !plan.points().any(|p| &p.id == id) {
            return Err(format!("--only {id}: no such point in the plan (see `sweep plan`)"));
        }
    }
    let state = State { results: Mutex::new(BTreeMap::new()), samples: Mutex::new(BTreeMap::new()) };
    {
        let mut r = state.results.lock().expect("lock");
        for p in canary.iter().copied().chain(matrices.iter().flat_map(|(_, _, v)| v.iter().copied())) {
            let mut res = pending(p);
            if opts.resume
                && let Some((done, s)) = load_finished(&point_dir(&opts.out, &p.id), p.gpus)
            {
                res = done;
                state.samples.lock().expect("lock").insert(p.id.clone(), s);
            }
            r.insert(p.id.clone(), res);
        }
    }
    save_summary(opts, &state, &order)?;
    let total = order.len();
    let done_count = Arc::new(std::sync::atomic::AtomicUsize::new(0));

    let start_order = Arc::new(StartOrder::default());
    let run_one = |p: &PlanPoint, cancel: Arc<AtomicBool>, turn: Turn| -> Result<bool, String> {
        if state.results.lock().expect("lock")[&p.id].status == Status::Done {
            return Ok(true);
        }
        let job = Job { point: p.clone(), dir: point_dir(&opts.out, &p.id), cancel, seed: opts.seed, turn: Some(turn) };
        let (res, samples) = runner.run_point(&job)?;
        let ok = res.ok();
        if opts.verbose {
            let n = done_count.fetch_add(1, Ordering::Relaxed) + 1;
            let detail = match (&res.status, &res.summary) {
                (Status::Done, Some(s)) => format!(
                    "{:>9} tok/s/GPU  P90 intvty {:>7.1}  TTFT p90 {:.2} s",
                    crate::gate::fmt_num(s.tput_per_gpu),
                    s.intvty_p90,
                    s.ttft.p90
                ),
                (st, _) => format!("{st:?}"),
            };
            eprintln!("[{n}/{total}] {:<58} {}  ({:.1} s)", p.id, detail, res.wall_s);
        }
        if let Some(s) = samples {
            state.samples.lock().expect("lock").insert(p.id.clone(), s);
        }
        state.results.lock().expect("lock").insert(p.id.clone(), res);
        save_summary(opts, &state, &order)?;
        Ok(ok)
    };

    let mark_rest = |ids: &mut dyn Iterator<Item = &String>, status: Status| {
        let mut r = state.results.lock().expect("lock");
        for id in ids {
            if let Some(x) = r.get_mut(id)
                && x.status == Status::Pending
            {
                x.status = status.clone();
            }
        }
    };

    let mut canary_failed = None;
    if let Some(c) = canary
        && !run_one(c, interrupt.clone(), start_order.take())?
    {
        let reason = match &state.results.lock().expect("lock")[&c.id].status {
            Status::Failed { reason } => reason.clone(),
            other => format!("{other:?}"),
        };
        canary_failed = Some(format!("canary {} failed: {reason}", c.id));
    }
    if let Some(reason) = &canary_failed {
        mark_rest(&mut order.iter(), Status::Cancelled { reason: reason.clone() });
    } else {
        let run_matrix = |name: &String, fail_fast: &bool, points: &[&PlanPoint]| -> Result<(), String> {
            let queue: Mutex<VecDeque<&PlanPoint>> = Mutex::new(points.iter().copied().collect());
            let matrix_cancel = Arc::new(AtomicBool::new(false));
            let first_failure: Mutex<Option<String>> = Mutex::new(None);
            let error: Mutex<Option<String>> = Mutex::new(None);
            let workers = runner.max_parallel().max(1).min(points.len());
            std::thread::scope(|s| {
                for _ in 0..workers {
                    s.spawn(|| {
                        loop {
                            if interrupt.load(Ordering::Relaxed) || matrix_cancel.load(Ordering::Relaxed) {
                                break;
                            }
                            let (p, turn) = {
                                let mut q = queue.lock().expect("lock");
                                let Some(p) = q.pop_front() else { break };
                                (p, start_order.take())
                            };
                            // A point's cancel flag: the matrix's fail-fast or Ctrl-C.
                            let cancel = Arc::new(AtomicBool::new(false));
                            let watcher_stop = Arc::new(AtomicBool::new(false));
                            let (c2, mc, it, ws) = (cancel.clone(), matrix_cancel.clone(), interrupt.clone(), watcher_stop.clone());
                            let watcher = std::thread::spawn(move || {
                                while !ws.load(Ordering::Relaxed) {
                                    if mc.load(Ordering::Relaxed) || it.load(Ordering::Relaxed) {
                                        c2.store(true, Ordering::Relaxed);
                                    }
                                    std::thread::sleep(std::time::Duration::from_millis(50));
                                }
                            });
                            let r = run_one(p, cancel, turn);
                            watcher_stop.store(true, Ordering::Relaxed);
                            let _ = watcher.join();
                            match r {
                                Ok(true) => {}
                                Ok(false) => {
                                    if *fail_fast {
                                        first_failure.lock().expect("lock").get_or_insert_with(|| p.id.clone());
                                        matrix_cancel.store(true, Ordering::Relaxed);
                                    }
                                }
                                Err(e) => {
                                    *error.lock().expect("lock") = Some(e);
                                    matrix_cancel.store(true, Ordering::Relaxed);
                                }
                            }
                        }
                    });
                }
            });
            if let Some(e) = error.into_inner().expect("lock") {
                return Err(e);
            }
            if let Some(f) = first_failure.into_inner().expect("lock") {
                // Points stopped mid-run by fail-fast are cancelled, not failed.
                let reason = format!("fail-fast: {f} failed in matrix {name}");
                let mut r = state.results.lock().expect("lock");
                for p in points {
                    if let Some(x) = r.get_mut(&p.id)
                        && p.id != f
                        && (x.status == Status::Pending || matches!(&x.status, Status::Failed { reason } if reason == "cancelled"))
                    {
                        x.status = Status::Cancelled { reason: reason.clone() };
                    }
                }
            }
            save_summary(opts, &state, &order)?;
            Ok(())
        };
        if runner.matrices_at_once() {
            // A batch scheduler queues every matrix at once; fail-fast stays per matrix.
            let results: Vec<Result<(), String>> = std::thread::scope(|s| {
                let hs: Vec<_> = matrices.iter().map(|(n, f, p)| s.spawn(|| run_matrix(n, f, p))).collect();
                hs.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("a matrix thread panicked".into()))).collect()
            });
            results.into_iter().collect::<Result<(), String>>()?;
        } else {
            for (name, fail_fast, points) in &matrices {
                if interrupt.load(Ordering::Relaxed) {
                    break;
                }
                run_matrix(name, fail_fast, points)?;
            }
        }
    }

    let summary = save_summary(opts, &state, &order)?;
    let samples = state.samples.lock().expect("lock").clone();
    finalize(summary, &samples, &opts.out)
}

/// Pareto over every finished point (bootstrap intervals, frontier probabilities), then
/// `summary.json` and `results.parquet`. Shared by `sweep run` and `sweep collect`.
pub fn finalize(mut summary: RunSummary, samples: &BTreeMap<String, Samples>, out: &Path) -> Result<RunSummary, String> {
    let inputs: Vec<(String, String, String, u32, bool, Samples)> = summary
        .points
        .iter()
        .filter(|r| r.summary.is_some())
        .filter_map(|r| samples.get(&r.id).map(|s| (r.id.clone(), r.config_key.clone(), r.arm.clone(), r.conc, r.ok(), s.clone())))
        .collect();
    let pts = pareto::points_with_uncertainty(&inputs, summary.replicates, summary.seed);
    summary.curves = pareto::analyse(&pts);
    for p in &pts {
        if let Some(x) = summary.points.iter_mut().find(|x| x.id == p.id) {
            x.pareto = Some(p.clone());
        }
    }
    summary.save(out).map_err(|e| format!("{}: {e}", out.display()))?;
    write_parquet(&summary, &out.join("results.parquet")).map_err(|e| format!("results.parquet: {e}"))?;
    Ok(summary)
}

/// Reads a finished point's samples back from its `profile_export.jsonl`.
pub fn load_samples(run: &Path, p: &PointResult) -> Option<Samples> {
    let recs = records::read_jsonl(&point_dir(run, &p.id).join("profile_export.jsonl")).ok()?;
    Some(Samples::from_records(&recs, p.gpus))
}

/// One row per point with the headline metrics (`results.parquet`).
pub fn write_parquet(run: &RunSummary, path: &Path) -> polars::prelude::PolarsResult<()> {
    use polars::prelude::*;
    let g = |f: &dyn Fn(&PointResult) -> Option<f64>| run.points.iter().map(f).collect::<Vec<Option<f64>>>();
    let mut df = df!(
        "point" => run.points.iter().map(|p| p.id.clone()).collect::<Vec<_>>(),
        "config_key" => run.points.iter().map(|p| p.config_key.clone()).collect::<Vec<_>>(),
        "arm" => run.points.iter().map(|p| p.arm.clone()).collect::<Vec<_>>(),
        "conc" => run.points.iter().map(|p| p.conc).collect::<Vec<_>>(),
        "gpus" => run.points.iter().map(|p| p.gpus).collect::<Vec<_>>(),
        "result_kind" => run.points.iter().map(|p| p.result_kind.clone()).collect::<Vec<_>>(),
        "status" => run.points.iter().map(|p| serde_json::to_value(&p.status).ok().and_then(|v| v["state"].as_str().map(str::to_string)).unwrap_or_default()).collect::<Vec<_>>(),
        "valid" => run.points.iter().map(|p| p.ok()).collect::<Vec<_>>(),
        "tput_per_gpu" => g(&|p| p.summary.as_ref().map(|s| s.tput_per_gpu)),
        "output_tput_per_gpu" => g(&|p| p.summary.as_ref().map(|s| s.output_tput_per_gpu)),
        "intvty_p90" => g(&|p| p.summary.as_ref().map(|s| s.intvty_p90)),
        "e2e_norm_intvty_p90" => g(&|p| p.summary.as_ref().map(|s| s.e2e_norm_intvty_p90)),
        "ttft_p50" => g(&|p| p.summary.as_ref().map(|s| s.ttft.p50)),
        "ttft_p90" => g(&|p| p.summary.as_ref().map(|s| s.ttft.p90)),
        "ttft_p99" => g(&|p| p.summary.as_ref().map(|s| s.ttft.p99)),
        "e2el_p75" => g(&|p| p.summary.as_ref().map(|s| s.e2el.p75)),
        "e2el_p90" => g(&|p| p.summary.as_ref().map(|s| s.e2el.p90)),
        "p_frontier" => g(&|p| p.pareto.as_ref().map(|x| x.p_frontier)),
    )?;
    let tmp = path.with_extension("parquet.tmp");
    let f = std::fs::File::create(&tmp)?;
    ParquetWriter::new(f).finish(&mut df)?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_are_served_in_the_order_taken_whatever_order_threads_arrive_in() {
        let order = Arc::new(StartOrder::default());
        let turns: Vec<Turn> = (0..6).map(|_| order.take()).collect();
        let served = Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for (i, t) in turns.into_iter().enumerate().rev() {
                let served = &served;
                s.spawn(move || {
                    // Later turns arrive first; turn 2 is given up without being served.
                    std::thread::sleep(std::time::Duration::from_millis(5 * (6 - i as u64)));
                    if i == 2 {
                        drop(t);
                        return;
                    }
                    t.wait();
                    served.lock().unwrap().push(i);
                    t.release();
                    t.release(); // twice is harmless
                });
            }
        });
        assert_eq!(served.into_inner().unwrap(), vec![0, 1, 3, 4, 5]);
    }

    /// Stands in for a batch scheduler's submission step: waits its turn, then notes the point.
    struct Submitter {
        submitted: Mutex<Vec<String>>,
        positions: BTreeMap<String, usize>,
    }

    impl PointRunner for Submitter {
        fn max_parallel(&self) -> usize {
            16
        }
        fn run(&self, _: &Job) -> Outcome {
            unreachable!("run_point is overridden")
        }
        fn run_point(&self, job: &Job) -> Result<(PointResult, Option<Samples>), String> {
            // Points late in the plan reach the submission first unless they wait their turn.
            let late = self.positions.len() - self.positions[&job.point.id];
            std::thread::sleep(std::time::Duration::from_millis(4 * late as u64));
            let turn = job.turn.as_ref().expect("execute gives every point a turn");
            turn.wait();
            self.submitted.lock().unwrap().push(job.point.id.clone());
            turn.release();
            let mut r = pending(&job.point);
            r.status = Status::Done;
            r.summary = Some(metrics::Summary { valid: true, ..Default::default() });
            Ok((r, None))
        }
        fn matrices_at_once(&self) -> bool {
            true
        }
    }

    /// The repository's own `full-sweep-fail-fast` plan.
    pub(in crate::run) fn repo_plan() -> Plan {
        let repo = crate::repo::Repo::at(&Path::new(env!("CARGO_MANIFEST_DIR")).join(".."));
        let inputs = crate::plan::Inputs::load(&repo).expect("repository config loads");
        let labels = crate::plan::Labels::parse(&["full-sweep-fail-fast"]).unwrap();
        crate::plan::build(&repo, &inputs, &crate::plan::PlanRequest { labels, base: None }).expect("plan")
    }

    #[test]
    fn parallel_points_reach_their_runner_in_plan_order() {
        let plan = repo_plan();
        let ids: Vec<String> = plan.points().map(|p| p.id.clone()).collect();
        assert!(ids.len() > 8, "{ids:?}");
        let runner = Submitter { submitted: Mutex::new(Vec::new()), positions: ids.iter().cloned().zip(0..).collect() };
        let tmp = tempfile::tempdir().unwrap();
        let opts = RunOptions {
            run_id: "order".into(),
            labels: vec!["full-sweep-fail-fast".into()],
            target: "test".into(),
            out: tmp.path().join("run"),
            resume: false,
            only: Vec::new(),
            seed: 1,
            replicates: 10,
            verbose: false,
        };
        execute(&plan, &opts, &runner, &Arc::new(AtomicBool::new(false))).unwrap();
        assert_eq!(runner.submitted.into_inner().unwrap(), ids);
    }
}
