//! Point labels that never overprint: each label is placed greedily, the most crowded points
//! first, at the cheapest free spot around its marker — right, then above and below, then left,
//! moving outwards with a leader line back to the marker — where it overlaps no other label, no
//! marker and no leader line and stays inside the plot. A label that finds no such spot becomes a
//! number beside its marker (placed by the same rule) and a line in the chart's key below.

use super::scene::{Anchor, Bounds, text_bounds};

/// A label to place beside a marker.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    pub at: (f64, f64),
    /// Marker radius.
    pub r: f64,
    pub text: String,
    pub size: f64,
}

/// Where a label went.
#[derive(Clone, Debug, PartialEq)]
pub struct Placed {
    /// The text drawn in the plot: the label, or its key number.
    pub text: String,
    pub at: (f64, f64),
    pub anchor: Anchor,
    pub bounds: Bounds,
    /// From the marker's edge to the text, when the text sits away from its marker.
    pub leader: Option<((f64, f64), (f64, f64))>,
    /// The key number when the label did not fit (the key below the chart gives the text).
    pub key: Option<usize>,
}

/// Offsets from the marker: direction, where the text's anchor sits relative to the candidate
/// point, and a preference cost (right first, as charts are read left to right).
const DIRS: [((f64, f64), Anchor, f64); 12] = [
    ((1.0, 0.0), Anchor::Start, 0.0),
    ((0.71, -0.71), Anchor::Start, 1.0),
    ((0.71, 0.71), Anchor::Start, 2.0),
    ((0.0, -1.0), Anchor::Middle, 3.0),
    ((0.0, 1.0), Anchor::Middle, 3.5),
    ((-1.0, 0.0), Anchor::End, 4.0),
    ((-0.71, -0.71), Anchor::End, 5.0),
    ((-0.71, 0.71), Anchor::End, 5.5),
    ((0.38, -0.92), Anchor::Start, 6.0),
    ((0.38, 0.92), Anchor::Start, 6.5),
    ((-0.38, -0.92), Anchor::End, 7.0),
    ((-0.38, 0.92), Anchor::End, 7.5),
];

/// Gaps between a marker's edge and its label, nearest first.
const GAPS: [f64; 9] = [3.0, 9.0, 18.0, 30.0, 45.0, 62.0, 80.0, 100.0, 125.0];

/// Beyond this gap a leader line joins the label to its marker.
const LEADER_GAP: f64 = 12.0;

/// Segments a label should not cross, with the cost of crossing one (whiskers cost more than
/// frontier lines: a label over a whisker hides the interval).
pub type Soft<'a> = (&'a [Segment], f64);
pub type Segment = ((f64, f64), (f64, f64));

/// Places `labels` inside `plot`, clear of `markers` (the boxes of every marker, each label's own
/// included) and of each other. `soft` segments are avoided where a spot of similar cost
/// exists. Deterministic.
pub fn place(labels: &[Request], plot: Bounds, markers: &[Bounds], soft: &[Soft]) -> Vec<Placed> {
    // The most crowded markers choose first, while room is left around them.
    let crowd = |i: usize| labels.iter().filter(|o| dist(o.at, labels[i].at) < 60.0).count();
    let mut order: Vec<usize> = (0..labels.len()).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(crowd(i)), i));
    let mut best = attempt(labels, &order, plot, markers, soft);
    // Labels left without room go first in another try (the first ones may have taken the
    // spots their leaders needed); the try with fewer numbered labels wins.
    for _ in 0..3 {
        if best.keyed.is_empty() {
            break;
        }
        let mut again: Vec<usize> = best.keyed.clone();
        again.extend(order.iter().copied().filter(|i| !best.keyed.contains(i)));
        let next = attempt(labels, &again, plot, markers, soft);
        if next.keyed.len() >= best.keyed.len() {
            break;
        }
        order = again;
        best = next;
    }
    let Attempt { mut out, mut taken, mut leaders, mut keyed } = best;
    // Key numbers in plot order (left to right), so the key reads like the chart.
    keyed.sort_by(|&a, &b| labels[a].at.0.total_cmp(&labels[b].at.0).then(a.cmp(&b)));
    for (k, &i) in keyed.iter().enumerate() {
        let l = &labels[i];
        let n = k + 1;
        let spot = best_spot(l, &n.to_string(), plot, markers, &taken, &leaders, soft);
        let p = match spot {
            Some(mut p) => {
                p.key = Some(n);
                p
            }
            // No room even for a number: the key still names the point, and its marker's
            // hover title too; nothing is drawn over another label.
            None => Placed {
                text: String::new(),
                at: l.at,
                anchor: Anchor::Start,
                bounds: Bounds::new(l.at.0, l.at.1, l.at.0, l.at.1),
                leader: None,
                key: Some(n),
            },
        };
        if !p.text.is_empty() {
            taken.push(p.bounds);
            leaders.extend(p.leader);
        }
        out[i] = Some(p);
    }
    out.into_iter().map(|p| p.expect("every label placed or keyed")).collect()
}

/// One greedy pass in `order`: what was placed, and which labels found no room.
struct Attempt {
    out: Vec<Option<Placed>>,
    taken: Vec<Bounds>,
    leaders: Vec<Segment>,
    keyed: Vec<usize>,
}

fn attempt(labels: &[Request], order: &[usize], plot: Bounds, markers: &[Bounds], soft: &[Soft]) -> Attempt {
    let mut a = Attempt { out: vec![None; labels.len()], taken: Vec::new(), leaders: Vec::new(), keyed: Vec::new() };
    for &i in order {
        let l = &labels[i];
        match best_spot(l, &l.text, plot, markers, &a.taken, &a.leaders, soft) {
            Some(p) => {
                a.taken.push(p.bounds);
                a.leaders.extend(p.leader);
                a.out[i] = Some(p);
            }
            None => a.keyed.push(i),
        }
    }
    a
}

fn dist(a: (f64, f64), b: (f64, f64)) -> f64 {
    ((a.0 - b.0).powi(2) + (a.1 - b.1).powi(2)).sqrt()
}

/// The cheapest free spot for `text` around `l`'s marker.
fn best_spot(
    l: &Request,
    text: &str,
    plot: Bounds,
    markers: &[Bounds],
    taken: &[Bounds],
    leaders: &[Segment],
    soft: &[Soft],
) -> Option<Placed> {
    let mut best: Option<(f64, Placed)> = None;
    for (gi, gap) in GAPS.iter().enumerate() {
        for (dir, anchor, pref) in DIRS {
            let d = l.r + gap;
            let p = (l.at.0 + dir.0 * d, l.at.1 + dir.1 * d);
            let mut b = text_bounds(text, l.size, p, anchor);
            // Above and below, the box's near edge (not its middle) sits at the gap.
            let h = b.y1 - b.y0;
            let shift = if dir.1 < -0.5 {
                -h / 2.0
            } else if dir.1 > 0.5 {
                h / 2.0
            } else {
                dir.1 * h / 2.0
            };
            b = Bounds::new(b.x0, b.y0 + shift, b.x1, b.y1 + shift);
            let at = (p.0, p.1 + shift);
            if !plot.contains(&b) {
                continue;
            }
            let pad = b.inflate(2.0);
            if taken.iter().any(|t| t.overlaps(&pad)) || markers.iter().any(|m| m.overlaps(&b.inflate(1.0))) {
                continue;
            }
            if leaders.iter().any(|(a, z)| pad.hits_segment(*a, *z)) {
                continue;
            }
            let leader = (*gap > LEADER_GAP).then(|| {
                let end = b.nearest(l.at);
                let len = dist(end, l.at).max(1e-9);
                let start = (l.at.0 + (end.0 - l.at.0) / len * (l.r + 1.0), l.at.1 + (end.1 - l.at.1) / len * (l.r + 1.0));
                (start, end)
            });
            // A leader may not cross another label.
            if let Some((a, z)) = leader
                && taken.iter().any(|t| t.hits_segment(a, z))
            {
                continue;
            }
            let crossings: f64 = soft.iter().map(|(segs, c)| segs.iter().filter(|(a, z)| b.hits_segment(*a, *z)).count() as f64 * c).sum();
            let cost = gi as f64 * 10.0 + pref + crossings;
            if best.as_ref().is_none_or(|(c, _)| cost < *c) {
                best = Some((cost, Placed { text: text.to_string(), at, anchor, bounds: b, leader, key: None }));
            }
        }
        // A free spot without crossings at this gap beats anything farther out.
        if best.as_ref().is_some_and(|(c, _)| *c < (gi as f64 + 1.0) * 10.0) {
            break;
        }
    }
    best.map(|(_, p)| p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(x: f64, y: f64, t: &str) -> Request {
        Request { at: (x, y), r: 5.0, text: t.into(), size: 12.0 }
    }

    fn marker(r: &Request) -> Bounds {
        Bounds::new(r.at.0 - r.r, r.at.1 - r.r, r.at.0 + r.r, r.at.1 + r.r)
    }

    fn check(labels: &[Request], placed: &[Placed]) {
        let drawn: Vec<&Placed> = placed.iter().filter(|p| !p.text.is_empty()).collect();
        for (i, a) in drawn.iter().enumerate() {
            for b in &drawn[i + 1..] {
                assert!(!a.bounds.overlaps(&b.bounds), "{a:?} overlaps {b:?}");
            }
            for l in labels {
                assert!(!a.bounds.overlaps(&marker(l)), "{a:?} covers the marker at {:?}", l.at);
            }
        }
    }

    #[test]
    fn a_lone_label_sits_right_of_its_marker() {
        let l = [req(100.0, 100.0, "TP4 c1")];
        let p = place(&l, Bounds::new(0.0, 0.0, 400.0, 300.0), &[marker(&l[0])], &[]);
        assert_eq!(p[0].anchor, Anchor::Start);
        assert!(p[0].bounds.x0 > 105.0 && p[0].bounds.x0 < 110.0 && p[0].leader.is_none(), "{:?}", p[0]);
    }

    #[test]
    fn a_cluster_of_markers_gets_labels_that_never_overlap() {
        // Five points pressed into a corner, as on a shared linear axis, markers touching.
        let l: Vec<Request> = (0..5).map(|i| req(40.0 + i as f64 * 12.0, 280.0 - i as f64 * 3.0, &format!("DEP8 c{}", 32 << i))).collect();
        let m: Vec<Bounds> = l.iter().map(marker).collect();
        let p = place(&l, Bounds::new(0.0, 0.0, 400.0, 300.0), &m, &[]);
        check(&l, &p);
        assert!(p.iter().all(|x| x.key.is_none()), "room enough around: {p:?}");
        assert!(p.iter().any(|x| x.leader.is_some()), "some pushed out with leaders");
        // Markers on top of each other: some labels become numbers, none overprints.
        let l: Vec<Request> = (0..5).map(|i| req(40.0 + i as f64 * 6.0, 280.0 - i as f64 * 2.0, &format!("DEP8 c{}", 32 << i))).collect();
        let m: Vec<Bounds> = l.iter().map(marker).collect();
        let p = place(&l, Bounds::new(0.0, 0.0, 400.0, 300.0), &m, &[]);
        check(&l, &p);
    }

    #[test]
    fn labels_without_room_become_numbered() {
        // Twenty markers in a plot barely larger than them.
        let l: Vec<Request> =
            (0..20).map(|i| req(20.0 + (i % 5) as f64 * 12.0, 20.0 + (i / 5) as f64 * 12.0, "a long label here")).collect();
        let m: Vec<Bounds> = l.iter().map(marker).collect();
        let p = place(&l, Bounds::new(0.0, 0.0, 100.0, 80.0), &m, &[]);
        check(&l, &p);
        let keys: Vec<usize> = p.iter().filter_map(|x| x.key).collect();
        assert!(!keys.is_empty());
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(sorted, (1..=keys.len()).collect::<Vec<_>>(), "numbered 1..n");
    }
}
