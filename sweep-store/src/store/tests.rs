//! The store on SQLite: a run folder recorded and read back, idempotence, newer schemas refused.
//! Both backends, concurrency and the commands are tested in `harness/tests/store.rs`.

use super::*;
use crate::results::RunSummary;
use sweep_results::testing::fake_run;

/// A run folder from the report tests' run, with a plan row per point and a gate verdict.
pub(crate) fn fake_run_dir(dir: &Path, run_id: &str, fingerprint: &str, finished: u64) {
    let mut run = fake_run(5);
    run.run_id = run_id.into();
    run.created_unix = finished;
    run.save(dir).unwrap();
    let points: Vec<serde_json::Value> = run
        .points
        .iter()
        .map(|p| serde_json::json!({"id": p.id, "row": {"runner": "cluster:gb300-nv", "recipe-fingerprint": fingerprint, "image": "img", "model": "m", "framework": "sglang", "precision": "fp4"}}))
        .collect();
    let plan = serde_json::json!({"head_ref": "abc", "base_ref": null, "canary": null, "matrices": [{"points": points}], "evals": [],
        "changelog_metadata": {"entries": [{"config-keys": ["cfg"], "pr-link": "https://github.com/o/r/pull/1"}]}});
    std::fs::write(dir.join("plan.json"), serde_json::to_vec(&plan).unwrap()).unwrap();
    let v = crate::gate::evaluate(&run, None, Vec::new());
    crate::results::write_json(&dir.join("gate.json"), &v).unwrap();
    for p in &run.points {
        let pd = crate::results::point_dir(dir, &p.id);
        std::fs::create_dir_all(&pd).unwrap();
        std::fs::write(pd.join("profile_export.jsonl"), b"{}\n").unwrap();
    }
}

#[test]
fn a_run_folder_is_recorded_and_read_back_whole() {
    let d = tempfile::tempdir().unwrap();
    let run_dir = d.path().join("r1");
    fake_run_dir(&run_dir, "r1", "fp-a", 1_700_000_000);
    let loc = Location::Sqlite(d.path().join("s.db"));
    let mut s = Store::open(&loc, Mode::Write).unwrap();
    let rec = s.record_dir(&run_dir, "run").unwrap();
    let runs = s.runs(&RunFilter::default()).unwrap();
    assert_eq!(runs, vec![rec.run.clone()]);
    assert_eq!(runs[0].gate.as_deref(), Some("pass"), "5 valid points pass coverage: {:?}", runs[0]);
    assert_eq!(runs[0].pr_link.as_deref(), Some("https://github.com/o/r/pull/1"));
    let points = s.points("r1").unwrap();
    assert_eq!(points, rec.points);
    assert_eq!(points.len(), 5);
    let p = &points[2];
    assert_eq!(p.recipe_fingerprint.as_deref(), Some("fp-a"));
    assert_eq!(p.topology.as_deref(), Some("tp4"));
    let m = p.metrics.as_ref().unwrap();
    assert!(m.tput_per_gpu.lo.unwrap() <= m.tput_per_gpu.value && m.tput_per_gpu.value <= m.tput_per_gpu.hi.unwrap());
    assert_eq!(
        p.files.iter().map(|f| (f.path.as_str(), f.kind.as_str())).collect::<Vec<_>>(),
        vec![("cfg/tp4-c4/profile_export.jsonl", "records")]
    );
    assert_eq!(s.blob(p.profiles_hash.as_ref().unwrap()).unwrap().unwrap()["hardware"], "gb300");
    assert_eq!(s.plan("r1").unwrap().unwrap()["head_ref"], "abc");
}

#[test]
fn recording_again_replaces_the_run() {
    let d = tempfile::tempdir().unwrap();
    let run_dir = d.path().join("r1");
    fake_run_dir(&run_dir, "r1", "fp-a", 1_700_000_000);
    let mut s = Store::open(&Location::Sqlite(d.path().join("s.db")), Mode::Write).unwrap();
    s.record_dir(&run_dir, "run").unwrap();
    let mut sum = RunSummary::load(&run_dir).unwrap();
    sum.points.truncate(3);
    sum.save(&run_dir).unwrap();
    s.record_dir(&run_dir, "gate").unwrap();
    assert_eq!(s.count_runs(&RunFilter::default()).unwrap(), 1);
    assert_eq!(s.points("r1").unwrap().len(), 3);
    assert_eq!(s.run("r1").unwrap().unwrap().source, "gate");
}

#[test]
fn a_store_of_a_newer_schema_is_refused_naming_both_versions() {
    let d = tempfile::tempdir().unwrap();
    let loc = Location::Sqlite(d.path().join("s.db"));
    drop(Store::open(&loc, Mode::Write).unwrap());
    let c = rusqlite::Connection::open(d.path().join("s.db")).unwrap();
    c.execute("INSERT INTO schema_version (version, applied_unix, sweep_version) VALUES (7, 0, '9.0.0')", []).unwrap();
    drop(c);
    for mode in [Mode::Write, Mode::ReadOnly] {
        let e = Store::open(&loc, mode).err().expect("refused").to_string();
        assert!(e.contains("schema version 7") && e.contains(&format!("up to {SCHEMA_VERSION}")) && e.contains("upgrade sweep"), "{e}");
    }
}

#[test]
fn a_missing_store_is_named_for_reading() {
    let d = tempfile::tempdir().unwrap();
    let e = Store::open(&Location::Sqlite(d.path().join("none.db")), Mode::ReadOnly).err().unwrap().to_string();
    assert!(e.starts_with("no store at ") && e.contains("--store"), "{e}");
    assert!(!d.path().join("none.db").exists(), "reading creates nothing");
}

#[test]
fn passwords_are_not_shown() {
    assert_eq!(Location::parse("postgres://u:secret@h:5432/db").to_string(), "postgres://u:***@h:5432/db");
    assert_eq!(Location::parse("postgresql://h/db").to_string(), "postgresql://h/db");
    assert_eq!(Location::parse("reports/x.db"), Location::Sqlite("reports/x.db".into()));
}

/// Labels and config keys keep their exact text: one with a space is one item (stored escaped,
/// so a label filter still matches whole items), and one with a backslash survives too.
#[test]
fn list_items_with_spaces_are_kept_whole() {
    let items = vec!["my config".to_string(), "a\\b".into(), "x".into(), "tab\tkept".into()];
    let joined = types::join_list(&items);
    assert_eq!(joined, " my\\sconfig a\\\\b x tab\tkept ");
    assert_eq!(types::split_list(&joined), items);
    // Lists written before the escaping read as they did.
    assert_eq!(types::split_list(" a b "), vec!["a", "b"]);

    let d = tempfile::tempdir().unwrap();
    let run_dir = d.path().join("r1");
    fake_run_dir(&run_dir, "r1", "fp-a", 1_700_000_000);
    let mut run = RunSummary::load(&run_dir).unwrap();
    run.labels = vec!["nightly sweep".into(), "sweep".into()];
    run.save(&run_dir).unwrap();
    let loc = Location::Sqlite(d.path().join("s.db"));
    let mut s = Store::open(&loc, Mode::Write).unwrap();
    s.record_dir(&run_dir, "run").unwrap();
    let runs = s.runs(&RunFilter::default()).unwrap();
    assert_eq!(runs[0].labels, vec!["nightly sweep", "sweep"]);
    let mut by = |l: &str| s.runs(&RunFilter { label: Some(l.into()), ..Default::default() }).unwrap().len();
    assert_eq!((by("nightly sweep"), by("sweep"), by("nightly")), (1, 1, 0));
}
