//! Every point of the DSV4.1-Flash GB300 recipe parses (each flag modelled,
//! front-end or accepted-but-not-modelled) and builds an engine on the GB300 profile.

use engine::{Engine, EngineConfig, FlagStatus, GpuSpec, ModelSpec};
use serde_yaml_ng::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn strings(v: &Value) -> Vec<String> {
    v.as_sequence()
        .map(|s| s.iter().map(|x| x.as_str().map(String::from).unwrap_or_else(|| format!("{}", x.as_i64().unwrap()))).collect())
        .unwrap_or_default()
}

fn env_of(v: &Value, into: &mut BTreeMap<String, String>) {
    if let Some(m) = v.as_mapping() {
        for (k, v) in m {
            let val = match v {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => b.to_string(),
                _ => panic!("env value for {k:?} is not a scalar"),
            };
            into.insert(k.as_str().unwrap().to_string(), val);
        }
    }
}

/// (arm, conc, engine) for every point.
fn engines(path: &Path) -> Vec<(String, u64, Engine)> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let doc: Value = serde_yaml_ng::from_str(&text).unwrap();
    let worker = &doc["worker"];
    let mut res = Vec::new();
    for arm in doc["arms"].as_sequence().unwrap() {
        for point in arm["points"].as_sequence().unwrap() {
            let mut args = strings(&worker["args"]);
            args.extend(strings(&worker["harness-args"]));
            args.extend(strings(&worker["harness-only-args"]));
            args.extend(strings(&arm["args"]));
            args.extend(strings(&point["args"]));
            let mut env = BTreeMap::new();
            env_of(&worker["env"], &mut env);
            env_of(&arm["env"], &mut env);
            env_of(&point["env"], &mut env);
            env.insert("SGLANG_SIMULATE_ACC_LEN".into(), "3.51".into());
            env.insert("SGLANG_SIMULATE_ACC_METHOD".into(), "match-expected".into());
            env.insert("SGLANG_SIMULATE_ACC_TOKEN_MODE".into(), "real-draft-token".into());
            let mut cfg = EngineConfig::from_args(&args, &env).unwrap_or_else(|e| panic!("{}: {e}", arm["name"].as_str().unwrap()));
            if let Some(r) = arm.get("router") {
                cfg = cfg.with_router_args(&strings(&r["args"])).unwrap();
            }
            for f in cfg.flags.iter() {
                assert_ne!(f.status, FlagStatus::Unknown, "{}", f.given);
            }
            let e = Engine::new(cfg, ModelSpec::lookup("deepseek-ai/DeepSeek-V4.1-Flash").unwrap(), GpuSpec::lookup("gb300").unwrap(), 42)
                .unwrap_or_else(|e| panic!("{} c{}: {e}", arm["name"].as_str().unwrap(), point["conc"].as_u64().unwrap()));
            res.push((arm["name"].as_str().unwrap().to_string(), point["conc"].as_u64().unwrap(), e));
        }
    }
    res
}

fn check(path: &Path) {
    let all = engines(path);
    assert_eq!(all.len(), 8, "three arms, eight points");
    for (arm, conc, e) in &all {
        let l = e.limits();
        let info = e.info();
        assert_eq!(info.result_kind, "predicted");
        assert!(info.accepted_not_modelled_flags.iter().any(|f| f == "--trust-remote-code"));
        let spec = l.speculative.as_ref().unwrap();
        assert_eq!((spec.dspark_block_size, spec.accept.mean), (Some(5), 3.51), "{arm} c{conc}");
        match (arm.as_str(), conc) {
            ("Agg DEP2", c) => {
                // per-rank caps seen in the published logs: 64 / 128 / 128, chunk 8192
                let want = match c {
                    64 => 64,
                    _ => 128,
                };
                assert_eq!(l.attn_dp_size, 2);
                assert_eq!(l.max_running_requests_per_dp, want, "DEP2 c{c}");
                assert_eq!(l.chunked_prefill_size_per_dp, Some(8192));
                assert!(info.router.as_ref().unwrap().dp_aware);
            }
            ("Agg TP4", 1) => {
                assert_eq!(l.max_running_requests_per_dp, 1);
                assert!(info.modelled_flags.iter().any(|f| f == "SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE"));
            }
            _ => assert_eq!(l.attn_dp_size, 1),
        }
    }
}

#[test]
fn repository_recipe_points_all_build() {
    check(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../recipes/dsv41flash-fp4-gb300-sglang-agentic-dspark.yaml"));
}

#[test]
#[ignore = "needs the shared data (SWEEP_SHARED_DATA, default ../shared/data)"]
fn shared_seed_recipe_points_all_build() {
    let root = std::env::var("SWEEP_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data"));
    let path = root.join("seed/dsv41flash-gb300-sglang-agentic.yaml");
    if !path.exists() {
        panic!("shared data absent: {} not found (set SWEEP_SHARED_DATA)", path.display());
    }
    check(&path);
}
