//! Tests of the eval record readers (`record.rs`, `folders.rs`).

use super::*;

#[test]
fn meta_reads_what_the_shell_writes() {
    let m: Meta = serde_json::from_str(
        r#"{"is_multinode": false, "framework": "sglang", "precision": "fp8", "tp": 8, "conc": 64, "ep": "1",
            "dp_attention": "true", "model": "m", "infmax_model_prefix": "dsv4", "hw": "b200", "isl": "8192", "osl": 1024}"#,
    )
    .unwrap();
    assert_eq!((m.tp, m.ep, m.dp_attention, m.isl.as_str(), m.osl.as_str()), (8, 1, true, "8192", "1024"));
    assert_eq!(m.label(), "dsv4 B200 sglang fp8 TP8 EP1 DPA C64");
    assert_eq!(Meta::default().model_prefix(), None);
}

#[test]
fn rows_are_collect_eval_results_rows_in_its_order() {
    let d = tempfile::tempdir().unwrap();
    for (dir, tp, conc, strict) in [("b", 8, 64, 0.97), ("a", 8, 16, 0.96), ("c", 4, 256, 0.95)] {
        let p = d.path().join(dir);
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(
            p.join(META_FILE),
            format!(
                r#"{{"infmax_model_prefix": "dsv4", "hw": "b200", "framework": "SGLang", "precision": "FP8", "tp": {tp}, "conc": {conc}}}"#
            ),
        )
        .unwrap();
        std::fs::write(
            p.join("results_x.json"),
            format!(r#"{{"lm_eval_version": "0.4.9", "results": {{"gsm8k": {{"exact_match,strict-match": {strict}, "exact_match,flexible-extract": 0.9}}}}, "n-samples": {{"gsm8k": {{"original": 1319, "effective": 1319}}}}}}"#),
        )
        .unwrap();
    }
    let rows = agg_rows(d.path());
    let got: Vec<(i64, i64, f64)> =
        rows.iter().map(|r| (r["tp"].as_i64().unwrap(), r["conc"].as_i64().unwrap(), r["score"].as_f64().unwrap())).collect();
    assert_eq!(got, [(4, 256, 0.95), (8, 16, 0.96), (8, 64, 0.97)]);
    let r = &rows[0];
    assert_eq!((r["hw"].as_str(), r["framework"].as_str(), r["precision"].as_str()), (Some("B200"), Some("sglang"), Some("fp8")));
    assert_eq!((r["score_name"].as_str(), r["n_eff"].as_u64(), r["em_flexible"].as_f64()), (Some("em_strict"), Some(1319), Some(0.9)));
    assert!(r["source"].as_str().unwrap().ends_with("results_x.json"));
}

#[test]
fn batched_artifacts_give_one_record_per_concurrency() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join(META_FILE),
        r#"{"is_multinode": true, "infmax_model_prefix": "dsv4", "conc": 8, "eval_concs": [8, 16, 32, 64], "completed_eval_concs": [8, 16, 64], "failed_eval_concs": [32]}"#,
    )
    .unwrap();
    let result = |strict: f64| {
        format!(
            r#"{{"lm_eval_version": "0.4.9", "results": {{"gsm8k": {{"exact_match,strict-match": {strict}, "exact_match,flexible-extract": 0.95}}}}, "n-samples": {{"gsm8k": {{"original": 1319, "effective": 1319}}}}}}"#
        )
    };
    std::fs::write(d.path().join("results_a_conc8.json"), result(0.96)).unwrap();
    std::fs::write(d.path().join("results_a_conc16_1.json"), result(0.97)).unwrap();
    let recs = read_eval_records(d.path()).unwrap();
    let got: Vec<(u32, EvalStatus, Option<f64>)> = recs.iter().map(|r| (r.meta.conc, r.status, r.em_strict)).collect();
    assert_eq!(
        got,
        [
            (8, EvalStatus::Done, Some(0.96)),
            (16, EvalStatus::Done, Some(0.97)),
            (32, EvalStatus::Failed, None),
            (64, EvalStatus::Failed, None)
        ]
    );
    assert!(recs[2].reason.as_deref().unwrap().contains("failed for concurrency 32"));
    assert!(recs[3].reason.as_deref().unwrap().contains("no result file for concurrency 64"));
    assert!(!recs[3].infrastructure_success);
}

#[test]
fn a_torn_last_sample_line_is_left_out() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("samples.jsonl");
    let s = Sample {
        doc_id: 3,
        prompt_hash: "p".into(),
        doc_hash: "d".into(),
        target_hash: "t".into(),
        target: "18".into(),
        response: Some("#### 18".into()),
        from_reasoning: false,
        filtered_resps: Some(FilterPair { strict: "18".into(), flexible: "18".into() }),
        exact_match: Some(FilterPair { strict: 1.0, flexible: 1.0 }),
        finish_reason: Some("stop".into()),
        completion_tokens: Some(4),
        error: None,
        attempts: 1,
        latency_s: 0.5,
    };
    let line = serde_json::to_string(&s).unwrap();
    std::fs::write(&p, format!("{line}\n{}", &line[..20])).unwrap();
    let (v, len) = read_samples(&p).unwrap();
    assert_eq!((v, len), (vec![s.clone()], line.len() as u64 + 1));
    std::fs::write(&p, format!("{line}\nnot json\n")).unwrap();
    let e = read_samples(&p).unwrap_err().to_string();
    assert!(e.contains("line 2") && e.contains("not a sample of `sweep eval`"), "{e}");
    assert_eq!(read_samples(&d.path().join("none.jsonl")).unwrap(), (vec![], 0));
}
