//! Tests of the launch-script scans (`scan.rs`).

use super::*;

#[test]
fn patching_lines() {
    assert!(patching("git apply /tmp/fix.patch").is_some());
    assert!(patching("cd $SGL && patch -p1 < fix.diff").is_some());
    assert!(patching("sed -i 's/a/b/' $(python3 -c 'import sglang,os;print(os.path.dirname(sglang.__file__))')/srt/x.py").is_some());
    assert!(patching("pip install --no-deps vllm==0.9.1").is_some());
    assert!(patching("pip install /wheels/sglang-0.5.0-cp310-linux_x86_64.whl").is_some());
    assert!(patching("pip install aiperf lm_eval").is_none());
    assert!(patching("sed -i 's/a/b/' results.json").is_none());
    assert!(patching("echo 'no patch here'").is_none());
    assert_eq!(heredoc("python3 - <<'PY'").as_deref(), Some("PY"));
    assert_eq!(heredoc("cat <<<\"x\""), None);
}

#[test]
fn overrides_and_assignments() {
    assert_eq!(override_keys(r#"'{"index_topk_freq": 4, "use_index_cache": true}'"#), vec!["index_topk_freq", "use_index_cache"]);
    assert_eq!(override_keys(r#"{"rope_scaling": {"factor": 2}}"#), vec!["rope_scaling", "factor"]);
    let a = assignments(
        "export SGLANG_SIMULATE_ACC_LEN=3.39\nFOO=1 python3 -m x \\\n  --tp 8\n  decode_environment:\n    TLLM_X: \"2.5\"\necho A=B\n",
    );
    let names: Vec<&str> = a.iter().map(|(k, _, _)| k.as_str()).collect();
    assert_eq!(names, vec!["SGLANG_SIMULATE_ACC_LEN", "FOO", "TLLM_X"]);
    assert_eq!(a[2].2, 5);
    assert_eq!(sku("cluster:gb300-nv"), "gb300");
}
