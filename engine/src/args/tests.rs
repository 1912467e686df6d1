use super::*;
use std::collections::BTreeMap;

fn parse(args: &[&str]) -> Result<EngineConfig, ArgsError> {
    EngineConfig::from_args(args, &BTreeMap::new())
}

#[test]
fn both_spellings_parse_to_the_same_config() {
    let a = parse(&["--cuda-graph-max-bs", "256"]).unwrap();
    let b = parse(&["--cuda-graph-max-bs-decode", "256"]).unwrap();
    assert_eq!(a.cuda_graph_max_bs_decode, Some(256));
    assert_eq!(a.cuda_graph_max_bs_decode, b.cuda_graph_max_bs_decode);
    let c = parse(&["--tensor-parallel-size", "4", "--expert-parallel-size=2"]).unwrap();
    assert_eq!((c.tp_size, c.ep_size), (4, 2));
    let d = parse(&["--tp", "8"]).unwrap();
    assert_eq!(d.tp_size, 8);
}

#[test]
fn enable_dp_attention_rewrites_dp_size() {
    let c = parse(&["--tp-size", "8", "--enable-dp-attention", "--dp-size", "8"]).unwrap();
    assert_eq!((c.attn_dp_size, c.dp_size, c.tp_size), (8, 1, 8));
}

#[test]
fn continuous_decode_steps_accepted_and_inert() {
    let a = parse(&["--num-continuous-decode-steps", "4"]).unwrap();
    let mut b = parse(&[]).unwrap();
    b.flags = a.flags.clone();
    b.launch_command = a.launch_command.clone();
    assert_eq!(a, b);
    assert_eq!(a.flags[0].status, FlagStatus::AcceptedNotModelled);
}

#[test]
fn unknown_flag_suggests_nearest_and_can_be_allowed() {
    let e = parse(&["--max-runing-requests", "4"]).unwrap_err();
    assert_eq!(e, ArgsError::UnknownFlag { flag: "--max-runing-requests".into(), suggestion: Some("--max-running-requests".into()) });
    assert!(e.to_string().contains("did you mean '--max-running-requests'"));
    let c = parse(&["--allow-unknown-flags", "--frobnicate", "3", "--tp", "2"]).unwrap();
    assert_eq!(c.tp_size, 2);
    assert!(c.flags.iter().any(|f| f.status == FlagStatus::Unknown && f.value.as_deref() == Some("3")));
    assert_eq!(c.warnings.len(), 1);
}

#[test]
fn old_load_balance_names_are_aliases() {
    assert_eq!(parse(&["--load-balance-method", "shortest_queue"]).unwrap().load_balance_method, LoadBalanceMethod::TotalRequests);
    assert_eq!(parse(&["--load-balance-method", "minimum_tokens"]).unwrap().load_balance_method, LoadBalanceMethod::TotalTokens);
}

#[test]
fn env_variables_are_parsed_and_recorded() {
    let mut env = BTreeMap::new();
    env.insert("SGLANG_SIMULATE_ACC_LEN".to_string(), "3.51".to_string());
    env.insert("SGLANG_SIMULATE_ACC_METHOD".to_string(), "multinomial".to_string());
    env.insert("SGLANG_NUMA_BIND_V2".to_string(), "0".to_string());
    env.insert("HOME".to_string(), "/root".to_string());
    let c = EngineConfig::from_args(&["--speculative-algorithm", "NEXTN"], &env).unwrap();
    assert_eq!(c.env.simulate_acc_len, Some(3.51));
    assert_eq!(c.env.simulate_acc_method, AccMethod::Multinomial);
    assert_eq!(c.speculative.as_ref().unwrap().algorithm, SpecAlgorithm::Eagle);
    let split = c.flag_split();
    assert!(split[&FlagStatus::AcceptedNotModelled].contains(&"SGLANG_NUMA_BIND_V2".into()));
    assert!(split[&FlagStatus::Unknown].contains(&"HOME".into()));
}

#[test]
fn bad_values_name_the_flag() {
    let e = parse(&["--mem-fraction-static", "1.5"]).unwrap_err().to_string();
    assert!(e.contains("--mem-fraction-static") && e.contains("(0, 1]"), "{e}");
    let e = parse(&["--tp-size"]).unwrap_err();
    assert_eq!(e, ArgsError::MissingValue { flag: "--tp-size".into() });
}

#[test]
fn router_defaults_and_flags() {
    let r = RouterConfig::from_args(&[
        "--policy",
        "cache_aware",
        "--dp-aware",
        "--worker-urls",
        "http://a",
        "http://b",
        "--disable-retries",
        "--request-timeout-secs",
        "14400",
    ])
    .unwrap();
    assert!(r.dp_aware);
    assert_eq!(r.cache_threshold, 0.3);
    assert_eq!(r.balance_abs_threshold, 64);
    assert_eq!(r.flags.iter().filter(|f| f.status == FlagStatus::Modelled).count(), 2);
}

/// A 1 MB flag was compared with every known flag at full length (minutes) and echoed whole.
#[test]
fn a_huge_unknown_flag_is_refused_with_its_name_cut() {
    let flag = format!("--max-run{}ning-requests", "\n".repeat(1 << 20));
    let e = parse(&[&flag, "4"]).unwrap_err().to_string();
    assert!(e.starts_with("unknown flag '--max-run\n") && e.contains(&format!("… ({} bytes)'", flag.len())), "{}", &e[..200.min(e.len())]);
    assert!(e.len() < 300, "{} bytes", e.len());
    assert_eq!(edit_distance("cuda-graph-max-bs", &"x".repeat(1000)), 1000);
    assert_eq!(edit_distance("tp-sise", "tp-size"), 1);
}

#[test]
fn quoted_parts_of_messages_are_cut() {
    let k = "k".repeat(1000);
    let m = format!("unknown field `{k}`, expected `t` or \"in\"");
    assert_eq!(excerpt_quoted(&m), format!("unknown field `{}… (1000 bytes)`, expected `t` or \"in\"", &k[..EXCERPT_CHARS]));
    // An unclosed quote, and a quote inside the input that pairs the wrong marks.
    assert_eq!(excerpt_quoted(&format!("value \"{k}")), format!("value \"{}… (1000 bytes)", &k[..EXCERPT_CHARS]));
    let odd = excerpt_quoted(&format!("string \"a\"{k}\", expected f64"));
    assert!(odd.len() < 500 && odd.ends_with("\", expected f64"), "{odd}");
    let escaped = excerpt_quoted(&format!("invalid type: string \"x:{}\", expected f64", "{\\\"a\\\":".repeat(500)));
    assert!(escaped.len() < 200 && escaped.ends_with("\", expected f64"), "{escaped}");
    let prose = "a short message with no quotes at all";
    assert_eq!(excerpt_quoted(prose), prose);
}
