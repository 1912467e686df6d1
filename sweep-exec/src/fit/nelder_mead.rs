//! Bounded Nelder–Mead on the unit cube (no crate in the dependency list does derivative-free
//! minimisation; this is the textbook method, Lagarias et al. 1998 coefficients).
//!
//! Parameters live in `[0, 1]^n` (the caller maps them onto their bounds); every trial point is
//! clamped into the cube, which keeps the simplex feasible without penalty terms. The objective is
//! a simulation, so it is piecewise constant in places: the method stops on a small simplex or a
//! flat set of values as well as on the evaluation budget.

/// Options of one minimisation.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Most objective evaluations.
    pub max_evals: usize,
    /// Initial simplex edge (unit-cube coordinates).
    pub step: f64,
    /// Stop when every vertex is within this distance (max-norm) of the best.
    pub x_tol: f64,
    /// Stop when the values differ by less than this.
    pub f_tol: f64,
}

impl Default for Options {
    fn default() -> Self {
        Options { max_evals: 120, step: 0.2, x_tol: 2e-3, f_tol: 1e-6 }
    }
}

/// The best point found and how many evaluations it took.
#[derive(Clone, Debug)]
pub struct Minimum {
    pub x: Vec<f64>,
    pub f: f64,
    pub evals: usize,
}

fn clamp(x: &mut [f64]) {
    for v in x {
        *v = v.clamp(0.0, 1.0);
    }
}

/// Minimises `f` from `x0` (in `[0,1]^n`). `f` receives batches of points so that independent
/// evaluations (the initial simplex, a shrink) can run in parallel, and a bound: a value at or
/// above it only needs to be known to be so (`f` may return any number ≥ the bound instead of the
/// value). Every decision of the method compares a trial value with one threshold — the worst
/// vertex for a reflection, the reflection for an expansion, the smaller of the two for a
/// contraction — so a bounded `f` takes exactly the steps of an exact one, while an expensive
/// objective can stop early on a hopeless trial point. Vertices (the initial simplex, a shrink)
/// are asked for with an infinite bound.
pub fn minimize(mut f: impl FnMut(&[Vec<f64>], f64) -> Vec<f64>, x0: &[f64], opts: Options) -> Minimum {
    let n = x0.len();
    let mut start = x0.to_vec();
    clamp(&mut start);
    // Initial simplex: step along each axis, inward where the start sits on the upper bound.
    let mut pts = vec![start.clone()];
    for i in 0..n {
        let mut p = start.clone();
        p[i] = if p[i] + opts.step <= 1.0 { p[i] + opts.step } else { p[i] - opts.step };
        clamp(&mut p);
        pts.push(p);
    }
    let vals = f(&pts, f64::INFINITY);
    let mut evals = pts.len();
    let mut s: Vec<(Vec<f64>, f64)> = pts.into_iter().zip(vals).collect();
    let (alpha, gamma, rho, sigma) = (1.0, 2.0, 0.5, 0.5);
    while evals < opts.max_evals {
        s.sort_by(|a, b| a.1.total_cmp(&b.1));
        let best = s[0].1;
        let worst = s[n].1;
        let spread = s.iter().flat_map(|(x, _)| x.iter().zip(&s[0].0).map(|(a, b)| (a - b).abs())).fold(0.0, f64::max);
        if (worst - best).abs() <= opts.f_tol && spread <= opts.x_tol * 10.0 || spread <= opts.x_tol {
            break;
        }
        let centroid: Vec<f64> = (0..n).map(|i| s[..n].iter().map(|(x, _)| x[i]).sum::<f64>() / n as f64).collect();
        let towards = |coef: f64| -> Vec<f64> {
            let mut p: Vec<f64> = (0..n).map(|i| centroid[i] + coef * (centroid[i] - s[n].0[i])).collect();
            clamp(&mut p);
            p
        };
        let xr = towards(alpha);
        let fr = f(std::slice::from_ref(&xr), s[n].1)[0];
        evals += 1;
        if fr < s[0].1 {
            let xe = towards(gamma);
            let fe = f(std::slice::from_ref(&xe), fr)[0];
            evals += 1;
            s[n] = if fe < fr { (xe, fe) } else { (xr, fr) };
            continue;
        }
        if fr < s[n - 1].1 {
            s[n] = (xr, fr);
            continue;
        }
        // Contraction: outside when the reflection improved on the worst, else inside.
        let (xc, fc) = if fr < s[n].1 {
            let xc = towards(rho);
            let fc = f(std::slice::from_ref(&xc), s[n].1.min(fr))[0];
            (xc, fc)
        } else {
            let xc = towards(-rho);
            let fc = f(std::slice::from_ref(&xc), s[n].1.min(fr))[0];
            (xc, fc)
        };
        evals += 1;
        if fc < s[n].1.min(fr) {
            s[n] = (xc, fc);
            continue;
        }
        // Shrink towards the best vertex.
        let b = s[0].0.clone();
        let shrunk: Vec<Vec<f64>> = s[1..].iter().map(|(x, _)| (0..n).map(|i| b[i] + sigma * (x[i] - b[i])).collect()).collect();
        let vals = f(&shrunk, f64::INFINITY);
        evals += shrunk.len();
        for (k, (x, v)) in shrunk.into_iter().zip(vals).enumerate() {
            s[k + 1] = (x, v);
        }
    }
    s.sort_by(|a, b| a.1.total_cmp(&b.1));
    Minimum { x: s[0].0.clone(), f: s[0].1, evals }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(g: impl Fn(&[f64]) -> f64) -> impl FnMut(&[Vec<f64>], f64) -> Vec<f64> {
        move |xs: &[Vec<f64>], _| xs.iter().map(|x| g(x)).collect()
    }

    #[test]
    fn finds_an_interior_minimum() {
        let m = minimize(
            batch(|x| (x[0] - 0.3).powi(2) + 2.0 * (x[1] - 0.7).powi(2) + (x[2] - 0.5).powi(2)),
            &[0.9, 0.1, 0.1],
            Options { max_evals: 400, ..Options::default() },
        );
        assert!((m.x[0] - 0.3).abs() < 0.01 && (m.x[1] - 0.7).abs() < 0.01 && (m.x[2] - 0.5).abs() < 0.01, "{m:?}");
    }

    #[test]
    fn respects_bounds_when_the_minimum_is_outside() {
        let m =
            minimize(batch(|x| (x[0] - 1.5).powi(2) + (x[1] + 0.5).powi(2)), &[0.5, 0.5], Options { max_evals: 300, ..Options::default() });
        assert!(m.x[0] > 0.99 && m.x[1] < 0.01, "{m:?}");
        assert!(m.x.iter().all(|v| (0.0..=1.0).contains(v)));
    }

    #[test]
    fn stops_at_the_evaluation_budget() {
        let mut n = 0;
        let m = minimize(
            |xs: &[Vec<f64>], _| {
                n += xs.len();
                xs.iter().map(|x| x.iter().map(|v| v.sin()).sum()).collect()
            },
            &[0.5; 4],
            Options { max_evals: 20, x_tol: 0.0, f_tol: 0.0, ..Options::default() },
        );
        assert!(m.evals <= 20 + 4 && m.evals == n, "{} evals, {n} calls", m.evals);
    }

    /// A bounded objective (answering just the bound, or a value above it, for every trial point
    /// at or above the bound) walks exactly the path of the exact one, and is asked for fewer
    /// exact values.
    #[test]
    fn a_bounded_objective_takes_the_same_steps() {
        let g = |x: &[f64]| (x[0] - 0.3).powi(2) + 2.0 * (x[1] - 0.7).powi(2) + (x[0] * x[1] - 0.2).powi(2) + (x[2] - 0.5).abs();
        let opts = Options { max_evals: 200, ..Options::default() };
        let (mut exact_path, mut bounded_path) = (Vec::new(), Vec::new());
        let exact = minimize(
            |xs: &[Vec<f64>], _| {
                exact_path.extend(xs.iter().cloned());
                xs.iter().map(|x| g(x)).collect()
            },
            &[0.9, 0.1, 0.1],
            opts,
        );
        let mut cut = 0;
        let bounded = minimize(
            |xs: &[Vec<f64>], bound: f64| {
                bounded_path.extend(xs.iter().cloned());
                xs.iter()
                    .map(|x| {
                        let v = g(x);
                        if v >= bound {
                            cut += 1;
                            // Any lower bound at or above the bound will do.
                            bound + (v - bound) * 0.01
                        } else {
                            v
                        }
                    })
                    .collect()
            },
            &[0.9, 0.1, 0.1],
            opts,
        );
        assert_eq!(exact_path, bounded_path);
        assert_eq!((exact.x, exact.f, exact.evals), (bounded.x, bounded.f, bounded.evals));
        assert!(cut > 10, "{cut} trial points were hopeless");
        assert!(bound_is_infinite_for_vertices());
    }

    fn bound_is_infinite_for_vertices() -> bool {
        let mut first = None;
        minimize(
            |xs: &[Vec<f64>], b: f64| {
                first.get_or_insert((xs.len(), b));
                xs.iter().map(|x| x[0]).collect()
            },
            &[0.5, 0.5],
            Options { max_evals: 5, ..Options::default() },
        );
        first == Some((3, f64::INFINITY))
    }
}
