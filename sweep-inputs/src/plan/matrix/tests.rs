use super::*;
use crate::recipe::master::Master;
use std::path::Path;

const SPEC_ENTRY: &str = r#"
dsr1-fp4-b200-sglang-mtp:
  image: lmsysorg/sglang:v0.5.16-cu130
  model: nvidia/DeepSeek-R1-0528-FP4-V2
  model-prefix: dsr1
  runner: b200
  precision: fp4
  framework: sglang
  multinode: false
  scenarios:
    fixed-seq-len:
    - isl: 8192
      osl: 1024
      search-space:
      - { tp: 4, ep: 1, conc-start: 1, conc-end: 32, spec-decoding: mtp }
      - { tp: 4, ep: 4, dp-attn: true, conc-start: 64, conc-end: 256, spec-decoding: mtp }
"#;

fn entry(text: &str) -> Entry {
    Master::from_str(Path::new("m.yaml"), text).unwrap().entries.remove(0)
}

#[test]
fn spec_first_row_byte_for_byte() {
    let rows = expand(&entry(SPEC_ENTRY), &[Scenario::FixedSeqLen], None).unwrap();
    let want = r#"{"conc":1,"dcp-size":1,"disagg":false,"dp-attn":false,"ep":1,"exp-name":"dsr1_8k1k","framework":"sglang","image":"lmsysorg/sglang:v0.5.16-cu130","isl":8192,"max-model-len":9472,"model":"nvidia/DeepSeek-R1-0528-FP4-V2","model-prefix":"dsr1","osl":1024,"pcp-size":1,"pp":1,"precision":"fp4","run-eval":false,"runner":"b200","spec-decoding":"mtp","tp":4}"#;
    assert_eq!(canonical_json(&Value::Object(rows[0].fields.clone())), want);
    let concs: Vec<u32> = rows.iter().map(|r| r.conc()).collect();
    assert_eq!(concs, vec![1, 2, 4, 8, 16, 32, 64, 128, 256]);
}

#[test]
fn fingerprint_ignores_only_conc_and_exp_name() {
    let rows = expand(&entry(SPEC_ENTRY), &[Scenario::FixedSeqLen], None).unwrap();
    let (a, b) = (recipe_fingerprint(&rows[0].fields), recipe_fingerprint(&rows[1].fields));
    assert_eq!(a, b, "only conc differs");
    let mut c = rows[0].fields.clone();
    c.insert("exp-name".into(), json!("other"));
    assert_eq!(recipe_fingerprint(&c), a);
    c.insert("ep".into(), json!(2));
    assert_ne!(recipe_fingerprint(&c), a);
    assert_eq!(a.len(), 64);
}

#[test]
fn eval_selection_defaults() {
    let rows = expand(&entry(SPEC_ENTRY), &[Scenario::FixedSeqLen], None).unwrap();
    let ev = select_evals(&rows, false, false);
    let mut concs: Vec<u32> = ev.iter().map(|r| r.conc()).collect();
    concs.sort();
    // {1..32} → 32; {64,128,256} (DPA group) → 128 and 256.
    assert_eq!(concs, vec![32, 128, 256]);
    assert!(ev.iter().all(|r| r.run_eval()));
    let small = SPEC_ENTRY
        .replace("conc-start: 1, conc-end: 32", "conc-list: [1, 2, 4, 8]")
        .replace("conc-start: 64, conc-end: 256", "conc-list: [2]");
    assert!(select_evals(&expand(&entry(&small), &[Scenario::FixedSeqLen], None).unwrap(), false, false).is_empty());
}

const MN: &str = r#"
k-mn:
  image: i
  model: m
  model-prefix: kimik3
  runner: cluster:h200-multinode
  precision: fp4
  framework: dynamo-trt
  multinode: true
  disagg: true
  kv-p2p-transfer: nixl
  scenarios:
    fixed-seq-len:
    - isl: 8192
      osl: 1024
      search-space:
      - { spec-decoding: mtp, conc-list: [64, 128], prefill: { num-worker: 1, tp: 4, ep: 4, dp-attn: true }, decode: { num-worker: 1, tp: 8, ep: 8, dp-attn: true } }
      - { spec-decoding: mtp, conc-list: [256, 16], prefill: { num-worker: 1, tp: 4, ep: 4, dp-attn: true }, decode: { num-worker: 1, tp: 8, ep: 8, dp-attn: true } }
    agentic-coding:
    - search-space:
      - { conc-list: [64, 128], prefill: { num-worker: 2, tp: 16, ep: 32, dp-attn: true }, decode: { num-worker: 0, tp: 16, ep: 32, dp-attn: true } }
"#;

#[test]
fn multinode_fixed_one_row_agentic_one_per_conc() {
    let e = entry(MN);
    let rows = expand(&e, &[Scenario::FixedSeqLen, Scenario::AgenticCoding], None).unwrap();
    assert_eq!(rows[0].concs(), vec![64, 128]);
    let ag: Vec<&Row> = rows.iter().filter(|r| r.origin.scenario == Scenario::AgenticCoding).collect();
    assert_eq!(ag.len(), 2);
    assert_eq!(ag[0].fields["exp-name"], json!("kimik3_p2x16ep32dpa_d0x16ep32dpa_conc64"));
    assert_eq!(ag[1].fields["conc"], json!([128]));
}

#[test]
fn all_evals_merges_multinode_rows() {
    let rows = expand(&entry(MN), &[Scenario::FixedSeqLen], None).unwrap();
    let ev = select_evals(&rows, true, false);
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0].fields["conc"], json!([16, 64, 128, 256]));
    assert_eq!(ev[0].fields["eval-all-concs"], json!(true));
    let def = select_evals(&rows, false, false);
    assert_eq!(def[0].fields["eval-conc"], json!(256));
}

#[test]
fn agentic_exp_names_and_dram_budget() {
    let text = r#"
dsv4-fp4-b200-vllm-agentic-mtp:
  image: i
  model: m
  model-prefix: dsv4
  runner: cluster:b200-dgxc
  precision: fp4
  framework: vllm
  multinode: false
  scenarios:
    agentic-coding:
    - dram-utilization: 0.95
      search-space:
      - { tp: 8, kv-offloading: dram, kv-offload-backend: { name: vllm-simple }, spec-decoding: mtp, conc-list: [1, 4] }
"#;
    let mut runners = Runners::default();
    runners
        .hardware
        .insert("cluster:b200-dgxc".into(), crate::recipe::runners::Hardware { available_cpu_dram_mib: 3_000_000, gpus_per_node: 8 });
    let rows = expand(&entry(text), &[Scenario::AgenticCoding], Some(&runners)).unwrap();
    assert_eq!(rows[0].fields["exp-name"], json!("dsv4_tp8_conc1_kvdram-vllm-simple_spec-mtp"));
    assert_eq!(rows[0].fields["total-cpu-dram-gb"], json!(2849));
    assert_eq!(rows[0].fields["duration"], json!(3600));
    assert!(rows[0].fields.get("isl").is_none());
    assert!(expand(&entry(text), &[Scenario::AgenticCoding], None).unwrap_err().to_string().contains("hardware"));
}

#[test]
fn trim_keeps_min_conc_per_recipe() {
    let rows = expand(&entry(SPEC_ENTRY), &[Scenario::FixedSeqLen], None).unwrap();
    let t = trim_conc(rows);
    let c: Vec<u32> = t.iter().map(|r| r.conc()).collect();
    assert_eq!(c, vec![1, 64]);
}
