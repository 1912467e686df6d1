//! Turning a `--like` plan into Weka traces: hash ids (allocated in first-seen order over the
//! session's global time order), then JSON written straight from id runs, or `Trace` values.
//!
//! A context is a short list of id runs (`start..start+len`), never a vector of ids: a 900K-token
//! request is a handful of runs, and its ids are printed by incrementing a decimal string.

use std::io::{self, Write};
use std::sync::mpsc;

use sha2::{Digest, Sha256};

use super::like::{MAIN_SHARED, Plan, PlannedRequest, PlannedSession};
use super::{Entry, InnerRequest, Request, Subagent, Trace};

const MAIN_MODEL: &str = "claude-opus-4-7";
const SUB_MODEL: &str = "claude-haiku-4-5-20251001";

type Run = (u64, u64);

/// Which request: a main turn, or inner request `q` of group `g`.
#[derive(Clone, Copy)]
enum Which {
    Main(usize),
    Inner(usize, usize),
}

/// A session's requests with their hash-id runs and think times, in file order.
struct Materialized {
    /// File order: main turns and groups interleaved by start time.
    entries: Vec<(f64, Option<usize>, usize)>,
    runs: Vec<Run>,
    /// Per main turn and per inner request: (offset, count) into `runs`, think time.
    main: Vec<(usize, usize, Option<f64>)>,
    inner: Vec<Vec<(usize, usize, Option<f64>)>>,
}

fn truncate(runs: &mut Vec<Run>, keep: u64) {
    let mut total: u64 = runs.iter().map(|r| r.1).sum();
    while total > keep {
        let last = runs.last_mut().expect("non-empty while total > keep");
        let cut = (total - keep).min(last.1);
        last.1 -= cut;
        total -= cut;
        if last.1 == 0 {
            runs.pop();
        }
    }
}

fn append(runs: &mut Vec<Run>, next_id: &mut u64, n: u64) {
    if n == 0 {
        return;
    }
    match runs.last_mut() {
        Some(last) if last.0 + last.1 == *next_id => last.1 += n,
        _ => runs.push((*next_id, n)),
    }
    *next_id += n;
}

fn materialize(s: &PlannedSession) -> Materialized {
    // File order: entries by start time; a main turn before a group spawned at the same instant.
    let mut entries: Vec<(f64, Option<usize>, usize)> = s.main.iter().enumerate().map(|(k, r)| (r.t, None, k)).collect();
    entries.extend(s.groups.iter().enumerate().map(|(g, gr)| (gr.inner[0].t, Some(g), 0)));
    entries.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.is_some().cmp(&b.1.is_some())));
    // Every request in file order, then a stable sort by start: the order the cache walk uses.
    let mut order: Vec<(f64, Which)> = Vec::new();
    for &(_, g, k) in &entries {
        match g {
            None => order.push((s.main[k].t, Which::Main(k))),
            Some(g) => order.extend(s.groups[g].inner.iter().enumerate().map(|(q, r)| (r.t, Which::Inner(g, q)))),
        }
    }
    order.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut m = Materialized {
        entries,
        runs: Vec::new(),
        main: vec![(0, 0, None); s.main.len()],
        inner: s.groups.iter().map(|g| vec![(0, 0, None); g.inner.len()]).collect(),
    };
    let mut next_id = 0u64;
    let mut main_ctx: Vec<Run> = Vec::new();
    let mut group_ctx: Vec<Vec<Run>> = vec![Vec::new(); s.groups.len()];
    let mut sub_prefix: Option<Run> = None;
    let mut prev_end: Option<f64> = None;
    for &(_, w) in &order {
        let (req, ctx): (&PlannedRequest, &mut Vec<Run>) = match w {
            Which::Main(k) => (&s.main[k], &mut main_ctx),
            Which::Inner(g, q) => (&s.groups[g].inner[q], &mut group_ctx[g]),
        };
        let first = match w {
            Which::Main(k) => k == 0,
            Which::Inner(_, q) => q == 0,
        };
        let blocks = req.blocks as u64;
        if first {
            ctx.clear();
            if let Which::Inner(..) = w {
                // The common system prefix, then the subagents' own prompt, shared by the groups.
                ctx.push((0, MAIN_SHARED as u64));
                let pre = *sub_prefix.get_or_insert_with(|| {
                    let r = (next_id, s.sub_prefix_blocks as u64);
                    next_id += r.1;
                    r
                });
                if pre.1 > 0 {
                    ctx.push(pre);
                }
            }
        } else {
            let have: u64 = ctx.iter().map(|r| r.1).sum();
            truncate(ctx, have - (req.rewrite as u64).min(have));
        }
        let have: u64 = ctx.iter().map(|r| r.1).sum();
        append(ctx, &mut next_id, blocks.saturating_sub(have));
        let off = m.runs.len();
        m.runs.extend_from_slice(ctx);
        let think = prev_end.map(|e| ((req.t - e).max(0.0) * 1000.0).round() / 1000.0);
        prev_end = Some(req.t + req.api);
        let slot = (off, ctx.len(), think);
        match w {
            Which::Main(k) => m.main[k] = slot,
            Which::Inner(g, q) => m.inner[g][q] = slot,
        }
    }
    m
}

fn trace_id(seed: u64, index: usize) -> String {
    let mut h = Sha256::new();
    h.update(b"sweep-like-trace");
    h.update(seed.to_le_bytes());
    h.update((index as u64).to_le_bytes());
    hex::encode(h.finalize())[..36].to_string()
}

fn agent_id(trace: &str, g: usize) -> String {
    format!("subagent_{:03}_{}", g + 1, &trace[28..36])
}

fn ttft(r: &PlannedRequest) -> f64 {
    (((0.4 + r.blocks as f64 * 64.0 / 120_000.0).min(r.api)) * 1000.0).round() / 1000.0
}

/// The session as a `Trace` (tests; the writer prints the same thing without building it).
pub fn to_trace(plan: &Plan, index: usize) -> Trace {
    let s = &plan.sessions[index];
    let m = materialize(s);
    let id = trace_id(plan.seed, index);
    let ids = |off: usize, n: usize| m.runs[off..off + n].iter().flat_map(|&(a, l)| a..a + l).collect::<Vec<u64>>();
    let req = |r: &PlannedRequest, slot: (usize, usize, Option<f64>), model: &str, main: bool| Request {
        t: r.t,
        model: model.into(),
        input_tokens: r.blocks as u64 * 64,
        output_tokens: r.out as u64,
        hash_ids: ids(slot.0, slot.1),
        api_time: Some(r.api),
        think_time: slot.2,
        ttft: main.then(|| ttft(r)),
        input_types: None,
        output_types: None,
        stop: None,
    };
    let requests = m
        .entries
        .iter()
        .map(|&(_, g, k)| match g {
            None => Entry::Streaming(req(&s.main[k], m.main[k], MAIN_MODEL, true)),
            Some(g) => {
                let inner = &s.groups[g].inner;
                let last = inner.last().expect("non-empty");
                Entry::Subagent(Subagent {
                    t: inner[0].t,
                    agent_id: agent_id(&id, g),
                    subagent_type: "Subagent".into(),
                    duration_ms: Some(((last.t + last.api - inner[0].t) * 1000.0).round()),
                    total_tokens: Some(inner.iter().map(|r| r.blocks as u64 * 64 + r.out as u64).sum()),
                    tool_use_count: None,
                    status: Some("completed".into()),
                    models: vec![SUB_MODEL.into()],
                    requests: inner
                        .iter()
                        .enumerate()
                        .map(|(q, r)| InnerRequest::NonStreaming(req(r, m.inner[g][q], SUB_MODEL, false)))
                        .collect(),
                    tool_tokens: 0,
                    system_tokens: 0,
                })
            }
        })
        .collect();
    let mut models = vec![MAIN_MODEL.to_string()];
    if !s.groups.is_empty() {
        models.insert(0, SUB_MODEL.to_string());
    }
    Trace { id, models, block_size: 64, hash_id_scope: "local".into(), tool_tokens: 0, system_tokens: 0, requests, totals: None }
}

/// Print `start..start+len` as comma-separated decimals by incrementing the digits in place.
fn push_run(out: &mut Vec<u8>, start: u64, len: u64, first: &mut bool) {
    if len == 0 {
        return;
    }
    let mut digits = [b'0'; 21];
    let mut pos = 21;
    let mut n = start;
    loop {
        pos -= 1;
        digits[pos] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.reserve(len as usize * (22 - pos));
    for _ in 0..len {
        if !*first {
            out.push(b',');
        }
        *first = false;
        out.extend_from_slice(&digits[pos..]);
        let mut i = 20;
        loop {
            if digits[i] == b'9' {
                digits[i] = b'0';
                if i == pos {
                    pos -= 1;
                    digits[pos] = b'1';
                    break;
                }
                i -= 1;
            } else {
                digits[i] += 1;
                break;
            }
        }
    }
}

fn push_f64(out: &mut Vec<u8>, v: f64) {
    serde_json::to_writer(&mut *out, &v).expect("writing to memory");
}

fn push_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(v.to_string().as_bytes());
}

fn push_request(out: &mut Vec<u8>, m: &Materialized, r: &PlannedRequest, slot: (usize, usize, Option<f64>), model: &str, main: bool) {
    // The converter's key order: t, model, in, out, hash_ids, api_time, think_time, type, ttft.
    out.extend_from_slice(b"{\"t\":");
    push_f64(out, r.t);
    out.extend_from_slice(b",\"model\":\"");
    out.extend_from_slice(model.as_bytes());
    out.extend_from_slice(b"\",\"in\":");
    push_u64(out, r.blocks as u64 * 64);
    out.extend_from_slice(b",\"out\":");
    push_u64(out, r.out as u64);
    out.extend_from_slice(b",\"hash_ids\":[");
    let mut first = true;
    for &(a, l) in &m.runs[slot.0..slot.0 + slot.1] {
        push_run(out, a, l, &mut first);
    }
    out.extend_from_slice(b"],\"api_time\":");
    push_f64(out, r.api);
    if let Some(th) = slot.2 {
        out.extend_from_slice(b",\"think_time\":");
        push_f64(out, th);
    }
    if main {
        out.extend_from_slice(b",\"type\":\"s\",\"ttft\":");
        push_f64(out, ttft(r));
        out.push(b'}');
    } else {
        out.extend_from_slice(b",\"type\":\"n\"}");
    }
}

/// Write session `index` as one JSON line; `flush_at` bounds the buffer between writes.
pub fn write_session(plan: &Plan, index: usize, w: &mut dyn Write, buf: &mut Vec<u8>) -> io::Result<()> {
    const FLUSH_AT: usize = 8 << 20;
    let s = &plan.sessions[index];
    let m = materialize(s);
    let id = trace_id(plan.seed, index);
    buf.clear();
    buf.extend_from_slice(b"{\"id\":\"");
    buf.extend_from_slice(id.as_bytes());
    buf.extend_from_slice(if s.groups.is_empty() {
        b"\",\"models\":[\"claude-opus-4-7\"]".as_slice()
    } else {
        b"\",\"models\":[\"claude-haiku-4-5-20251001\",\"claude-opus-4-7\"]".as_slice()
    });
    buf.extend_from_slice(b",\"block_size\":64,\"hash_id_scope\":\"local\",\"requests\":[");
    for (e, &(_, g, k)) in m.entries.iter().enumerate() {
        if e > 0 {
            buf.push(b',');
        }
        match g {
            None => push_request(buf, &m, &s.main[k], m.main[k], MAIN_MODEL, true),
            Some(g) => {
                let inner = &s.groups[g].inner;
                let last = inner.last().expect("non-empty");
                buf.extend_from_slice(b"{\"t\":");
                push_f64(buf, inner[0].t);
                buf.extend_from_slice(b",\"type\":\"subagent\",\"agent_id\":\"");
                buf.extend_from_slice(agent_id(&id, g).as_bytes());
                buf.extend_from_slice(b"\",\"subagent_type\":\"Subagent\",\"duration_ms\":");
                push_f64(buf, ((last.t + last.api - inner[0].t) * 1000.0).round());
                buf.extend_from_slice(b",\"total_tokens\":");
                push_u64(buf, inner.iter().map(|r| r.blocks as u64 * 64 + r.out as u64).sum());
                buf.extend_from_slice(
                    b",\"tool_use_count\":null,\"status\":\"completed\",\"models\":[\"claude-haiku-4-5-20251001\"],\"requests\":[",
                );
                for (q, r) in inner.iter().enumerate() {
                    if q > 0 {
                        buf.push(b',');
                    }
                    push_request(buf, &m, r, m.inner[g][q], SUB_MODEL, false);
                    if buf.len() >= FLUSH_AT {
                        w.write_all(buf)?;
                        buf.clear();
                    }
                }
                buf.extend_from_slice(b"]}");
            }
        }
        if buf.len() >= FLUSH_AT {
            w.write_all(buf)?;
            buf.clear();
        }
    }
    buf.extend_from_slice(b"]}\n");
    w.write_all(buf)?;
    buf.clear();
    Ok(())
}

/// Write every session of the plan, in order.
pub fn write_jsonl(plan: &Plan, w: &mut dyn Write) -> io::Result<()> {
    let mut buf = Vec::with_capacity(9 << 20);
    for i in 0..plan.sessions.len() {
        write_session(plan, i, w, &mut buf)?;
    }
    w.flush()
}

/// A chunk to compress and where its gzip member goes back.
type GzJob = (Vec<u8>, mpsc::SyncSender<io::Result<Vec<u8>>>);

/// Gzip on worker threads: the stream is cut into chunks, each compressed as its own gzip
/// member (readers decode concatenated members as one stream), written back in order.
pub struct ParallelGz<W: Write> {
    inner: W,
    chunk: Vec<u8>,
    jobs: Option<mpsc::SyncSender<GzJob>>,
    pending: std::collections::VecDeque<mpsc::Receiver<io::Result<Vec<u8>>>>,
    workers: Vec<std::thread::JoinHandle<()>>,
    threads: usize,
}

const GZ_CHUNK: usize = 4 << 20;

impl<W: Write> ParallelGz<W> {
    pub fn new(inner: W, threads: usize) -> Self {
        let threads = threads.max(1);
        let (tx, rx) = mpsc::sync_channel::<GzJob>(threads);
        let rx = std::sync::Arc::new(std::sync::Mutex::new(rx));
        let workers = (0..threads)
            .map(|_| {
                let rx = rx.clone();
                std::thread::spawn(move || {
                    loop {
                        let job = rx.lock().expect("job queue").recv();
                        let Ok((data, reply)) = job else { break };
                        let mut gz = flate2::write::GzEncoder::new(Vec::with_capacity(data.len() / 4), flate2::Compression::fast());
                        let res = gz.write_all(&data).and_then(|_| gz.finish());
                        let _ = reply.send(res);
                    }
                })
            })
            .collect();
        Self { inner, chunk: Vec::with_capacity(GZ_CHUNK), jobs: Some(tx), pending: Default::default(), workers, threads }
    }

    fn submit(&mut self) -> io::Result<()> {
        if self.chunk.is_empty() {
            return Ok(());
        }
        let data = std::mem::replace(&mut self.chunk, Vec::with_capacity(GZ_CHUNK));
        let (tx, rx) = mpsc::sync_channel(1);
        self.jobs.as_ref().expect("open").send((data, tx)).map_err(|_| io::Error::other("gzip worker stopped"))?;
        self.pending.push_back(rx);
        // Bounded memory: at most two chunks per worker in flight.
        while self.pending.len() > 2 * self.threads {
            self.drain_one()?;
        }
        Ok(())
    }

    fn drain_one(&mut self) -> io::Result<()> {
        if let Some(rx) = self.pending.pop_front() {
            let bytes = rx.recv().map_err(|_| io::Error::other("gzip worker stopped"))??;
            self.inner.write_all(&bytes)?;
        }
        Ok(())
    }

    /// Compress what is left, wait for the workers and return the inner writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.submit()?;
        while !self.pending.is_empty() {
            self.drain_one()?;
        }
        self.jobs = None;
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
        self.inner.flush()?;
        Ok(self.inner)
    }
}

impl<W: Write> Write for ParallelGz<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let room = GZ_CHUNK - self.chunk.len();
        let n = data.len().min(room);
        self.chunk.extend_from_slice(&data[..n]);
        if self.chunk.len() >= GZ_CHUNK {
            self.submit()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_print_as_decimal_sequences() {
        let mut out = Vec::new();
        let mut first = true;
        push_run(&mut out, 7, 5, &mut first);
        push_run(&mut out, 98, 4, &mut first);
        push_run(&mut out, 999, 2, &mut first);
        assert_eq!(String::from_utf8(out).unwrap(), "7,8,9,10,11,98,99,100,101,999,1000");
    }

    #[test]
    fn truncate_and_append_keep_runs_compact() {
        let mut runs = vec![(0, 10)];
        let mut next = 10;
        append(&mut runs, &mut next, 5);
        assert_eq!(runs, vec![(0, 15)]);
        truncate(&mut runs, 12);
        append(&mut runs, &mut next, 4);
        assert_eq!(runs, vec![(0, 12), (15, 4)]);
        truncate(&mut runs, 3);
        assert_eq!(runs, vec![(0, 3)]);
    }

    #[test]
    fn parallel_gzip_members_decode_as_one_stream() {
        let data: Vec<u8> = (0..(GZ_CHUNK * 2 + 12345)).map(|i| (i % 251) as u8).collect();
        let mut gz = ParallelGz::new(Vec::new(), 2);
        gz.write_all(&data).unwrap();
        let bytes = gz.finish().unwrap();
        let mut back = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::MultiGzDecoder::new(&bytes[..]), &mut back).unwrap();
        assert_eq!(back, data);
    }
}

#[cfg(test)]
mod corpus_tests {
    use super::*;
    use crate::trace::against::{CorpusMeasure, compare};
    use crate::trace::published::PublishedStats;
    use crate::trace::read::{ReadOptions, read_traces};

    fn stats(text: &str) -> PublishedStats {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.stats.yaml");
        std::fs::write(&p, text).unwrap();
        PublishedStats::load(&p).unwrap()
    }

    const SMALL: &str = "counts: {traces: 12, main_turns: 600, subagent_groups: 20, subagent_inner_requests: 200}
filters: {min_requests_per_session: 20, max_request_input_tokens: 990016}
distributions:
  main_isl: {p50: 60000, p90: 150000}
  subagent_isl: {p50: 20000, p90: 50000}
  main_osl: {p50: 300, mean: 600, p90: 1500}
  new_prefill_tokens_per_turn: {p50: 1024, mean: 2500, p99: 30000}
  inter_turn_gap_s: {p50: 5, p90: 100, p99: 2000}
  sessions_with_subagents: 0.5
";

    #[test]
    fn a_small_like_corpus_parses_with_the_reader_and_matches_its_plan() {
        let st = stats(SMALL);
        let plan = Plan::new(&st, None, 42).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("like.jsonl");
        let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
        write_jsonl(&plan, &mut f).unwrap();
        drop(f);
        let set = read_traces(&[&path], &ReadOptions::default()).unwrap();
        assert_eq!(set.traces.len(), 12);
        for (i, t) in set.traces.iter().enumerate() {
            // The fast writer prints exactly the trace the plan describes.
            assert_eq!(t, &to_trace(&plan, i), "trace {i}");
            for r in t.all_requests() {
                assert_eq!(r.input_tokens, r.hash_ids.len() as u64 * 64, "`in` is whole 64-token blocks");
            }
            // Hash ids are numbered in first-seen order over the trace's time order.
            let mut all: Vec<_> = t.all_requests().collect();
            all.sort_by(|a, b| a.t.total_cmp(&b.t));
            let mut next = 0u64;
            for r in all {
                for &h in &r.hash_ids {
                    assert!(h <= next, "id {h} appears before {next}");
                    next = next.max(h + 1);
                }
            }
        }
        // Counts are exact and the constructed distributions are within tolerance even at this
        // size (the solved rows need the full corpus: see tests/corpus_like.rs).
        let mut m = CorpusMeasure::default();
        set.traces.iter().for_each(|t| m.add(t));
        for row in compare(&st, &m) {
            if ["counts.", "main_isl", "subagent_isl", "main_osl", "inter_turn_gap_s", "sessions_with"].iter().any(|k| row.row.contains(k))
            {
                assert!(row.pass, "{row:?}");
            }
        }
    }

    #[test]
    fn same_seed_same_corpus_other_seed_other_corpus() {
        let st = stats(SMALL);
        let a = Plan::new(&st, Some(3), 42).unwrap();
        let b = Plan::new(&st, Some(3), 42).unwrap();
        let c = Plan::new(&st, Some(3), 43).unwrap();
        assert_eq!(to_trace(&a, 1), to_trace(&b, 1));
        assert_ne!(to_trace(&a, 1), to_trace(&c, 1));
    }

    #[test]
    fn a_file_with_only_counts_still_generates() {
        let st = stats("counts: {traces: 5, main_turns: 200}\n");
        let plan = Plan::new(&st, None, 1).unwrap();
        let total: usize = plan.sessions.iter().map(|s| s.main.len()).sum();
        assert_eq!((plan.sessions.len(), total), (5, 200));
    }
}
