//! The trace set a fit replays: reading it, scaling its workload and compiling it into plans.

use std::path::Path;
use std::sync::Arc;

use engine::profiles::WorkloadScales;

use super::FitError;
use super::parallel::parallel_map;
use crate::trace::{Entry, InnerRequest, ReadOptions, Request, Trace, TraceSource};
use crate::workload::TracePlan;

/// Reads a trace set into memory (workload scales are applied per candidate).
pub fn load_traces(spec: &str) -> Result<Vec<Trace>, FitError> {
    let source: TraceSource =
        spec.parse().map_err(|e: crate::trace::TraceSourceError| FitError::Traces { spec: spec.into(), message: e.to_string() })?;
    let mut warnings = Vec::new();
    let mut out = Vec::new();
    source
        .for_each(&ReadOptions::default(), &mut warnings, |t| {
            out.push(t);
            Ok(())
        })
        .map_err(|e| FitError::Traces { spec: spec.into(), message: e.to_string() })?;
    if out.is_empty() {
        return Err(FitError::Traces { spec: spec.into(), message: "no trace".into() });
    }
    Ok(out)
}

/// The tokens per hashed block after input scaling (a whole number, at least 1), and the factor
/// it actually applies.
pub fn scaled_block(block_size: u32, isl_scale: f64) -> (u32, f64) {
    let b = ((f64::from(block_size) * isl_scale).round() as u32).max(1);
    (b, f64::from(b) / f64::from(block_size.max(1)))
}

/// A trace with its outputs, inputs and recorded times scaled. Scaling every recorded time by
/// the same factor scales every end-to-start delay and spawn offset by it and keeps cross-stream
/// order. Inputs scale with the tokens per hashed block, so every request keeps its blocks and
/// its prefix reuse; the factor is rounded to whole tokens per block.
pub fn scale_trace(t: &Trace, s: WorkloadScales) -> Trace {
    let mut t = t.clone();
    let d = s.delay_scale;
    let (bs, fi) = scaled_block(t.block_size, s.isl_scale);
    t.block_size = bs;
    let tok = |x: u64| (x as f64 * fi).round() as u64;
    t.tool_tokens = tok(t.tool_tokens);
    t.system_tokens = tok(t.system_tokens);
    let f = |r: &mut Request| {
        r.output_tokens = s.osl(r.output_tokens);
        r.input_tokens = tok(r.input_tokens).max(1);
        r.t *= d;
        r.api_time = r.api_time.map(|x| x * d);
        r.think_time = r.think_time.map(|x| x * d);
        r.ttft = r.ttft.map(|x| x * d);
    };
    for e in &mut t.requests {
        match e {
            Entry::NonStreaming(r) | Entry::Streaming(r) => f(r),
            Entry::Subagent(sa) => {
                sa.t *= d;
                sa.duration_ms = sa.duration_ms.map(|x| x * d);
                for ir in &mut sa.requests {
                    match ir {
                        InnerRequest::NonStreaming(r) | InnerRequest::Streaming(r) => f(r),
                    }
                }
            }
        }
    }
    t
}

/// Compiles one trace for replay with workload scales applied; the delay cap bounds each
/// compiled end-to-start delay (a cap on recorded time would move later turns of other streams).
pub fn compile_one(t: &Trace, s: WorkloadScales, seed: u64) -> Result<TracePlan, FitError> {
    let mut p = if s.is_identity() { TracePlan::build(t, seed) } else { TracePlan::build(&scale_trace(t, s), seed) }
        .map_err(|e| FitError::Plan(e.to_string()))?;
    if let Some(cap) = s.delay_cap_s {
        let cap_ns = (cap.max(0.0) * 1e9).round() as u64;
        for st in &mut p.streams {
            for turn in &mut st.turns {
                turn.delay_ns = turn.delay_ns.min(cap_ns);
            }
        }
    }
    Ok(p)
}

/// Reads and compiles a trace set as recorded, keeping only the compact plans: the published
/// corpus is 1.8 GB of JSON whose hash ids alone take 2.7 GB as traces, its plans a few hundred
/// MB. A Weka JSONL file is parsed and compiled `jobs` lines at a time in parallel (parsing is
/// most of a load); plans keep file order. Returns the plans and how many traces were read.
pub fn load_pool(spec: &str, seed: u64, jobs: usize) -> Result<(Vec<Arc<TracePlan>>, usize), FitError> {
    let bad = |message: String| FitError::Traces { spec: spec.into(), message };
    let path = Path::new(spec);
    let jsonl = path.is_file() && !spec.trim_end_matches(".gz").ends_with(".json");
    let (mut pool, mut read) = (Vec::new(), 0usize);
    if jsonl && jobs > 1 {
        // The same bounded reader and unique ids as the one-at-a-time path.
        let reader = crate::trace::read::open_maybe_gz(path).map_err(|e| bad(e.to_string()))?;
        let mut records = crate::trace::lines::Records::new(reader, spec);
        let mut seen: std::collections::HashMap<Arc<str>, usize> = std::collections::HashMap::new();
        loop {
            let batch: Vec<(usize, String)> = records.by_ref().take(jobs * 2).collect::<Result<_, _>>().map_err(|e| bad(e.to_string()))?;
            if batch.is_empty() {
                break;
            }
            if read == 0 && !batch[0].1.contains("\"requests\"") {
                // Not Weka (mooncake rows are grouped across lines): the plain reader.
                return load_pool(spec, seed, 1);
            }
            let parsed = parallel_map(jobs, batch.len(), |i| {
                crate::trace::read::parse_weka(spec, batch[i].0, &batch[i].1).map(|t| TracePlan::build(&t, seed).ok())
            });
            for (p, (line, _)) in parsed.into_iter().zip(&batch) {
                read += 1;
                if let Some(p) = p.map_err(|e| bad(e.to_string()))? {
                    if let Some(first) = seen.insert(p.id.clone(), *line) {
                        let id = crate::problem::excerpt(&p.id);
                        return Err(bad(format!("{spec}:{line}: trace {id}: field `id`: repeats the id of the trace at line {first}")));
                    }
                    pool.push(Arc::new(p));
                }
            }
        }
    } else {
        let source: TraceSource = spec.parse().map_err(|e: crate::trace::TraceSourceError| bad(e.to_string()))?;
        source
            .for_each(&ReadOptions::default(), &mut Vec::new(), |t| {
                read += 1;
                if let Ok(p) = TracePlan::build(&t, seed) {
                    pool.push(Arc::new(p));
                }
                Ok(())
            })
            .map_err(|e| bad(e.to_string()))?;
    }
    if pool.is_empty() {
        return Err(bad("no trace".into()));
    }
    Ok((pool, read))
}

/// Compiles a trace set for replay with workload scales applied.
pub fn compile(traces: &[Trace], s: WorkloadScales, seed: u64) -> Vec<Arc<TracePlan>> {
    traces.iter().filter_map(|t| compile_one(t, s, seed).ok()).map(Arc::new).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The parallel reader of a JSONL pool reads as the one-at-a-time reader does: blank lines
    /// skipped, ids unique.
    #[test]
    fn the_parallel_pool_reader_skips_blank_lines_and_refuses_repeated_ids() {
        let d = tempfile::tempdir().unwrap();
        let t = |id: &str| {
            format!(
                r#"{{"id":"{id}","block_size":64,"hash_id_scope":"local","requests":[{{"t":0,"type":"s","in":640,"out":5,"hash_ids":[1,2]}}]}}"#
            )
        };
        let p = d.path().join("pool.jsonl");
        std::fs::write(&p, format!("{}\n\n\n{}\n{}\n", t("a"), t("b"), t("c"))).unwrap();
        let (pool, read) = load_pool(p.to_str().unwrap(), 42, 2).unwrap();
        assert_eq!((pool.len(), read), (3, 3));
        std::fs::write(&p, format!("{}\n{}\n\n{}\n", t("a"), t("b"), t("a"))).unwrap();
        let e = load_pool(p.to_str().unwrap(), 42, 2).unwrap_err().to_string();
        assert!(e.contains("pool.jsonl:4: trace a: field `id`: repeats the id of the trace at line 1"), "{e}");
    }
}
