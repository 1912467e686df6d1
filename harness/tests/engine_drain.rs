//! `sweep engine serve` as a process, stopped by real signals: SIGTERM drains (streams that end
//! within the drain timeout end normally, the rest get SGLang's in-stream error and `[DONE]`),
//! SIGINT on an idle server exits at once, both exit 0; and the soft open-file limit is raised at
//! start.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A `sweep engine serve` child on a free port, its stderr collected line by line.
struct Engine {
    child: Child,
    addr: String,
    lines: mpsc::Receiver<String>,
    log: Vec<String>,
}

impl Engine {
    fn start(extra: &[&str], soft_nofile: Option<u64>) -> Engine {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sweep"));
        cmd.args(["engine", "serve", "--model-path", "deepseek-ai/DeepSeek-V4-Flash", "--tp", "8", "--port", "0"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(soft) = soft_nofile {
            // SAFETY: only async-signal-safe calls (getrlimit, setrlimit) between fork and exec.
            unsafe {
                cmd.pre_exec(move || {
                    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
                    libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
                    lim.rlim_cur = soft as libc::rlim_t;
                    libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
                    Ok(())
                });
            }
        }
        let mut child = cmd.spawn().expect("start sweep engine serve");
        let err = BufReader::new(child.stderr.take().unwrap());
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in err.lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        let mut e = Engine { child, addr: String::new(), lines, log: Vec::new() };
        let banner = e.wait_line("http://127.0.0.1:", Duration::from_secs(120));
        let i = banner.find("http://").unwrap() + "http://".len();
        e.addr = banner[i..].split_whitespace().next().unwrap().to_string();
        e
    }

    /// The first stderr line containing `needle`.
    fn wait_line(&mut self, needle: &str, limit: Duration) -> String {
        let t0 = Instant::now();
        loop {
            if let Some(l) = self.log.iter().find(|l| l.contains(needle)) {
                return l.clone();
            }
            match self.lines.recv_timeout(Duration::from_millis(200)) {
                Ok(l) => self.log.push(l),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => panic!("server exited; no line with {needle:?}:\n{}", self.log.join("\n")),
            }
            assert!(t0.elapsed() < limit, "no line with {needle:?} in {limit:?}:\n{}", self.log.join("\n"));
        }
    }

    fn signal(&self, sig: i32) {
        // SAFETY: a signal to the child this test started.
        unsafe {
            libc::kill(self.child.id() as i32, sig);
        }
    }

    /// Waits for the exit (at most `limit`); its code and the whole stderr.
    fn exit(mut self, limit: Duration) -> (i32, String) {
        let t0 = Instant::now();
        let code = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s.code().unwrap_or(-1);
            }
            if t0.elapsed() > limit {
                let _ = self.child.kill();
                panic!("still running {limit:?} after the signal:\n{}", self.log.join("\n"));
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        while let Ok(l) = self.lines.recv_timeout(Duration::from_secs(5)) {
            self.log.push(l);
        }
        (code, self.log.join("\n"))
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts a streamed chat of `max_tokens` on its own thread; returns once its first output
/// arrived, with the handle that yields the whole response text.
fn stream(addr: &str, max_tokens: u64) -> std::thread::JoinHandle<String> {
    let body = serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "go"}],
                                  "stream": true, "ignore_eos": true, "max_tokens": max_tokens})
    .to_string();
    let mut s = TcpStream::connect(addr).unwrap();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body.as_bytes()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    let (tx, rx) = mpsc::channel();
    let h = std::thread::spawn(move || {
        let (mut text, mut buf, mut told) = (String::new(), [0u8; 8192], false);
        while let Ok(n) = s.read(&mut buf) {
            if n == 0 {
                break;
            }
            text.push_str(&String::from_utf8_lossy(&buf[..n]));
            if !told && text.contains("\"role\":\"assistant\"") {
                told = tx.send(()).is_ok();
            }
        }
        text
    });
    rx.recv_timeout(Duration::from_secs(60)).expect("the stream started");
    h
}

#[test]
fn sigterm_lets_short_streams_finish_and_cuts_long_ones_with_an_error_event() {
    let mut e = Engine::start(&["--drain-timeout", "8"], None);
    // Real time: 1,000 tokens take about 3 s, well inside the drain; 100K would take minutes.
    let long = stream(&e.addr, 100_000);
    let short = stream(&e.addr, 1000);
    e.signal(libc::SIGTERM);
    let line = e.wait_line("received SIGTERM", Duration::from_secs(30));
    assert!(line.contains("draining 2 open streams (up to 8 s)"), "{line}");
    // No new connections once draining.
    let t0 = Instant::now();
    while TcpStream::connect(&e.addr).is_ok() {
        assert!(t0.elapsed() < Duration::from_secs(20), "still accepting 20 s after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    }
    let short = short.join().unwrap();
    assert!(short.contains("\"finish_reason\":\"length\""), "{short}");
    assert!(short.contains("data: [DONE]") && !short.contains("\"error\""), "{short}");
    let long = long.join().unwrap();
    let err = long.find("data: {\"error\":").unwrap_or_else(|| panic!("no error event in the cut stream:\n{long}"));
    assert!(long[err..].contains("\"type\":\"SERVICE_UNAVAILABLE\""), "{}", &long[err..]);
    assert!(long[err..].contains("data: [DONE]"), "{}", &long[err..]);
    let (code, log) = e.exit(Duration::from_secs(60));
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("1 of 2 streams finished, 1 cut"), "{log}");
}

#[test]
fn sigint_on_an_idle_server_exits_0_at_once() {
    let mut e = Engine::start(&[], None);
    e.signal(libc::SIGINT);
    let line = e.wait_line("received SIGINT", Duration::from_secs(30));
    assert!(line.contains("draining 0 open streams (up to 10 s)"), "{line}");
    // Nothing to wait for: far less than the 10 s drain (a bound load cannot reach).
    let (code, log) = e.exit(Duration::from_secs(8));
    assert_eq!(code, 0, "{log}");
}

#[test]
fn the_soft_open_file_limit_is_raised_at_start() {
    let e = Engine::start(&[], Some(256));
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", e.child.id())).unwrap();
    let row = limits.lines().find(|l| l.starts_with("Max open files")).unwrap();
    let nums: Vec<u64> = row.split_whitespace().filter_map(|w| w.parse().ok()).collect();
    let (soft, hard) = (nums[0], nums[1]);
    assert_eq!(soft, hard.min(65_535), "{row}");
    assert!(soft > 256 || hard <= 256, "{row}");
}
