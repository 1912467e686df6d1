use super::*;

#[test]
fn embedded_profiles_parse_and_look_up_by_alias() {
    assert_eq!(ModelSpec::builtin().len(), 4);
    let gpus = GpuSpec::builtin();
    let mut names: Vec<&str> = gpus.iter().map(|g| g.name.as_str()).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), gpus.len(), "profile names are unique: {names:?}");
    // Every datasheet GPU, each with its architecture; every fitted or borrowed profile keeps
    // the datasheet of the GPU it is for.
    for (gpu, arch) in [
        ("h100", "hopper"),
        ("h200", "hopper"),
        ("b200", "blackwell"),
        ("b300", "blackwell"),
        ("gb200", "blackwell"),
        ("gb300", "blackwell"),
    ] {
        let g = GpuSpec::lookup(gpu).unwrap();
        assert_eq!((g.datasheet.architecture.as_deref(), g.fit.is_none()), (Some(arch), true), "{gpu}");
    }
    for g in gpus.iter().filter(|g| g.fit.is_some()) {
        let base = GpuSpec::lookup(&g.fit.as_ref().unwrap().base_profile).unwrap();
        assert_eq!(g.datasheet, base.datasheet, "{}", g.name);
    }
    let m = ModelSpec::lookup("deepseek-ai/DeepSeek-V4.1-Flash").unwrap();
    assert_eq!(m.name, "deepseek-v4.1-flash");
    assert!(m.unconfirmed.iter().any(|u| u == "kv"));
    assert_eq!(ModelSpec::lookup("DSV3").unwrap().name, "deepseek-v3");
    assert_eq!(GpuSpec::lookup("H200").unwrap().name, "h200");
    let fitted = GpuSpec::lookup("gb300-fitted").unwrap();
    assert_eq!(fitted.name, "gb300-fitted-dsv41flash");
    let f = fitted.fit.as_ref().expect("a fitted profile records its fit");
    assert_eq!(f.points.len(), 3);
    assert_eq!(fitted.datasheet, GpuSpec::lookup("gb300").unwrap().datasheet, "the datasheet is kept");
    assert!(fitted.cost.calibrated);
    // The committed fit replays the synthesized corpus as generated, with cost parameters in
    // their physical ranges.
    assert!(f.workload.is_identity(), "{:?}", f.workload);
    let c = f.corpus.as_ref().expect("the corpus it replayed is recorded");
    assert!(c.like.ends_with("cc-traces-weka-062126.stats.yaml") && c.command.contains("--like"));
    assert!(fitted.cost.eta_bw <= 1.0 && fitted.cost.eta_flops <= 1.0);
    assert!(fitted.cost.tau_step_us < 10_000.0 && fitted.cost.a2a_latency_us < 100.0);
    let e = ModelSpec::lookup("gpt-9").unwrap_err().to_string();
    assert!(e.contains("deepseek-v4-flash"), "{e}");
}

#[test]
fn weight_totals_match_published_sizes() {
    let v4 = ModelSpec::lookup("deepseek-v4-flash").unwrap();
    let gb = (v4.weight_bytes() + v4.draft_bytes()) / 1e9;
    assert!((150.0..=170.0).contains(&gb), "V4-Flash {gb} GB (spec: 158-167)");
    let v3 = ModelSpec::lookup("deepseek-v3").unwrap();
    let gb = v3.weight_bytes() / 1e9;
    assert!((660.0..=720.0).contains(&gb), "V3 {gb} GB (about 690)");
    let l = ModelSpec::lookup("llama-3.1-8b").unwrap();
    let gb = l.weight_bytes() / 1e9;
    assert!((15.5..=16.5).contains(&gb), "Llama 8B {gb} GB");
}

#[test]
fn bad_profile_names_line_and_field() {
    let err = ModelSpec::from_yaml("x.yaml", "name: a\nlayerz: 3\n").unwrap_err();
    let s = err.to_string();
    assert!(s.contains("x.yaml") && s.contains("layerz"), "{s}");
}
