//! Headless Chromium driven over the DevTools protocol, through `--remote-debugging-pipe`
//! (NUL-separated JSON on file descriptors 3 and 4): no websocket client, no browser driver.
//! The browser is found at `SWEEP_CHROMIUM`, else `chromium` / `chromium-browser` /
//! `google-chrome` on the PATH.

use serde_json::{Value, json};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

/// The browser binary, if there is one.
pub fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("SWEEP_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        for dir in std::env::split_paths(&path) {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// A running browser with one page attached.
pub struct Browser {
    child: Child,
    to: ChildStdin,
    from: Receiver<Value>,
    next: u64,
    session: String,
    /// Every event received so far (console calls, exceptions, log entries, dialogs, …).
    pub events: Vec<Value>,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts `bin` headless with a fresh profile and opens a blank page of `width` × `height`.
    pub fn start(bin: &Path, width: u32, height: u32) -> Browser {
        let profile = tempfile::tempdir().unwrap();
        // The shell hands the pipes to the browser as descriptors 3 (commands) and 4 (replies).
        let mut child = Command::new("sh")
            .arg("-c")
            .arg("exec \"$0\" \"$@\" 3<&0 4>&1 0</dev/null 1>/dev/null")
            .arg(bin)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--hide-scrollbars",
                "--remote-debugging-pipe",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", bin.display()));
        let to = child.stdin.take().unwrap();
        let mut out = child.stdout.take().unwrap();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let mut chunk = vec![0u8; 1 << 16];
            loop {
                let n = match out.read(&mut chunk) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                buf.extend_from_slice(&chunk[..n]);
                while let Some(i) = buf.iter().position(|&b| b == 0) {
                    let msg: Vec<u8> = buf.drain(..=i).collect();
                    if let Ok(v) = serde_json::from_slice::<Value>(&msg[..msg.len() - 1])
                        && tx.send(v).is_err()
                    {
                        return;
                    }
                }
            }
        });
        let mut b = Browser { child, to, from: rx, next: 0, session: String::new(), events: Vec::new(), _profile: profile };
        let target = b.call("Target.createTarget", json!({"url": "about:blank"}))["targetId"].as_str().unwrap().to_string();
        let session =
            b.call("Target.attachToTarget", json!({"targetId": target, "flatten": true}))["sessionId"].as_str().unwrap().to_string();
        b.session = session;
        for domain in ["Runtime.enable", "Log.enable", "Page.enable"] {
            b.call(domain, json!({}));
        }
        b.call("Emulation.setDeviceMetricsOverride", json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}));
        b
    }

    /// Sends a command (to the page once one is attached) and waits for its result.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if !self.session.is_empty() {
            msg["sessionId"] = json!(self.session);
        }
        let mut bytes = serde_json::to_vec(&msg).unwrap();
        bytes.push(0);
        self.to.write_all(&bytes).expect("write to the browser");
        let t = Instant::now();
        loop {
            let left = Duration::from_secs(30).checked_sub(t.elapsed()).unwrap_or_default();
            match self.from.recv_timeout(left) {
                Ok(v) if v["id"] == id => {
                    assert!(v.get("error").is_none(), "{method}: {}", v["error"]);
                    return v["result"].clone();
                }
                Ok(v) => self.events.push(v),
                Err(RecvTimeoutError::Timeout) => panic!("{method}: no answer from the browser in 30 s"),
                Err(RecvTimeoutError::Disconnected) => panic!("{method}: the browser went away"),
            }
        }
    }

    /// Evaluates an expression in the page (awaiting a promise) and returns its value.
    pub fn eval(&mut self, expr: &str) -> Value {
        let r = self.call("Runtime.evaluate", json!({"expression": expr, "returnByValue": true, "awaitPromise": true}));
        assert!(r.get("exceptionDetails").is_none(), "{expr}: {}", r["exceptionDetails"]);
        r["result"]["value"].clone()
    }

    /// Opens `url` and waits until `ready` (an expression) is true.
    pub fn open(&mut self, url: &str, ready: &str) {
        self.call("Page.navigate", json!({"url": url}));
        self.wait(ready);
    }

    pub fn wait(&mut self, cond: &str) {
        let t = Instant::now();
        let expr = format!("document.readyState === 'complete' && !!({cond})");
        while self.eval(&expr) != json!(true) {
            assert!(t.elapsed() < Duration::from_secs(30), "page never got ready: {cond}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Moves the mouse over the centre of the element `selector` picks.
    pub fn hover(&mut self, selector: &str) {
        let sel = serde_json::to_string(selector).unwrap();
        let at = self.eval(&format!("(() => {{ const r = document.querySelector({sel}).getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; }})()"));
        self.call("Input.dispatchMouseEvent", json!({"type": "mouseMoved", "x": at[0], "y": at[1]}));
    }

    /// Moves the mouse to the page's top-left corner (off every chart).
    pub fn unhover(&mut self) {
        self.call("Input.dispatchMouseEvent", json!({"type": "mouseMoved", "x": 0, "y": 0}));
    }

    /// A PNG of the whole page (up to 4,000 px tall), written to `path`.
    pub fn screenshot(&mut self, path: &Path) {
        let h = self.eval("document.documentElement.scrollHeight").as_f64().unwrap_or(1000.0).min(4000.0);
        let w = self.eval("document.documentElement.clientWidth").as_f64().unwrap_or(1280.0);
        let r = self.call(
            "Page.captureScreenshot",
            json!({"format": "png", "captureBeyondViewport": true, "clip": {"x": 0, "y": 0, "width": w, "height": h, "scale": 1}}),
        );
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, base64(r["data"].as_str().unwrap())).unwrap();
    }

    /// Console errors and warnings, uncaught exceptions, failed loads, policy violations and
    /// dialogs since the last call, as text.
    pub fn problems(&mut self) -> Vec<String> {
        // Let queued events arrive.
        self.eval("1");
        let mut out = Vec::new();
        for e in self.events.drain(..) {
            let p = &e["params"];
            match e["method"].as_str().unwrap_or("") {
                "Runtime.exceptionThrown" => out.push(format!("exception: {}", p["exceptionDetails"])),
                "Runtime.consoleAPICalled" if matches!(p["type"].as_str(), Some("error" | "warning" | "assert")) => {
                    out.push(format!("console.{}: {}", p["type"].as_str().unwrap(), p["args"]))
                }
                "Log.entryAdded" if matches!(p["entry"]["level"].as_str(), Some("error" | "warning")) => {
                    out.push(format!("log {}: {} ({})", p["entry"]["level"], p["entry"]["text"], p["entry"]["url"]))
                }
                "Page.javascriptDialogOpening" => out.push(format!("dialog: {}", p["message"])),
                _ => {}
            }
        }
        out
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Standard base64 (what the protocol sends screenshots in).
fn base64(s: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let bytes: Vec<u8> = s.bytes().filter(|&c| c != b'=' && !c.is_ascii_whitespace()).collect();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let v: Vec<u32> = chunk.iter().map(|&c| val(c) as u32).collect();
        let n = v.iter().enumerate().fold(0u32, |acc, (i, x)| acc | (x << (18 - 6 * i)));
        out.push((n >> 16) as u8);
        if v.len() > 2 {
            out.push((n >> 8) as u8);
        }
        if v.len() > 3 {
            out.push(n as u8);
        }
    }
    out
}

#[test]
fn base64_decodes_padded_and_unpadded() {
    assert_eq!(base64("aGVsbG8="), b"hello");
    assert_eq!(base64("aGk="), b"hi");
    assert_eq!(base64("YWJj"), b"abc");
}
