//! The local launcher: start a recipe's resolved server command (argv and environment, never a
//! shell) in its own process group, keep its output in `server.log`, wait on `/health` while
//! watching the process, and stop the whole group afterwards. [`PointLauncher`] starts a point's
//! servers (the worker, its router) for a live runner, which only drives them.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::recipe::serving::Launch;
use crate::run::Job;
use crate::targets::sim::{ProfileChoice, SimError};

/// A running server process group.
pub struct Server {
    child: Child,
    pub base_url: String,
    pub pid: u32,
}

/// Why a server could not be started, or is gone.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("cannot start `{program}`: {message}")]
    Spawn { program: String, message: String },
    #[error("server exited during start-up ({status}); see {log}")]
    ExitedAtStart { status: String, log: String },
    #[error("server did not become healthy within {secs} s at {url}; see {log}")]
    HealthTimeout { secs: u64, url: String, log: String },
    #[error("cancelled while waiting for the server to start")]
    Cancelled,
    /// The process has exited since it became healthy (its exit status).
    #[error("{status}")]
    Died { status: String },
    #[error("point has no resolved server command")]
    NoCommand,
    #[error("{}: {source}", .path.display())]
    PointDir { path: PathBuf, source: std::io::Error },
    #[error("no free port: {0}")]
    NoPort(#[source] std::io::Error),
    /// No hardware profile for `sweep engine serve`.
    #[error("no hardware: the point has no `runner`; pass --hardware NAME")]
    NoHardware,
    #[error(transparent)]
    Profile(#[from] SimError),
    #[error("router: {0}")]
    Router(Box<LaunchError>),
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

/// The server gets SIGTERM when `sweep` dies, even by SIGKILL (which runs no clean-up): a
/// launched engine must not outlive the run and keep holding the GPUs. (SGLang and `sweep engine
/// serve` stop their own workers on SIGTERM.)
#[cfg(target_os = "linux")]
pub(crate) fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: getpid is async-signal-safe.
    let parent = unsafe { libc::getpid() };
    // SAFETY: between fork and exec only async-signal-safe calls: prctl, getppid, _exit.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent died before the request took effect: do not start at all.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn die_with_parent(_cmd: &mut Command) {}

impl Server {
    /// Starts `argv` with `env` added to the inherited environment; stdout and stderr go to `log`.
    pub fn start(argv: &[String], env: &[(String, String)], log: &Path, base_url: String) -> Result<Server, LaunchError> {
        let argv = expand_vars(argv, env)?;
        let (prog, args) = argv.split_first().ok_or(LaunchError::Spawn { program: String::new(), message: "empty command".into() })?;
        let out = std::fs::File::create(log)
            .map_err(|e| LaunchError::Spawn { program: prog.clone(), message: format!("{}: {e}", log.display()) })?;
        let err = out.try_clone().map_err(|e| LaunchError::Spawn { program: prog.clone(), message: e.to_string() })?;
        let mut cmd = Command::new(prog);
        cmd.args(args).envs(env.iter().map(|(k, v)| (k, v))).stdin(Stdio::null()).stdout(out).stderr(err);
        // Its own process group, so stopping it stops every worker it forked.
        cmd.process_group(0);
        die_with_parent(&mut cmd);
        let child = cmd.spawn().map_err(|e| LaunchError::Spawn { program: prog.clone(), message: e.to_string() })?;
        let pid = child.id();
        Ok(Server { child, base_url, pid })
    }

    /// The exit status once the process has ended (or why it cannot be known); `None` while it
    /// runs.
    fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(None) => None,
            Ok(Some(st)) => Some(st.to_string()),
            Err(e) => Some(e.to_string()),
        }
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> Result<(), LaunchError> {
        match self.exited() {
            None => Ok(()),
            Some(status) => Err(LaunchError::Died { status }),
        }
    }

    /// Polls `GET /health` until it answers 200 (and `/readiness`, where served, too); fails at
    /// once if the process exits.
    pub fn wait_healthy(&mut self, timeout: Duration, log: &Path, cancel: &Arc<AtomicBool>) -> Result<(), LaunchError> {
        let host = self.base_url.trim_start_matches("http://").trim_end_matches('/').to_string();
        let t0 = Instant::now();
        loop {
            if let Some(status) = self.exited() {
                return Err(LaunchError::ExitedAtStart { status, log: log.display().to_string() });
            }
            if cancel.load(Ordering::Relaxed) {
                return Err(LaunchError::Cancelled);
            }
            // sglang-router answers /health at once but /readiness 503 until a worker has
            // registered; servers without /readiness answer 404 there. Servers without /health
            // (llama.cpp's Python server) are up once they list their models.
            let get = |path| http_get_status(&host, path, Duration::from_secs(2));
            let healthy = match get("/health") {
                Some(200) => get("/readiness").is_some_and(|c| c != 503),
                Some(404) => get("/v1/models") == Some(200),
                _ => false,
            };
            if healthy {
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

/// Where a live point's server is.
pub enum Endpoint {
    /// An existing server (`--target url:URL`).
    Url(String),
    /// Each point's own servers, started from its resolved command (`--target local`,
    /// `local:engine`).
    Launch(PointLauncher),
}

/// Starts each point's server, and the recipe's router in front of it, from the point's resolved
/// command.
pub struct PointLauncher {
    /// Replace the recipe's program with `sweep engine serve` (the reference engine's live twin).
    pub engine_twin: bool,
    /// How long a started server may take to answer `/health`.
    pub health_timeout: Duration,
    /// Profiles of the reference engine when `engine_twin` (default: from the point's runner and model).
    pub profiles: ProfileChoice,
}

/// A point's running servers: the worker, and the router in front of it when the recipe has one.
pub struct PointServers {
    worker: Server,
    router: Option<Server>,
}

impl PointLauncher {
    /// Starts the point's worker (`server.log` in its folder) and router (`router.log`), each
    /// healthy; a router that fails stops the worker.
    pub fn launch(&self, job: &Job) -> Result<PointServers, LaunchError> {
        let launch = job.point.launch.as_ref().ok_or(LaunchError::NoCommand)?;
        std::fs::create_dir_all(&job.dir).map_err(|source| LaunchError::PointDir { path: job.dir.clone(), source })?;
        let argv = self.worker_argv(job, launch)?;
        let env: Vec<(String, String)> = launch.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        let mut worker = start_healthy(argv, &env, &job.dir.join("server.log"), self.health_timeout, &job.cancel)?;
        // A real recipe's router goes in front of the worker (`<worker>` is the worker's URL); the
        // reference engine models the router in process instead (`--router-args`).
        let mut router = None;
        if let Some(r) = launch.router_argv.as_ref().filter(|_| !self.engine_twin) {
            let argv = r.iter().map(|a| a.replace("<worker>", &worker.base_url)).collect();
            let env: Vec<(String, String)> = launch.router_env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            match start_healthy(argv, &env, &job.dir.join("router.log"), self.health_timeout, &job.cancel) {
                Ok(s) => router = Some(s),
                Err(e) => {
                    worker.stop(Duration::from_secs(5));
                    return Err(LaunchError::Router(Box::new(e)));
                }
            }
        }
        Ok(PointServers { worker, router })
    }

    /// The worker's argv: the recipe's command, or the same flags served by `sweep engine serve`
    /// with the point's hardware and model profiles and the recipe's router flags.
    fn worker_argv(&self, job: &Job, launch: &Launch) -> Result<Vec<String>, LaunchError> {
        let mut argv = launch.worker_argv.clone();
        if self.engine_twin {
            let flags_at = argv.iter().position(|a| a.starts_with("--")).unwrap_or(argv.len());
            let exe = std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_else(|_| "sweep".into());
            argv.splice(..flags_at, [exe, "engine".into(), "serve".into()]);
            let hardware = match (&self.profiles.hardware, job.point.row.get("runner").and_then(Value::as_str)) {
                (Some(h), _) => h.clone(),
                // The same best profile the virtual clock would use for this model.
                (None, Some(r)) => crate::targets::sim::best_for_runner(r, crate::targets::pools::point_model(&job.point).as_ref())?.name,
                (None, None) => return Err(LaunchError::NoHardware),
            };
            argv.push(format!("--hardware={hardware}"));
            if let Some(m) = &self.profiles.model {
                argv.push(format!("--engine-model={m}"));
            }
            if let Some(r) = &launch.router_argv {
                argv.push(format!("--router-args={}", crate::targets::sim::flags_only(r).join(" ")));
            }
        }
        Ok(argv)
    }
}

impl PointServers {
    /// Where requests go: the router when there is one, else the worker.
    pub fn base_url(&self) -> &str {
        &self.router.as_ref().unwrap_or(&self.worker).base_url
    }

    /// The worker itself: its `/server_info` names the engine, its `/metrics` are the engine's.
    pub fn worker_url(&self) -> &str {
        &self.worker.base_url
    }

    /// Whether the worker and the router are still running.
    pub fn alive(&mut self) -> Result<(), LaunchError> {
        self.worker.alive()?;
        match self.router.as_mut() {
            Some(r) => r.alive().map_err(|e| LaunchError::Router(Box::new(e))),
            None => Ok(()),
        }
    }

    /// Stops the router, then the worker.
    pub fn stop(mut self) {
        if let Some(mut r) = self.router.take() {
            r.stop(Duration::from_secs(10));
        }
        self.worker.stop(Duration::from_secs(10));
    }
}

/// Starts a server on a free loopback port (`--host`/`--port` appended) and waits for `/health`.
/// `${NAME}` in a command replaced by the variable from the point's environment or this
/// process's (model paths and interpreters differ per machine); an unset one is an error.
fn expand_vars(argv: &[String], env: &[(String, String)]) -> Result<Vec<String>, LaunchError> {
    let lookup = |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()).or_else(|| std::env::var(name).ok());
    argv.iter()
        .map(|a| {
            let mut out = String::with_capacity(a.len());
            let mut rest = a.as_str();
            while let Some(i) = rest.find("${") {
                let Some(j) = rest[i..].find('}') else { break };
                let name = &rest[i + 2..i + j];
                let value = lookup(name).ok_or_else(|| LaunchError::Spawn {
                    program: argv.first().cloned().unwrap_or_default(),
                    message: format!("`${{{name}}}` in the command: {name} is not set; export it (e.g. from scripts/llama/setup.sh)"),
                })?;
                out.push_str(&rest[..i]);
                out.push_str(&value);
                rest = &rest[i + j + 1..];
            }
            out.push_str(rest);
            Ok(out)
        })
        .collect()
}

fn start_healthy(
    mut argv: Vec<String>,
    env: &[(String, String)],
    log: &Path,
    timeout: Duration,
    cancel: &Arc<AtomicBool>,
) -> Result<Server, LaunchError> {
    let port = free_port().map_err(LaunchError::NoPort)?;
    argv.extend(["--host".into(), "127.0.0.1".into(), "--port".into(), port.to_string()]);
    let mut server = Server::start(&argv, env, log, format!("http://127.0.0.1:{port}"))?;
    if let Err(e) = server.wait_healthy(timeout, log, cancel) {
        server.stop(Duration::from_secs(5));
        return Err(e);
    }
    Ok(server)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_in_a_command_are_expanded_or_named_when_unset() {
        let env = vec![("MODEL".to_string(), "/m/tiny.gguf".to_string())];
        let argv: Vec<String> = ["${PY}", "--model", "${MODEL}", "x${MODEL}y", "$HOME"].iter().map(|s| s.to_string()).collect();
        let e = expand_vars(&argv, &env).unwrap_err().to_string();
        assert!(e.contains("`${PY}` in the command: PY is not set"), "{e}");
        let argv: Vec<String> = ["py", "--model", "${MODEL}", "x${MODEL}y", "$HOME", "${unclosed"].iter().map(|s| s.to_string()).collect();
        assert_eq!(expand_vars(&argv, &env).unwrap(), ["py", "--model", "/m/tiny.gguf", "x/m/tiny.ggufy", "$HOME", "${unclosed"]);
    }

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
