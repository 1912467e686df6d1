//! Chart axes: the range of the data, linear or logarithmic, ticks and their labels. An axis is
//! logarithmic when its positive values span more than [`LOG_SPAN`]×, so a curve a hundred times
//! below another on the same chart (or a latency tail) keeps its shape instead of being pressed
//! into the bottom few pixels.

/// Above this ratio of largest to smallest value, an axis is logarithmic.
pub const LOG_SPAN: f64 = 20.0;

/// A value axis mapped onto pixels `p0` (at `lo`) to `p1` (at `hi`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Axis {
    pub lo: f64,
    pub hi: f64,
    pub log: bool,
    pub p0: f64,
    pub p1: f64,
}

impl Axis {
    /// An axis over `values` (non-finite ones ignored): logarithmic when they are positive and
    /// span more than [`LOG_SPAN`]×, else linear from 0 when the data reach down towards it.
    pub fn fit(values: &[f64], p0: f64, p1: f64) -> Axis {
        Axis::fit_with(values, p0, p1, None)
    }

    /// As [`Axis::fit`], with the scale forced (`Some(true)` log where the data allow it).
    pub fn fit_with(values: &[f64], p0: f64, p1: f64, log: Option<bool>) -> Axis {
        let v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        let (mn, mx) = (v.iter().copied().fold(f64::INFINITY, f64::min), v.iter().copied().fold(f64::NEG_INFINITY, f64::max));
        if v.is_empty() {
            return Axis { lo: 0.0, hi: 1.0, log: false, p0, p1 };
        }
        let span_log = mn > 0.0 && mx / mn > LOG_SPAN;
        if log.unwrap_or(span_log) && mn > 0.0 {
            // A tenth of a decade of room on each side, so markers and whiskers stay inside.
            let (a, b) = (mn.log10(), mx.log10());
            let pad = ((b - a) * 0.06).max(0.05);
            return Axis { lo: 10f64.powf(a - pad), hi: 10f64.powf(b + pad), log: true, p0, p1 };
        }
        if mx <= mn {
            let d = if mn == 0.0 { 1.0 } else { mn.abs() * 0.1 };
            return Axis { lo: (mn - d).max(if mn >= 0.0 { 0.0 } else { f64::MIN }), hi: mx + d, log: false, p0, p1 };
        }
        let pad = (mx - mn) * 0.07;
        // Start at 0 when the data reach within a third of the way down to it.
        let lo = if mn >= 0.0 && mn < mx / 3.0 { 0.0 } else { mn - pad };
        let lo = if mn >= 0.0 { lo.max(0.0) } else { lo };
        Axis { lo, hi: mx + pad, log: false, p0, p1 }
    }

    fn t(&self, v: f64) -> f64 {
        if self.log {
            (v.max(f64::MIN_POSITIVE).log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        }
    }

    /// The pixel of value `v` (clamped a little outside the axis so that far values stay drawable).
    pub fn px(&self, v: f64) -> f64 {
        let t = self.t(v).clamp(-0.05, 1.05);
        self.p0 + t * (self.p1 - self.p0)
    }

    /// Ticks and their labels: 1-2-5 steps (linear), or decades with 2 and 5 between them while
    /// the axis spans fewer than three decades (log).
    pub fn ticks(&self) -> Vec<(f64, String)> {
        let mut out = Vec::new();
        if self.log {
            let (a, b) = (self.lo.log10().floor() as i32, self.hi.log10().ceil() as i32);
            let mults: &[f64] = if b - a <= 3 { &[1.0, 2.0, 5.0] } else { &[1.0] };
            for e in a..=b {
                for m in mults {
                    let v = m * 10f64.powi(e);
                    if v >= self.lo && v <= self.hi {
                        out.push((v, fmt_tick(v)));
                    }
                }
            }
            if out.len() < 2 {
                // Less than a decade with no 1-2-5 inside: the ends.
                out = vec![(self.lo, fmt_tick(self.lo)), (self.hi, fmt_tick(self.hi))];
            }
            return out;
        }
        let step = nice_step((self.hi - self.lo) / 5.0);
        let mut v = (self.lo / step).ceil() * step;
        while v <= self.hi + step * 1e-9 {
            out.push((v, fmt_tick(if v.abs() < step * 1e-9 { 0.0 } else { v })));
            v += step;
        }
        out
    }

    /// The axis title with its scale said when it is logarithmic.
    pub fn title(&self, what: &str) -> String {
        if self.log { format!("{what} — log scale") } else { what.to_string() }
    }
}

/// The 1-2-5 step at or above `raw`.
fn nice_step(raw: f64) -> f64 {
    if raw <= 0.0 || !raw.is_finite() {
        return 1.0;
    }
    let p = 10f64.powf(raw.log10().floor());
    let m = raw / p;
    let n = if m <= 1.0 {
        1.0
    } else if m <= 2.0 {
        2.0
    } else if m <= 5.0 {
        5.0
    } else {
        10.0
    };
    n * p
}

/// Tick labels: `250K`, `1.5M`, `2,000`, `0.05`.
pub fn fmt_tick(v: f64) -> String {
    let a = v.abs();
    let trim = |s: String| if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_string() } else { s };
    if a >= 1e6 {
        format!("{}M", trim(format!("{:.2}", v / 1e6)))
    } else if a >= 1e4 {
        format!("{}K", trim(format!("{:.1}", v / 1e3)))
    } else if a >= 1000.0 {
        crate::gate::fmt_num(v)
    } else if a >= 1.0 || a == 0.0 {
        trim(format!("{v:.2}"))
    } else {
        trim(format!("{v:.4}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wide_ranges_are_logarithmic() {
        let a = Axis::fit(&[5_472.0, 292_935.0], 0.0, 100.0);
        assert!(a.log, "53× apart");
        assert!(a.px(5_472.0) > 0.0 && a.px(292_935.0) < 100.0, "inside the axis");
        let b = Axis::fit(&[955.0, 6_506.0], 0.0, 100.0);
        assert!(!b.log && b.lo == 0.0, "6.8× apart, from 0: {b:?}");
        assert!(!Axis::fit(&[-1.0, 100.0], 0.0, 1.0).log, "not with values ≤ 0");
    }

    #[test]
    fn ticks_are_round_and_inside() {
        let a = Axis::fit(&[955.0, 6_506.0], 0.0, 100.0);
        let t: Vec<String> = a.ticks().into_iter().map(|t| t.1).collect();
        assert_eq!(t, ["0", "2,000", "4,000", "6,000"]);
        let l = Axis::fit(&[5_000.0, 300_000.0], 0.0, 100.0);
        let t: Vec<String> = l.ticks().into_iter().map(|t| t.1).collect();
        assert_eq!(t, ["5,000", "10K", "20K", "50K", "100K", "200K"]);
        assert!(l.ticks().iter().all(|(v, _)| *v >= l.lo && *v <= l.hi));
    }

    #[test]
    fn a_single_value_gets_a_range() {
        let a = Axis::fit(&[7.0], 0.0, 10.0);
        assert!(a.lo < 7.0 && a.hi > 7.0);
        assert!(Axis::fit(&[], 0.0, 1.0).hi > 0.0);
    }
}
