//! `report.html` and a point's page rendered in headless Chromium from a real short run of the
//! main job: the verdict comes first, the table before the charts, every point in the table and
//! on the charts, no two point labels overlap and none covers a marker (measured on the text the
//! browser laid out, not on the layout's own estimate), every point has whiskers on both axes,
//! the point page has its distributions and time series, and no page logs a console error.
//! Screenshots are kept under `target/test-artifacts/report_browser/` to be looked at.
//!
//! Needs Chromium: `SWEEP_CHROMIUM=/path/to/chromium`, else `chromium` or `chromium-browser` on
//! the PATH. Ignored by default; `.ci/run` installs Debian's `chromium` and runs it with
//! `cargo test -p harness --test report_browser -- --ignored`.

mod common;
use common::*;

use std::path::{Path, PathBuf};
use std::process::Command;

fn chromium() -> PathBuf {
    if let Some(p) = std::env::var_os("SWEEP_CHROMIUM") {
        return PathBuf::from(p);
    }
    for name in ["chromium", "chromium-browser"] {
        if let Ok(o) = Command::new("sh").args(["-c", &format!("command -v {name}")]).output()
            && o.status.success()
        {
            return PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
        }
    }
    panic!("headless Chromium not found: set SWEEP_CHROMIUM or install it (Debian: apt-get install chromium)");
}

/// Runs Chromium headless on `page` with `args`; returns (stdout, stderr).
fn chrome(page: &Path, args: &[&str]) -> (String, String) {
    let profile = tempfile::tempdir().unwrap();
    let o = Command::new(chromium())
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking"])
        .args(["--disable-component-update", "--disable-sync", "--hide-scrollbars", "--enable-logging=stderr", "--v=0"])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("run chromium");
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// Console errors Chromium logged for the page (its own D-Bus and GPU noise left out).
fn console_errors(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.contains("CONSOLE(") || l.contains("Uncaught") || (l.contains("ERROR:") && l.contains("javascript")))
        .collect()
}

/// Measures the laid-out page in the browser and writes the result into `<pre id="probe">`.
const PROBE: &str = r#"<script>
(function () {
  const r = {};
  const all = Array.from(document.querySelectorAll('*'));
  const at = (sel) => { const e = document.querySelector(sel); return e ? all.indexOf(e) : -1; };
  r.order = { verdict: at('#verdict'), summary: at('#summary'), charts: at('#charts'), details: at('#details') };
  r.verdict = (document.querySelector('#verdict h2') || {}).textContent || '';
  r.rows = document.querySelectorAll('#summary tr[data-point]').length;
  r.svgs = document.querySelectorAll('svg').length;
  r.overlaps = [];
  r.labels = 0;
  r.points = 0;
  r.no_whiskers = [];
  const hit = (a, b) => a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5;
  for (const svg of document.querySelectorAll('svg')) {
    const labels = Array.from(svg.querySelectorAll('text.lbl')).map(t => [t.textContent, t.getBoundingClientRect()]);
    const marks = Array.from(svg.querySelectorAll('circle.mk')).map(c => c.getBoundingClientRect());
    r.labels += labels.length;
    for (let i = 0; i < labels.length; i++) {
      for (let j = i + 1; j < labels.length; j++) {
        if (hit(labels[i][1], labels[j][1])) r.overlaps.push(svg.id + ': ' + labels[i][0] + ' / ' + labels[j][0]);
      }
      for (const m of marks) if (hit(labels[i][1], m)) r.overlaps.push(svg.id + ': ' + labels[i][0] + ' covers a marker');
    }
    for (const g of svg.querySelectorAll('g.pt')) {
      r.points += 1;
      if (!g.querySelector('.wx') || !g.querySelector('.wy')) r.no_whiskers.push(svg.id + ' ' + g.dataset.point);
    }
  }
  r.dist = document.querySelectorAll('#distribution-charts svg').length;
  r.series = document.querySelectorAll('#time-series svg').length;
  const pre = document.createElement('pre');
  pre.id = 'probe';
  pre.textContent = JSON.stringify(r);
  document.body.appendChild(pre);
})();
</script>"#;

/// The page's measurements: a copy of it with the probe, beside it (so its links resolve).
fn probe(page: &Path) -> serde_json::Value {
    let html = std::fs::read_to_string(page).unwrap();
    let copy = page.with_file_name("probe.html");
    std::fs::write(&copy, html.replace("</body>", &format!("{PROBE}</body>"))).unwrap();
    let (dom, stderr) = chrome(&copy, &["--dump-dom"]);
    std::fs::remove_file(&copy).unwrap();
    let errors = console_errors(&stderr);
    assert!(errors.is_empty(), "{}: console errors:\n{}", page.display(), errors.join("\n"));
    let start = dom.find("<pre id=\"probe\">").unwrap_or_else(|| panic!("{}: the probe did not run:\n{stderr}", page.display())) + 16;
    let end = start + dom[start..].find("</pre>").unwrap();
    let json = dom[start..end].replace("&quot;", "\"").replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&");
    serde_json::from_str(&json).unwrap_or_else(|e| panic!("probe output {json}: {e}"))
}

/// Screenshots of `page`, kept as test artifacts.
fn screenshot(page: &Path, name: &str, height: u32) -> PathBuf {
    let dir = workspace_root().join("target/test-artifacts/report_browser");
    std::fs::create_dir_all(&dir).unwrap();
    let png = dir.join(name);
    let _ = std::fs::remove_file(&png);
    let (_, stderr) = chrome(page, &[&format!("--screenshot={}", png.display()), &format!("--window-size=1400,{height}")]);
    let size = std::fs::metadata(&png).map(|m| m.len()).unwrap_or(0);
    assert!(size > 50_000, "{}: screenshot missing or blank ({size} bytes)\n{stderr}", png.display());
    png
}

#[test]
#[ignore = "needs headless Chromium (SWEEP_CHROMIUM or chromium on the PATH); .ci/run runs it"]
fn chromium_renders_the_report_verdict_first_with_clear_labels_and_point_pages() {
    let out = tempfile::tempdir().unwrap();
    let run = out.path().join("run");
    let root = workspace_root();
    let o = sweep(
        &[
            "run",
            "full-sweep-fail-fast",
            "--duration",
            "300",
            "--seed-replicates",
            "0",
            "--out",
            run.to_str().unwrap(),
            "--root",
            root.to_str().unwrap(),
        ],
        &root,
    );
    let (stdout, stderr) = text(&o);
    assert!(stdout.contains("39/39 point(s) finished"), "{stdout}\n{stderr}");

    let r = probe(&run.join("report.html"));
    let ord = |k: &str| r["order"][k].as_i64().unwrap();
    assert!(
        ord("verdict") >= 0 && ord("verdict") < ord("summary") && ord("summary") < ord("charts") && ord("charts") < ord("details"),
        "{r}"
    );
    assert!(r["verdict"].as_str().unwrap().starts_with("Gate: "), "{r}");
    assert_eq!(r["rows"], 39, "every point in the table");
    // Five charts, six panels each (the agentic dsv41flash on GB300 and dsv3 on H200; DeepSeek-R1
    // on B200 and on H200, each at 1k/1k and at 8k/1k), every point on each.
    assert_eq!(r["svgs"], 30, "{r}");
    assert_eq!(r["points"], 195, "{r}");
    assert_eq!(r["no_whiskers"], serde_json::json!([]), "{r}");
    assert!(r["labels"].as_u64().unwrap() >= 60, "labels drawn (a few may be key numbers): {r}");
    assert_eq!(r["overlaps"], serde_json::json!([]), "labels overprint in the browser: {r}");
    screenshot(&run.join("report.html"), "report.png", 3400);

    let page = run.join("dsv41flash-fp4-gb300-sglang-agentic-dspark/dep2-c64/report.html");
    let p = probe(&page);
    assert_eq!(p["dist"], 4, "TTFT, ITL, E2EL, E2EL/OSL: {p}");
    assert_eq!(p["series"], 4, "requests, output and total throughput, KV use: {p}");
    screenshot(&page, "point-dep2-c64.png", 2000);

    // `sweep gate` rewrites the verdict the report opens with.
    let o = sweep(&["gate", run.to_str().unwrap(), "--baseline", run.to_str().unwrap()], &root);
    assert!(text(&o).0.contains("updated"), "{:?}", text(&o));
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert!(html.contains("baseline <code>"), "the verdict against the baseline is shown");
}
