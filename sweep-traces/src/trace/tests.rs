use std::io::Write;

use super::read::parse_weka;
use super::*;

/// The §1.5 example of the AgentX spec with the elided id lists written out.
pub(crate) fn example_record() -> String {
    let ids = |r: std::ops::Range<u64>| r.map(|i| i.to_string()).collect::<Vec<_>>().join(",");
    format!(
        r#"{{"id":"0196085d85d2075a50b74cd8795ffbdcea9a",
 "models":["claude-haiku-4-5-20251001","claude-opus-4-8"],
 "block_size":64,"hash_id_scope":"local",
 "requests":[
  {{"t":0.0,"model":"claude-opus-4-8","in":640,"out":20,"hash_ids":[{a}],"api_time":1.9,"type":"s","ttft":0.8}},
  {{"t":3.4,"model":"claude-opus-4-8","in":37760,"out":548,"hash_ids":[0,1,2,{b}],"api_time":14.1,"think_time":1.5,"type":"s","ttft":2.3}},
  {{"t":19.6,"model":"claude-opus-4-8","in":38400,"out":96,"hash_ids":[0,1,2,{b},{c}],"api_time":3.0,"think_time":0.7,"type":"s","ttft":1.1}},
  {{"t":23.0,"type":"subagent","agent_id":"subagent_001_9c2e41fa","subagent_type":"Subagent",
   "duration_ms":48210,"total_tokens":27580,"tool_use_count":null,"status":"completed",
   "models":["claude-haiku-4-5-20251001"],
   "requests":[
    {{"t":23.0,"type":"n","model":"claude-haiku-4-5-20251001","in":12800,"out":410,"hash_ids":[0,1,2,{d}],"api_time":6.0,"think_time":0.4}},
    {{"t":31.5,"type":"n","model":"claude-haiku-4-5-20251001","in":13824,"out":546,"hash_ids":[0,1,2,{d},{e}],"api_time":7.2,"think_time":2.5}}]}},
  {{"t":74.1,"model":"claude-opus-4-8","in":41664,"out":1210,"hash_ids":[0,1,2,{b},{c},{f}],"api_time":31.0,"think_time":0.1,"type":"s","ttft":1.9}}
 ]}}"#,
        a = ids(0..10),
        b = ids(10..597),
        c = ids(597..597 + 10),
        d = ids(609..806),
        e = ids(807..823),
        f = ids(823..859),
    )
    .replace('\n', "")
}

#[test]
fn example_record_parses_into_four_turns_and_one_subagent() {
    let t = parse_weka("example.jsonl", 1, &example_record()).unwrap();
    assert_eq!(t.main_requests().count(), 4);
    let subs: Vec<_> = t.subagents().collect();
    assert_eq!(subs.len(), 1);
    let times: Vec<f64> = subs[0].inner().map(|r| r.t).collect();
    assert_eq!(times, vec![23.0, 31.5]);
    assert_eq!(t.main_requests().nth(1).unwrap().ttft, Some(2.3));
    // Writing it back and reading again loses nothing.
    let again = parse_weka("x", 1, &serde_json::to_string(&t).unwrap()).unwrap();
    assert_eq!(again, t);
}

#[test]
fn relative_subagent_times_become_absolute() {
    let rec = example_record()
        .replace(r#"{"t":23.0,"type":"n""#, r#"{"t":0.0,"type":"n""#)
        .replace(r#"{"t":31.5,"type":"n""#, r#"{"t":8.5,"type":"n""#);
    let t = parse_weka("x", 1, &rec).unwrap();
    let times: Vec<f64> = t.subagents().next().unwrap().inner().map(|r| r.t).collect();
    assert_eq!(times, vec![23.0, 31.5]);
}

#[test]
fn global_hash_scope_is_rejected_naming_trace_and_field() {
    let rec = example_record().replace(r#""hash_id_scope":"local""#, r#""hash_id_scope":"global""#);
    let e = parse_weka("corpus.jsonl", 7, &rec).unwrap_err().to_string();
    assert!(e.contains("corpus.jsonl:7"), "{e}");
    assert!(e.contains("0196085d85d2075a50b74cd8795ffbdcea9a"), "{e}");
    assert!(e.contains("hash_id_scope"), "{e}");
}

#[test]
fn unknown_fields_are_rejected_with_their_path() {
    let top = example_record().replace(r#""block_size":64"#, r#""block_size":64,"colour":"red""#);
    let e = parse_weka("c.jsonl", 2, &top).unwrap_err().to_string();
    assert!(e.contains("colour") && e.contains("c.jsonl:2"), "{e}");
    let inner = example_record().replace(r#""ttft":0.8"#, r#""ttft":0.8,"temperature":1"#);
    let e = parse_weka("c.jsonl", 3, &inner).unwrap_err().to_string();
    assert!(e.contains("temperature") && e.contains("requests[0]"), "{e}");
    assert!(e.contains("0196085d85d2075a50b74cd8795ffbdcea9a"), "{e}");
    let missing = example_record().replace(r#""in":640,"#, "");
    let e = parse_weka("c.jsonl", 4, &missing).unwrap_err().to_string();
    assert!(e.contains("in") && e.contains("requests[0]"), "{e}");
    let bad_type = example_record().replace(r#""type":"s","ttft":0.8"#, r#""type":"x","ttft":0.8"#);
    let e = parse_weka("c", 1, &bad_type).unwrap_err().to_string();
    assert!(e.contains("unknown variant `x`") && e.contains("requests[0]") && e.contains("\"subagent\""), "{e}");
    let no_type = example_record().replace(r#""type":"s","ttft":0.8"#, r#""ttft":0.8"#);
    let e = parse_weka("c", 1, &no_type).unwrap_err().to_string();
    assert!(e.contains("missing field `type`") && e.contains("requests[0]"), "{e}");
    // An unknown field read before `type` (buffered) is refused like one after it.
    let early = example_record().replace(r#"{"t":0.0,"model""#, r#"{"t":0.0,"seed":7,"model""#);
    let e = parse_weka("c", 1, &early).unwrap_err().to_string();
    assert!(e.contains("unknown field `seed`") && e.contains("requests[0]"), "{e}");
    let inner_type = example_record().replace(r#"{"t":31.5,"type":"n""#, r#"{"t":31.5,"type":"subagent""#);
    let e = parse_weka("c", 1, &inner_type).unwrap_err().to_string();
    assert!(e.contains("unknown variant `subagent`") && e.contains("requests[3].requests[1]"), "{e}");
}

#[test]
fn entries_parse_whatever_the_position_of_their_type() {
    let first = example_record()
        .replace(r#"{"t":0.0,"model":"claude-opus-4-8","in":640"#, r#"{"type":"s","t":0.0,"model":"claude-opus-4-8","in":640"#);
    let first = first.replace(r#""api_time":1.9,"type":"s","ttft":0.8"#, r#""api_time":1.9,"ttft":0.8"#);
    let last = example_record().replace(r#""api_time":1.9,"type":"s","ttft":0.8"#, r#""api_time":1.9,"ttft":0.8,"type":"s""#);
    let base = parse_weka("x", 1, &example_record()).unwrap();
    assert_eq!(parse_weka("x", 1, &first).unwrap(), base);
    assert_eq!(parse_weka("x", 1, &last).unwrap(), base);
    assert!(matches!(base.requests[0], Entry::Streaming(_)));
    assert!(matches!(base.requests[3], Entry::Subagent(_)));
}

#[test]
fn reads_plain_gzip_directory_and_skips_bad_traces_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let good = example_record();
    let bad = good.replace(r#""block_size":64"#, r#""block_size":64,"oops":1"#);
    std::fs::write(dir.path().join("a.jsonl"), format!("{good}\n\n{bad}\n")).unwrap();
    // Each file holds its own trace: ids are unique in a set.
    let renamed = |n: &str| good.replace("0196085d85d2075a50b74cd8795ffbdcea9a", n);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(format!("{}\n", renamed("b")).as_bytes()).unwrap();
    std::fs::write(dir.path().join("b.jsonl.gz"), gz.finish().unwrap()).unwrap();
    std::fs::write(dir.path().join("c.json"), serde_json::to_string_pretty(&parse_weka("x", 1, &renamed("c")).unwrap()).unwrap()).unwrap();
    std::fs::write(dir.path().join("notes.txt"), "ignored").unwrap();

    let strict = read_traces(&[dir.path()], &ReadOptions::default()).unwrap_err().to_string();
    assert!(strict.contains("a.jsonl:3") && strict.contains("oops"), "{strict}");

    let set = read_traces(&[dir.path()], &ReadOptions { skip_invalid: true, ..ReadOptions::default() }).unwrap();
    assert_eq!(set.traces.len(), 3);
    assert_eq!(set.warnings.len(), 1);
    assert!(set.warnings[0].contains("a.jsonl:3"));
    assert_eq!(set.files.len(), 3);
    assert!(set.traces.iter().all(|t| t.main_requests().count() == 4));
}

#[test]
fn mooncake_lines_group_by_session() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("m.jsonl");
    std::fs::write(
        &p,
        concat!(
            r#"{"timestamp": 0, "input_length": 655, "output_length": 52, "hash_ids": [46, 47]}"#,
            "\n",
            r#"{"session_id": "s1", "input_length": 1000, "output_length": 10, "hash_ids": [1, 2]}"#,
            "\n",
            r#"{"session_id": "s1", "delay": 1500, "input_length": 1600, "output_length": 12, "hash_ids": [1, 2, 3]}"#,
            "\n"
        ),
    )
    .unwrap();
    let set = read_traces(&[&p], &ReadOptions::default()).unwrap();
    assert_eq!(set.traces.len(), 2);
    assert_eq!(set.traces[0].block_size, 512);
    let s1: Vec<_> = set.traces[1].main_requests().collect();
    assert_eq!(s1.len(), 2);
    assert_eq!(s1[1].t, 1.5);
    assert_eq!(s1[1].input_tokens, 1600);
    std::fs::write(&p, r#"{"input_length": 5, "text_input": "hi"}"#).unwrap();
    let e = read_traces(&[&p], &ReadOptions::default()).unwrap_err().to_string();
    assert!(e.contains("m.jsonl:1") && e.contains("input_length"), "{e}");
}

#[test]
fn synthetic_generator_is_deterministic_and_well_formed() {
    let a = synth::generate(12, 7);
    let b = synth::generate(12, 7);
    let c = synth::generate(12, 8);
    assert!(a == b, "same seed, same traces");
    assert!(a != c, "different seed, different traces");
    for t in &a {
        // Round trip through the strict reader.
        let back = parse_weka("x", 1, &serde_json::to_string(t).unwrap()).unwrap();
        assert!(&back == t, "trace {} changed in a write/read round trip", t.id);
        let mut last = -1.0;
        for r in t.main_requests() {
            assert!(r.t >= last);
            last = r.t;
            assert_eq!(r.hash_ids.len() as u64, r.input_tokens / 64);
            assert!(r.output_tokens >= 1);
        }
    }
    // A trace can be generated alone, identical to its place in the set.
    let g = synth::Generator::new(synth::SynthParams { traces: 12, seed: 7, ..Default::default() });
    assert!(g.trace(5) == a[5]);
}

#[test]
fn synthetic_set_matches_the_corpus_quantiles() {
    // The calibration target (docs/traces.md): p50 and p90 of ISL, OSL, think time and turns per
    // trace within 15 % of the real corpus values (measured on the 200 real traces).
    let real = [
        ("ISL (tokens)", 103_443.0, 201_209.0),
        ("OSL (tokens)", 215.0, 849.0),
        ("think time (s)", 10.0, 149.0),
        ("turns per trace", 51.0, 173.1),
    ];
    let s = stats::stats_of("synthetic", &synth::generate(200, 42));
    for (name, p50, p90) in real {
        let row = s.row(name).unwrap();
        for (got, want, which) in [(row.p50, p50, "p50"), (row.p90, p90, "p90")] {
            assert!((got / want - 1.0).abs() <= 0.15, "{name} {which}: synthetic {got} vs real {want}");
        }
    }
}

fn shared_data() -> Option<std::path::PathBuf> {
    let root = std::env::var("SWEEP_SHARED_DATA")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data"));
    let p = root.join("agentx-traces/kv-cache-tester-200.jsonl.gz");
    if p.exists() {
        Some(p)
    } else {
        eprintln!("shared data absent: {} not found (set SWEEP_SHARED_DATA)", p.display());
        None
    }
}

#[test]
#[ignore = "needs the shared AgentX corpus (SWEEP_SHARED_DATA)"]
fn all_real_traces_parse_and_totals_match_an_independent_count() {
    let Some(path) = shared_data() else {
        panic!("shared data absent: set SWEEP_SHARED_DATA to the shared data directory");
    };
    let set = read_traces(&[&path], &ReadOptions::default()).unwrap();
    assert_eq!(set.traces.len(), 200);
    // Independent count straight from the JSON values.
    let text = {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(std::fs::File::open(&path).unwrap()), &mut s).unwrap();
        s
    };
    let (mut reqs, mut groups, mut inner, mut tok_in, mut tok_out) = (0u64, 0u64, 0u64, 0u64, 0u64);
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        for r in v["requests"].as_array().unwrap() {
            if r["type"] == "subagent" {
                groups += 1;
                for q in r["requests"].as_array().unwrap() {
                    inner += 1;
                    tok_in += q["in"].as_u64().unwrap();
                    tok_out += q["out"].as_u64().unwrap();
                }
            } else {
                reqs += 1;
                tok_in += r["in"].as_u64().unwrap();
                tok_out += r["out"].as_u64().unwrap();
            }
        }
    }
    let main: u64 = set.traces.iter().map(|t| t.main_requests().count() as u64).sum();
    let g: u64 = set.traces.iter().map(|t| t.subagents().count() as u64).sum();
    let i: u64 = set.traces.iter().flat_map(|t| t.subagents()).map(|s| s.requests.len() as u64).sum();
    let ti: u64 = set.traces.iter().flat_map(|t| t.all_requests()).map(|r| r.input_tokens).sum();
    let to: u64 = set.traces.iter().flat_map(|t| t.all_requests()).map(|r| r.output_tokens).sum();
    assert_eq!((main, g, i, ti, to), (reqs, groups, inner, tok_in, tok_out));
    assert_eq!(set.traces.iter().filter(|t| t.subagents().next().is_some()).count(), 9);
    // kv-cache-tester stores subagent inner times relative to the group: now absolute.
    for t in &set.traces {
        for s in t.subagents() {
            assert!(s.inner().next().unwrap().t >= s.t - 0.001);
        }
    }
}

#[test]
#[ignore = "needs the shared AgentX corpus (SWEEP_SHARED_DATA)"]
fn synthetic_matches_real_corpus_within_15_percent() {
    let Some(path) = shared_data() else {
        panic!("shared data absent: set SWEEP_SHARED_DATA to the shared data directory");
    };
    let set = read_traces(&[&path], &ReadOptions::default()).unwrap();
    let real = stats::stats_of("real", &set.traces);
    let syn = stats::stats_of("synthetic", &synth::generate(200, 42));
    for name in ["ISL (tokens)", "OSL (tokens)", "think time (s)", "turns per trace"] {
        let (r, s) = (real.row(name).unwrap(), syn.row(name).unwrap());
        for (a, b, w) in [(s.p50, r.p50, "p50"), (s.p90, r.p90, "p90")] {
            assert!((a / b - 1.0).abs() <= 0.15, "{name} {w}: synthetic {a} vs real {b}");
        }
    }
}
