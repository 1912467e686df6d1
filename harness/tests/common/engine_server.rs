//! A real `sweep engine serve` process for the live tests, and `sweep replay` against it.

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The DSV4.1-Flash TP4 recipe's worker flags (`sweep plan --show-commands`), without the program.
pub const TP4_FLAGS: &str = "--model-path deepseek-ai/DeepSeek-V4.1-Flash --served-model-name deepseek-ai/DeepSeek-V4.1-Flash \
    --trust-remote-code --speculative-algorithm DSPARK --speculative-dspark-block-size 5 --reasoning-parser auto \
    --tool-call-parser auto --watchdog-timeout 3600 --tensor-parallel-size 4 --expert-parallel-size 1 \
    --chunked-prefill-size 16384 --mem-fraction-static 0.8 --tokenizer-backend fastokens --max-running-requests 128 \
    --cuda-graph-max-bs-decode 128 --prefill-decode-interval 0 --swa-prefix-tails 4096 --enable-metrics";

pub const TP4_ENV: &[(&str, &str)] = &[
    ("NCCL_CUMEM_ENABLE", "1"),
    ("SGLANG_DEFAULT_THINKING", "1"),
    ("SGLANG_DSPARK_FOLDED_SAMPLING", "2"),
    ("SGLANG_DSPARK_OPT_MARKOV_W2_BF16", "True"),
    ("SGLANG_DSV41_ENGRAM_HOST_TABLE_LAYOUT", "per_rank"),
];

/// A `sweep engine serve` child on a free port; killed on drop.
pub struct EngineServer {
    pub child: Child,
    pub url: String,
}

impl EngineServer {
    pub fn start(extra: &[&str]) -> EngineServer {
        Self::start_on(0, extra)
    }

    /// On `port` (0: a free one).
    pub fn start_on(port: u16, extra: &[&str]) -> EngineServer {
        let mut args: Vec<String> = vec!["engine".into(), "serve".into()];
        args.extend(TP4_FLAGS.split_whitespace().map(str::to_string));
        args.extend(["--hardware", "gb300", "--port", &port.to_string()].iter().map(|s| s.to_string()));
        args.extend(extra.iter().map(|s| s.to_string()));
        let mut child = Command::new(env!("CARGO_BIN_EXE_sweep"))
            .args(&args)
            .envs(TP4_ENV.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start sweep engine serve");
        // The banner on stderr names the bound address.
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        let t = Instant::now();
        let url = loop {
            line.clear();
            assert!(err.read_line(&mut line).unwrap() > 0, "server exited before its banner");
            if let Some(i) = line.find("http://127.0.0.1:") {
                break line[i..].split_whitespace().next().unwrap().to_string();
            }
            assert!(t.elapsed() < Duration::from_secs(60), "no banner: {line}");
        };
        // Keep draining stderr so the server never blocks on a full pipe.
        std::thread::spawn(move || for _ in err.lines() {});
        EngineServer { child, url }
    }
}

impl Drop for EngineServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn read_json(p: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))).unwrap()
}

pub fn records(dir: &Path) -> Vec<Value> {
    let text = super::export_text(dir);
    assert!(!text.is_empty(), "{}: no records", dir.display());
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

pub fn replay(args: &[&str]) -> (std::process::Output, tempfile::TempDir) {
    let out = tempfile::tempdir().unwrap();
    let mut a: Vec<&str> = vec!["replay"];
    a.extend_from_slice(args);
    let dir = out.path().join("point");
    let d = dir.to_str().unwrap().to_string();
    a.extend(["--out", &d]);
    let o = Command::new(env!("CARGO_BIN_EXE_sweep")).args(&a).envs(TP4_ENV.iter().copied()).output().expect("run sweep replay");
    (o, out)
}
