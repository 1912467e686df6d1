//! Parsing a master document: every entry's fields, scenarios, blocks and search-space rows,
//! with the load-time invariants reported at their YAML paths.

use super::{AgenticBlock, Component, Conc, Entry, FixedBlock, SearchRow, Topology, Worker};
use crate::problem::Problems;
use crate::recipe::schema::Checker;
use crate::yaml::{Doc, YPath};
use serde_yaml_ng::{Mapping, Value};

const TOP_KEYS: &[&str] = &[
    "image",
    "model",
    "model-prefix",
    "runner",
    "precision",
    "framework",
    "multinode",
    "disagg",
    "router",
    "kv-p2p-transfer",
    "scenarios",
];
const SN_FIXED_KEYS: &[&str] = &[
    "tp",
    "pp",
    "dcp-size",
    "pcp-size",
    "ep",
    "dp-attn",
    "spec-decoding",
    "router",
    "kv-p2p-transfer",
    "conc-start",
    "conc-end",
    "conc-list",
];
const MN_FIXED_KEYS: &[&str] = &["spec-decoding", "prefill", "decode", "router", "kv-p2p-transfer", "conc-start", "conc-end", "conc-list"];
const SN_AGENTIC_KEYS: &[&str] = &[
    "tp",
    "pp",
    "dcp-size",
    "pcp-size",
    "ep",
    "dp-attn",
    "spec-decoding",
    "router",
    "kv-p2p-transfer",
    "conc-start",
    "conc-end",
    "conc-list",
    "kv-offloading",
    "kv-offload-backend",
];
const MN_AGENTIC_KEYS: &[&str] = &[
    "spec-decoding",
    "prefill",
    "decode",
    "router",
    "kv-p2p-transfer",
    "conc-start",
    "conc-end",
    "conc-list",
    "kv-offloading",
    "kv-offload-backend",
];
const WORKER_KEYS: &[&str] = &["num-worker", "tp", "ep", "dp-attn", "pp", "dcp-size", "pcp-size", "hardware", "additional-settings"];
const SPEC_MODES: &[&str] = &["mtp", "draft_model", "none"];
pub(super) fn parse_doc(doc: &Doc) -> Result<Vec<Entry>, Problems> {
    let mut c = Checker::new(doc);
    let root = YPath::root();
    let mut out = Vec::new();
    if let Value::Null = doc.value {
        return Ok(out);
    }
    let Some(top) = c.mapping(&doc.value, &root, "a master config file") else { return Err(c.problems) };
    for (k, v) in top {
        let Some(key) = k.as_str() else {
            c.err(&root, format!("config key {k:?} is not a string"), "use a string config key");
            continue;
        };
        let p = root.key(key);
        if key.contains('*') {
            c.err(&p, format!("config key `{key}` contains `*`"), "`*` is reserved for changelog wildcards: remove it from the key");
            continue;
        }
        if let Some(e) = parse_entry(&mut c, key, v, &p) {
            out.push(e);
        }
    }
    c.problems.into_result(out)
}

fn parse_component(c: &mut Checker, v: &Value, p: &YPath, what: &str, version_required: bool) -> Option<Component> {
    let m = c.mapping(v, p, what)?;
    c.known_keys(m, p, &["name", "version"], what);
    let name = c.req_str(m, p, "name");
    let version = if version_required { c.req_str(m, p, "version") } else { c.opt_str(m, p, "version") };
    if let Some(ver) = &version
        && ver.starts_with("image:")
    {
        c.err(
            &p.key("version"),
            format!("{what} version `{ver}` starts with `image:`"),
            "give the component's own version (e.g. \"0.3.2\"), not an image reference",
        );
    }
    Some(Component { name: name?, version })
}

fn parse_entry(c: &mut Checker, key: &str, v: &Value, p: &YPath) -> Option<Entry> {
    let m = c.mapping(v, p, "a config entry")?;
    c.known_keys(m, p, TOP_KEYS, "a config entry");
    let mut entry = entry_fields(c, key, m, p);
    parse_scenarios(c, m, p, &mut entry);
    entry_invariants(c, &entry, p);
    Some(entry)
}

/// The entry's top-level fields (missing ones reported and left empty), with the single-node
/// rules on `disagg` and `kv-p2p-transfer`.
fn entry_fields(c: &mut Checker, key: &str, m: &Mapping, p: &YPath) -> Entry {
    let image = c.req_str(m, p, "image");
    let model = c.req_str(m, p, "model");
    let model_prefix = c.req_str(m, p, "model-prefix");
    let runner = c.req_str(m, p, "runner");
    let precision = c.req_str(m, p, "precision");
    let framework = c.req_str(m, p, "framework");
    let multinode = c.req_bool(m, p, "multinode");
    let disagg = c.opt_bool(m, p, "disagg").unwrap_or(false);
    let router = m.get("router").and_then(|v| parse_component(c, v, &p.key("router"), "router", true));
    let kv_p2p_transfer = c.opt_str(m, p, "kv-p2p-transfer");
    let mn = multinode.unwrap_or(false);

    if !mn && disagg {
        c.err(
            &p.key("disagg"),
            "`disagg: true` on a single-node entry",
            "single-node entries are aggregated: set `disagg: false` or `multinode: true`",
        );
    }
    if !mn && kv_p2p_transfer.is_some() {
        c.err(
            &p.key("kv-p2p-transfer"),
            "`kv-p2p-transfer` on a single-node entry",
            "KV transfer applies only to `multinode: true` entries: remove it",
        );
    }

    Entry {
        key: key.to_string(),
        file: c.doc.file.clone(),
        line: c.doc.loc.line(p),
        image: image.unwrap_or_default(),
        model: model.unwrap_or_default(),
        model_prefix: model_prefix.unwrap_or_default(),
        runner: runner.unwrap_or_default(),
        precision: precision.unwrap_or_default(),
        framework: framework.unwrap_or_default(),
        multinode: mn,
        disagg,
        router,
        kv_p2p_transfer,
        fixed: Vec::new(),
        agentic: Vec::new(),
        has_fixed: false,
        has_agentic: false,
    }
}

/// `scenarios`: the fixed-seq-len and agentic-coding blocks; agentic configs need a `cluster:`
/// runner.
fn parse_scenarios(c: &mut Checker, m: &Mapping, p: &YPath, entry: &mut Entry) {
    let mn = entry.multinode;
    let sp = p.key("scenarios");
    let Some(sv) = m.get("scenarios") else {
        c.err(&sp, "missing required field `scenarios`", "add `scenarios:` with `fixed-seq-len:` and/or `agentic-coding:`");
        return;
    };
    let Some(sm) = c.mapping(sv, &sp, "scenarios") else { return };
    c.known_keys(sm, &sp, &["fixed-seq-len", "agentic-coding"], "scenarios");
    if sm.get("fixed-seq-len").is_none() && sm.get("agentic-coding").is_none() {
        c.err(&sp, "`scenarios` has no scenario", "add `fixed-seq-len:` and/or `agentic-coding:`");
    }
    if let Some(fv) = sm.get("fixed-seq-len") {
        entry.has_fixed = true;
        let fp = sp.key("fixed-seq-len");
        if let Some(blocks) = c.sequence(fv, &fp, "fixed-seq-len") {
            for (i, b) in blocks.iter().enumerate() {
                if let Some(fb) = parse_fixed_block(c, b, &fp.index(i), i, mn) {
                    entry.fixed.push(fb);
                }
            }
        }
    }
    if let Some(av) = sm.get("agentic-coding") {
        entry.has_agentic = true;
        let ap = sp.key("agentic-coding");
        if let Some(blocks) = c.sequence(av, &ap, "agentic-coding") {
            for (i, b) in blocks.iter().enumerate() {
                if let Some(ab) = parse_agentic_block(c, b, &ap.index(i), i, mn) {
                    entry.agentic.push(ab);
                }
            }
        }
        if !entry.runner.is_empty() && !entry.runner.starts_with("cluster:") {
            c.err(
                &p.key("runner"),
                format!("agentic config uses runner `{}` without a `cluster:` label", entry.runner),
                format!("agentic configs are scheduled per cluster: use e.g. `runner: cluster:{}`", entry.runner),
            );
        }
    }
}

/// Cross-row invariants: router/kv-p2p scope, disagg ⇒ kv-p2p-transfer.
fn entry_invariants(c: &mut Checker, e: &Entry, p: &YPath) {
    let rows: Vec<(YPath, &SearchRow)> = e
        .fixed
        .iter()
        .flat_map(|b| {
            b.rows.iter().map(move |r| (p.key("scenarios").key("fixed-seq-len").index(b.index).key("search-space").index(r.index), r))
        })
        .chain(e.agentic.iter().flat_map(|b| {
            b.rows.iter().map(move |r| (p.key("scenarios").key("agentic-coding").index(b.index).key("search-space").index(r.index), r))
        }))
        .collect();
    if e.router.is_some() {
        for (rp, r) in &rows {
            if r.router.is_some() {
                c.err(
                    &rp.key("router"),
                    "`router` is declared both top-level and on this row",
                    "declare the router either top-level or on rows, never both",
                );
            }
        }
    }
    if e.kv_p2p_transfer.is_some() {
        for (rp, r) in &rows {
            if r.kv_p2p_transfer.is_some() {
                c.err(
                    &rp.key("kv-p2p-transfer"),
                    "`kv-p2p-transfer` is declared both top-level and on this row",
                    "declare it either top-level or on rows, never both",
                );
            }
        }
    }
    if e.disagg && e.kv_p2p_transfer.is_none() {
        for (rp, r) in &rows {
            if r.kv_p2p_transfer.is_none() {
                c.err(
                    rp,
                    "`disagg: true` but this row has no `kv-p2p-transfer`",
                    "set `kv-p2p-transfer` (e.g. nixl, mooncake) top-level or on every row",
                );
            }
        }
    }
}

fn parse_fixed_block(c: &mut Checker, v: &Value, p: &YPath, index: usize, mn: bool) -> Option<FixedBlock> {
    let m = c.mapping(v, p, "a fixed-seq-len block")?;
    c.known_keys(m, p, &["isl", "osl", "search-space"], "a fixed-seq-len block");
    let isl = c.req_pos_int(m, p, "isl");
    let osl = c.req_pos_int(m, p, "osl");
    let rows = parse_rows(c, m, p, mn, false, None);
    Some(FixedBlock { index, isl: isl?, osl: osl?, rows })
}

fn parse_agentic_block(c: &mut Checker, v: &Value, p: &YPath, index: usize, mn: bool) -> Option<AgenticBlock> {
    let m = c.mapping(v, p, "an agentic-coding block")?;
    c.known_keys(m, p, &["search-space", "dram-utilization"], "an agentic-coding block");
    let dram = c.opt_f64(m, p, "dram-utilization");
    if let Some(d) = dram
        && !(d > 0.0 && d <= 1.0)
    {
        c.err(&p.key("dram-utilization"), format!("`dram-utilization` must be in (0, 1], found {d}"), "use a fraction such as 0.80");
    }
    let rows = parse_rows(c, m, p, mn, true, Some(dram));
    Some(AgenticBlock { index, dram_utilization: dram, rows })
}

fn parse_rows(c: &mut Checker, m: &Mapping, p: &YPath, mn: bool, agentic: bool, dram: Option<Option<f64>>) -> Vec<SearchRow> {
    let sp = p.key("search-space");
    let Some(v) = m.get("search-space") else {
        c.err(&sp, "missing required field `search-space`", "add `search-space:` with at least one row");
        return Vec::new();
    };
    let Some(seq) = c.sequence(v, &sp, "search-space") else { return Vec::new() };
    if seq.is_empty() {
        c.err(&sp, "`search-space` is empty", "add at least one row");
    }
    let mut rows = Vec::new();
    for (i, rv) in seq.iter().enumerate() {
        let rp = sp.index(i);
        if let Some(r) = parse_row(c, rv, &rp, i, mn, agentic) {
            if agentic && r.kv_offloading.as_deref() == Some("dram") && dram == Some(None) {
                c.err(
                    &rp.key("kv-offloading"),
                    "`kv-offloading: dram` needs the block's `dram-utilization`",
                    "add `dram-utilization: 0.80` (a fraction in (0, 1]) to the agentic-coding block",
                );
            }
            rows.push(r);
        }
    }
    rows
}

fn parse_conc(c: &mut Checker, m: &Mapping, p: &YPath) -> Option<Conc> {
    let list = m.get("conc-list");
    let start = m.get("conc-start");
    let end = m.get("conc-end");
    match (list, start, end) {
        (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
            c.err(
                &p.key("conc-list"),
                "both `conc-list` and a `conc-start`/`conc-end` range are given",
                "use either `conc-list: [..]` or `conc-start` + `conc-end`, not both",
            );
            None
        }
        (None, None, None) => {
            c.err(
                p,
                "no concurrency: neither `conc-list` nor `conc-start`/`conc-end`",
                "add `conc-list: [1, 4, 16]` or `conc-start: 1` + `conc-end: 64`",
            );
            None
        }
        (Some(l), None, None) => {
            let lp = p.key("conc-list");
            let seq = c.sequence(l, &lp, "conc-list")?;
            if seq.is_empty() {
                c.err(&lp, "`conc-list` is empty", "list at least one concurrency");
                return None;
            }
            let mut out = Vec::new();
            for (i, x) in seq.iter().enumerate() {
                out.push(c.pos_int(x, &lp.index(i), "conc-list value")?);
            }
            Some(Conc::List(out))
        }
        (None, s, e) => {
            let (Some(s), Some(e)) = (s, e) else {
                let missing = if s.is_none() { "conc-start" } else { "conc-end" };
                c.err(
                    &p.key(missing),
                    format!("range concurrency needs both `conc-start` and `conc-end`; `{missing}` is missing"),
                    format!("add `{missing}`"),
                );
                return None;
            };
            let s = c.pos_int(s, &p.key("conc-start"), "conc-start");
            let e = c.pos_int(e, &p.key("conc-end"), "conc-end");
            let (s, e) = (s?, e?);
            if s > e {
                c.err(&p.key("conc-start"), format!("`conc-start` {s} is greater than `conc-end` {e}"), "make conc-start ≤ conc-end");
                return None;
            }
            Some(Conc::Range { start: s, end: e })
        }
    }
}

fn check_dcp(c: &mut Checker, p: &YPath, tp: u32, dcp: u32) {
    if !tp.is_multiple_of(dcp) {
        c.err(
            &p.key("dcp-size"),
            format!("tp {tp} is not divisible by dcp-size {dcp} (tp % dcp-size must be 0)"),
            "decode context parallelism reuses the TP GPUs: choose a dcp-size that divides tp",
        );
    }
}

fn parse_worker(c: &mut Checker, v: &Value, p: &YPath) -> Option<Worker> {
    let m = c.mapping(v, p, "a worker block")?;
    c.known_keys(m, p, WORKER_KEYS, "a worker block");
    let num_worker = match m.get("num-worker") {
        None => {
            c.err(&p.key("num-worker"), "missing required field `num-worker`", "add `num-worker: <n>` (0 on decode = aggregated)");
            None
        }
        Some(v) => match v.as_u64() {
            Some(n) => Some(n as u32),
            None => {
                c.err(&p.key("num-worker"), "`num-worker` must be an integer ≥ 0", "write a plain integer");
                None
            }
        },
    };
    let tp = c.req_pos_int(m, p, "tp");
    let ep = c.req_pos_int(m, p, "ep");
    let dp_attn = c.req_bool(m, p, "dp-attn");
    let pp = c.int_or(m, p, "pp", 1);
    let dcp = c.int_or(m, p, "dcp-size", 1);
    let pcp = c.int_or(m, p, "pcp-size", 1);
    let hardware = c.opt_str(m, p, "hardware");
    let additional_settings = c.str_list(m, p, "additional-settings");
    for (i, s) in additional_settings.iter().enumerate() {
        if !s.contains('=') {
            c.err(&p.key("additional-settings").index(i), format!("additional setting `{s}` is not KEY=VALUE"), "write it as `KEY=VALUE`");
        }
    }
    let tp = tp?;
    check_dcp(c, p, tp, dcp);
    Some(Worker { num_worker: num_worker?, tp, ep: ep?, dp_attn: dp_attn?, pp, dcp, pcp, hardware, additional_settings })
}
fn parse_row(c: &mut Checker, v: &Value, p: &YPath, index: usize, mn: bool, agentic: bool) -> Option<SearchRow> {
    let m = c.mapping(v, p, "a search-space row")?;
    let (allowed, what) = match (mn, agentic) {
        (false, false) => (SN_FIXED_KEYS, "a single-node fixed-seq-len row"),
        (true, false) => (MN_FIXED_KEYS, "a multi-node fixed-seq-len row"),
        (false, true) => (SN_AGENTIC_KEYS, "a single-node agentic row"),
        (true, true) => (MN_AGENTIC_KEYS, "a multi-node agentic row"),
    };
    if agentic && (mn && m.contains_key("tp") || !mn && (m.contains_key("prefill") || m.contains_key("decode"))) {
        let fix = if mn {
            "multi-node entries describe workers in `prefill`/`decode`, not `tp`"
        } else {
            "single-node entries use `tp` (set `multinode: true` for `prefill`/`decode`)"
        };
        c.err(p, "agentic row mixes single-node (`tp`) and multi-node (`prefill`/`decode`) fields", fix);
    }
    c.known_keys(m, p, allowed, what);
    let spec = c.opt_str(m, p, "spec-decoding").unwrap_or_else(|| "none".to_string());
    if !SPEC_MODES.contains(&spec.as_str()) {
        c.err(
            &p.key("spec-decoding"),
            format!("unknown spec-decoding `{spec}`"),
            "use one of mtp, draft_model, none (EAGLE3 and DSpark are written as mtp)",
        );
    }
    let router = m.get("router").and_then(|v| parse_component(c, v, &p.key("router"), "router", true));
    let kv_p2p_transfer = c.opt_str(m, p, "kv-p2p-transfer");
    if !mn && kv_p2p_transfer.is_some() {
        c.err(
            &p.key("kv-p2p-transfer"),
            "`kv-p2p-transfer` on a single-node row",
            "KV transfer applies only to multi-node entries: remove it",
        );
    }
    let conc = parse_conc(c, m, p);
    let (kv_offloading, kv_offload_backend) = if agentic { parse_kv_offload(c, m, p, mn) } else { (None, None) };
    let topology = if mn { parse_multi_topology(c, m, p)? } else { parse_single_topology(c, m, p)? };
    Some(SearchRow { index, topology, spec_decoding: spec, router, kv_p2p_transfer, conc: conc?, kv_offloading, kv_offload_backend })
}

/// An agentic row's `kv-offloading` mode (`none` or `dram`; required on a single node) and its
/// backend, which must be set exactly when offloading is on.
fn parse_kv_offload(c: &mut Checker, m: &Mapping, p: &YPath, mn: bool) -> (Option<String>, Option<Component>) {
    let kv = c.opt_str(m, p, "kv-offloading");
    if let Some(k) = &kv
        && k != "none"
        && k != "dram"
    {
        c.err(&p.key("kv-offloading"), format!("unknown kv-offloading `{k}`"), "use `none` or `dram` (NVMe offload is out of scope)");
    }
    if kv.is_none() && !mn {
        c.err(
            &p.key("kv-offloading"),
            "single-node agentic rows must set `kv-offloading`",
            "add `kv-offloading: none` (or `dram` with a `kv-offload-backend`)",
        );
    }
    let backend =
        m.get("kv-offload-backend").and_then(|v| parse_component(c, v, &p.key("kv-offload-backend"), "kv-offload-backend", false));
    let off = kv.as_deref().is_some_and(|k| k != "none");
    if off && backend.is_none() && m.get("kv-offload-backend").is_none() {
        c.err(
            &p.key("kv-offload-backend"),
            "`kv-offloading` is on but `kv-offload-backend` is missing",
            "add `kv-offload-backend: { name: hicache }` (or another backend)",
        );
    }
    if !off && m.get("kv-offload-backend").is_some() {
        c.err(
            &p.key("kv-offload-backend"),
            "`kv-offload-backend` is set but `kv-offloading` is `none`",
            "remove the backend or set `kv-offloading: dram`",
        );
    }
    (kv, backend)
}

/// A multi-node row's `prefill` and `decode` workers (`hardware` on both or neither).
fn parse_multi_topology(c: &mut Checker, m: &Mapping, p: &YPath) -> Option<Topology> {
    let pre = m.get("prefill").and_then(|v| parse_worker(c, v, &p.key("prefill")));
    let dec = m.get("decode").and_then(|v| parse_worker(c, v, &p.key("decode")));
    for role in ["prefill", "decode"] {
        if !m.contains_key(role) {
            c.err(
                &p.key(role),
                format!("multi-node row is missing `{role}`"),
                format!("add a `{role}:` worker block with num-worker, tp, ep, dp-attn"),
            );
        }
    }
    let (pre, dec) = (pre?, dec?);
    if pre.hardware.is_some() != dec.hardware.is_some() {
        c.err(p, "worker `hardware` is set on only one role", "set `hardware` on both prefill and decode, or on neither");
    }
    Some(Topology::Multi { prefill: pre, decode: dec })
}

/// A single-node row's parallelism, with its defaults.
fn parse_single_topology(c: &mut Checker, m: &Mapping, p: &YPath) -> Option<Topology> {
    let tp = c.req_pos_int(m, p, "tp");
    let pp = c.int_or(m, p, "pp", 1);
    let dcp = c.int_or(m, p, "dcp-size", 1);
    let pcp = c.int_or(m, p, "pcp-size", 1);
    let ep = match m.get("ep") {
        None => 1,
        Some(v) => c.pos_int(v, &p.key("ep"), "ep").unwrap_or(1),
    };
    let dp_attn = c.opt_bool(m, p, "dp-attn").unwrap_or(false);
    let tp = tp?;
    check_dcp(c, p, tp, dcp);
    Some(Topology::Single { tp, pp, dcp, pcp, ep, dp_attn })
}
