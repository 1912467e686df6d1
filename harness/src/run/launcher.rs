//! The local launcher: start a recipe's resolved server command (argv and environment, never a
//! shell) in its own process group, keep its output in `server.log`, wait on `/health` while
//! watching the process, and stop the whole group afterwards.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// A running server process group.
pub struct Server {
    child: Child,
    pub base_url: String,
    pub pid: u32,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum LaunchError {
    #[error("cannot start `{program}`: {message}")]
    Spawn { program: String, message: String },
    #[error("server exited during start-up ({status}); see {log}")]
    ExitedAtStart { status: String, log: String },
    #[error("server did not become healthy within {secs} s at {url}; see {log}")]
    HealthTimeout { secs: u64, url: String, log: String },
    #[error("cancelled while waiting for the server to start")]
    Cancelled,
}

/// Picks a free TCP port on 127.0.0.1.
pub fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// One blocking `GET path` on loopback; returns the status code.
pub fn http_get_status(host_port: &str, path: &str, timeout: Duration) -> Option<u16> {
    use std::io::{Read, Write};
    let addr: std::net::SocketAddr = host_port.parse().ok()?;
    let mut s = std::net::TcpStream::connect_timeout(&addr, timeout).ok()?;
    s.set_read_timeout(Some(timeout)).ok()?;
    s.set_write_timeout(Some(timeout)).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: {host_port}\r\nConnection: close\r\n\r\n").ok()?;
    let mut buf = [0u8; 64];
    let n = s.read(&mut buf).ok()?;
    let head = std::str::from_utf8(&buf[..n]).ok()?;
    head.split_whitespace().nth(1)?.parse().ok()
}

impl Server {
    /// Starts `argv` with `env` added to the inherited environment; stdout and stderr go to `log`.
    pub fn start(argv: &[String], env: &[(String, String)], log: &Path, base_url: String) -> Result<Server, LaunchError> {
        let (prog, args) = argv.split_first().ok_or(LaunchError::Spawn { program: String::new(), message: "empty command".into() })?;
        let out = std::fs::File::create(log)
            .map_err(|e| LaunchError::Spawn { program: prog.clone(), message: format!("{}: {e}", log.display()) })?;
        let err = out.try_clone().map_err(|e| LaunchError::Spawn { program: prog.clone(), message: e.to_string() })?;
        let mut cmd = Command::new(prog);
        cmd.args(args).envs(env.iter().map(|(k, v)| (k, v))).stdin(Stdio::null()).stdout(out).stderr(err);
        // Its own process group, so stopping it stops every worker it forked.
        cmd.process_group(0);
        let child = cmd.spawn().map_err(|e| LaunchError::Spawn { program: prog.clone(), message: e.to_string() })?;
        let pid = child.id();
        Ok(Server { child, base_url, pid })
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> Result<(), String> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(st)) => Err(st.to_string()),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Polls `GET /health` until it answers 200 (and `/readiness`, where served, too); fails at
    /// once if the process exits.
    pub fn wait_healthy(&mut self, timeout: Duration, log: &Path, cancel: &Arc<AtomicBool>) -> Result<(), LaunchError> {
        let host = self.base_url.trim_start_matches("http://").trim_end_matches('/').to_string();
        let t0 = Instant::now();
        loop {
            if let Err(status) = self.alive() {
                return Err(LaunchError::ExitedAtStart { status, log: log.display().to_string() });
            }
            if cancel.load(Ordering::Relaxed) {
                return Err(LaunchError::Cancelled);
            }
            // sglang-router answers /health at once but /readiness 503 until a worker has
            // registered; servers without /readiness answer 404 there.
            if http_get_status(&host, "/health", Duration::from_secs(2)) == Some(200)
                && http_get_status(&host, "/readiness", Duration::from_secs(2)).is_some_and(|c| c != 503)
            {
                return Ok(());
            }
            if t0.elapsed() > timeout {
                return Err(LaunchError::HealthTimeout {
                    secs: timeout.as_secs(),
                    url: format!("{}/health", self.base_url),
                    log: log.display().to_string(),
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// SIGTERM to the group, then SIGKILL after `grace`.
    pub fn stop(&mut self, grace: Duration) {
        let pgid = self.pid as i32;
        // SAFETY: killpg only sends a signal to the process group we created.
        unsafe {
            libc::killpg(pgid, libc::SIGTERM);
        }
        let t0 = Instant::now();
        while t0.elapsed() < grace {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        // SAFETY: as above; the group may already be gone (ESRCH is fine).
        unsafe {
            libc::killpg(pgid, libc::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.stop(Duration::from_secs(2));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_at_start_fails_without_waiting_for_timeout() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("server.log");
        let argv: Vec<String> = ["sh", "-c", "echo boom >&2; exit 3"].iter().map(|s| s.to_string()).collect();
        let port = free_port().unwrap();
        let mut s = Server::start(&argv, &[], &log, format!("http://127.0.0.1:{port}")).unwrap();
        let t0 = Instant::now();
        let e = s.wait_healthy(Duration::from_secs(60), &log, &Arc::new(AtomicBool::new(false))).unwrap_err();
        assert!(matches!(e, LaunchError::ExitedAtStart { .. }), "{e}");
        assert!(t0.elapsed() < Duration::from_secs(10));
        assert!(std::fs::read_to_string(&log).unwrap().contains("boom"));
    }

    #[test]
    fn stop_kills_the_whole_process_group() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("server.log");
        let pidfile = d.path().join("child.pid");
        // The shell forks a long-running grandchild; stopping must take it down too.
        let script = format!("sleep 300 & echo $! > {}; wait", pidfile.display());
        let argv: Vec<String> = vec!["sh".into(), "-c".into(), script];
        let mut s = Server::start(&argv, &[("X".into(), "1".into())], &log, "http://127.0.0.1:1".into()).unwrap();
        let t0 = Instant::now();
        while !pidfile.exists() && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let gc: i32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
        s.stop(Duration::from_secs(2));
        std::thread::sleep(Duration::from_millis(100));
        // Gone, or a zombie waiting for init to reap it.
        let stat = std::fs::read_to_string(format!("/proc/{gc}/stat")).unwrap_or_default();
        let state = stat.rsplit(')').next().and_then(|r| r.split_whitespace().next()).unwrap_or("");
        assert!(stat.is_empty() || state == "Z", "grandchild {gc} survived in state {state}");
    }
}
