//! The GitHub Actions path, run the way a workflow runs it (docs/examples/github-sweep.yml):
//! `sweep plan --format github` gives the matrices, each matrix entry is one job running
//! `sweep run --point <id>` into its own artifact folder, and `sweep collect` merges the
//! downloaded artifacts. The merged run must equal a single local run of the same plan.

mod common;
use common::*;

fn run(a: &[String]) -> std::process::Output {
    sweep(&a.iter().map(String::as_str).collect::<Vec<_>>(), &workspace_root())
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

#[test]
fn github_matrix_jobs_collected_equal_a_single_local_run() {
    let tmp = tempfile::tempdir().unwrap();
    let o = sweep(&["plan", "full-sweep-fail-fast", "--format", "github"], &workspace_root());
    assert!(o.status.success(), "{}", text(&o).1);
    let matrices: serde_json::Value = serde_json::from_slice(&o.stdout).expect("plan --format github prints JSON");
    let jobs: Vec<(String, usize, String)> = matrices
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(job, m)| {
            m["include"]
                .as_array()
                .unwrap()
                .iter()
                .enumerate()
                .map(move |(i, e)| (job.clone(), i, e["point"].as_str().unwrap().to_string()))
        })
        .collect();
    assert_eq!(jobs.iter().filter(|j| j.0 == "canary").count(), 1);
    // 39 throughput points (13 agentic, 26 fixed-seq-len), the 2 agentic evals and the 3 8k/1k
    // evals (gsm8k), each its own job.
    assert_eq!(jobs.len(), 44, "{jobs:?}");
    let count = |m: &str| jobs.iter().filter(|j| j.0 == m).count();
    assert_eq!((count("single_node_1k1k"), count("single_node_8k1k"), count("single_node_agentic")), (11, 14, 13), "{jobs:?}");
    assert_eq!((count("agentic_evals"), count("evals")), (2, 3), "{jobs:?}");
    assert_eq!(matrices["single_node_agentic"]["fail-fast"], true);

    // One matrix job per point, each with its own artifact folder; each exits on its point alone.
    let artifacts = tmp.path().join("artifacts");
    for (job, i, point) in &jobs {
        let out = artifacts.join(format!("{job}-{i}"));
        let o = run(&[
            s(&["run", "full-sweep-fail-fast", "--duration", "300", "--traces", "synthetic", "--point", point, "--out"]),
            vec![out.display().to_string()],
        ]
        .concat());
        let (so, se) = text(&o);
        assert!(o.status.success(), "matrix job for {point} failed:\n{so}\n{se}");
        let summary = harness::results::RunSummary::load(&out).unwrap();
        let ran: Vec<&str> = summary.points.iter().map(|p| p.id.as_str()).chain(summary.evals.iter().map(|e| e.id.as_str())).collect();
        assert_eq!(ran, vec![point.as_str()]);
    }
    let merged = tmp.path().join("merged");
    let o = run(&s(&["collect", artifacts.to_str().unwrap(), "--out", merged.to_str().unwrap()]));
    assert!(o.status.success(), "{}", text(&o).1);
    assert!(text(&o).0.contains("collected 39 point(s)"), "{}", text(&o).0);

    let whole = tmp.path().join("whole");
    let o = run(&s(&["run", "full-sweep-fail-fast", "--duration", "300", "--traces", "synthetic", "--out", whole.to_str().unwrap()]));
    assert!(text(&o).0.contains("39/39 point(s) finished"), "{}\n{}", text(&o).0, text(&o).1);
    for (_, _, id) in jobs.iter().filter(|j| !j.2.starts_with("eval:")) {
        let read = |run: &std::path::Path| std::fs::read(harness::results::point_dir(run, id).join("agg.json")).unwrap();
        assert_eq!(read(&whole), read(&merged), "{id}: aggregates differ");
    }
    let (w, m) = (harness::results::RunSummary::load(&whole).unwrap(), harness::results::RunSummary::load(&merged).unwrap());
    assert_eq!(w.points.iter().map(|p| &p.id).collect::<Vec<_>>(), m.points.iter().map(|p| &p.id).collect::<Vec<_>>(), "plan order");
    assert_eq!(w.curves, m.curves, "same frontiers and coverage");
    let evals = |r: &harness::results::RunSummary| r.evals.iter().map(|e| (e.id.clone(), e.describe())).collect::<Vec<_>>();
    assert_eq!(evals(&w), evals(&m), "the evals, collected in plan order");
    assert_eq!(evals(&w).len(), 5);
    for f in ["report.html", "report.md", "results.parquet", "plan.json"] {
        assert!(merged.join(f).is_file(), "{f} missing from the collected run");
    }
    // The gate runs on the collected run, as the workflow's last job does.
    let o = sweep(&["gate", merged.to_str().unwrap()], &workspace_root());
    let g = sweep(&["gate", whole.to_str().unwrap()], &workspace_root());
    assert_eq!(o.status.code(), g.status.code(), "{}\n{}", text(&o).0, text(&g).0);
}

#[test]
fn point_must_name_a_point_of_the_plan() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("x");
    let o = sweep(&["run", "full-sweep-fail-fast", "--point", "nope/tp1-c1", "--out", out.to_str().unwrap()], &workspace_root());
    assert!(!o.status.success());
    assert!(text(&o).1.contains("nope/tp1-c1: no such point in the plan"), "{}", text(&o).1);
}
