//! Pareto frontiers of per-GPU throughput against interactivity and latency, with bootstrap
//! uncertainty (spec `inferencex.md` §8). The North Star frontier is against E2E-normalised
//! interactivity; on any other view a point is on the displayed frontier only if it is a North
//! Star winner and non-dominated in the displayed coordinates.

use crate::records::{Record, RecordPhase};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// An x-axis view. Higher y (tok/s/GPU) is always better.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum View {
    /// 1 / P90(E2EL / OSL), tok/s/user — the North Star.
    E2eNormIntvtyP90,
    /// 1 / P90(ITL), tok/s/user.
    IntvtyP90,
    /// P90 end-to-end latency, s (lower is better).
    E2elP90,
    /// P75 end-to-end latency, s (lower is better).
    E2elP75,
}

pub const VIEWS: [View; 4] = [View::E2eNormIntvtyP90, View::IntvtyP90, View::E2elP90, View::E2elP75];

impl View {
    pub fn higher_is_better(self) -> bool {
        matches!(self, View::E2eNormIntvtyP90 | View::IntvtyP90)
    }
    pub fn label(self) -> &'static str {
        match self {
            View::E2eNormIntvtyP90 => "P90 E2E-normalised interactivity (tok/s/user)",
            View::IntvtyP90 => "P90 interactivity (tok/s/user)",
            View::E2elP90 => "P90 end-to-end latency (s)",
            View::E2elP75 => "P75 end-to-end latency (s)",
        }
    }
    pub fn key(self) -> &'static str {
        match self {
            View::E2eNormIntvtyP90 => "e2e_norm_intvty_p90",
            View::IntvtyP90 => "intvty_p90",
            View::E2elP90 => "e2el_p90",
            View::E2elP75 => "e2el_p75",
        }
    }
}

/// The per-request samples a point's metrics (and their bootstrap) are computed from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Samples {
    pub tokens: Vec<f64>,
    pub itl: Vec<f64>,
    pub e2el: Vec<f64>,
    pub e2e_per_token: Vec<f64>,
    pub duration_s: f64,
    pub gpus: f64,
    /// Output tokens per request (the output tok/s/GPU InferenceX shows beside the total).
    #[serde(default)]
    pub output: Vec<f64>,
}

impl Samples {
    pub fn from_records(records: &[Record], gpus: u32) -> Samples {
        let ok: Vec<&Record> = records.iter().filter(|r| r.phase == RecordPhase::Profiling && r.ok()).collect();
        let duration = match (ok.iter().map(|r| r.start_ns).min(), ok.iter().map(|r| r.end_ns).max()) {
            (Some(a), Some(b)) if b > a => (b - a) as f64 / 1e9,
            _ => 0.0,
        };
        let pos = |x: f64| x.is_finite() && x > 0.0;
        Samples {
            tokens: ok.iter().map(|r| (r.input_tokens.unwrap_or(0) + r.output_tokens.unwrap_or(0)) as f64).collect(),
            itl: ok.iter().filter_map(|r| r.itl_ns().map(|x| x / 1e9)).filter(|x| pos(*x)).collect(),
            e2el: ok.iter().filter_map(|r| r.e2el_ns().map(|x| x as f64 / 1e9)).filter(|x| pos(*x)).collect(),
            e2e_per_token: ok
                .iter()
                .filter_map(|r| match (r.e2el_ns(), r.output_tokens) {
                    (Some(e), Some(o)) if e > 0 && o > 0 => Some(e as f64 / 1e9 / o as f64),
                    _ => None,
                })
                .collect(),
            duration_s: duration,
            gpus: gpus.max(1) as f64,
            output: ok.iter().map(|r| r.output_tokens.unwrap_or(0) as f64).collect(),
        }
    }

    /// Tokens per second per GPU over the fixed window.
    fn per_gpu(&self, tokens: &[f64]) -> f64 {
        if self.duration_s > 0.0 { tokens.iter().sum::<f64>() / self.duration_s / self.gpus } else { 0.0 }
    }

    /// Output tok/s/GPU and its 95 % bootstrap interval. Its own random stream, so the
    /// replicates behind every other interval (and the frontier probabilities) stay as they were.
    pub fn output_estimate(&self, n: usize, seed: u64) -> (f64, (f64, f64)) {
        let y = self.per_gpu(&self.output);
        if self.output.is_empty() || n == 0 {
            return (y, (y, y));
        }
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6f75_7470_7574);
        let mut reps: Vec<f64> = (0..n)
            .map(|_| {
                let draw: Vec<f64> = (0..self.output.len()).map(|_| self.output[rng.random_range(0..self.output.len())]).collect();
                self.per_gpu(&draw)
            })
            .collect();
        reps.sort_by(f64::total_cmp);
        (y, (crate::metrics::percentile_linear(&reps, 0.025), crate::metrics::percentile_linear(&reps, 0.975)))
    }

    fn metrics(&self, tokens: &[f64], itl: &[f64], e2el: &[f64], r: &[f64]) -> (f64, BTreeMap<View, f64>) {
        let y = self.per_gpu(tokens);
        let p = |v: &[f64], q: f64| {
            let mut s = v.to_vec();
            s.sort_by(f64::total_cmp);
            crate::metrics::percentile_linear(&s, q)
        };
        let inv = |x: f64| if x > 0.0 { 1.0 / x } else { 0.0 };
        let mut x = BTreeMap::new();
        x.insert(View::E2eNormIntvtyP90, inv(p(r, 0.9)));
        x.insert(View::IntvtyP90, inv(p(itl, 0.9)));
        x.insert(View::E2elP90, p(e2el, 0.9));
        x.insert(View::E2elP75, p(e2el, 0.75));
        (y, x)
    }

    /// Point estimate: (tok/s/GPU, x per view).
    pub fn estimate(&self) -> (f64, BTreeMap<View, f64>) {
        self.metrics(&self.tokens, &self.itl, &self.e2el, &self.e2e_per_token)
    }

    /// `n` bootstrap replicates (requests resampled with replacement; the window is fixed).
    pub fn bootstrap(&self, n: usize, seed: u64) -> Vec<(f64, BTreeMap<View, f64>)> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let draw = |v: &[f64], rng: &mut ChaCha8Rng| -> Vec<f64> {
            if v.is_empty() {
                return Vec::new();
            }
            (0..v.len()).map(|_| v[rng.random_range(0..v.len())]).collect()
        };
        (0..n)
            .map(|_| {
                let t = draw(&self.tokens, &mut rng);
                let i = draw(&self.itl, &mut rng);
                let e = draw(&self.e2el, &mut rng);
                let r = draw(&self.e2e_per_token, &mut rng);
                self.metrics(&t, &i, &e, &r)
            })
            .collect()
    }
}

/// A point as Pareto analysis sees it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Point {
    pub id: String,
    /// Curve: the config key (its arms share one frontier).
    pub curve: String,
    pub arm: String,
    pub conc: u32,
    pub valid: bool,
    pub y: f64,
    pub x: BTreeMap<View, f64>,
    /// 95 % bootstrap intervals: `y` and each view.
    pub y_ci: (f64, f64),
    pub x_ci: BTreeMap<View, (f64, f64)>,
    /// Share of bootstrap replicates in which the point is on the North Star frontier.
    pub p_frontier: f64,
    /// Output tok/s/GPU and its 95 % bootstrap interval (absent in runs written before it).
    #[serde(default)]
    pub y_out: f64,
    #[serde(default)]
    pub y_out_ci: (f64, f64),
}

fn better(view: View, a: f64, b: f64) -> bool {
    if view.higher_is_better() { a > b } else { a < b }
}
fn at_least(view: View, a: f64, b: f64) -> bool {
    if view.higher_is_better() { a >= b } else { a <= b }
}

/// `a` dominates `b` on (x, y): at least as good on both, strictly better on one.
pub fn dominates(view: View, ax: f64, ay: f64, bx: f64, by: f64) -> bool {
    at_least(view, ax, bx) && ay >= by && (better(view, ax, bx) || ay > by)
}

/// Indices of the non-dominated points among `pts` (x, y).
pub fn non_dominated(view: View, pts: &[(f64, f64)]) -> Vec<bool> {
    pts.iter().map(|&(x, y)| !pts.iter().any(|&(ox, oy)| dominates(view, ox, oy, x, y))).collect()
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ViewResult {
    /// Frontier point ids, ordered along x.
    pub frontier: Vec<String>,
    /// Dominated point id → the id of a point that dominates it.
    pub dominated_by: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Coverage {
    pub measured: usize,
    pub invalid: usize,
    pub frontier: usize,
    /// PASS needs at least [`MIN_VALID_POINTS`] valid points on the curve.
    pub pass: bool,
}

pub const MIN_VALID_POINTS: usize = 5;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CurveResult {
    pub curve: String,
    pub views: BTreeMap<View, ViewResult>,
    pub coverage: Coverage,
}

/// Frontiers per curve and view, dominance explanations and coverage.
pub fn analyse(points: &[Point]) -> Vec<CurveResult> {
    let mut curves: BTreeMap<&str, Vec<&Point>> = BTreeMap::new();
    for p in points {
        curves.entry(&p.curve).or_default().push(p);
    }
    let mut out = Vec::new();
    for (curve, pts) in curves {
        let valid: Vec<&Point> = pts.iter().copied().filter(|p| p.valid).collect();
        let ns = View::E2eNormIntvtyP90;
        let coords = |v: View| valid.iter().map(|p| (p.x[&v], p.y)).collect::<Vec<_>>();
        let ns_front = non_dominated(ns, &coords(ns));
        let mut views = BTreeMap::new();
        for v in VIEWS {
            let nd = non_dominated(v, &coords(v));
            let mut res = ViewResult::default();
            let mut front: Vec<&Point> = Vec::new();
            for (i, p) in valid.iter().enumerate() {
                if nd[i] && ns_front[i] {
                    front.push(p);
                } else {
                    // Name a dominator: in this view if any, else on the North Star view.
                    let dom_in = |vv: View| valid.iter().find(|o| dominates(vv, o.x[&vv], o.y, p.x[&vv], p.y)).map(|o| o.id.clone());
                    if let Some(d) = dom_in(v).or_else(|| dom_in(ns)) {
                        res.dominated_by.insert(p.id.clone(), d);
                    }
                }
            }
            front.sort_by(|a, b| a.x[&v].total_cmp(&b.x[&v]));
            res.frontier = front.iter().map(|p| p.id.clone()).collect();
            views.insert(v, res);
        }
        let coverage = Coverage {
            measured: pts.len(),
            invalid: pts.len() - valid.len(),
            frontier: views[&ns].frontier.len(),
            pass: valid.len() >= MIN_VALID_POINTS,
        };
        out.push(CurveResult { curve: curve.to_string(), views, coverage });
    }
    out
}

/// Builds analysis points with bootstrap intervals and frontier probabilities.
/// `inputs`: (id, curve, arm, conc, valid, samples). Deterministic for a seed.
pub fn points_with_uncertainty(inputs: &[(String, String, String, u32, bool, Samples)], replicates: usize, seed: u64) -> Vec<Point> {
    let boots: Vec<Vec<(f64, BTreeMap<View, f64>)>> =
        inputs.iter().enumerate().map(|(i, (_, _, _, _, _, s))| s.bootstrap(replicates, seed.wrapping_add(i as u64 * 7919))).collect();
    let ci = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (crate::metrics::percentile_linear(&v, 0.025), crate::metrics::percentile_linear(&v, 0.975))
    };
    let mut pts: Vec<Point> = inputs
        .iter()
        .zip(&boots)
        .enumerate()
        .map(|(k, ((id, curve, arm, conc, valid, s), b))| {
            let (y, x) = s.estimate();
            let y_ci = ci(b.iter().map(|(y, _)| *y).collect());
            let x_ci = VIEWS.iter().map(|v| (*v, ci(b.iter().map(|(_, x)| x[v]).collect()))).collect();
            let (y_out, y_out_ci) = s.output_estimate(replicates, seed.wrapping_add(k as u64 * 7919));
            Point {
                id: id.clone(),
                curve: curve.clone(),
                arm: arm.clone(),
                conc: *conc,
                valid: *valid,
                y,
                x,
                y_ci,
                x_ci,
                p_frontier: 0.0,
                y_out,
                y_out_ci,
            }
        })
        .collect();
    // P(on the North Star frontier): joint replicate r of every point of a curve.
    let ns = View::E2eNormIntvtyP90;
    let mut hits = vec![0usize; pts.len()];
    let mut by_curve: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, p) in pts.iter().enumerate() {
        if p.valid {
            by_curve.entry(&p.curve).or_default().push(i);
        }
    }
    // Replicate r of every point of a curve forms one joint draw (indexing by r is the point).
    #[allow(clippy::needless_range_loop)]
    for r in 0..replicates {
        for idx in by_curve.values() {
            let coords: Vec<(f64, f64)> = idx.iter().map(|&i| (boots[i][r].1[&ns], boots[i][r].0)).collect();
            for (k, nd) in non_dominated(ns, &coords).into_iter().enumerate() {
                if nd {
                    hits[idx[k]] += 1;
                }
            }
        }
    }
    if replicates > 0 {
        for (p, h) in pts.iter_mut().zip(hits) {
            p.p_frontier = h as f64 / replicates as f64;
        }
    }
    pts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pt(id: &str, y: f64, ns: f64, e2el: f64) -> Point {
        let mut x = BTreeMap::new();
        x.insert(View::E2eNormIntvtyP90, ns);
        x.insert(View::IntvtyP90, ns * 2.0);
        x.insert(View::E2elP90, e2el);
        x.insert(View::E2elP75, e2el / 2.0);
        Point {
            id: id.into(),
            curve: "c".into(),
            arm: "a".into(),
            conc: 1,
            valid: true,
            y,
            x,
            y_ci: (y, y),
            x_ci: BTreeMap::new(),
            p_frontier: 0.0,
            y_out: y / 10.0,
            y_out_ci: (y / 10.0, y / 10.0),
        }
    }

    #[test]
    fn frontier_and_dominators() {
        let pts = vec![pt("a", 100.0, 50.0, 2.0), pt("b", 200.0, 30.0, 4.0), pt("c", 150.0, 20.0, 3.0), pt("d", 300.0, 10.0, 8.0)];
        let r = analyse(&pts);
        let ns = &r[0].views[&View::E2eNormIntvtyP90];
        assert_eq!(ns.frontier, vec!["d", "b", "a"]);
        assert_eq!(ns.dominated_by["c"], "b");
        assert_eq!(r[0].coverage, Coverage { measured: 4, invalid: 0, frontier: 3, pass: false });
    }

    #[test]
    fn north_star_losers_never_appear_on_other_views() {
        // `c` is non-dominated on E2EL p90 (lowest latency) but dominated on the North Star view.
        let pts = vec![pt("a", 100.0, 50.0, 2.0), pt("b", 200.0, 60.0, 4.0), pt("c", 90.0, 40.0, 1.0)];
        let r = analyse(&pts);
        assert!(!r[0].views[&View::E2eNormIntvtyP90].frontier.contains(&"c".to_string()));
        assert!(!r[0].views[&View::E2elP90].frontier.contains(&"c".to_string()));
        assert!(r[0].views[&View::E2elP90].dominated_by.contains_key("c"));
    }

    #[test]
    fn invalid_points_are_excluded_and_counted() {
        let mut pts: Vec<Point> = (0..6).map(|i| pt(&format!("p{i}"), 100.0 + i as f64, 100.0 - i as f64, 1.0 + i as f64)).collect();
        pts[0].valid = false;
        let r = analyse(&pts);
        assert_eq!(r[0].coverage.invalid, 1);
        assert!(r[0].coverage.pass);
        assert!(!r[0].views[&View::E2eNormIntvtyP90].frontier.contains(&"p0".to_string()));
    }

    #[test]
    fn bootstrap_intervals_cover_estimate_and_are_deterministic() {
        let s = Samples {
            tokens: (0..200).map(|i| 1000.0 + (i % 17) as f64 * 100.0).collect(),
            itl: (0..200).map(|i| 0.01 + (i % 13) as f64 * 0.001).collect(),
            e2el: (0..200).map(|i| 1.0 + (i % 11) as f64 * 0.5).collect(),
            e2e_per_token: (0..200).map(|i| 0.02 + (i % 7) as f64 * 0.002).collect(),
            duration_s: 100.0,
            gpus: 2.0,
            output: (0..200).map(|i| 100.0 + (i % 5) as f64 * 10.0).collect(),
        };
        let inp = vec![("a".to_string(), "c".to_string(), "arm".to_string(), 1, true, s.clone())];
        let p1 = points_with_uncertainty(&inp, 200, 42);
        let p2 = points_with_uncertainty(&inp, 200, 42);
        assert_eq!(p1, p2);
        let p = &p1[0];
        assert!(p.y_ci.0 <= p.y && p.y <= p.y_ci.1, "{:?} {}", p.y_ci, p.y);
        assert!(p.y_ci.1 > p.y_ci.0);
        assert_eq!(p.p_frontier, 1.0, "a lone point is always on its frontier");
        // Output: 200 requests of 120 tokens on average over 100 s on 2 GPUs.
        assert!((p.y_out - 120.0).abs() < 1e-9, "{}", p.y_out);
        assert!(p.y_out_ci.0 < p.y_out && p.y_out < p.y_out_ci.1, "{:?}", p.y_out_ci);
    }
}
