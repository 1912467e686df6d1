use super::scene::{Bounds, Item};
use super::*;
pub use sweep_results::testing::{fake_run, fake_run_of};

/// Every marker's box, in scene pixels.
fn marker_boxes(s: &Scene) -> Vec<Bounds> {
    fn walk(items: &[Item], off: (f64, f64), out: &mut Vec<Bounds>) {
        for it in items {
            match it {
                Item::Circle { c, r, class: "mk", .. } => {
                    out.push(Bounds::new(c.0 + off.0 - r, c.1 + off.1 - r, c.0 + off.0 + r, c.1 + off.1 + r))
                }
                Item::Group { items, offset, .. } => walk(items, (off.0 + offset.0, off.1 + offset.1), out),
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    walk(&s.items, (0.0, 0.0), &mut out);
    out
}

/// No two point labels overlap and none covers a marker, in every panel of every chart.
fn assert_labels_clear(run: &RunSummary) {
    for (chart, panels) in figures(run) {
        for (g, s) in panels {
            let labels: Vec<(String, Bounds)> =
                s.text_boxes().into_iter().filter(|(c, _, _)| *c == "lbl").map(|(_, t, b)| (t, b)).collect();
            for (i, (ta, a)) in labels.iter().enumerate() {
                for (tb, b) in &labels[i + 1..] {
                    assert!(!a.overlaps(b), "{} / {}: `{ta}` overlaps `{tb}`", chart.key(), g.title);
                }
                for m in marker_boxes(&s) {
                    assert!(!a.overlaps(&m), "{} / {}: `{ta}` covers a marker", chart.key(), g.title);
                }
            }
        }
    }
}

#[test]
fn writes_charts_and_reports() {
    let run = fake_run(5);
    let d = tempfile::tempdir().unwrap();
    let files = write_all(&run, d.path()).unwrap();
    // Keep the output for a look (e.g. scripts/check-report.sh on it).
    if let Ok(keep) = std::env::var("SWEEP_KEEP_TEST_REPORT") {
        std::fs::create_dir_all(&keep).unwrap();
        for e in std::fs::read_dir(d.path()).unwrap() {
            let e = e.unwrap();
            if e.path().is_file() {
                std::fs::copy(e.path(), std::path::Path::new(&keep).join(e.file_name())).unwrap();
            }
        }
    }
    assert_eq!(files.len(), 2, "no records on disk: no point pages");
    for c in Chart::ALL {
        let png = std::fs::read(d.path().join(format!("{}.png", c.key()))).unwrap();
        assert_eq!(&png[1..4], b"PNG");
        assert!(png.len() > 10_000, "a drawn chart, not an empty image: {} bytes", png.len());
        let svg = std::fs::read_to_string(d.path().join(format!("{}.svg", c.key()))).unwrap();
        assert_eq!(svg.matches("class=\"pt").count(), 5, "{}: five points", c.key());
    }
    let html = std::fs::read_to_string(d.path().join("report.html")).unwrap();
    assert!(html.contains("<table id=\"summary\">") && html.contains("<svg") && html.contains("predicted"));
    assert!(!html.contains("src=\"http") && !html.contains("href=\"http"), "self-contained");
    assert!(html.contains("Gate: not run"), "no gate.json yet");
    let md = std::fs::read_to_string(d.path().join("report.md")).unwrap();
    assert_eq!(md.lines().filter(|l| l.starts_with("| cfg/")).count(), 5);
    assert!(md.contains("`cfg` PASS"));
    assert!(!md.contains("KV cache per point"), "no KV figures, no KV table");
}

#[test]
fn reports_open_with_the_verdict_then_the_table_then_the_charts() {
    let mut run = fake_run(5);
    run.points[4].status = Status::Failed { reason: "server exited".into() };
    let d = tempfile::tempdir().unwrap();
    let v = crate::gate::evaluate(&run, None, Vec::new());
    crate::results::write_json(&d.path().join("gate.json"), &v).unwrap();
    write_all(&run, d.path()).unwrap();
    let html = std::fs::read_to_string(d.path().join("report.html")).unwrap();
    let at = |s: &str| html.find(s).unwrap_or_else(|| panic!("{s} missing"));
    assert!(at("id=\"verdict\"") < at("<table id=\"summary\">"));
    assert!(at("<table id=\"summary\">") < at("id=\"charts\""));
    assert!(at("id=\"charts\"") < at("id=\"details\""));
    assert!(at("id=\"details\"") < at("<details><summary>Provenance"), "provenance collapsed after the charts");
    assert!(html.contains("Gate: FAIL") && html.contains("point cfg/tp4-c16"), "the failed check is named");
    let md = std::fs::read_to_string(d.path().join("report.md")).unwrap();
    let mat = |s: &str| md.find(s).unwrap_or_else(|| panic!("{s} missing from\n{md}"));
    assert!(mat("**Gate: FAIL**") < mat("| point |"));
    assert!(mat("| point |") < mat("### Charts") && mat("### Charts") < mat("### Details"));
    assert!(md.contains("- FAIL point cfg/tp4-c16: failed: server exited"));
    // A verdict of another run is not shown.
    let mut other = v.clone();
    other.run_id = "another".into();
    crate::results::write_json(&d.path().join("gate.json"), &other).unwrap();
    write_main(&run, d.path()).unwrap();
    assert!(std::fs::read_to_string(d.path().join("report.html")).unwrap().contains("Gate: not run"));
}

#[test]
fn the_table_shows_output_throughput_beside_the_total() {
    let run = fake_run(3);
    let md = markdown(&run, None);
    let header = md.lines().find(|l| l.starts_with("| point |")).unwrap();
    let cols: Vec<&str> = header.split('|').map(str::trim).collect();
    let t = cols.iter().position(|c| c.starts_with("tok/s/GPU")).unwrap();
    assert_eq!(cols[t + 1], "output tok/s/GPU");
    let row = md.lines().find(|l| l.starts_with("| cfg/tp4-c4 |")).unwrap();
    let cells: Vec<&str> = row.split('|').map(str::trim).collect();
    let s = run.points[2].summary.as_ref().unwrap();
    assert_eq!(cells[t + 1], fmt_num(s.output_tput_per_gpu));
    assert!(s.output_tput_per_gpu > 0.0 && s.output_tput_per_gpu < s.tput_per_gpu / 50.0);
}

#[test]
fn energy_per_token_is_a_column_and_prices_turn_throughput_into_cost() {
    let mut run = fake_run_of(&[("dsv41flash-fp4-gb300-sglang", 2, 1.0)]);
    let s = run.points[1].summary.as_mut().unwrap();
    s.input_tput_per_gpu = s.tput_per_gpu - s.output_tput_per_gpu;
    s.power = Some(sweep_results::power::PowerFigures {
        source: "predicted".into(),
        avg_power_w: 900.0,
        total_gpu_energy_j: 1e6,
        joules_per_output_token: 0.4567,
        joules_per_total_token: 0.01,
    });
    let md = markdown(&run, None);
    let header: Vec<&str> = md.lines().find(|l| l.starts_with("| point |")).unwrap().split('|').map(str::trim).collect();
    let j = header.iter().position(|c| *c == "J/out tok").unwrap();
    let cells = |id: &str| -> Vec<String> {
        md.lines().find(|l| l.starts_with(&format!("| {id} |"))).unwrap().split('|').map(|c| c.trim().to_string()).collect()
    };
    assert_eq!(cells("dsv41flash-fp4-gb300-sglang/tp4-c2")[j], "0.457");
    assert_eq!(cells("dsv41flash-fp4-gb300-sglang/tp4-c1")[j], "-");
    assert!(super::summary::summary_table(&run).contains("J/out tok"));
    // 3.60 per GPU-hour is 0.001 a GPU-second: a million output tokens at y tok/s/GPU cost 1000 / y.
    let prices = crate::price::PriceTable::parse(
        std::path::Path::new("p.yaml"),
        "currency: USD\nprices:\n  gb300: {per_gpu_hour: 3.60, source: test}\n",
    )
    .unwrap();
    let t = super::summary::cost_table(&run, &prices);
    let out = run.points[1].summary.as_ref().unwrap().output_tput_per_gpu;
    let row = t.lines().find(|l| l.starts_with("dsv41flash-fp4-gb300-sglang/tp4-c2")).unwrap();
    let figures: Vec<f64> = row.split_whitespace().skip(1).map(|x| x.parse().unwrap()).collect();
    assert!((figures[1] - 1000.0 / out).abs() < 1e-3, "{t}");
    assert!(t.contains("USD/M output tok") && t.contains("price: gb300 3.60 USD per GPU-hour (test)"), "{t}");
    let none =
        crate::price::PriceTable::parse(std::path::Path::new("p.yaml"), "currency: EUR\nprices:\n  h100: {per_gpu_hour: 2, source: x}\n")
            .unwrap();
    assert!(super::summary::cost_table(&run, &none).starts_with("no point has a price"), "unpriced GPUs get no figure");
}

#[test]
fn one_panel_per_model_and_gpu_split_when_scales_differ_twentyfold() {
    let run = fake_run_of(&[("dsv3-fp8-h200-sglang", 5, 1.0), ("dsv41flash-fp4-gb300-sglang", 5, 40.0)]);
    let g = groups(&run);
    assert_eq!(g.iter().map(|g| g.title.as_str()).collect::<Vec<_>>(), ["dsv3 on H200", "dsv41flash on GB300"], "in the run's order");
    // Two configs of one model on one GPU share a panel …
    let same = fake_run_of(&[("m-fp8-h200-a", 4, 1.0), ("m-fp4-h200-b", 4, 1.5)]);
    assert_eq!(groups(&same).len(), 1);
    // … unless one is more than 20× the other.
    let apart = fake_run_of(&[("m-fp8-h200-a", 4, 1.0), ("m-fp4-h200-b", 4, 30.0)]);
    assert_eq!(groups(&apart).iter().map(|g| g.configs.len()).collect::<Vec<_>>(), [1, 1]);
}

#[test]
fn wide_ranges_get_log_axes() {
    // 5 points of a ×2 ladder: throughput spans 16× (linear), E2E-norm interactivity ~5×.
    let run = fake_run(5);
    let svg = figures(&run)[0].1[0].1.svg("x");
    assert!(!svg.contains("log scale"), "16× is not wide enough");
    // 8 points span 128×: the y axis turns logarithmic.
    let run = fake_run(8);
    let svg = figures(&run)[0].1[0].1.svg("x");
    assert!(svg.contains("total tok/s/GPU — log scale"), "{svg}");
}

#[test]
fn every_point_has_whiskers_on_both_axes_and_a_link_to_its_page() {
    let run = fake_run(5);
    for (chart, panels) in figures(&run) {
        let svg = panels[0].1.svg("x");
        for p in &run.points {
            let start = svg.find(&format!("data-point=\"{}\"", p.id)).unwrap_or_else(|| panic!("{}: {} missing", chart.key(), p.id));
            let g = &svg[start..start + svg[start..].find("</g>").unwrap()];
            assert_eq!(g.matches("class=\"wx\"").count(), 3, "x whisker and its caps");
            assert_eq!(g.matches("class=\"wy\"").count(), 3, "y whisker and its caps");
            assert!(g.contains("<title>") && g.contains("95 % CI"), "hover details");
            assert!(svg[..start].rfind("<a href=\"").is_some_and(|a| svg[a..start].contains(&point_href(&p.id))));
        }
    }
}

#[test]
fn the_legend_explains_markers_and_the_frontier_rule() {
    let run = fake_run(5);
    let figs = figures(&run);
    for (chart, panels) in &figs {
        let texts: Vec<String> =
            panels[0].1.text_boxes().into_iter().filter(|(c, _, _)| c.starts_with("legend")).map(|(_, t, _)| t).collect();
        let all = texts.join(" ");
        for want in [
            "filled: on the frontier",
            "hollow: dominated",
            "95 % bootstrap CI, both axes",
            "Frontier (line)",
            "P90 E2E-normalised interactivity",
        ] {
            assert!(all.contains(want), "{}: {want} missing from the legend: {all}", chart.key());
        }
    }
}

#[test]
fn labels_never_overprint() {
    // Two configs of one model on one GPU, the second a shade faster: their points interleave.
    assert_labels_clear(&fake_run_of(&[("m-fp8-h200-a", 6, 1.0), ("m-fp8-h200-b", 6, 1.08)]));
    // A dozen points on one curve.
    assert_labels_clear(&fake_run(12));
}

#[test]
fn crowded_labels_become_a_numbered_key() {
    // Five configs of near-identical points on one panel: 25 labels about the same spots.
    let curves: Vec<(String, usize, f64)> = (0..5).map(|i| (format!("m-fp8-h200-c{i}"), 5, 1.0 + i as f64 * 0.01)).collect();
    let c: Vec<(&str, usize, f64)> = curves.iter().map(|(a, n, s)| (a.as_str(), *n, *s)).collect();
    let run = fake_run_of(&c);
    assert_labels_clear(&run);
    let (_, panels) = &figures(&run)[0];
    let keys: Vec<String> = panels[0].1.text_boxes().into_iter().filter(|(c, _, _)| *c == "legend key").map(|(_, t, _)| t).collect();
    assert!(!keys.is_empty() && keys[0].starts_with("Numbered points: 1 = "), "{keys:?}");
}

#[test]
fn kv_table_lists_the_points_that_report_kv() {
    let mut run = fake_run(3);
    let kv = crate::kv::KvSummary {
        source: "engine".into(),
        pool_tokens: Some(33_554_432),
        peak_used_tokens: Some(30_000_000),
        peak_token_usage: Some(0.95),
        evicted_tokens: Some(1_200_000),
        reprefilled_tokens: Some(800_000),
        retractions: Some(7),
        prefix_hit_rate: Some(0.90),
        ideal_prefix_hit_rate: Some(0.95),
    };
    run.points[1].summary.as_mut().unwrap().kv = Some(kv);
    let md = markdown(&run, None);
    let rows: Vec<&str> = md.lines().filter(|l| l.contains("| engine |")).collect();
    assert_eq!(rows.len(), 1, "{md}");
    assert!(rows[0].starts_with(&format!("| {} |", run.points[1].id)));
    assert!(rows[0].contains("33.55M") && rows[0].contains("95.0 %") && rows[0].contains("| 7 |") && rows[0].contains("90.0 % / 95.0 %"));
    let html = html(&run, None, &[]);
    assert!(html.contains("<table id=\"kv\">") && html.contains("1.20M"));
}

/// Records of a point: `n` requests, one starting each second, TTFT growing with the index.
fn records(n: u64) -> Vec<crate::records::Record> {
    (0..n).map(|i| sweep_results::testing::rec(i * 1000, 100 + i, 2000 + 10 * i, 10_000, 101)).collect()
}

#[test]
fn point_pages_show_distributions_and_time_series() {
    let run = fake_run(3);
    let d = tempfile::tempdir().unwrap();
    let p = &run.points[1];
    let pd = crate::results::point_dir(d.path(), &p.id);
    crate::records::write_jsonl_gz(&pd.join(crate::records::EXPORT_GZ), &records(300)).unwrap();
    // The engine's samples: 2 running, the KV half full, 1,000 output tokens a second.
    let t: Vec<u64> = (0..30).map(|i| i * 10_000_000_000).collect();
    let ts = serde_json::json!({
        "source": "reference engine (virtual clock)", "t_ns": t, "running": vec![2; 30], "queued": vec![0; 30],
        "kv_used_tokens": vec![500; 30], "kv_cached_tokens": vec![100; 30], "kv_usage": vec![0.5; 30], "kv_capacity_tokens": 1000,
        "prompt_tokens_total": (0..30).map(|i| i * 5000).collect::<Vec<u64>>(), "generation_tokens_total": (0..30).map(|i| i * 10_000).collect::<Vec<u64>>(),
    });
    crate::results::write_json(&pd.join("timeseries.json"), &ts).unwrap();
    let files = write_all(&run, d.path()).unwrap();
    let page = pd.join("report.html");
    assert_eq!(files.last(), Some(&page), "one page: the only point with records");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("href=\"../../report.html\""), "back to the run");
    for id in ["id=\"dist-0\"", "id=\"dist-3\"", "id=\"ts-requests\"", "id=\"ts-output\"", "id=\"ts-total\"", "id=\"ts-kv\""] {
        assert!(html.contains(id), "{id} missing");
    }
    // 300 records: TTFT 100–399 ms, p50 249.5 ms.
    let row = html.lines().find(|l| l.starts_with("<tr><td>TTFT (s)")).unwrap();
    assert!(row.contains("<td>300</td>") && row.contains("<td>0.2495</td>"), "{row}");
    // The server's output rate per GPU: 1,000 tok/s over 4 GPUs.
    let s = TimeSeries::load(&pd, p.gpus).unwrap();
    let out = &s.series.iter().find(|x| x.1 == "throughput").unwrap().2;
    assert!(out.iter().all(|(_, v)| (v - 250.0).abs() < 1e-9), "{out:?}");
    // The summary links to the page.
    let main = std::fs::read_to_string(d.path().join("report.html")).unwrap();
    assert!(main.contains(&format!("href=\"{}\"", point_href(&p.id))));
}

#[test]
fn a_live_scrape_gives_the_time_series() {
    let d = tempfile::tempdir().unwrap();
    let slice = |t: u64, v: f64| serde_json::json!({"start_ns": t, "avg": v, "max": v});
    let export = serde_json::json!({"metrics": {
        "sglang:num_running_reqs": {"series": [{"labels": {}, "timeslices": [slice(1_000_000_000, 3.0), slice(2_000_000_000, 4.0)]},
                                               {"labels": {"dp": "1"}, "timeslices": [slice(1_000_000_000, 1.0), slice(2_000_000_000, 1.0)]}]},
        "sglang:token_usage": {"series": [{"labels": {}, "timeslices": [slice(1_000_000_000, 0.2), slice(2_000_000_000, 0.4)]}]},
    }});
    crate::results::write_json(&d.path().join("server_metrics_export.json"), &export).unwrap();
    let s = TimeSeries::load(d.path(), 2).unwrap();
    let get = |name: &str| s.series.iter().find(|x| x.0.starts_with(name)).map(|x| x.2.clone()).unwrap();
    assert_eq!(get("running"), vec![(1_000_000_000, 4.0), (2_000_000_000, 5.0)], "ranks summed");
    assert_eq!(get("KV in use"), vec![(1_000_000_000, 20.0), (2_000_000_000, 40.0)]);
    let cs = super::point::ClientSeries::of(&records(100), 4).unwrap();
    // One request a second, each 2.0–3.0 s long: 2 to 3 in flight.
    let mid = &cs.in_flight[2..cs.in_flight.len() - 3];
    assert!(mid.iter().all(|x| (2.0..=3.0).contains(x)), "{mid:?}");
}
