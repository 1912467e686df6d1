//! `sweep serve` as a user runs it: the real binary over a store filled by recording real run
//! folders (short `sweep run`s on the reference engine), checked over real HTTP (JSON, pages,
//! run files, refused methods, paths and hosts) and in headless Chromium (points drawn, no
//! console errors, screenshots under `target/test-artifacts/dashboard/`).
//!
//! Over 600 lines on purpose: every test shares one fixture (two recorded `sweep run`s and a
//! store), made once per test binary; split into two binaries it would be made twice in CI.

#[path = "common/cdp.rs"]
mod cdp;
mod common;

use common::*;
use harness::store::{Location, Mode, RunRecord, Store, read_run_dir};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const CONFIG: &str = "dsv3-fp8-h200-sglang-agentic";
/// A run id and a config key a user could have written, each with markup in it.
const EVIL_RUN: &str = "evil<script>alert(1)</script>\"'&";
const EVIL_CONFIG: &str = "cfg<img/src=x/onerror=alert(2)>";
/// A copy of `new` labelled measured (see [`fixture`]).
const MEASURED: &str = "measured-stand-in";

/// Runs recorded into one store, shared by every test here.
struct Fixture {
    db: PathBuf,
    /// Run folders: `base` (seed 7) finished before `new` (seed 42); a copy of `base` named
    /// [`EVIL_RUN`] is recorded as finished an hour before both, and a copy of `new` labelled
    /// measured ([`MEASURED`]) two hours before.
    base: PathBuf,
    new: PathBuf,
}

/// A short sweep of the H200 config on the reference engine, recorded into `db` by `sweep run`.
fn sweep_run(out: &Path, seed: &str, db: &Path) {
    let o = sweep(
        &[
            "run",
            "full-sweep-fail-fast",
            "--configs",
            "dsv3-*",
            "--duration",
            "60",
            "--seed",
            seed,
            "--out",
            out.to_str().unwrap(),
            "--store",
            db.to_str().unwrap(),
        ],
        &workspace_root(),
    );
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "sweep run: {stderr}");
    assert!(stdout.contains("recorded") && !stderr.contains("not recorded"), "{stdout}\n{stderr}");
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("dashboard");
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        let (base, new, db) = (root.join("base"), root.join("new"), root.join("sweep.db"));
        sweep_run(&base, "7", &db);
        sweep_run(&new, "42", &db);
        let mut store = Store::open(&Location::Sqlite(db.clone()), Mode::Write).unwrap();
        // The first run again under names with markup (everything the store holds is the
        // user's), recorded as finished an hour before both, so that `new`'s last passing
        // baseline is still `base`.
        let mut evil: RunRecord = read_run_dir(&base, "run").unwrap();
        evil.run.run_id = EVIL_RUN.into();
        evil.run.labels = vec!["<b>label</b>".into()];
        evil.run.configs = vec![EVIL_CONFIG.into()];
        evil.run.finished_unix -= 3600;
        for p in &mut evil.points {
            p.run_id = EVIL_RUN.into();
            p.config_key = EVIL_CONFIG.into();
        }
        for e in &mut evil.evals {
            e.point_id = e.point_id.replace(CONFIG, EVIL_CONFIG);
        }
        store.record(&evil).unwrap();
        // Every server that runs here is the reference engine, whose results are predicted: the
        // charts' measured markers are checked on a copy of `new` labelled measured. Only the
        // label differs; the dashboard draws whatever kind the store holds.
        let mut measured: RunRecord = read_run_dir(&new, "run").unwrap();
        measured.run.run_id = MEASURED.into();
        measured.run.result_kind = "measured".into();
        measured.run.finished_unix -= 7200;
        for p in &mut measured.points {
            p.run_id = MEASURED.into();
            p.result_kind = "measured".into();
        }
        store.record(&measured).unwrap();
        Fixture { db, base, new }
    })
}

fn summary(dir: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap()
}

fn run_id(dir: &Path) -> String {
    summary(dir)["run_id"].as_str().unwrap().to_string()
}

/// A `sweep serve` child on a free loopback port; killed on drop.
struct Server {
    child: Child,
    url: String,
    addr: String,
}

impl Server {
    /// On `store`: a SQLite file or a PostgreSQL URL.
    fn start(store: &str) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sweep"))
            .args(["serve", "--store", store, "--listen", "127.0.0.1:0", "--root"])
            .arg(workspace_root())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start sweep serve");
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        let t = Instant::now();
        let url = loop {
            line.clear();
            assert!(err.read_line(&mut line).unwrap() > 0, "sweep serve exited before its banner");
            if let Some(i) = line.find("http://127.0.0.1:") {
                break line[i..].split_whitespace().next().unwrap().trim_end_matches('/').to_string();
            }
            assert!(t.elapsed() < Duration::from_secs(60), "no banner: {line}");
        };
        std::thread::spawn(move || for _ in err.lines() {});
        let addr = url.trim_start_matches("http://").to_string();
        Server { child, url, addr }
    }

    fn get(&self, path: &str) -> Resp {
        request(reqwest::Method::GET, &format!("{}{path}", self.url))
    }

    fn json(&self, path: &str) -> Value {
        let r = self.get(path);
        assert_eq!(r.status, 200, "{path}: {}", r.text());
        r.json()
    }

    fn html(&self, path: &str) -> String {
        let r = self.get(path);
        assert_eq!(r.status, 200, "{path}: {}", r.text());
        assert!(r.header("content-type").starts_with("text/html"));
        r.text()
    }

    /// One request exactly as written (no client normalising its path), its status and body.
    fn raw(&self, request: &str) -> (u16, String) {
        let mut s = std::net::TcpStream::connect(&self.addr).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        let status = out.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
        (status, out)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A response read whole.
struct Resp {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: Vec<u8>,
}

impl Resp {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }
    fn header(&self, name: &str) -> String {
        self.headers.get(name).map(|v| v.to_str().unwrap().to_string()).unwrap_or_default()
    }
}

/// One request with the real HTTP client (a body on methods that take one).
fn request(method: reqwest::Method, url: &str) -> Resp {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let client = reqwest::Client::builder().timeout(Duration::from_secs(60)).build().unwrap();
        let mut req = client.request(method.clone(), url);
        if method != reqwest::Method::GET && method != reqwest::Method::HEAD {
            req = req.body("x");
        }
        let r = req.send().await.unwrap_or_else(|e| panic!("{method} {url}: {e}"));
        let (status, headers) = (r.status().as_u16(), r.headers().clone());
        Resp { status, headers, body: r.bytes().await.unwrap().to_vec() }
    })
}

fn server() -> Server {
    Server::start(fixture().db.to_str().unwrap())
}

/// Points of `config` in a run folder that finished with metrics (what the charts can draw).
fn drawable(dir: &Path, config: &str) -> usize {
    summary(dir)["points"].as_array().unwrap().iter().filter(|p| p["config_key"] == config && p.get("pareto").is_some()).count()
}

#[test]
fn json_endpoints_carry_every_recorded_point_with_intervals_frontiers_and_flag_diffs() {
    let f = fixture();
    let s = server();
    let runs = s.json("/api/runs");
    assert_eq!(runs["total"], 4, "{runs}");
    let ids: Vec<&str> = runs["runs"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert!(ids.contains(&run_id(&f.base).as_str()) && ids.contains(&run_id(&f.new).as_str()) && ids.contains(&EVIL_RUN), "{ids:?}");

    let configs = s.json("/api/configs");
    let c = configs.as_array().unwrap().iter().find(|c| c["config_key"] == CONFIG).expect("the config is listed");
    assert_eq!(c["runs"], 3);

    let data = s.json(&format!("/api/config/{CONFIG}"));
    assert_eq!(data["runs"].as_array().unwrap().len(), 3);
    let points = data["points"].as_array().unwrap();
    let expected = drawable(&f.base, CONFIG) + 2 * drawable(&f.new, CONFIG);
    assert!(expected >= 5, "the runs finished too few points: {expected}");
    assert_eq!(points.len(), expected);
    // Each point as the run folder has it: throughput and its interval, every view's x, the
    // frontier membership of the run's own analysis.
    for dir in [&f.base, &f.new] {
        let sum = summary(dir);
        let run_index = data["runs"].as_array().unwrap().iter().position(|r| r["id"] == sum["run_id"]).unwrap();
        let curve = sum["curves"].as_array().unwrap().iter().find(|c| c["curve"] == CONFIG).unwrap();
        for sp in sum["points"].as_array().unwrap().iter().filter(|p| p["config_key"] == CONFIG) {
            let p = points.iter().find(|p| p["run"] == run_index && p["id"] == sp["id"]).expect("point is in the payload");
            if dir == &f.new {
                let twin = points.iter().find(|q| q["id"] == sp["id"] && q["kind"] == "measured").expect("the measured copy");
                assert_eq!((&twin["y"], &twin["x"]), (&p["y"], &p["x"]));
            }
            let pareto = &sp["pareto"];
            assert_eq!(p["y"]["value"], pareto["y"]);
            assert_eq!(p["y"]["lo"], pareto["y_ci"][0]);
            assert_eq!(p["x"]["e2e_norm_intvty_p90"]["value"], pareto["x"]["e2e_norm_intvty_p90"]);
            assert_eq!(p["x"]["intvty_p90"]["hi"], pareto["x_ci"]["intvty_p90"][1]);
            assert!(p["x"]["ttft_p90"]["value"].as_f64().unwrap() > 0.0);
            assert_eq!(p["p_frontier"], pareto["p_frontier"]);
            assert_eq!(p["kind"], "predicted");
            assert_eq!(data["texts"][p["trace_set"].as_u64().unwrap() as usize], sp["trace_set"]);
            let provenance = data["texts"][p["provenance"].as_u64().unwrap() as usize].as_str().unwrap();
            assert_eq!(
                provenance,
                format!(
                    "model profile {} on hardware profile {}",
                    sp["profiles"]["model_profile"].as_str().unwrap(),
                    sp["profiles"]["hardware_profile"].as_str().unwrap()
                )
            );
            for view in ["e2e_norm_intvty_p90", "intvty_p90", "e2el_p90", "e2el_p75"] {
                let on = curve["views"][view]["frontier"].as_array().unwrap().contains(&sp["id"]);
                assert_eq!(p["frontier"][view], on, "{} {view}", sp["id"]);
            }
            // TTFT's frontier only ever holds North Star winners.
            if p["frontier"]["ttft_p90"] == true {
                assert_eq!(p["frontier"]["e2e_norm_intvty_p90"], true);
            }
            // The launch against the repository's recipe: the DEP8 arm adds DP attention.
            let diff = &data["flags"][p["flags"].as_u64().expect("a flag diff") as usize];
            assert_eq!(diff["base"], format!("recipe recipes/{CONFIG}.yaml"));
            let names: Vec<&str> = diff["worker"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
            if sp["id"].as_str().unwrap().contains("/dep8-") {
                assert!(names.contains(&"--enable-dp-attention"), "{diff}");
            } else {
                assert!(!names.contains(&"--enable-dp-attention") && names.contains(&"--max-running-requests"), "{diff}");
            }
        }
    }
    // Filters narrow the runs.
    let measured = s.json(&format!("/api/config/{CONFIG}?kind=measured"));
    assert_eq!(measured["runs"].as_array().unwrap().len(), 1);
    assert!(measured["points"].as_array().unwrap().iter().all(|p| p["kind"] == "measured"));
    let none = s.get(&format!("/api/config/{CONFIG}?hardware=gb300"));
    assert_eq!(none.status, 404);
    assert!(none.text().contains("no recorded run"));
    let bad = s.get("/api/runs?since=last-week");
    assert_eq!(bad.status, 400);
    assert!(bad.text().contains("since: expected a date YYYY-MM-DD"));
    assert_eq!(s.json("/api/runs?framework=sglang&limit=1")["runs"].as_array().unwrap().len(), 1);
    assert_eq!(s.json("/api/runs?framework=vllm")["total"], 0);
    assert_eq!(s.json("/api/runs?until=2000-01-01")["total"], 0);

    let run = s.json(&format!("/api/run/{}", run_id(&f.new)));
    assert_eq!(run["points"].as_array().unwrap().len(), summary(&f.new)["points"].as_array().unwrap().len());
    assert_eq!(s.get("/api/run/nope").status, 404);
}

#[test]
fn pages_list_runs_and_link_reports_served_from_run_folders() {
    let f = fixture();
    let s = server();
    let id = run_id(&f.new);
    let page = s.html("/");
    assert!(page.contains(&format!("<a href=\"/run/{id}\">{id}</a>")), "{page}");
    assert!(page.contains(&format!("<a href=\"/config/{CONFIG}\">{CONFIG}</a>")));
    assert!(page.contains("4 of 4 matching run(s)"));
    let filtered = s.html(&format!("/?config={CONFIG}&kind=predicted&gate=pass"));
    assert!(filtered.contains("2 of 2 matching run(s)"), "{filtered}");
    assert!(s.html("/?hardware=gb300").contains("0 of 0 matching run(s)"));

    let config = s.html(&format!("/config/{CONFIG}"));
    assert!(config.contains(&format!("data-config=\"{CONFIG}\"")));
    assert!(config.contains("<script src=\"/assets/dashboard.js\" defer></script>"));

    let run = s.html(&format!("/run/{id}"));
    let report = format!("/runs/{id}/files/report.html");
    assert!(run.contains(&format!("href=\"{report}\"")), "{run}");
    assert!(run.contains(&format!("<td title=\"{CONFIG}/tp8-c1\">tp8-c1</td>")) && run.contains("/agg.json\">aggregate</a>"), "{run}");
    // The report is the run folder's file, byte for byte, under a sandboxing policy.
    let r = s.get(&report);
    assert_eq!(r.status, 200);
    assert!(r.header("content-security-policy").starts_with("sandbox"));
    assert_eq!(r.body, std::fs::read(f.new.join("report.html")).unwrap());
    let agg = s.get(&format!("/runs/{id}/files/{CONFIG}/tp8-c1/agg.json"));
    assert_eq!(agg.status, 200);
    assert_eq!(agg.header("content-type"), "application/json");

    for path in ["/assets/dashboard.js", "/assets/dashboard.css", "/configs"] {
        assert_eq!(s.get(path).status, 200, "{path}");
    }
    let missing = s.get("/nothing/here");
    assert_eq!(missing.status, 404);
    // Every page carries the policy: no inline script, this origin only.
    let csp = s.get("/").header("content-security-policy");
    assert!(csp.contains("script-src 'self'") && !csp.contains("unsafe-inline") && csp.contains("default-src 'none'"), "{csp}");
}

#[test]
fn compare_judges_a_run_against_its_last_passing_baseline() {
    let f = fixture();
    let s = server();
    let (base, new) = (run_id(&f.base), run_id(&f.new));
    let c = s.json(&format!("/api/compare?run={new}"));
    assert_eq!(c["baseline"]["id"], base.as_str(), "{c}");
    let deltas = c["deltas"].as_array().unwrap();
    // Every gated metric of every shared point (tok/s/GPU, three views, and J per output token:
    // both runs are predicted, so each seed has its energy).
    assert_eq!(deltas.len(), 5 * drawable(&f.new, CONFIG));
    assert!(deltas.iter().any(|d| d["metric"] == "joules_per_output_token"), "{c}");
    for d in deltas {
        let worse = d["worse"].as_bool().unwrap();
        let beyond = d["beyond_noise"].as_bool().unwrap();
        let expected = if !beyond {
            "within noise"
        } else if worse {
            "regression"
        } else {
            "improvement"
        };
        assert_eq!(d["significance"], expected, "{d}");
        let (b, n) = (d["base"].as_f64().unwrap(), d["new"].as_f64().unwrap());
        assert!(((n - b) / b.abs() * 100.0 - d["change_pct"].as_f64().unwrap()).abs() < 1e-6, "{d}");
    }
    // The gate's own judgement of the two folders, as `sweep compare` would make it.
    let load = |d: &Path| harness::results::RunSummary::load(d).unwrap();
    let direct = harness::gate::compare(&load(&f.base), &load(&f.new));
    assert_eq!(direct.len(), deltas.len());
    for (d, j) in deltas.iter().zip(&direct) {
        assert_eq!((d["point"].as_str().unwrap(), d["metric"].as_str().unwrap()), (j.point.as_str(), j.metric.as_str()));
        assert_eq!(d["beyond_noise"], j.judgement.beyond_noise, "{d}");
        assert_eq!(d["model"], j.judgement.model.as_str());
        assert!((d["change_pct"].as_f64().unwrap() - j.judgement.change_pct).abs() < 1e-9, "{d} vs {j:?}");
    }
    // The oldest run has nothing before it.
    let enc = |t: &str| {
        t.bytes().map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") }).collect::<String>()
    };
    let first = s.json(&format!("/api/compare?run={}", enc(EVIL_RUN)));
    assert!(first["baseline"].is_null() && first["deltas"].as_array().unwrap().is_empty(), "{first}");
    // A given baseline is used as given.
    let given = s.json(&format!("/api/compare?run={base}&baseline={new}"));
    assert_eq!(given["baseline"]["id"], new.as_str());
    assert_eq!(given["baseline_rule"], "given");

    let page = s.html(&format!("/compare?run={new}"));
    assert!(page.contains(&format!("<a href=\"/run/{base}\">{base}</a>")), "{page}");
    let rows = page.matches("<tr class=\"sig-").count();
    assert_eq!(rows, deltas.len());
    assert!(page.contains(&format!("data-runs=\"[&quot;{new}&quot;,&quot;{base}&quot;]\"")));
    assert_eq!(s.get("/compare").status, 400);
    assert_eq!(s.get("/compare?run=nope").status, 404);
}

#[test]
fn only_get_and_head_are_served() {
    let s = server();
    for path in ["/", "/api/runs", "/api/config/x", "/runs/x/files/report.html", "/no/such/path"] {
        for method in
            [reqwest::Method::POST, reqwest::Method::PUT, reqwest::Method::DELETE, reqwest::Method::PATCH, reqwest::Method::OPTIONS]
        {
            let r = request(method.clone(), &format!("{}{path}", s.url));
            assert_eq!(r.status, 405, "{method} {path}");
            assert_eq!(r.header("allow"), "GET, HEAD");
        }
    }
    let head = request(reqwest::Method::HEAD, &format!("{}/", s.url));
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
    // The connection the dashboard opens cannot write either.
    let mut ro = Store::open(&Location::Sqlite(fixture().db.clone()), Mode::ReadOnly).unwrap();
    let e = ro.remove(EVIL_RUN).unwrap_err().to_string();
    assert!(e.contains("readonly"), "{e}");
}

#[test]
fn stored_strings_are_escaped_everywhere() {
    let s = server();
    let enc = |t: &str| {
        t.bytes().map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") }).collect::<String>()
    };
    let pages = [
        "/".to_string(),
        "/configs".to_string(),
        format!("/run/{}", enc(EVIL_RUN)),
        format!("/config/{}", enc(EVIL_CONFIG)),
        format!("/compare?run={}", enc(EVIL_RUN)),
        // Error pages repeat what was asked for.
        format!("/run/{}", enc("<script>nope")),
    ];
    for p in &pages {
        let body = s.get(p).text();
        for raw in ["<script>alert", "<img/src", "<b>label", "<script>nope"] {
            assert!(!body.contains(raw), "{p} carries {raw:?} unescaped");
        }
    }
    let runs = s.html("/");
    assert!(runs.contains("evil&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39;&amp;"), "{runs}");
    assert!(runs.contains("&lt;b&gt;label&lt;/b&gt;"));
    // Links percent-encode the ids.
    assert!(runs.contains(&format!("href=\"/run/{}\"", enc(EVIL_RUN))), "{runs}");
    let config = s.html(&format!("/config/{}", enc(EVIL_CONFIG)));
    assert!(config.contains("data-config=\"cfg&lt;img/src=x/onerror=alert(2)&gt;\""), "{config}");
    // JSON carries the strings as data; the script writes them as text only.
    let data = s.json(&format!("/api/config/{}", enc(EVIL_CONFIG)));
    assert_eq!(data["config_key"], EVIL_CONFIG);
    assert_eq!(data["runs"][0]["id"], EVIL_RUN);
    let js = s.get("/assets/dashboard.js").text();
    assert!(!js.contains("innerHTML") && !js.contains("insertAdjacentHTML") && !js.contains("document.write") && !js.contains("eval("));
}

#[test]
fn paths_that_leave_a_run_folder_are_refused() {
    let f = fixture();
    let s = server();
    let id = run_id(&f.new);
    // A link inside the folder to a file outside it.
    let outside = f.new.parent().unwrap().join("outside-secret.txt");
    std::fs::write(&outside, "TOPSECRET-CONTENT").unwrap();
    let link = f.new.join("link-out.txt");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&outside, &link).unwrap();
    for path in [
        format!("/runs/{id}/files/../../../../etc/passwd"),
        format!("/runs/{id}/files/%2e%2e/%2e%2e/%2e%2e/etc/passwd"),
        format!("/runs/{id}/files/..%2F..%2Foutside-secret.txt"),
        format!("/runs/{id}/files/%2Fetc%2Fpasswd"),
        format!("/runs/{id}/files/link-out.txt"),
        format!("/runs/{id}/files/./report.html"),
    ] {
        let (status, body) = s.raw(&format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"));
        assert!(status == 403 || status == 404 || status == 400, "{path}: {status}");
        assert!(!body.contains("TOPSECRET-CONTENT") && !body.contains("root:"), "{path}: {body}");
    }
    let (status, body) = s.raw(&format!("GET /runs/{id}/files/link-out.txt HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"));
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("outside the run's folder"));
    // A run the store does not have has no files.
    assert_eq!(s.get("/runs/nope/files/report.html").status, 404);
    std::fs::remove_file(&link).unwrap();
}

#[test]
fn requests_for_other_hosts_and_remote_listening_are_refused() {
    let s = server();
    // A page of another site whose name resolves here (DNS rebinding) reads nothing.
    let (status, _) = s.raw("GET /api/runs HTTP/1.1\r\nHost: evil.example:8080\r\nConnection: close\r\n\r\n");
    assert_eq!(status, 403);
    let (status, _) = s.raw("GET /api/runs HTTP/1.1\r\nHost: localhost:1\r\nConnection: close\r\n\r\n");
    assert_eq!(status, 200);

    let db = fixture().db.to_str().unwrap().to_string();
    let o = sweep(&["serve", "--store", &db, "--listen", "0.0.0.0:0"], &workspace_root());
    assert!(!o.status.success());
    let err = text(&o).1;
    assert!(err.contains("not a loopback address") && err.contains("--allow-remote"), "{err}");
    let o = sweep(&["serve", "--store", &db, "--listen", "nowhere"], &workspace_root());
    assert!(text(&o).1.contains("--listen \"nowhere\": expected an address and port"), "{}", text(&o).1);
    let missing = fixture().db.with_file_name("missing.db");
    let o = sweep(&["serve", "--store", missing.to_str().unwrap(), "--listen", "127.0.0.1:0"], &workspace_root());
    assert!(!o.status.success());
    assert!(text(&o).1.contains("no store at"), "{}", text(&o).1);
}

/// Every page in a real browser: the expected points drawn, hover details, no console error,
/// no policy violation, no dialog; screenshots kept. Skipped (with a note) without Chromium
/// unless `SWEEP_REQUIRE_CHROMIUM` is set, as `.ci/run` sets it.
#[test]
fn pages_render_in_headless_chromium() {
    let Some(bin) = cdp::chromium() else {
        assert!(std::env::var_os("SWEEP_REQUIRE_CHROMIUM").is_none(), "SWEEP_REQUIRE_CHROMIUM is set but no chromium was found");
        eprintln!("skipped: no chromium (set SWEEP_CHROMIUM or install Debian's chromium)");
        return;
    };
    let f = fixture();
    let s = server();
    let shots = workspace_root().join("target/test-artifacts/dashboard");
    let mut b = cdp::Browser::start(&bin, 1280, 900);
    let chart_ready =
        "document.querySelector('.chart-app') && [...document.querySelectorAll('.chart-app')].every(a => a.dataset.state === 'ready')";
    let count = |b: &mut cdp::Browser| -> Vec<(u64, u64)> {
        let v =
            b.eval("[...document.querySelectorAll('svg.chart')].map(s => [Number(s.dataset.points), s.querySelectorAll('.pt').length])");
        v.as_array().unwrap().iter().map(|p| (p[0].as_u64().unwrap(), p[1].as_u64().unwrap())).collect()
    };

    b.open(&format!("{}/", s.url), "document.querySelector('table.runs')");
    assert_eq!(b.eval("document.querySelectorAll('table.runs tbody tr').length"), 4);
    b.screenshot(&shots.join("runs.png"));
    assert_eq!(b.problems(), Vec::<String>::new(), "runs list");

    // The config page: every run drawn (measured as filled circles, predicted as hollow
    // diamonds), every view, log and linear, runs and kinds toggled off.
    let (n_base, n_new) = (drawable(&f.base, CONFIG) as u64, drawable(&f.new, CONFIG) as u64);
    let all = n_base + 2 * n_new;
    b.open(&format!("{}/config/{CONFIG}", s.url), chart_ready);
    assert_eq!(count(&mut b), vec![(all, all)]);
    assert_eq!(b.eval("document.querySelectorAll('svg.chart .pt[data-kind=measured] > circle:not(.hit)').length"), n_new);
    assert_eq!(b.eval("document.querySelectorAll('svg.chart .pt[data-kind=predicted] > path').length"), n_base + n_new);
    b.hover("svg.chart .pt");
    b.wait("!document.querySelector('.tooltip').hidden");
    let tip = b.eval("document.querySelector('.tooltip').textContent").as_str().unwrap().to_string();
    assert!(
        tip.contains(CONFIG)
            && tip.contains("tok/s/GPU")
            && tip.contains("p(North Star frontier)")
            && tip.contains("launch against the recipe"),
        "{tip}"
    );
    b.screenshot(&shots.join("config.png"));
    b.unhover();
    b.wait("document.querySelector('.tooltip').hidden");
    for view in ["intvty_p90", "e2el_p75", "e2el_p90", "ttft_p90", "e2e_norm_intvty_p90"] {
        b.eval(&format!("document.querySelector('button[data-view={view}]').click()"));
        assert_eq!(count(&mut b), vec![(all, all)], "{view}");
        let label = b.eval("document.querySelector('svg.chart .axes text.label').textContent");
        assert!(label.as_str().unwrap().contains(if view.starts_with("ttft") { "first token" } else { "" }), "{label}");
    }
    b.eval("document.querySelectorAll('.modes select')[0].value = 'log'; document.querySelectorAll('.modes select')[0].dispatchEvent(new Event('change'))");
    assert!(b.eval("document.querySelector('svg.chart .axes text.label').textContent").as_str().unwrap().contains("(log)"));
    b.screenshot(&shots.join("config-log-x.png"));
    let base_id = run_id(&f.base);
    b.eval(&format!("document.querySelector('input[data-run=\"{base_id}\"]').click()"));
    assert_eq!(count(&mut b), vec![(2 * n_new, 2 * n_new)], "base toggled off");
    b.eval("[...document.querySelectorAll('.modes input[type=checkbox]')][1].click()");
    assert_eq!(count(&mut b), vec![(n_new, n_new)], "predicted points hidden");
    b.eval("[...document.querySelectorAll('.modes input[type=checkbox]')][0].click()");
    assert_eq!(count(&mut b), vec![(0, 0)], "measured points hidden too");
    assert_eq!(b.problems(), Vec::<String>::new(), "config page");

    // A run, and a run against its baseline (deltas and both curves).
    b.open(&format!("{}/run/{}", s.url, run_id(&f.new)), "document.querySelector('table.points')");
    b.screenshot(&shots.join("run.png"));
    b.open(&format!("{}/compare?run={}", s.url, run_id(&f.new)), chart_ready);
    assert_eq!(count(&mut b), vec![(n_base + n_new, n_base + n_new)]);
    b.screenshot(&shots.join("compare.png"));
    assert_eq!(b.problems(), Vec::<String>::new(), "run and compare pages");

    // Names with markup stay text: nothing runs, nothing is blocked (which would be logged).
    let enc = |t: &str| {
        t.bytes().map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") }).collect::<String>()
    };
    b.open(&format!("{}/config/{}", s.url, enc(EVIL_CONFIG)), chart_ready);
    assert_eq!(count(&mut b), vec![(n_base, n_base)]);
    assert_eq!(b.eval("document.querySelectorAll('img').length"), 0);
    assert_eq!(b.eval("document.querySelector('h1').textContent"), format!("config {EVIL_CONFIG}"));
    b.hover("svg.chart .pt");
    b.wait("!document.querySelector('.tooltip').hidden");
    assert!(b.eval("document.querySelector('.tooltip').textContent").as_str().unwrap().contains(EVIL_RUN));
    b.screenshot(&shots.join("escaped.png"));
    b.open(&format!("{}/run/{}", s.url, enc(EVIL_RUN)), "document.querySelector('table.points')");
    assert_eq!(b.eval("document.querySelectorAll('script').length"), 1, "only the dashboard's own script");
    assert_eq!(b.problems(), Vec::<String>::new(), "pages with markup in names");

    // The run's own report, served from its folder.
    b.open(&format!("{}/runs/{}/files/report.html", s.url, run_id(&f.new)), "document.body");
    b.screenshot(&shots.join("report.png"));
}

/// The same runs recorded into PostgreSQL are served alike, over a read-only session.
#[test]
fn a_postgres_store_is_served_alike() {
    let Some(url) = pg_store("dashboard") else { return };
    let f = fixture();
    let mut pg = Store::open(&Location::Postgres(url.clone()), Mode::Write).unwrap();
    pg.record_dir(&f.base, "run").unwrap();
    pg.record_dir(&f.new, "run").unwrap();
    drop(pg);
    let (p, q) = (Server::start(&url), server());
    let id = run_id(&f.new);
    let (from_pg, from_sqlite) = (p.json(&format!("/api/run/{id}")), q.json(&format!("/api/run/{id}")));
    assert_eq!(from_pg["points"], from_sqlite["points"]);
    let data = p.json(&format!("/api/config/{CONFIG}"));
    assert_eq!(data["points"].as_array().unwrap().len(), drawable(&f.base, CONFIG) + drawable(&f.new, CONFIG));
    let c = p.json(&format!("/api/compare?run={id}"));
    assert_eq!(c["baseline"]["id"], run_id(&f.base).as_str());
    assert!(p.html("/").contains("2 of 2 matching run(s)"));
    // The dashboard's session cannot write, whatever a request asks for.
    let mut ro = Store::open(&Location::Postgres(url), Mode::ReadOnly).unwrap();
    let e = ro.remove(&id).unwrap_err().to_string();
    assert!(e.contains("read-only"), "{e}");
}
