//! Ctrl-C (SIGINT) and SIGTERM in the middle of `sweep run` and `sweep replay`: the records so far
//! are kept, the point is `interrupted` (never valid, not a failure, no fail-fast), the gate says
//! the run is incomplete, and the exit code is 130.

mod common;
use common::export_text;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn signal_after(mut child: Child, err: &Path, started: &str, wait: Duration, signal: i32) -> (i32, String) {
    let t0 = Instant::now();
    loop {
        let t = std::fs::read_to_string(err).unwrap_or_default();
        if t.contains(started) {
            break;
        }
        assert!(child.try_wait().unwrap().is_none(), "sweep exited before it started:\n{t}");
        assert!(t0.elapsed() < Duration::from_secs(120), "never started:\n{t}");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(wait);
    assert!(child.try_wait().unwrap().is_none(), "sweep finished before the signal: make the run longer");
    // SAFETY: a signal to the child this test started.
    unsafe {
        libc::kill(child.id() as i32, signal);
    }
    let code = child.wait().unwrap().code().unwrap_or(-1);
    (code, std::fs::read_to_string(err).unwrap())
}

fn json(p: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))).unwrap()
}

#[test]
fn an_interrupted_run_keeps_its_points_blames_no_one_and_exits_130() {
    let tmp = tempfile::tempdir().unwrap();
    let (out, err) = (tmp.path().join("run"), tmp.path().join("stderr.txt"));
    // Thousand-hour points on the virtual clock: far longer than the test waits, in an
    // optimised build too (there, ten hours of the first point take under two seconds).
    let child = Command::new(env!("CARGO_BIN_EXE_sweep"))
        .args(["run", "full-sweep-fail-fast", "--configs", "dsv3-*", "--duration", "3600000", "--jobs", "1", "--no-store", "--out"])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let (code, stderr) = signal_after(child, &err, "sweep run:", Duration::from_secs(2), libc::SIGINT);
    assert_eq!(code, 130, "{stderr}");
    let s = json(&out.join("summary.json"));
    let states: Vec<(String, String)> = s["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_str().unwrap().to_string(), p["status"]["state"].as_str().unwrap().to_string()))
        .collect();
    assert!(states.iter().any(|(_, st)| st == "interrupted"), "{states:?}");
    assert!(states.iter().all(|(_, st)| st == "interrupted" || st == "pending" || st == "done"), "{states:?}");
    // The interrupted point kept what it had recorded.
    let (id, _) = states.iter().find(|(_, st)| st == "interrupted").unwrap();
    let dir = harness::results::point_dir(&out, id);
    assert!(!export_text(&dir).is_empty(), "{id}: no records kept");
    let g = json(&out.join("gate.json"));
    assert_eq!(g["passed"], false);
    assert!(!g["incomplete"].as_array().unwrap().is_empty(), "{g}");
    assert!(
        g["checks"].as_array().unwrap().iter().all(|c| !c["name"].as_str().unwrap().starts_with("point ") || c["passed"] == true),
        "{g}"
    );
}

#[test]
fn sigterm_on_a_replay_keeps_its_records_and_exits_130() {
    let tmp = tempfile::tempdir().unwrap();
    let (out, err) = (tmp.path().join("replay"), tmp.path().join("stderr.txt"));
    let child = Command::new(env!("CARGO_BIN_EXE_sweep"))
        // A thousand virtual hours: ten take under two seconds in an optimised build.
        .args(["replay", "--engine", "--model-path deepseek-ai/DeepSeek-V3 --tp 8", "--concurrency", "16", "--duration", "3600000"])
        .args(["--warmup-per-lane", "1", "--out"])
        .arg(&out)
        .stdout(std::fs::File::create(tmp.path().join("stdout.txt")).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    // The output folder is made once the trace pool is loaded (seconds in a debug build on a
    // busy machine); the replay starts right after: give it a couple of seconds of simulation.
    let t0 = Instant::now();
    while !out.exists() {
        assert!(t0.elapsed() < Duration::from_secs(120), "the replay never started");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(2));
    let (code, stderr) = signal_after(child, &err, "", Duration::ZERO, libc::SIGTERM);
    let stdout = std::fs::read_to_string(tmp.path().join("stdout.txt")).unwrap();
    assert_eq!(code, 130, "{stdout}\n{stderr}");
    assert!(stdout.contains("status: interrupted"), "{stdout}");
    let records = export_text(&out);
    assert!(records.lines().count() > 0, "no records kept");
    let agg = json(&out.join("agg.json"));
    assert_eq!(agg["validity"]["valid"], false, "{agg}");
    assert!(agg["validity"]["reasons"].as_array().unwrap().iter().any(|r| r == "run_cancelled"), "{agg}");
}

/// Pids of the live (not zombie) processes whose parent is `ppid`.
fn children_of(ppid: u32) -> Vec<u32> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else { continue };
        if let Some((state, parent)) = stat(pid)
            && parent == ppid
            && state != 'Z'
        {
            v.push(pid);
        }
    }
    v
}

/// (state, parent pid) from `/proc/PID/stat`.
fn stat(pid: u32) -> Option<(char, u32)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces: fields follow the last ')'.
    let mut f = s[s.rfind(')')? + 2..].split_whitespace();
    Some((f.next()?.chars().next()?, f.next()?.parse().ok()?))
}

#[test]
fn sigkill_of_sweep_run_takes_the_server_it_launched_with_it() {
    let tmp = tempfile::tempdir().unwrap();
    let (out, err) = (tmp.path().join("run"), tmp.path().join("stderr.txt"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_sweep"))
        .args(["run", "full-sweep-fail-fast", "--only", "dsv3-fp8-h200-sglang-agentic/tp8-c1", "--target", "local:engine"])
        .args(["--duration", "3600", "--traces", "synthetic:20", "--no-store", "--out"])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let server = loop {
        let log = std::fs::read_to_string(harness::results::point_dir(&out, "dsv3-fp8-h200-sglang-agentic/tp8-c1").join("server.log"));
        let kids = children_of(child.id());
        if log.is_ok_and(|l| l.contains("serving")) && kids.len() == 1 {
            break kids[0];
        }
        assert!(child.try_wait().unwrap().is_none(), "sweep exited early:\n{}", std::fs::read_to_string(&err).unwrap());
        assert!(t0.elapsed() < Duration::from_secs(120), "the server never started:\n{}", std::fs::read_to_string(&err).unwrap());
        std::thread::sleep(Duration::from_millis(100));
    };
    child.kill().unwrap(); // SIGKILL: no clean-up runs in sweep.
    child.wait().unwrap();
    let t0 = Instant::now();
    while stat(server).is_some_and(|(state, _)| state != 'Z') {
        assert!(t0.elapsed() < Duration::from_secs(15), "the launched server {server} outlived sweep's SIGKILL");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_reader_that_stops_early_neither_fails_the_run_nor_loses_it() {
    // `sweep run … | head -n 1` once head has exited: every write of the summary meets a closed
    // pipe. The read end is closed before the run prints anything, so this does not depend on
    // how much of the summary fits in the pipe's buffer.
    let tmp = tempfile::tempdir().unwrap();
    let (out, store) = (tmp.path().join("run"), tmp.path().join("sweep.db"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_sweep"))
        .args(["run", "full-sweep-fail-fast", "--configs", "dsr1-fp8-h200-sglang", "--seed-replicates", "0", "--out"])
        .arg(&out)
        .arg("--store")
        .arg(&store)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{:?}\n{stderr}", o.status);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(out.join("gate.json").is_file() && out.join("summary.json").is_file(), "{stderr}");
    let h = Command::new(env!("CARGO_BIN_EXE_sweep")).args(["history", "--json", "--store"]).arg(&store).output().unwrap();
    let runs: serde_json::Value = serde_json::from_slice(&h.stdout).unwrap();
    assert_eq!(runs.as_array().map(Vec::len), Some(1), "the run is recorded: {runs}");
}
