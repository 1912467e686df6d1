//! `sweep calibrate report`: a measured profile's ceilings and curves as Markdown, next to the
//! datasheet and the peer run.

use anyhow::{Context, Result};
use engine::GpuSpec;
use engine::calibrate::Dtype;
use engine::calibrate::curves::MeasuredCurves;
use engine::profiles::Datasheet;

use super::{ReportArgs, load_profile};
use harness::problem::atomic_write;

/// The profile's ceilings and curves as Markdown, next to the datasheet and the peer run.
pub fn report_markdown(g: &GpuSpec, ms: &[u64]) -> Result<String> {
    let m = g.measured.as_ref().context("profile has no measured section")?;
    let peer = m.peer.as_ref();
    let pname = peer.map_or("peer (not run)".to_string(), |p| p.name.clone());
    let mut s = format!(
        "Measured {} on {} ({} SMs), driver {}, CUDA {}, cuBLAS {}, NVRTC {}; peer: {}.\n\n",
        m.date, m.device, m.sm_count, m.driver, m.cuda_driver, m.cublas, m.nvrtc, pname
    );
    ceilings(&mut s, &g.datasheet, m, &pname);
    fitted_terms(&mut s, m);
    gemm_table(&mut s, m, &pname, ms);
    moe_table(&mut s, m, &pname, ms);
    attention_table(&mut s, m, &pname);
    if !m.prefill_attention.is_empty() {
        s.push_str(&format!(
            "\nCausal prefill attention (flash, {pname}), one layer, prefix 0.\n\n| tokens | µs | TFLOP/s |\n|---:|---:|---:|\n"
        ));
        for q in &m.prefill_attention {
            s.push_str(&format!("| {} | {:.1} | {:.0} |\n", q.tokens, q.us, q.tflops));
        }
    }
    s.push_str("\nCorrectness checks (fresh random inputs, outputs poisoned first, float64 CPU reference):");
    for c in &m.checks {
        s.push_str(&format!(" {} {:.1e}{};", c.name, c.rel_err, if c.pass { "" } else { " FAILED" }));
    }
    s.push('\n');
    Ok(s)
}

/// The ceilings table: copy bandwidth and peak GEMM rates against the datasheet and the peer.
fn ceilings(s: &mut String, ds: &Datasheet, m: &MeasuredCurves, pname: &str) {
    let peer = m.peer.as_ref();
    let peer_peak = |d: Dtype| {
        peer.and_then(|p| p.gemm.iter().filter(|c| c.dtype == d).flat_map(|c| c.points.iter().map(|q| q.tflops)).reduce(f64::max))
    };
    let opt = |v: Option<f64>| v.map_or("n/a".to_string(), |x| format!("{x:.0}"));
    s.push_str("| ceiling | datasheet | sweep (cudarc) | ratio to datasheet | ");
    s.push_str(&format!("{pname} | sweep / peer |\n|---|---:|---:|---:|---:|---:|\n"));
    let rows = [
        (
            "HBM copy, GB/s (read + write; best of SM kernel and memcpy)",
            ds.hbm_bandwidth / 1e9,
            m.copy.gbps,
            peer.map(|p| p.copy.gbps.max(p.copy.memcpy_gbps)),
        ),
        ("  SM copy kernel in a graph, GB/s", ds.hbm_bandwidth / 1e9, m.copy.kernel_gbps, peer.map(|p| p.copy.gbps)),
        ("  memcpy (eager), GB/s", ds.hbm_bandwidth / 1e9, m.copy.memcpy_gbps, peer.map(|p| p.copy.memcpy_gbps)),
        (
            "dense bf16 GEMM, best TFLOP/s over shapes and M",
            ds.flops.bf16 / 1e12,
            m.peak_tflops(Dtype::Bf16).unwrap_or(0.0),
            peer_peak(Dtype::Bf16),
        ),
        (
            "dense fp8 GEMM, best TFLOP/s over shapes and M",
            ds.flops.fp8 / 1e12,
            m.peak_tflops(Dtype::Fp8).unwrap_or(0.0),
            peer_peak(Dtype::Fp8),
        ),
    ];
    for (name, d, v, p) in rows {
        s.push_str(&format!(
            "| {name} | {d:.0} | {v:.0} | {:.2} | {} | {} |\n",
            v / d,
            opt(p),
            p.map_or("n/a".into(), |p| format!("{:.2}", v / p))
        ));
    }
}

/// The fitted roofline and per-layer terms, and the peer chain's when it was run.
fn fitted_terms(s: &mut String, m: &MeasuredCurves) {
    let f = &m.fitted;
    let peer = m.peer.as_ref();
    s.push_str(&format!(
        "\nFitted: eta_bw {:.2}, eta_flops bf16 {:.2} / fp8 {:.2}, decode-attention bandwidth {:.2} of datasheet; \
         per layer at batch 1: tau_layer {:.1} µs beyond weight streaming, elementwise kernels {:.1} µs; \
         launch: eager {:.2} µs, graph node {:.2} µs, graph replay {:.2} µs; one decode layer (batch 1, 1K context, \
         {} kernels) {:.1} µs.\n",
        f.eta_bw,
        f.eta_f_bf16,
        f.eta_f_fp8,
        f.eta_bw_attention,
        f.tau_layer_us,
        f.tau_elementwise_us,
        m.launch.eager_launch_us,
        m.launch.graph_node_us,
        m.launch.graph_launch_us,
        m.launch.layer_chain_kernels,
        m.launch.layer_chain_us
    ));
    if let Some((pl, pf)) = peer.and_then(|p| p.layer.zip(p.fitted)) {
        s.push_str(&format!(
            "\nPeer chain, one layer as a graph: decode (batch 1, 1K context) {:.1} µs, of which {:.1} µs beyond \
             its GEMMs and attention; prefill of {} tokens {:.1} µs, elementwise traffic {:.1}× one fused pass per kernel.\n",
            pl.decode_us, pf.tau_elementwise_us, pl.prefill_tokens, pl.prefill_us, pf.elementwise_traffic
        ));
    }
}

/// Per weight shape and M in `ms`: the GEMM's time and rate, and the peer's.
fn gemm_table(s: &mut String, m: &MeasuredCurves, pname: &str, ms: &[u64]) {
    let peer = m.peer.as_ref();
    s.push_str(&format!(
        "\nGEMM `Y[M,N] = X[M,K]·W[N,K]ᵀ`, µs (TFLOP/s); ratio = peer time / sweep time.\n\n\
         | weight | N×K | dtype | M | sweep µs | sweep TFLOP/s | {pname} µs | peer TFLOP/s | ratio |\n\
         |---|---|---|---:|---:|---:|---:|---:|---:|\n"
    ));
    for c in &m.gemm {
        let pc = peer.and_then(|p| p.gemm.iter().find(|q| q.n == c.n && q.k == c.k && q.dtype == c.dtype));
        for q in c.points.iter().filter(|q| ms.contains(&q.m)) {
            let pp = pc.and_then(|pc| pc.points.iter().find(|x| x.m == q.m));
            s.push_str(&format!(
                "| {} | {}×{} | {} | {} | {:.1} | {:.0} | {} | {} | {} |\n",
                c.name,
                c.n,
                c.k,
                c.dtype.as_str(),
                q.m,
                q.us,
                q.tflops,
                pp.map_or("n/a".into(), |x| format!("{:.1}", x.us)),
                pp.map_or("n/a".into(), |x| format!("{:.0}", x.tflops)),
                pp.map_or("n/a".into(), |x| format!("{:.2}", x.us / q.us))
            ));
        }
    }
}

/// The batched expert GEMMs at token counts in `ms` (nothing when none were measured).
fn moe_table(s: &mut String, m: &MeasuredCurves, pname: &str, ms: &[u64]) {
    let peer = m.peer.as_ref();
    if !m.moe.is_empty() {
        s.push_str(&format!(
            "\nBatched expert GEMM (tokens × top-k rows spread evenly over the experts hit), µs.\n\n\
             | experts | dtype | tokens | experts hit | rows each | sweep µs | weight GB/s | TFLOP/s | {pname} µs |\n\
             |---|---|---:|---:|---:|---:|---:|---:|---:|\n"
        ));
        for c in &m.moe {
            let pc = peer.and_then(|p| p.moe.iter().find(|q| q.n == c.n && q.k == c.k && q.dtype == c.dtype));
            for q in c.points.iter().filter(|q| ms.contains(&q.tokens)) {
                let pp = pc.and_then(|pc| pc.points.iter().find(|x| x.tokens == q.tokens));
                s.push_str(&format!(
                    "| {} | {} | {} | {} | {} | {:.1} | {:.0} | {:.0} | {} |\n",
                    c.name,
                    c.dtype.as_str(),
                    q.tokens,
                    q.active_experts,
                    q.rows_per_expert,
                    q.us,
                    q.weight_gbps,
                    q.tflops,
                    pp.map_or("n/a".into(), |x| format!("{:.1}", x.us))
                ));
            }
        }
    }
}

/// Decode attention per batch and context, and the peer's SDPA.
fn attention_table(s: &mut String, m: &MeasuredCurves, pname: &str) {
    let peer = m.peer.as_ref();
    if let Some(a) = &m.attention {
        let pa = peer.and_then(|p| p.attention.as_ref());
        s.push_str(&format!(
            "\nDecode attention, one layer ({} KV heads × {} query heads each × {}, bf16 KV), µs (GB/s of K + V).\n\n\
             | batch | context | KV MB | sweep split-K kernel µs | GB/s | {pname} SDPA µs | GB/s |\n\
             |---:|---:|---:|---:|---:|---:|---:|\n",
            a.kv_heads, a.q_per_kv, a.head_dim
        ));
        let mut pts = a.points.clone();
        pts.sort_by_key(|p| (p.batch, p.ctx));
        for q in pts {
            let pp = pa.and_then(|pa| pa.points.iter().find(|x| x.batch == q.batch && x.ctx == q.ctx));
            s.push_str(&format!(
                "| {} | {} | {:.0} | {:.1} | {:.0} | {} | {} |\n",
                q.batch,
                q.ctx,
                q.kv_bytes as f64 / 1e6,
                q.us,
                q.gbps,
                pp.map_or("n/a".into(), |x| format!("{:.1}", x.us)),
                pp.map_or("n/a".into(), |x| format!("{:.0}", x.gbps))
            ));
        }
    }
}

pub(super) fn report(a: ReportArgs) -> Result<()> {
    let g = load_profile(&a.profile)?;
    let md = report_markdown(&g, &a.ms)?;
    harness::out!("{md}");
    if let Some(p) = &a.markdown {
        atomic_write(p, md.as_bytes())?;
    }
    Ok(())
}
