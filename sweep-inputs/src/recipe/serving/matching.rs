//! Matching a recipe's points to its master entry's search-space rows: by the parallel layout
//! read from the point's flags, its concurrency and, for fixed-seq-len rows, its `seq-len`
//! selector (a point without one serves every row of its layout and concurrency; one with it,
//! only fixed-seq-len rows of that length, and there it overrides a point without). Every master
//! concurrency needs exactly one point, and every point a row.

use super::{ArgTopology, Recipe, arg_topology, expand_concs, merge_args};
use crate::problem::{Problem, Problems};
use crate::recipe::master::{Entry, SearchRow, Topology};
use crate::recipe::seq_len::SeqLen;
use crate::yaml::YPath;
use std::collections::BTreeMap;

/// The scenario block a master row is in (fixed-seq-len and agentic blocks are numbered apart).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Block {
    Fixed(usize),
    Agentic(usize),
}

/// (block, search-space row, conc) → (arm, point).
pub type PointMap = BTreeMap<(Block, usize, u32), (usize, usize)>;

/// A master search-space row, with the sequence length of its block (fixed-seq-len rows).
struct MasterRow<'e> {
    block: Block,
    seq: Option<SeqLen>,
    row: &'e SearchRow,
    /// `<key>.scenarios.<scenario>[b].search-space[r]`.
    path: String,
}

impl MasterRow<'_> {
    /// What the row is, for messages: `1k1k concurrency 4` or `concurrency 4`.
    fn what(&self, conc: u32) -> String {
        match self.seq {
            Some(s) => format!("{s} concurrency {conc}"),
            None => format!("concurrency {conc}"),
        }
    }
}

/// A recipe point as matching sees it: its layout, concurrency and sequence-length selector.
struct PointView {
    arm: usize,
    point: usize,
    topo: ArgTopology,
    conc: u32,
    seq: Option<SeqLen>,
    path: YPath,
}

impl PointView {
    /// Whether the point can serve `conc` of `r`: same layout and concurrency, and a selector
    /// that admits the row (none admits every row; one admits fixed-seq-len rows of its length).
    fn serves(&self, r: &MasterRow, conc: u32) -> bool {
        let same_layout = match r.row.topology {
            Topology::Single { tp, ep, dp_attn, .. } => tp == self.topo.tp && ep == self.topo.ep && dp_attn == self.topo.dp_attn,
            Topology::Multi { .. } => false,
        };
        let seq_ok = self.seq.is_none() || self.seq == r.seq;
        same_layout && seq_ok && conc == self.conc
    }
}

fn master_rows(e: &Entry) -> Vec<MasterRow<'_>> {
    let mut rows = Vec::new();
    for b in &e.fixed {
        for r in &b.rows {
            let path = format!("{}.scenarios.fixed-seq-len[{}].search-space[{}]", e.key, b.index, r.index);
            rows.push(MasterRow { block: Block::Fixed(b.index), seq: Some(SeqLen::new(b.isl, b.osl)), row: r, path });
        }
    }
    for b in &e.agentic {
        for r in &b.rows {
            let path = format!("{}.scenarios.agentic-coding[{}].search-space[{}]", e.key, b.index, r.index);
            rows.push(MasterRow { block: Block::Agentic(b.index), seq: None, row: r, path });
        }
    }
    rows
}

impl Recipe {
    /// Matches every master row's concurrency to exactly one recipe point and every point to at
    /// least one row (at most one per sequence length): (block, row, conc) → (arm, point).
    pub fn match_master(&self, e: &Entry) -> Result<PointMap, Problems> {
        let mut problems = Problems::default();
        self.check_identity(e, &mut problems);
        let rows = master_rows(e);
        let points = self.point_views();
        let mut out = BTreeMap::new();
        for r in &rows {
            for c in expand_concs(&r.row.conc) {
                let mut hits: Vec<&PointView> = points.iter().filter(|p| p.serves(r, c)).collect();
                // A point that selects the row's sequence length overrides one that selects none.
                if hits.iter().any(|p| p.seq.is_some()) {
                    hits.retain(|p| p.seq.is_some());
                }
                match hits.as_slice() {
                    [p] => {
                        out.insert((r.block, r.row.index, c), (p.arm, p.point));
                    }
                    [] => problems.push(self.no_point(e, r, c)),
                    [first, rest @ ..] => {
                        for p in rest {
                            problems.push(self.ambiguous(r, c, first, p));
                        }
                    }
                }
            }
        }
        for p in &points {
            self.check_point_rows(e, p, &rows, &out, &mut problems);
        }
        problems.into_result(out)
    }

    /// The recipe names its config and pins the master entry's image.
    fn check_identity(&self, e: &Entry, problems: &mut Problems) {
        let root = YPath::root();
        if self.config_key != e.key {
            problems.push(self.problem(
                &root.key("config-key"),
                format!("recipe is for `{}` but was matched to `{}`", self.config_key, e.key),
                "name the recipe file after its config key",
            ));
        }
        if let Some(img) = &self.image
            && img != &e.image
        {
            problems.push(self.problem(
                &root.key("image"),
                format!("recipe image `{img}` differs from the master config's `{}`", e.image),
                "pin the same image (tag and digest) in both files",
            ));
        }
    }

    fn point_views(&self) -> Vec<PointView> {
        let mut out = Vec::new();
        for (ai, a) in self.arms.iter().enumerate() {
            for (pi, p) in a.points.iter().enumerate() {
                let mut args = Vec::new();
                merge_args(&mut args, &self.worker.args);
                merge_args(&mut args, &a.args);
                merge_args(&mut args, &p.args);
                let seq = p.seq_len.or(a.seq_len);
                out.push(PointView { arm: ai, point: pi, topo: arg_topology(&args), conc: p.conc, seq, path: p.path.clone() });
            }
        }
        out
    }

    /// A point serves at least one row, at most one per sequence length, with its arm's GPUs.
    fn check_point_rows(&self, e: &Entry, p: &PointView, rows: &[MasterRow], out: &PointMap, problems: &mut Problems) {
        let a = &self.arms[p.arm];
        let matched: Vec<&MasterRow> = rows.iter().filter(|r| p.serves(r, p.conc) && expand_concs(&r.row.conc).contains(&p.conc)).collect();
        let served: Vec<&MasterRow> =
            matched.iter().copied().filter(|r| out.get(&(r.block, r.row.index, p.conc)) == Some(&(p.arm, p.point))).collect();
        if matched.is_empty() {
            problems.push(self.no_row(e, p));
            return;
        }
        let overridden = |r: &&MasterRow| out.get(&(r.block, r.row.index, p.conc)).is_some_and(|&(ai, pi)| self.seq_len(ai, pi).is_some());
        if p.seq.is_none() && matched.iter().all(overridden) {
            let paths: Vec<&str> = matched.iter().map(|r| r.path.as_str()).collect();
            problems.push(self.problem(
                &p.path,
                format!("point serves no row: every row it matches ({}) has a point that selects its `seq-len`", paths.join(", ")),
                "remove this point, or the points with `seq-len` that override it",
            ));
        }
        let mut per_seq: BTreeMap<Option<SeqLen>, Vec<&str>> = BTreeMap::new();
        for r in &served {
            per_seq.entry(r.seq).or_default().push(&r.path);
        }
        for paths in per_seq.values().filter(|v| v.len() > 1) {
            problems.push(self.problem(
                &p.path,
                format!("point matches {} master rows ({})", paths.len(), paths.join(", ")),
                "make master rows differ in topology or concurrency",
            ));
        }
        if let Some(g) = a.gpus
            && let Some(r) = served.iter().find(|r| r.row.gpus() != g)
        {
            problems.push(self.problem(
                &a.path.key("gpus"),
                format!("arm `{}` says {g} GPUs but its master row {} uses {}", a.name, r.path, r.row.gpus()),
                "make `gpus` equal tp × pp × pcp-size of the row",
            ));
        }
    }

    /// A recipe point that no master row has (named at the point).
    fn no_row(&self, e: &Entry, p: &PointView) -> Problem {
        let seq = p.seq.map(|s| format!(" in a {s} block")).unwrap_or_default();
        let lengths: Vec<String> = e.fixed.iter().map(|b| SeqLen::new(b.isl, b.osl).name()).collect();
        let fix = match p.seq {
            Some(s) if !lengths.contains(&s.name()) => {
                format!("`{}` has no {s} block: use one of its sequence lengths ({})", e.key, lengths.join(", "))
            }
            _ => "add the concurrency to the matching master row, or fix the arm's --tensor-parallel-size / --expert-parallel-size / --enable-dp-attention".into(),
        };
        let t = p.topo;
        let msg = format!(
            "no master search-space row of `{}` has tp {} ep {} dp-attn {} with concurrency {}{seq}",
            e.key, t.tp, t.ep, t.dp_attn, p.conc
        );
        self.problem(&p.path, msg, fix)
    }

    /// A master row's concurrency that no recipe point serves (named at the master row).
    fn no_point(&self, e: &Entry, r: &MasterRow, c: u32) -> Problem {
        let fix = match (r.seq, &r.row.topology) {
            (Some(s), Topology::Single { tp, ep, dp_attn, .. }) => format!(
                "add `- conc: {c}` to an arm whose flags give tp {tp} ep {ep} dp-attn {dp_attn} and whose `seq-len` is {s} or unset"
            ),
            _ => "add a point with this `conc` to the matching arm of the recipe".into(),
        };
        Problem::new(
            &e.file,
            e.line,
            r.path.clone(),
            format!("{} has no point in the serving recipe {}", r.what(c), self.file.display()),
            fix,
        )
    }

    /// Two recipe points that serve the same master row and concurrency (named at the second).
    fn ambiguous(&self, r: &MasterRow, c: u32, first: &PointView, other: &PointView) -> Problem {
        let line = self.line(&first.path).map(|l| format!(" (line {l})")).unwrap_or_default();
        self.problem(
            &other.path,
            format!("master row {} {} matches two recipe points: this one and {}{line}", r.path, r.what(c), first.path),
            match r.seq {
                Some(s) => {
                    format!("give the arms or points `seq-len` selectors that differ (this row needs `seq-len: {s}`), or remove one point")
                }
                None => "keep one point per master concurrency: remove one, or change its arm's layout".into(),
            },
        )
    }
}
