//! GPU power telemetry while a live point runs, sampled as InferenceX's `start_gpu_monitor` and
//! `stop_gpu_monitor` sample it (`benchmark_lib.sh`): `nvidia-smi` with the same query once a
//! second, or `amd-smi`'s watch mode, into the point's `gpu_metrics.csv`; at the end the
//! monitor is stopped, a truncated last row dropped, and (NVIDIA) one more sample taken after
//! it so the window's end is bracketed. The aggregate integrates the file
//! (`sweep_results::power`); a host without the tool, or a server on another host, gets
//! `power_valid` 0 with the reason, never a number.
//!
//! Two deliberate differences: `nvidia-smi` runs under `TZ=UTC0`, so its zone-less timestamps
//! are UTC whatever the host's zone (InferenceX records the zone beside the file instead), and
//! `CUDA_VISIBLE_DEVICES` becomes `-i`, so a point on some of the host's GPUs is not held to
//! the others.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::power::PointPower;

/// InferenceX's `NVIDIA_GPU_MONITOR_QUERY`.
pub const NVIDIA_QUERY: &str =
    "timestamp,index,power.draw,temperature.gpu,clocks.current.sm,clocks.current.memory,utilization.gpu,utilization.memory";
/// The telemetry's file in the point's folder, as InferenceX names it.
pub const TELEMETRY_FILE: &str = "gpu_metrics.csv";
/// Seconds between samples.
const INTERVAL_S: u64 = 1;

/// Whether and how a live point samples GPU power (`--gpu-monitor`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum MonitorChoice {
    /// `nvidia-smi`, else `amd-smi`, when the server runs on this host (a launched server or a
    /// loopback URL); otherwise `power_valid` 0 saying why.
    #[default]
    Auto,
    /// `nvidia-smi`, wherever the server is (the GPUs sampled are this host's).
    NvidiaSmi,
    /// `amd-smi`, wherever the server is.
    AmdSmi,
    /// No sampling and no power keys.
    Off,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Vendor {
    Nvidia,
    Amd,
}

impl Vendor {
    fn program(self) -> &'static str {
        match self {
            Vendor::Nvidia => "nvidia-smi",
            Vendor::Amd => "amd-smi",
        }
    }
}

/// A running monitor.
pub struct GpuMonitor {
    child: Child,
    vendor: Vendor,
    program: PathBuf,
    path: PathBuf,
    command: String,
}

/// What starting a monitor gave.
pub enum Monitor {
    Running(GpuMonitor),
    /// Nothing sampled, and why (recorded as `power_valid` 0).
    NotSampled(String),
    /// `--gpu-monitor off`.
    Off,
}

impl Monitor {
    /// Starts sampling into `dir/gpu_metrics.csv`; `server_here` says the server runs on this host.
    pub fn start(choice: MonitorChoice, server_here: bool, dir: &Path) -> Monitor {
        let vendor = match choice {
            MonitorChoice::Off => return Monitor::Off,
            MonitorChoice::Auto if !server_here => {
                return Monitor::NotSampled(
                    "the server is not on this host, so this host's GPUs say nothing of it (--gpu-monitor nvidia-smi samples them anyway)"
                        .into(),
                );
            }
            MonitorChoice::Auto => match [Vendor::Nvidia, Vendor::Amd].into_iter().find_map(|v| on_path(v.program()).map(|p| (v, p))) {
                Some(found) => found,
                None => return Monitor::NotSampled("neither nvidia-smi nor amd-smi is on PATH".into()),
            },
            MonitorChoice::NvidiaSmi | MonitorChoice::AmdSmi => {
                let v = if choice == MonitorChoice::NvidiaSmi { Vendor::Nvidia } else { Vendor::Amd };
                match on_path(v.program()) {
                    Some(p) => (v, p),
                    None => return Monitor::NotSampled(format!("{} is not on PATH", v.program())),
                }
            }
        };
        match GpuMonitor::spawn(vendor.0, vendor.1, dir) {
            Ok(m) => Monitor::Running(m),
            Err(why) => Monitor::NotSampled(why),
        }
    }

    /// Stops sampling; the point's power as the aggregate reads it (`None` when off). A replay
    /// on a time-scaled server's clock cannot be lined up with the telemetry, and a simulated
    /// server's power is not this host's GPUs': both say so.
    pub fn finish(self, simulated: bool, time_scale: f64) -> Option<PointPower> {
        let mut power = match self {
            Monitor::Off => None,
            Monitor::NotSampled(note) => Some(PointPower::Measured { monitor: None, note: Some(note), csv: None }),
            Monitor::Running(m) => Some(m.stop()),
        };
        if let Some(PointPower::Measured { note, csv, .. }) = &mut power {
            if time_scale != 1.0 && csv.is_some() {
                *csv = None;
                *note =
                    Some(format!("the replay ran on the server's clock (x{time_scale}), which the telemetry's timestamps do not follow"));
            } else if simulated && note.is_none() {
                *note = Some("the server is the reference engine (simulated): these are this host's GPUs, not the served model's".into());
            }
        }
        power
    }
}

/// The first `name` on `PATH` that is a file.
fn on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join(name)).find(|p| p.is_file())
}

/// `-i 0,1` from `CUDA_VISIBLE_DEVICES` when it lists devices by index or UUID.
fn device_filter() -> Vec<String> {
    match std::env::var("CUDA_VISIBLE_DEVICES") {
        Ok(v) if !v.trim().is_empty() && v.trim() != "all" => vec!["-i".into(), v.trim().to_string()],
        _ => Vec::new(),
    }
}

impl GpuMonitor {
    fn args(vendor: Vendor, one_shot: bool) -> Vec<String> {
        match vendor {
            Vendor::Nvidia => {
                let format = if one_shot { "--format=csv,noheader" } else { "--format=csv" };
                let mut a = vec![format!("--query-gpu={NVIDIA_QUERY}"), format.to_string()];
                if !one_shot {
                    a.extend(["-l".to_string(), INTERVAL_S.to_string()]);
                }
                a.extend(device_filter());
                a
            }
            Vendor::Amd => ["metric", "-p", "-c", "-t", "-u", "-w", &INTERVAL_S.to_string(), "--csv"].map(String::from).to_vec(),
        }
    }

    fn command(vendor: Vendor, program: &Path, one_shot: bool) -> Command {
        let mut cmd = Command::new(program);
        cmd.args(Self::args(vendor, one_shot)).env("TZ", "UTC0").env("PYTHONUNBUFFERED", "1").stdin(Stdio::null()).stderr(Stdio::null());
        cmd
    }

    fn spawn(vendor: Vendor, program: PathBuf, dir: &Path) -> Result<GpuMonitor, String> {
        let path = dir.join(TELEMETRY_FILE);
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let file = File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut cmd = Self::command(vendor, &program, false);
        cmd.stdout(file);
        // The monitor must not outlive `sweep`, even killed by SIGKILL.
        crate::run::launcher::die_with_parent(&mut cmd);
        let command = format!("{} {}", vendor.program(), Self::args(vendor, false).join(" "));
        let child = cmd.spawn().map_err(|e| format!("{command}: {e}"))?;
        Ok(GpuMonitor { child, vendor, program, path, command })
    }

    /// Stops the monitor as `stop_gpu_monitor` does and reads the telemetry back.
    pub fn stop(mut self) -> PointPower {
        if self.vendor == Vendor::Amd {
            // amd-smi stamps whole seconds: the stream needs a tick at the next whole second.
            std::thread::sleep(Duration::from_secs(INTERVAL_S + 2));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut note = None;
        let repaired = drop_truncated_tail(&self.path);
        if self.vendor == Vendor::Nvidia && repaired.is_ok() {
            // One sample after the window's end, so the last boundary is interpolated.
            if let Err(e) = self.append_one_shot() {
                note = Some(format!("the final nvidia-smi sample failed: {e}"));
            }
        }
        if let Err(e) = repaired {
            note = Some(format!("{}: {e}", self.path.display()));
        }
        let csv = std::fs::read(&self.path).ok().map(|b| String::from_utf8_lossy(&b).into_owned());
        let csv = match self.vendor {
            Vendor::Amd => csv.map(|t| amd_rows(&t)),
            Vendor::Nvidia => csv,
        };
        if self.vendor == Vendor::Amd
            && let Some(t) = &csv
            && let Err(e) = crate::problem::atomic_write(&self.path, t.as_bytes())
        {
            note = Some(format!("{}: {e}", self.path.display()));
        }
        PointPower::Measured { monitor: Some(std::mem::take(&mut self.command)), note, csv }
    }

    fn append_one_shot(&self) -> Result<(), String> {
        let out = Self::command(self.vendor, &self.program, true).stdout(Stdio::piped()).output().map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(format!("exit {}", out.status));
        }
        let mut f = std::fs::OpenOptions::new().append(true).open(&self.path).map_err(|e| e.to_string())?;
        f.write_all(&out.stdout).map_err(|e| e.to_string())
    }
}

impl Drop for GpuMonitor {
    /// A point that ends early (an error, Ctrl-C) stops its monitor too.
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Whether a server URL names this host (`localhost`, a loopback address).
pub fn is_loopback(url: &str) -> bool {
    let Some(host) = reqwest::Url::parse(url).ok().and_then(|u| u.host_str().map(str::to_string)) else { return false };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Drops a last row cut off by the kill (a file not ending in a newline).
fn drop_truncated_tail(path: &Path) -> std::io::Result<()> {
    let Ok(bytes) = std::fs::read(path) else { return Ok(()) };
    if bytes.is_empty() || bytes.ends_with(b"\n") {
        return Ok(());
    }
    let keep = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    crate::problem::atomic_write(path, &bytes[..keep])
}

/// amd-smi's watch output as InferenceX's awk filter keeps it: the preamble skipped, the first
/// `timestamp,` header kept, repeated headers dropped.
fn amd_rows(text: &str) -> String {
    let mut out = String::new();
    let mut header = false;
    for line in text.lines() {
        if line.starts_with("timestamp,") {
            if !header {
                out.push_str(line);
                out.push('\n');
                header = true;
            }
        } else if header {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amd_watch_output_keeps_one_header_and_no_preamble() {
        let raw = "AMD SMI watch\nsome banner\ntimestamp,gpu,power\n1,0,300\ntimestamp,gpu,power\n2,0,310\n";
        assert_eq!(amd_rows(raw), "timestamp,gpu,power\n1,0,300\n2,0,310\n");
    }

    #[test]
    fn a_row_cut_off_by_the_kill_is_dropped_and_a_whole_file_kept() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(TELEMETRY_FILE);
        std::fs::write(&p, "timestamp, index\n2026/12/07 10:00:00.000, 0\n2026/12/07 10:00:01").unwrap();
        drop_truncated_tail(&p).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "timestamp, index\n2026/12/07 10:00:00.000, 0\n");
        drop_truncated_tail(&p).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "timestamp, index\n2026/12/07 10:00:00.000, 0\n");
    }

    #[test]
    fn off_records_nothing_and_auto_for_a_remote_server_says_why() {
        let dir = tempfile::tempdir().unwrap();
        assert!(Monitor::start(MonitorChoice::Off, true, dir.path()).finish(false, 1.0).is_none());
        match Monitor::start(MonitorChoice::Auto, false, dir.path()).finish(false, 1.0) {
            Some(PointPower::Measured { monitor: None, note: Some(n), csv: None, .. }) => assert!(n.contains("not on this host"), "{n}"),
            other => panic!("{other:?}"),
        }
        assert!(!dir.path().join(TELEMETRY_FILE).exists());
    }

    #[test]
    fn loopback_urls_are_this_host() {
        for u in ["http://localhost:30000", "http://127.0.0.1:8000/v1", "http://[::1]:80"] {
            assert!(is_loopback(u), "{u}");
        }
        for u in ["http://10.0.0.5:30000", "http://gpu-node-3:30000", "not a url"] {
            assert!(!is_loopback(u), "{u}");
        }
    }
}
