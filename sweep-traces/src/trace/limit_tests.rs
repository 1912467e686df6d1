//! Reading limits and the set-wide checks: each test fails without its limit or check.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::read::MAX_SKIP_WARNINGS;
use super::*;

/// A one-request Weka trace with the given id and main-agent start times.
fn trace(id: &str, times: &[f64]) -> String {
    let reqs: Vec<String> = times.iter().map(|t| format!(r#"{{"t":{t},"type":"s","in":640,"out":5,"hash_ids":[1,2]}}"#)).collect();
    format!(r#"{{"id":"{id}","block_size":64,"hash_id_scope":"local","requests":[{}]}}"#, reqs.join(","))
}

/// A trace with one subagent whose inner requests start at `inner` (absolute times).
fn with_subagent(id: &str, agents: &[&str], inner: &[f64]) -> String {
    let reqs: Vec<String> = inner.iter().map(|t| format!(r#"{{"t":{t},"type":"n","in":640,"out":5,"hash_ids":[1,3]}}"#)).collect();
    let subs: Vec<String> = agents
        .iter()
        .map(|a| format!(r#"{{"t":{},"type":"subagent","agent_id":"{a}","requests":[{}]}}"#, inner[0], reqs.join(",")))
        .collect();
    format!(
        r#"{{"id":"{id}","block_size":64,"hash_id_scope":"local","requests":[{{"t":0,"type":"s","in":640,"out":5,"hash_ids":[1,2]}},{}]}}"#,
        subs.join(",")
    )
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn read_err(paths: &[&Path]) -> String {
    read_traces(paths, &ReadOptions::default()).unwrap_err().to_string()
}

fn skipping(paths: &[&Path]) -> TraceSet {
    read_traces(paths, &ReadOptions { skip_invalid: true, ..ReadOptions::default() }).unwrap()
}

/// `copies` gzip members of `chunk` after one of `head + chunk`: a large stream compressed once.
fn gzip_members(path: &Path, head: &[u8], chunk: &[u8], copies: usize) {
    let member = |data: &[u8]| {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(data).unwrap();
        gz.finish().unwrap()
    };
    let mut out = member(&[head, chunk].concat());
    let body = member(chunk);
    for _ in 1..copies {
        out.extend_from_slice(&body);
    }
    std::fs::write(path, out).unwrap();
}

/// 64 MiB of one id from 66 KB of gzip: it read 1 GiB into one line (2.1 GB of memory) and
/// echoed it; now the stream stops past 16 MiB at the ratio limit.
#[test]
fn a_gzip_bomb_is_refused_early_naming_the_file() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("bomb.jsonl.gz");
    gzip_members(&p, br#"{"id":""#, &[b'a'; 1 << 20], 64);
    let e = read_err(&[&p]);
    assert!(e.starts_with(&format!("{}:1: gzip stream expands more than 100×", p.display())), "{e}");
    assert!(e.contains(lines::GZIP_RATIO_ENV) && e.len() < 400, "{e}");
}

#[test]
fn a_long_id_is_cut_in_the_message() {
    let d = tempfile::tempdir().unwrap();
    let id = "x".repeat(1 << 20);
    let p = write(d.path(), "long.jsonl", &format!("{}\n", trace(&id, &[0.0])));
    let e = read_err(&[&p]);
    assert!(e.contains("long.jsonl:1") && e.contains("field `id`: is 1048576 bytes; ids are at most 256 bytes"), "{e}");
    assert!(e.contains("… (1048576 bytes)") && e.len() < 600, "{e}");
    // A record that does not parse quotes its id and the offending value cut too.
    let bad = trace(&id, &[0.0]).replace(r#""in":640"#, &format!(r#""in":"{id}""#));
    let p = write(d.path(), "bad.jsonl", &format!("{bad}\n"));
    let e = read_err(&[&p]);
    assert!(e.contains("bad.jsonl:1") && e.contains("requests[0].in") && e.len() < 800, "{e}");
}

#[test]
fn a_flood_of_newlines_is_skipped_and_lines_keep_their_numbers() {
    let d = tempfile::tempdir().unwrap();
    let flood = "\n".repeat(8 << 20);
    let text = format!("{}\n{flood}{}\n{}\n", trace("a", &[0.0]), trace("b", &[0.0]), trace("c", &[1.0, 0.5]));
    let p = write(d.path(), "flood.jsonl", &text);
    let set = skipping(&[&p]);
    assert_eq!(set.traces.len(), 2);
    let line_of_c = 3 + (8 << 20);
    assert!(set.warnings[0].contains(&format!("flood.jsonl:{line_of_c}:")), "{:?}", set.warnings);
    let only = write(d.path(), "empty.jsonl", &flood);
    assert!(read_err(&[&only]).contains("no traces found"));
}

#[test]
fn devices_are_refused_and_pipes_read() {
    let e = read_err(&[Path::new("/dev/zero")]);
    assert!(e.starts_with("/dev/zero: is a device, not a trace file"), "{e}");
    let d = tempfile::tempdir().unwrap();
    let fifo = d.path().join("traces.jsonl");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let (f, text) = (fifo.clone(), format!("{}\n", trace("piped", &[0.0])));
    let writer = std::thread::spawn(move || std::fs::write(f, text).unwrap());
    let set = read_traces(&[&fifo], &ReadOptions::default()).unwrap();
    writer.join().unwrap();
    assert_eq!(set.traces[0].id, "piped");
}

#[test]
fn backwards_times_are_refused_naming_the_request() {
    let d = tempfile::tempdir().unwrap();
    let p = write(d.path(), "back.jsonl", &format!("{}\n", trace("m", &[0.0, 5.0, 4.0])));
    let e = read_err(&[&p]);
    assert!(e.contains("back.jsonl:1: trace m: field `requests[2].t`: starts at 4 s, before the previous main-agent request (5 s)"), "{e}");
    assert!(e.contains("sort them by `t`"), "{e}");
    let p = write(d.path(), "inner.jsonl", &format!("{}\n", with_subagent("s", &["sa"], &[2.0, 9.0, 3.0])));
    let e = read_err(&[&p]);
    assert!(e.contains("trace s: field `requests[1].requests[2].t`") && e.contains("previous subagent request"), "{e}");
    // Equal times are in order; subagent entries may sit out of order among the others.
    let ok =
        with_subagent("ok", &["a"], &[2.0, 2.0]).replace(r#"{"t":0,"type":"s""#, r#"{"t":0,"type":"s","in":1,"out":1},{"t":3,"type":"s""#);
    let p = write(d.path(), "ok.jsonl", &format!("{ok}\n"));
    assert_eq!(read_traces(&[&p], &ReadOptions::default()).unwrap().traces.len(), 1);
}

#[test]
fn repeated_ids_are_refused_naming_both_places() {
    let d = tempfile::tempdir().unwrap();
    let a = write(d.path(), "a.jsonl", &format!("{}\n{}\n", trace("t1", &[0.0]), trace("t2", &[0.0])));
    let b = write(d.path(), "b.jsonl", &format!("\n{}\n", trace("t2", &[1.0])));
    let e = read_err(&[&a, &b]);
    assert!(e.contains("b.jsonl:2: trace t2: field `id`: repeats the id of the trace at") && e.contains("a.jsonl:2"), "{e}");
    let p = write(d.path(), "agents.jsonl", &format!("{}\n", with_subagent("s", &["x", "x"], &[1.0, 2.0])));
    let e = read_err(&[&p]);
    assert!(e.contains("field `requests[2].agent_id`: \"x\" is also the agent id of requests[1]"), "{e}");
    // Subagents before any main-agent request are dropped as orphans: their ids may repeat.
    let orphans = with_subagent("o", &["y", "y"], &[1.0]).replace(r#"{"t":0,"type":"s","in":640,"out":5,"hash_ids":[1,2]},"#, "");
    let orphans = orphans.replace("]}]}", r#"]},{"t":5,"type":"s","in":640,"out":5,"hash_ids":[1]}]}"#);
    let p = write(d.path(), "orphans.jsonl", &format!("{orphans}\n"));
    assert_eq!(read_traces(&[&p], &ReadOptions::default()).unwrap().traces.len(), 1);
}

#[test]
fn skip_invalid_skips_backwards_and_repeated_traces_with_a_warning_each() {
    let d = tempfile::tempdir().unwrap();
    let lines = [trace("a", &[0.0]), trace("back", &[2.0, 1.0]), trace("a", &[0.0]), trace("b", &[0.0])];
    let p = write(d.path(), "mixed.jsonl", &(lines.join("\n") + "\n"));
    let set = skipping(&[&p]);
    let ids: Vec<&str> = set.traces.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, ["a", "b"]);
    assert_eq!(set.warnings.len(), 2, "{:?}", set.warnings);
    assert!(set.warnings[0].contains("mixed.jsonl:2") && set.warnings[1].contains("mixed.jsonl:3"), "{:?}", set.warnings);
}

#[test]
fn mooncake_sessions_going_back_in_time_are_refused_or_skipped_whole() {
    let d = tempfile::tempdir().unwrap();
    let line = |s: &str, ts: u64| format!(r#"{{"session_id":"{s}","timestamp":{ts},"input_length":10,"hash_ids":[1]}}"#);
    let text = [line("s1", 0), line("s2", 100), line("s1", 500), line("s2", 50), line("s2", 900)].join("\n");
    let p = write(d.path(), "m.jsonl", &text);
    let e = read_err(&[&p]);
    assert!(e.contains("m.jsonl:4: trace s2: field `timestamp`: starts at 0.050 s, before the session's previous request"), "{e}");
    let set = skipping(&[&p]);
    assert_eq!(set.traces.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(), ["s1"]);
    assert_eq!(set.warnings.len(), 1, "{:?}", set.warnings);
}

#[test]
fn skipped_traces_past_the_cap_are_counted_not_listed() {
    let d = tempfile::tempdir().unwrap();
    let junk = "{}\n".repeat(MAX_SKIP_WARNINGS + 50);
    let p = write(d.path(), "junk.jsonl", &format!("{junk}{}\n", trace("ok", &[0.0])));
    let set = skipping(&[&p]);
    assert_eq!(set.traces.len(), 1);
    assert_eq!(set.warnings.len(), MAX_SKIP_WARNINGS + 1);
    assert!(set.warnings.last().unwrap().contains("skipped 50 more invalid traces"), "{:?}", set.warnings.last());
}
