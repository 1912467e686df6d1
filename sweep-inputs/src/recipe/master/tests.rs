use super::*;

fn load(text: &str) -> Result<Master, Problems> {
    Master::from_str(Path::new("m.yaml"), text)
}

const GOOD: &str = r#"
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

#[test]
fn good_entry_loads_with_defaults() {
    let m = load(GOOD).unwrap();
    let e = m.get("dsr1-fp4-b200-sglang-mtp").unwrap();
    assert_eq!(e.fixed[0].rows.len(), 2);
    assert_eq!(e.fixed[0].rows[0].topology, Topology::Single { tp: 4, pp: 1, dcp: 1, pcp: 1, ep: 1, dp_attn: false });
    assert_eq!(e.fixed[0].rows[1].conc, Conc::Range { start: 64, end: 256 });
    assert_eq!(e.line, Some(2));
}

fn expect_err(text: &str, needle: &str, line: Option<usize>) {
    let err = load(text).err().unwrap_or_else(|| panic!("expected an error containing {needle}"));
    let hit = err.0.iter().find(|p| p.to_string().contains(needle)).unwrap_or_else(|| panic!("no `{needle}` in:\n{err}"));
    if line.is_some() {
        assert_eq!(hit.line, line, "{hit}");
    }
    assert!(!hit.fix.is_empty());
}

#[test]
fn star_in_key_fails_naming_key() {
    expect_err(&GOOD.replace("dsr1-fp4-b200-sglang-mtp:", "dsr1-*-b200:"), "`dsr1-*-b200` contains `*`", Some(2));
}

#[test]
fn unknown_field_names_its_path() {
    let t = GOOD.replace("      osl: 1024\n", "      osl: 1024\n      trace-source: x\n");
    expect_err(&t, "dsr1-fp4-b200-sglang-mtp.scenarios.fixed-seq-len[0].trace-source: unknown key", Some(14));
}

#[test]
fn range_and_list_both_or_neither_fail() {
    expect_err(
        &GOOD.replace("conc-start: 1, conc-end: 32", "conc-list: [1], conc-start: 1, conc-end: 32"),
        "both `conc-list` and",
        Some(15),
    );
    expect_err(&GOOD.replace("conc-start: 1, conc-end: 32, ", ""), "no concurrency", Some(15));
    expect_err(&GOOD.replace("conc-start: 1, conc-end: 32", "conc-start: 64, conc-end: 32"), "greater than", None);
    expect_err(&GOOD.replace("conc-start: 1, conc-end: 32", "conc-list: [0, 4]"), "integer > 0", None);
}

#[test]
fn duplicate_key_across_files_fails() {
    let d = tempfile::tempdir().unwrap();
    let (a, b) = (d.path().join("amd-master.yaml"), d.path().join("nvidia-master.yaml"));
    std::fs::write(&a, GOOD).unwrap();
    std::fs::write(&b, GOOD).unwrap();
    let e = Master::load(&[a, b]).unwrap_err();
    let s = e.to_string();
    assert!(s.contains("nvidia-master.yaml:2") && s.contains("already defined in") && s.contains("amd-master.yaml:2"), "{s}");
}

#[test]
fn tp_dcp_divisibility() {
    expect_err(&GOOD.replace("{ tp: 4, ep: 1,", "{ tp: 6, dcp-size: 4, ep: 1,"), "tp 6 is not divisible by dcp-size 4", Some(15));
}

#[test]
fn strict_ints_reject_strings_and_bools() {
    expect_err(&GOOD.replace("{ tp: 4, ep: 1,", "{ tp: 4, pp: \"2\", ep: 1,"), "`pp` must be an integer > 0, found a string", None);
    expect_err(&GOOD.replace("{ tp: 4, ep: 1,", "{ tp: 4, pp: true, ep: 1,"), "`pp` must be an integer > 0, found a boolean", None);
}

#[test]
fn single_node_kv_p2p_and_disagg_fail() {
    expect_err(
        &GOOD.replace("  multinode: false\n", "  multinode: false\n  kv-p2p-transfer: nixl\n"),
        "`kv-p2p-transfer` on a single-node entry",
        None,
    );
    expect_err(
        &GOOD.replace("  multinode: false\n", "  multinode: false\n  disagg: true\n"),
        "`disagg: true` on a single-node entry",
        None,
    );
}

const MN: &str = r#"
k-mn:
  image: i
  model: m
  model-prefix: dsr1
  runner: b200-multinode
  precision: fp4
  framework: dynamo-trt
  multinode: true
  disagg: true
  scenarios:
    fixed-seq-len:
    - isl: 8192
      osl: 1024
      search-space:
      - spec-decoding: mtp
        conc-list: [64, 128]
        prefill: { num-worker: 1, tp: 4, ep: 4, dp-attn: true }
        decode: { num-worker: 1, tp: 8, ep: 8, dp-attn: true }
"#;

#[test]
fn disagg_needs_kv_p2p_transfer() {
    expect_err(MN, "`disagg: true` but this row has no `kv-p2p-transfer`", Some(16));
    assert!(load(&MN.replace("  disagg: true\n", "  disagg: true\n  kv-p2p-transfer: nixl\n")).is_ok());
}

#[test]
fn hardware_on_one_role_fails() {
    let t = MN
        .replace("  disagg: true\n", "  disagg: true\n  kv-p2p-transfer: nixl\n")
        .replace("dp-attn: true }\n        decode", "dp-attn: true, hardware: b200 }\n        decode");
    expect_err(&t, "`hardware` is set on only one role", None);
}

const AG: &str = r#"
dsv4-agentic:
  image: i
  model: m
  model-prefix: dsv4
  runner: cluster:b200-dgxc
  precision: fp4
  framework: sglang
  multinode: false
  scenarios:
    agentic-coding:
    - dram-utilization: 0.80
      search-space:
      - { tp: 8, kv-offloading: none, spec-decoding: mtp, conc-list: [1, 2] }
      - { tp: 8, ep: 8, dp-attn: true, kv-offloading: dram, kv-offload-backend: { name: hicache }, conc-list: [32], router: { name: sglang-router, version: "0.3.2" } }
"#;

#[test]
fn agentic_rules() {
    assert!(load(AG).is_ok(), "{:?}", load(AG).err());
    expect_err(&AG.replace("cluster:b200-dgxc", "b200"), "without a `cluster:` label", Some(6));
    expect_err(
        &AG.replace("    - dram-utilization: 0.80\n      search-space:", "    - search-space:"),
        "needs the block's `dram-utilization`",
        None,
    );
    expect_err(
        &AG.replace("kv-offloading: none, spec", "kv-offloading: none, kv-offload-backend: { name: hicache }, spec"),
        "`kv-offloading` is `none`",
        None,
    );
    expect_err(&AG.replace("{ tp: 8, kv-offloading: none,", "{ tp: 8,"), "must set `kv-offloading`", None);
    expect_err(
        &AG.replace("  multinode: false\n", "  multinode: false\n  router: { name: r, version: \"1\" }\n"),
        "both top-level and on this row",
        None,
    );
    expect_err(&AG.replace("version: \"0.3.2\"", "version: \"image:foo\""), "starts with `image:`", None);
    expect_err(&AG.replace("      search-space:", "      trace-source: weka\n      search-space:"), "unknown key `trace-source`", Some(13));
}
