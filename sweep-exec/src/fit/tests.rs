use engine::GpuSpec;
use engine::profiles::WorkloadScales;

use super::space::{from_unit, to_unit};
use super::*;
use crate::metrics::Summary;
use crate::plan::PlanPoint;
use crate::trace::{ReadOptions, Trace, TraceSource};
use crate::workload::TracePlan;

#[test]
fn unit_mapping_round_trips_and_stays_in_bounds() {
    for p in PARAMS {
        for v in [p.lower, (p.lower * p.upper).sqrt(), p.upper] {
            let u = to_unit(p, v);
            assert!((from_unit(p, u) - v).abs() <= 1e-9 * v.max(1.0), "{} {v}", p.name);
        }
        assert_eq!(from_unit(p, -1.0), p.lower);
        assert!((from_unit(p, 2.0) - p.upper).abs() < 1e-9);
    }
}

/// One point `k/a-c1` measured at 100 tok/s/GPU and E2EL p90 2 s.
fn one_point() -> (PlanPoint, MeasuredPoint) {
    let pp = PlanPoint {
        id: "k/a-c1".into(),
        config_key: "k".into(),
        arm: "a".into(),
        conc: 1,
        gpus: 1,
        scenario: crate::plan::matrix::Scenario::AgenticCoding,
        matrix: "m".into(),
        duration_s: None,
        warmup_per_lane: None,
        fixed: None,
        row: Default::default(),
        launch: None,
    };
    let m = MeasuredPoint {
        arm: "a".into(),
        conc: 1,
        id: None,
        metrics: [(Metric::TputPerGpu, 100.0), (Metric::E2elP90, 2.0)].into_iter().collect(),
    };
    (pp, m)
}

#[test]
fn corrected_targets_move_each_metric_by_the_short_to_full_ratio() {
    let (pp, m) = one_point();
    let mut full = Summary { tput_per_gpu: 80.0, ..Default::default() };
    full.e2el.p90 = 4.0;
    let mut short = Summary { tput_per_gpu: 40.0, ..Default::default() };
    short.e2el.p90 = 5.0;
    let ev = |s: Summary| Evaluation { loss: 0.0, summaries: vec![Ok(s)], complete: true };
    let pts = vec![(pp, m)];
    let t = corrected_targets(&pts, &ev(full.clone()), &ev(short.clone()));
    assert_eq!(t[0].1.metrics[&Metric::TputPerGpu], 50.0);
    assert_eq!(t[0].1.metrics[&Metric::E2elP90], 2.5);
    // The short replay meets the corrected targets exactly where the full one meets the
    // measurements: the same loss.
    let w = default_weights();
    assert!((loss(&t, &[Ok(short)], &w) - loss(&pts, &[Ok(full)], &w)).abs() < 1e-12);
    let failed = Evaluation { loss: 25.0, summaries: vec![Err(PointError::NoSuccess)], complete: true };
    assert_eq!(corrected_targets(&pts, &failed, &ev(Summary::default()))[0].1, pts[0].1);
}

#[test]
fn loss_is_zero_on_a_perfect_match_and_grows_with_the_ratio() {
    let mut s = Summary { tput_per_gpu: 100.0, ..Default::default() };
    s.e2el.p90 = 2.0;
    let pts = vec![one_point()];
    let w = default_weights();
    assert_eq!(loss(&pts, &[Ok(s.clone())], &w), 0.0);
    let mut s2 = s.clone();
    s2.tput_per_gpu = 200.0;
    let l = loss(&pts, &[Ok(s2)], &w);
    assert!((l - 2f64.ln().powi(2) / 2.0).abs() < 1e-12, "{l}");
    assert_eq!(loss(&pts, &[Err(PointError::NoSuccess)], &w), 25.0);
    let only_tput = parse_weights(&["e2el_p90=0".to_string()]).unwrap();
    assert!((loss(&pts, &[Ok(s.clone())], &only_tput)).abs() < 1e-12);
    assert!(parse_weights(&["nope=1".to_string()]).is_err());
}

#[test]
fn scaling_a_trace_scales_outputs_and_delays() {
    let src: TraceSource = "synthetic:2:3".parse().unwrap();
    let mut ts = Vec::new();
    src.for_each(&ReadOptions::default(), &mut Vec::new(), |t| {
        ts.push(t);
        Ok(())
    })
    .unwrap();
    let t = &ts[0];
    let s = scale_trace(t, WorkloadScales { osl_scale: 3.0, delay_scale: 0.5, ..Default::default() });
    let (a, b) = (t.main_requests().nth(1).unwrap(), s.main_requests().nth(1).unwrap());
    assert_eq!(b.output_tokens, ((a.output_tokens as f64) * 3.0).round() as u64);
    assert!((b.t - a.t * 0.5).abs() < 1e-9);
    assert_eq!(b.input_tokens, a.input_tokens);
    assert_eq!(b.hash_ids, a.hash_ids);
}

fn two_synthetic() -> Vec<Trace> {
    let src: TraceSource = "synthetic:2:3".parse().unwrap();
    let mut ts = Vec::new();
    src.for_each(&ReadOptions::default(), &mut Vec::new(), |t| {
        ts.push(t);
        Ok(())
    })
    .unwrap();
    ts
}

#[test]
fn output_exponent_pivots_at_the_reference_length() {
    let s = WorkloadScales { osl_scale: 2.0, osl_exp: 1.5, ..Default::default() };
    assert_eq!(s.osl(1000), 2000);
    assert_eq!(s.osl(4000), 16000, "2 x 1000 x 4^1.5");
    assert_eq!(s.osl(250), 250, "2 x 1000 x 0.25^1.5");
    assert_eq!(s.osl(0), 1);
    // Exponent 1 is plain proportional scaling.
    assert_eq!(WorkloadScales { osl_scale: 2.5, ..Default::default() }.osl(333), 833);
    assert!(!s.is_identity() && WorkloadScales::default().is_identity());
    assert!(s.describe().contains("^1.500"), "{}", s.describe());
}

#[test]
fn input_scaling_keeps_blocks_and_prefix_reuse() {
    let t = &two_synthetic()[0];
    let s = scale_trace(t, WorkloadScales { isl_scale: 1.5, ..Default::default() });
    assert_eq!((s.block_size, t.block_size), (96, 64));
    for (a, b) in t.main_requests().zip(s.main_requests()) {
        assert_eq!(b.input_tokens, ((a.input_tokens as f64) * 1.5).round() as u64);
        assert_eq!(b.hash_ids, a.hash_ids);
        assert_eq!(b.output_tokens, a.output_tokens);
        assert_eq!(b.t, a.t);
    }
    // The factor is whole tokens per block: 64 x 1.01 rounds to 65.
    assert_eq!(scaled_block(64, 1.01), (65, 65.0 / 64.0));
    // The compiled plan has the same conversations and turns.
    let (p, q) = (TracePlan::build(t, 1).unwrap(), compile_one(t, WorkloadScales { isl_scale: 1.5, ..Default::default() }, 1).unwrap());
    assert_eq!(p.streams.len(), q.streams.len());
    assert_eq!(p.order.len(), q.order.len());
}

#[test]
fn delay_cap_bounds_every_compiled_delay_and_nothing_else() {
    let ts = two_synthetic();
    let cap = 2.0;
    for t in &ts {
        let scales = WorkloadScales { delay_scale: 0.5, delay_cap_s: Some(cap), ..Default::default() };
        let (a, b) =
            (compile_one(t, WorkloadScales { delay_scale: 0.5, ..Default::default() }, 1).unwrap(), compile_one(t, scales, 1).unwrap());
        let mut capped = 0;
        for (sa, sb) in a.streams.iter().zip(&b.streams) {
            for (x, y) in sa.turns.iter().zip(&sb.turns) {
                assert_eq!(y.delay_ns, x.delay_ns.min(2_000_000_000));
                assert_eq!((x.t, x.end, x.preds.clone()), (y.t, y.end, y.preds.clone()));
                capped += usize::from(x.delay_ns > y.delay_ns);
            }
        }
        assert!(capped > 0, "the synthetic traces have delays above {cap} s");
    }
    let mut c = Candidate { gpu: GpuSpec::lookup("gb300").unwrap(), scales: WorkloadScales::default() };
    assert_eq!(c.get("delay_cap_s"), f64::INFINITY);
    let p = param("delay_cap_s").unwrap();
    assert_eq!(from_unit(&p, to_unit(&p, c.get("delay_cap_s"))), p.upper, "no cap searches as the largest cap");
    c.set("delay_cap_s", 3.0);
    assert_eq!(c.scales.delay_cap_s, Some(3.0));
}
