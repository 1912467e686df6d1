//! The summary table a run prints at its end (`sweep run`, `sweep predict`): reads results only.

use crate::price::PriceTable;
use crate::results::{PointResult, RunSummary};

/// The summary table printed at the end of a run: points grouped under their config, the
/// frontier's own x (P90 E2E-normalised interactivity) beside tok/s/GPU so that "dominated by"
/// reads right, energy per output token where the point has a valid power figure (measured or
/// predicted, as the point is), and every column as wide as its widest cell.
pub fn summary_table(run: &RunSummary) -> String {
    const HEAD: [&str; 10] = [
        "point",
        "tok/s/GPU",
        "out tok/s/GPU",
        "E2E-norm intvty",
        "P90 intvty",
        "TTFT p50/p90 s",
        "E2EL p90 s",
        "J/out tok",
        "frontier (tok/s/GPU × E2E-norm intvty)",
        "status",
    ];
    // Left-aligned: point, frontier, status; numbers right-aligned.
    const LEFT: [bool; 10] = [true, false, false, false, false, false, false, false, true, true];
    let mut configs: Vec<&str> = Vec::new();
    for p in &run.points {
        if !configs.contains(&p.config_key.as_str()) {
            configs.push(&p.config_key);
        }
    }
    let rows: Vec<(&str, Vec<[String; 10]>)> =
        configs.iter().map(|c| (*c, run.points.iter().filter(|p| p.config_key == *c).map(|p| point_row(run, p)).collect())).collect();
    let mut w: [usize; 10] = HEAD.map(|h| h.chars().count());
    for r in rows.iter().flat_map(|(_, r)| r) {
        for (k, cell) in r.iter().enumerate() {
            w[k] = w[k].max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| -> String {
        let mut o = String::new();
        for (k, c) in cells.iter().enumerate() {
            let pad = w[k].saturating_sub(c.chars().count());
            if k == cells.len() - 1 {
                o.push_str(c);
            } else if LEFT[k] {
                o.push_str(&format!("{c}{}  ", " ".repeat(pad)));
            } else {
                o.push_str(&format!("{}{c}  ", " ".repeat(pad)));
            }
        }
        o.trim_end().to_string() + "\n"
    };
    let mut o = line(&HEAD.map(String::from));
    for (config, rs) in rows {
        let kinds: Vec<&str> = {
            let mut k: Vec<&str> =
                run.points.iter().filter(|p| p.config_key == config && !p.result_kind.is_empty()).map(|p| p.result_kind.as_str()).collect();
            k.dedup();
            k
        };
        o.push_str(&format!("{config}{}\n", if kinds.is_empty() { String::new() } else { format!(" ({})", kinds.join(", ")) }));
        for r in rs {
            o.push_str(&line(&r));
        }
    }
    if run.points.iter().any(|p| p.summary.as_ref().is_some_and(|s| s.power.is_some())) {
        o.push_str("J/out tok: GPU energy over the profiling window per output token (predicted: the hardware profile's power model)\n");
    }
    o.push_str("frontier: per config, the points no other beats on both tok/s/GPU and E2E-norm intvty (1 / P90 of E2EL/OSL, tok/s/user); p = share of bootstrap replicates on it\n");
    o
}

/// A point's cells in the summary table, its id shortened to what follows its config; `-` for
/// metrics it has none of.
fn point_row(run: &RunSummary, p: &PointResult) -> [String; 10] {
    let short = p.id.strip_prefix(&format!("{}/", p.config_key)).unwrap_or(&p.id).to_string();
    let (t, o, en, i, tt, e, j) = match &p.summary {
        Some(s) => (
            crate::gate::fmt_num(s.tput_per_gpu),
            crate::gate::fmt_num(s.output_tput_per_gpu),
            format!("{:.1}", s.e2e_norm_intvty_p90),
            format!("{:.1}", s.intvty_p90),
            format!("{:.2} / {:.2}", s.ttft.p50, s.ttft.p90),
            format!("{:.2}", s.e2el.p90),
            s.power.as_ref().map_or_else(String::new, |w| format!("{:.3}", w.joules_per_output_token)),
        ),
        None => Default::default(),
    };
    let dash = |x: String| if x.is_empty() { "-".to_string() } else { x };
    [
        format!("  {short}"),
        dash(t),
        dash(o),
        dash(en),
        dash(i),
        dash(tt),
        dash(e),
        dash(j),
        crate::report::frontier_cell(run, p),
        crate::report::status_text(p),
    ]
}

/// The hardware a point is priced as: its hardware profile, else the config key's part that the
/// price file names (InferenceX keys read `<model>-<precision>-<gpu>-<framework>`).
fn priced_hardware<'a>(p: &'a PointResult, prices: &PriceTable) -> Option<&'a str> {
    p.profiles.get("hardware_profile").and_then(|v| v.as_str()).filter(|h| prices.price_of(h).is_some()).or_else(|| {
        let key = p.config_key.as_str();
        key.split('-').find(|part| prices.prices.contains_key(*part))
    })
}

/// Cost per million input, output and total tokens of every finished point with a price, from
/// its throughput per GPU and the price file; the prices it used, each with its source.
pub fn cost_table(run: &RunSummary, prices: &PriceTable) -> String {
    let cur = &prices.currency;
    let mut rows: Vec<[String; 4]> = Vec::new();
    let mut used: Vec<String> = Vec::new();
    for p in &run.points {
        let (Some(s), Some(hw)) = (&p.summary, priced_hardware(p, prices)) else { continue };
        let Some(c) = prices.token_cost(hw, s.input_tput_per_gpu, s.output_tput_per_gpu) else { continue };
        if let Some(price) = prices.price_of(hw) {
            let line = format!("price: {hw} {:.2} {cur} per GPU-hour ({})", price.per_gpu_hour, price.source);
            if !used.contains(&line) {
                used.push(line);
            }
        }
        let money = |x: f64| if x.is_finite() { format!("{x:.3}") } else { "-".into() };
        rows.push([p.id.clone(), money(c.per_mtok_input), money(c.per_mtok_output), money(c.per_mtok_total)]);
    }
    if rows.is_empty() {
        return format!(
            "no point has a price in the price file (it names {})\n",
            prices.prices.keys().cloned().collect::<Vec<_>>().join(", ")
        );
    }
    let head = ["point".to_string(), format!("{cur}/M input tok"), format!("{cur}/M output tok"), format!("{cur}/M tok")];
    let mut w = head.clone().map(|h| h.chars().count());
    for r in &rows {
        for (k, c) in r.iter().enumerate() {
            w[k] = w[k].max(c.chars().count());
        }
    }
    let line =
        |r: &[String; 4]| format!("{:<a$}  {:>b$}  {:>c$}  {:>d$}\n", r[0], r[1], r[2], r[3], a = w[0], b = w[1], c = w[2], d = w[3]);
    let mut o = line(&head);
    rows.iter().for_each(|r| o.push_str(&line(r)));
    used.iter().for_each(|l| o.push_str(&format!("{l}\n")));
    o.push_str("each figure charges all of the GPUs' time to those tokens (input, output, or both together)\n");
    o
}
