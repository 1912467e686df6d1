//! What the store and dashboard benches share.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A real 13-point run (`sweep run full-sweep-fail-fast --duration 60` on the virtual clock,
/// with `extra` arguments) made once into `out` (an interrupted making resumes).
pub fn run13(out: PathBuf, extra: &[&str]) -> PathBuf {
    if !out.join("summary.json").is_file() {
        eprintln!("making a 13-point run on the virtual clock into {} …", out.display());
        let st = Command::new(env!("CARGO_BIN_EXE_sweep"))
            .args(["run", "full-sweep-fail-fast", "--duration", "60"])
            .args(extra)
            .args(["--no-store", "--resume", "--out"])
            .arg(&out)
            .arg("--root")
            .arg(root())
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(st.success() || out.join("summary.json").is_file(), "sweep run failed");
    }
    out
}
