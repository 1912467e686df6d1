//! A bounded mutation fuzz run over every input `sweep` reads: seeds from this repository and
//! the shared data, seeded mutations, the real loaders in process. A finding is a panic, an input
//! that takes longer than the per-input cap or more than 512 MB of memory, or an error that does
//! not name its file or echoes its input; each is saved with how to replay it, and the run exits
//! non-zero. `scripts/fuzz.sh` runs it.
//!
//! ```text
//! cargo run --release -p harness --example fuzz -- [--budget 150] [--seed N] [--cap 2] [--findings DIR]
//! cargo run --release -p harness --example fuzz -- --replay DIR/master-17.yaml --kind Master
//! cargo run --release -p harness --example fuzz -- --seed N --input 17   (input 17 of seed N alone)
//! ```
//! Seeds from `$SWEEP_SHARED_DATA` when it is set (InferenceX inputs, small real traces).

mod mutate;
mod targets;
mod verify_repo;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use targets::{Kind, Outcome, Seed};

struct Opts {
    budget: Duration,
    seed: u64,
    cap: Duration,
    findings: PathBuf,
    replay: Option<(PathBuf, Kind)>,
    /// Only this input of the seed: a finding from a log whose findings folder is gone.
    only: Option<usize>,
}

fn parse_args() -> Opts {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let mut o = Opts {
        budget: Duration::from_secs(150),
        seed: now.as_nanos() as u64 % 1_000_000_007,
        cap: Duration::from_secs(2),
        findings: PathBuf::from("fuzz-findings"),
        replay: None,
        only: None,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut kind = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().unwrap_or_else(|| panic!("{a} needs a value")).clone();
        match a.as_str() {
            "--budget" => o.budget = Duration::from_secs_f64(val().parse().expect("--budget SECONDS")),
            "--seed" => o.seed = val().parse().expect("--seed N"),
            "--cap" => o.cap = Duration::from_secs_f64(val().parse().expect("--cap SECONDS")),
            "--findings" => o.findings = val().into(),
            "--replay" => o.replay = Some((val().into(), Kind::Master)),
            "--kind" => kind = Some(val()),
            "--input" => o.only = Some(val().parse().expect("--input N (N >= 1)")).filter(|&n| n >= 1),
            other => panic!("unknown argument {other}"),
        }
    }
    if let (Some((_, k)), Some(name)) = (o.replay.as_mut(), kind) {
        *k = KINDS.iter().copied().find(|k| format!("{k:?}") == name).unwrap_or_else(|| panic!("--kind {name}: one of {KINDS:?}"));
    }
    o
}

const KINDS: [Kind; 19] = [
    Kind::Master,
    Kind::Changelog,
    Kind::Recipe,
    Kind::Runners,
    Kind::GoldenAl,
    Kind::SharedYaml,
    Kind::ModelProfile,
    Kind::HardwareProfile,
    Kind::TraceJsonl,
    Kind::TraceGz,
    Kind::TraceJson,
    Kind::Mooncake,
    Kind::Aggregate,
    Kind::Gsm8k,
    Kind::EvalSamples,
    Kind::PrFacts,
    Kind::EvalResult,
    Kind::EvalReply,
    Kind::VerifyName,
];

/// The message of the last panic (a worker's panic is reported through its join).
static PANIC: Mutex<Option<String>> = Mutex::new(None);

/// A copy of this repository's inputs where one file at a time is replaced by a mutant.
struct Workdir {
    root: tempfile::TempDir,
}

impl Workdir {
    fn new(workspace: &Path) -> Workdir {
        let root = tempfile::tempdir().expect("temporary folder");
        for dir in ["recipes", "golden_al"] {
            std::fs::create_dir_all(root.path().join(dir)).unwrap();
            for e in std::fs::read_dir(workspace.join(dir)).unwrap().flatten() {
                std::fs::copy(e.path(), root.path().join(dir).join(e.file_name())).unwrap();
            }
        }
        std::fs::copy(workspace.join("perf-changelog.yaml"), root.path().join("perf-changelog.yaml")).unwrap();
        Workdir { root }
    }

    /// Where a seed of a repository kind lives; other kinds go to a loose file.
    fn place(&self, seed: &Seed, n: usize) -> PathBuf {
        let r = self.root.path();
        match seed.kind {
            Kind::Master | Kind::Runners | Kind::Recipe => r.join("recipes").join(&seed.name),
            Kind::Changelog => r.join("perf-changelog.yaml"),
            Kind::GoldenAl => r.join("golden_al").join(&seed.name),
            Kind::SharedYaml | Kind::ModelProfile | Kind::HardwareProfile => r.join("loose").join(&seed.name),
            // An eval result keeps its name (lm-eval's `results*.json`, `agg_eval_all.json`) in a
            // folder of its own.
            Kind::EvalResult => {
                let d = r.join("loose").join(format!("eval{n}"));
                std::fs::create_dir_all(&d).unwrap();
                d.join(&seed.name)
            }
            k => r.join("loose").join(format!("input{n}.{}", k.ext(&seed.name))),
        }
    }
}

/// Peak resident memory allowed while one input runs: 16× the largest mutant.
const MAX_RSS_KB: u64 = 512 << 10;

/// Resets the process's peak resident memory (Linux `clear_refs`), so that the next reading of
/// it is one input's.
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// The peak resident memory since the last reset, in KiB (0 where it cannot be read).
fn peak_rss_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let hwm = status.lines().find_map(|l| l.strip_prefix("VmHWM:"));
    hwm.and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok()).unwrap_or(0)
}

/// Runs one input through its loaders on a worker thread, within the cap.
fn run_one(kind: Kind, path: PathBuf, root: PathBuf, name: String, cap: Duration) -> Result<Outcome, String> {
    let (tx, rx) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        let out = match kind {
            Kind::Master | Kind::Changelog | Kind::Recipe => targets::run_repo(&root, true),
            Kind::Runners | Kind::GoldenAl => targets::run_repo(&root, false),
            Kind::SharedYaml => targets::run_shared(&path, &name),
            Kind::ModelProfile => targets::run_profile(&path, true),
            Kind::HardwareProfile => targets::run_profile(&path, false),
            Kind::Aggregate => targets::run_aggregate(&path),
            Kind::Gsm8k => targets::run_gsm8k(&path),
            Kind::EvalSamples => targets::run_eval_samples(&path),
            Kind::PrFacts => targets::run_pr_facts(&path),
            Kind::EvalResult => targets::run_eval_result(&path),
            Kind::EvalReply => verify_repo::run_eval_reply(&path),
            Kind::VerifyName => verify_repo::run_verify_repo(&path, &root),
            _ => targets::run_traces(&path),
        };
        let _ = tx.send(());
        out
    });
    match rx.recv_timeout(cap) {
        Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => {
            worker.join().map_err(|_| format!("panic: {}", PANIC.lock().unwrap().take().unwrap_or_default()))
        }
        Err(mpsc::RecvTimeoutError::Timeout) => Err(format!("took longer than the {:?} cap", cap)),
    }
}

#[derive(Default)]
struct Counts {
    tried: usize,
    accepted: usize,
    refused: usize,
    findings: usize,
    time: Duration,
    /// The slowest input and its number: how close the loaders come to the cap, and what to
    /// replay with `--input`.
    slowest: Duration,
    slowest_n: usize,
}

/// Saves a finding, named after its seed: the input and a note of what happened and how to
/// replay it.
fn save_finding(o: &Opts, seed: &Seed, n: usize, input: &Path, note: &str) -> PathBuf {
    std::fs::create_dir_all(&o.findings).unwrap();
    let (kind, ext) = (seed.kind, seed.kind.ext(&seed.name));
    let stem = seed.name.strip_suffix(&format!(".{ext}")).unwrap_or(&seed.name);
    let file = o.findings.join(format!("{}-{n}-{stem}.{ext}", format!("{kind:?}").to_lowercase()));
    std::fs::copy(input, &file).unwrap();
    let replay = format!("cargo run --release -p harness --example fuzz -- --replay {} --kind {kind:?}", file.display());
    std::fs::write(format!("{}.txt", file.display()), format!("{note}\nseed {} input {n}\nreplay: {replay}\n", o.seed)).unwrap();
    eprintln!(
        "FINDING {kind:?} input {n}: {note}\n    saved {}\n    replay: {replay}\n    \
         or, from this log alone: SWEEP_SHARED_DATA=… cargo run --release -p harness --example fuzz -- --seed {} --input {n}",
        file.display(),
        o.seed
    );
    file
}

fn main() {
    let o = parse_args();
    // A worker's panic is a finding, reported with its input; the main thread's is the fuzzer's own.
    std::panic::set_hook(Box::new(|info| {
        if std::thread::current().name() == Some("main") {
            eprintln!("{info}");
        }
        *PANIC.lock().unwrap() = Some(info.to_string());
    }));
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let shared = std::env::var_os("SWEEP_SHARED_DATA").map(PathBuf::from).filter(|p| p.join("README.md").is_file());
    let work = Workdir::new(&workspace);
    std::fs::create_dir_all(work.root.path().join("loose")).unwrap();
    if let Some((file, kind)) = &o.replay {
        std::process::exit(replay(&o, &work, &workspace, shared.as_deref(), file, *kind));
    }
    let seeds = targets::seeds(&workspace, shared.as_deref());
    println!(
        "fuzz: seed {} budget {:?} cap {:?}; {} seed inputs{}",
        o.seed,
        o.budget,
        o.cap,
        seeds.len(),
        match &shared {
            Some(s) => format!(" (shared data {})", s.display()),
            None => " (SWEEP_SHARED_DATA not set: repository seeds only)".into(),
        }
    );
    let (counts, findings) = fuzz(&o, &work, &seeds);
    print_counts(&counts);
    if findings > 0 {
        eprintln!("fuzz: {findings} findings under {} (seed {})", o.findings.display(), o.seed);
        std::process::exit(1);
    }
    println!("fuzz: no findings (seed {})", o.seed);
}

/// The loop: one mutated input at a time until the budget is spent. Returns the counts per kind
/// and the number of findings.
fn fuzz(o: &Opts, work: &Workdir, seeds: &[Seed]) -> (BTreeMap<Kind, Counts>, usize) {
    let start = Instant::now();
    let mut counts: BTreeMap<Kind, Counts> = BTreeMap::new();
    let mut findings = 0;
    let mut n = o.only.map_or(0, |k| k - 1);
    while start.elapsed() < o.budget && o.only.is_none_or(|k| n < k) {
        n += 1;
        // Each input from its own generator: the same seed and input number give the same input.
        let mut rng = ChaCha8Rng::seed_from_u64(o.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(n as u64));
        // A kind first, then one of its seeds: kinds with many seeds get no more inputs.
        let kinds: Vec<Kind> = KINDS.iter().copied().filter(|k| seeds.iter().any(|s| s.kind == *k)).collect();
        let kind = kinds[rng.random_range(0..kinds.len())];
        let of_kind: Vec<&Seed> = seeds.iter().filter(|s| s.kind == kind).collect();
        let seed = of_kind[rng.random_range(0..of_kind.len())];
        let (bytes, ops) = mutate::mutate(&seed.bytes, &mut rng);
        let path = work.place(seed, n);
        targets::write_input(&path, seed.kind, &bytes).unwrap();
        drop(bytes);
        if seed.kind == Kind::TraceGz && rng.random_bool(0.3) {
            let gz = std::fs::read(&path).unwrap();
            std::fs::write(&path, mutate::mutate(&gz, &mut rng).0).unwrap();
        }
        let t = Instant::now();
        reset_peak_rss();
        let mut result = run_one(seed.kind, path.clone(), work.root.path().to_path_buf(), seed.name.clone(), o.cap);
        let rss = peak_rss_kb();
        if rss > MAX_RSS_KB && matches!(result, Ok(Outcome::Accepted | Outcome::Refused)) {
            result =
                Ok(Outcome::Finding(format!("{} MB resident at the peak (the limit for one input: {} MB)", rss >> 10, MAX_RSS_KB >> 10)));
        }
        let c = counts.entry(seed.kind).or_default();
        c.tried += 1;
        c.time += t.elapsed();
        if t.elapsed() > c.slowest {
            (c.slowest, c.slowest_n) = (t.elapsed(), n);
        }
        let note = match result {
            Ok(Outcome::Accepted) => {
                c.accepted += 1;
                None
            }
            Ok(Outcome::Refused) => {
                c.refused += 1;
                None
            }
            Ok(Outcome::Finding(what)) => Some(what),
            Err(what) => Some(what),
        };
        if let Some(what) = note {
            c.findings += 1;
            findings += 1;
            let saved = save_finding(o, seed, n, &path, &format!("{what}\nmutations: {}", ops.join(", ")));
            if what.starts_with("took longer") {
                // The worker is still running and cannot be stopped: end the run here.
                print_counts(&counts);
                eprintln!("fuzz: stopped at a slow input ({}), seed {}", saved.display(), o.seed);
                std::process::exit(1);
            }
        }
        // Put the seed back so that the next mutant of another file sees a valid repository.
        if matches!(seed.kind, Kind::Master | Kind::Changelog | Kind::Recipe | Kind::Runners | Kind::GoldenAl) {
            std::fs::write(&path, &seed.bytes).unwrap();
        } else {
            let _ = std::fs::remove_file(&path);
        }
    }
    (counts, findings)
}

fn print_counts(counts: &BTreeMap<Kind, Counts>) {
    let row = |name: &str, c: &Counts| {
        let (time, slowest) = (c.time.as_secs_f64(), c.slowest.as_secs_f64());
        println!(
            "| {name} | {} | {} | {} | {} | {time:.1} s | {slowest:.2} s ({}) |",
            c.tried, c.accepted, c.refused, c.findings, c.slowest_n
        );
    };
    println!("| kind | inputs | accepted | refused | findings | time | slowest (input) |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let mut total = Counts::default();
    for (k, c) in counts {
        row(&format!("{k:?}"), c);
        total.tried += c.tried;
        total.accepted += c.accepted;
        total.refused += c.refused;
        total.findings += c.findings;
        total.time += c.time;
        if c.slowest > total.slowest {
            (total.slowest, total.slowest_n) = (c.slowest, c.slowest_n);
        }
    }
    row("all", &total);
}

/// Runs one saved input of `kind`; returns the exit code.
fn replay(o: &Opts, work: &Workdir, workspace: &Path, shared: Option<&Path>, file: &Path, kind: Kind) -> i32 {
    let bytes = std::fs::read(file).expect("the input to replay");
    let seeds = targets::seeds(workspace, shared);
    let name = file.file_name().unwrap().to_string_lossy().into_owned();
    // The seed it came from: named at the end of the finding's file name.
    let of_kind = || seeds.iter().filter(|s| s.kind == kind);
    let seed =
        of_kind().find(|s| name.ends_with(&s.name)).or_else(|| of_kind().next()).expect("a seed of that kind (SWEEP_SHARED_DATA set?)");
    // A repository kind replaces the seed file of its kind; the others are read where they lie.
    let path = match kind {
        Kind::Master | Kind::Changelog | Kind::Recipe | Kind::Runners | Kind::GoldenAl => {
            let p = work.place(seed, 0);
            std::fs::write(&p, &bytes).unwrap();
            p
        }
        _ => file.to_path_buf(),
    };
    match run_one(kind, path, work.root.path().to_path_buf(), name, o.cap) {
        Ok(Outcome::Accepted) => println!("accepted"),
        Ok(Outcome::Refused) => println!("refused with an error naming the file"),
        Ok(Outcome::Finding(what)) | Err(what) => {
            println!("FINDING: {what}");
            return 1;
        }
    }
    0
}
