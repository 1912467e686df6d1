//! The device side of calibration: cudarc (driver API, cuBLAS, cuBLASLt, NVRTC).
//!
//! Every timing uses CUDA events around replays of a captured CUDA graph that holds `n` copies
//! of the operation (so launch gaps do not count, as under the serving engine's graphs), after
//! eager warm-up; the figure is the median over replays divided by `n`. Weights rotate over
//! enough copies that each operation reads them from HBM, not from the 50 MB L2.

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::cublas::result as blas;
use cudarc::cublas::sys as blas_sys;
use cudarc::cublaslt::result as lt;
use cudarc::cublaslt::sys as lt_sys;
use cudarc::driver::result as drv;
use cudarc::driver::sys as drv_sys;
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaStream, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::{CompileOptions, compile_ptx_with_opts};

use super::curves::CheckResult;

/// Errors from the device run; each names the step that failed.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    #[error("CUDA driver error during {step}: {source}")]
    Driver { step: String, source: cudarc::driver::DriverError },
    #[error("cuBLAS error during {step}: {source:?}")]
    Blas { step: String, source: cudarc::cublas::result::CublasError },
    #[error("NVRTC could not compile the calibration kernels: {0}")]
    Nvrtc(String),
    #[error("{0}")]
    Other(String),
}

pub type Result<T> = std::result::Result<T, GpuError>;

trait Ctx<T> {
    fn at(self, step: &str) -> Result<T>;
}
impl<T> Ctx<T> for std::result::Result<T, cudarc::driver::DriverError> {
    fn at(self, step: &str) -> Result<T> {
        self.map_err(|source| GpuError::Driver { step: step.to_string(), source })
    }
}
impl<T> Ctx<T> for std::result::Result<T, cudarc::cublas::result::CublasError> {
    fn at(self, step: &str) -> Result<T> {
        self.map_err(|source| GpuError::Blas { step: step.to_string(), source })
    }
}

/// A plain device allocation (cuMemAlloc), freed on drop.
pub struct DevBuf {
    pub ptr: u64,
    pub bytes: usize,
}

impl Drop for DevBuf {
    fn drop(&mut self) {
        // SAFETY: allocated by malloc_sync and not freed elsewhere.
        unsafe {
            let _ = drv::free_sync(self.ptr);
        }
    }
}

/// Kernel handles compiled from `kernels.cu`.
struct Kernels {
    _module: Arc<CudaModule>,
    fill_bf16: CudaFunction,
    fill_fp8: CudaFunction,
    empty: CudaFunction,
    rmsnorm: CudaFunction,
    add_inplace: CudaFunction,
    silu_mul: CudaFunction,
    attn_partial: CudaFunction,
    attn_combine: CudaFunction,
    rope_kv_append: CudaFunction,
    copy_kernel: CudaFunction,
}

/// The attention kernel's compile-time layout.
#[derive(Debug, Clone, Copy)]
pub struct AttnLayout {
    pub kv_heads: u32,
    pub q_per_kv: u32,
    pub head_dim: u32,
}

pub struct Gpu {
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    blas: blas_sys::cublasHandle_t,
    _blas_ws: DevBuf,
    lt: lt_sys::cublasLtHandle_t,
    lt_ws: DevBuf,
    k: Kernels,
    pub attn: AttnLayout,
    ev0: drv_sys::CUevent,
    ev1: drv_sys::CUevent,
}

const LT_WORKSPACE: usize = 64 << 20;

/// Kernel argument values, pushed in order (device pointers travel as u64).
enum Arg {
    U64(u64),
    I32(i32),
    F32(f32),
}

/// Launches `f` with `args`, which must match the kernel's signature in kernels.cu.
fn launch(f: &CudaFunction, stream: &CudaStream, grid: (u32, u32, u32), block: (u32, u32, u32), args: &[Arg]) -> Result<()> {
    let mut b = stream.launch_builder(f);
    for a in args {
        match a {
            Arg::U64(v) => b.arg(v),
            Arg::I32(v) => b.arg(v),
            Arg::F32(v) => b.arg(v),
        };
    }
    let cfg = LaunchConfig { grid_dim: grid, block_dim: block, shared_mem_bytes: 0 };
    // SAFETY: every call site passes arguments matching the kernel signature.
    unsafe { b.launch(cfg) }.at("kernel launch")?;
    Ok(())
}

fn arg<T>(v: &T) -> *mut c_void {
    v as *const T as *mut c_void
}

/// Compiles `kernels.cu` with NVRTC for compute capability `cc` (e.g. 90).
pub fn compile_kernels(attn: AttnLayout, cc: i32) -> Result<cudarc::nvrtc::Ptx> {
    let arch: &'static str = Box::leak(format!("compute_{cc}").into_boxed_str());
    let opts = CompileOptions {
        arch: Some(arch),
        options: vec![format!("-DHEAD_DIM={}", attn.head_dim), format!("-DGQA={}", attn.q_per_kv), "--use_fast_math".into()],
        ..Default::default()
    };
    compile_ptx_with_opts(include_str!("kernels.cu"), opts).map_err(|e| GpuError::Nvrtc(format!("{e:?}")))
}

impl Gpu {
    /// Opens device `ordinal`, loads cuBLAS/cuBLASLt and compiles the kernels for `attn`.
    pub fn new(ordinal: usize, attn: AttnLayout) -> Result<Self> {
        let ctx = CudaContext::new(ordinal).at("opening the device")?;
        // One stream only: cudarc's cross-stream event tracking would add work to every launch.
        // SAFETY: all work is enqueued on the single stream below.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream().at("creating a stream")?;
        let (cc_major, cc_minor) = ctx.compute_capability().at("compute capability")?;
        let ptx = compile_kernels(attn, cc_major * 10 + cc_minor)?;
        let module = ctx.load_module(ptx).at("loading the kernel module")?;
        let f = |name: &str| module.load_function(name).at(&format!("loading kernel {name}"));
        let k = Kernels {
            fill_bf16: f("fill_bf16")?,
            fill_fp8: f("fill_fp8")?,
            empty: f("empty_kernel")?,
            rmsnorm: f("rmsnorm")?,
            add_inplace: f("add_inplace")?,
            silu_mul: f("silu_mul")?,
            attn_partial: f("decode_attn_partial")?,
            attn_combine: f("decode_attn_combine")?,
            rope_kv_append: f("rope_kv_append")?,
            copy_kernel: f("copy_kernel")?,
            _module: module.clone(),
        };
        let blas_h = blas::create_handle().at("creating the cuBLAS handle")?;
        let blas_ws = Self::alloc_raw(&ctx, 64 << 20)?;
        // SAFETY: valid handle, stream and workspace that outlive the handle's use.
        unsafe {
            blas::set_stream(blas_h, stream.cu_stream() as _).at("cublasSetStream")?;
            blas_sys::cublasSetWorkspace_v2(blas_h, blas_ws.ptr as *mut c_void, blas_ws.bytes).result().at("cublasSetWorkspace")?;
        }
        let lt_h = lt::create_handle().map_err(|e| GpuError::Other(format!("cublasLtCreate: {e:?}")))?;
        let lt_ws = Self::alloc_raw(&ctx, LT_WORKSPACE)?;
        let ev0 = drv::event::create(drv_sys::CUevent_flags::CU_EVENT_DEFAULT).at("event")?;
        let ev1 = drv::event::create(drv_sys::CUevent_flags::CU_EVENT_DEFAULT).at("event")?;
        Ok(Gpu { ctx, stream, blas: blas_h, _blas_ws: blas_ws, lt: lt_h, lt_ws, k, attn, ev0, ev1 })
    }

    fn alloc_raw(ctx: &Arc<CudaContext>, bytes: usize) -> Result<DevBuf> {
        ctx.bind_to_thread().at("binding the context")?;
        // SAFETY: plain device allocation, freed by DevBuf's Drop.
        let ptr = unsafe { drv::malloc_sync(bytes.max(256)) }.at(&format!("allocating {} MiB", bytes >> 20))?;
        Ok(DevBuf { ptr, bytes })
    }

    pub fn alloc(&self, bytes: usize) -> Result<DevBuf> {
        Self::alloc_raw(&self.ctx, bytes)
    }

    pub fn sync(&self) -> Result<()> {
        self.stream.synchronize().at("stream synchronize")
    }

    /// Device name, SM count, total memory.
    pub fn describe(&self) -> Result<(String, u32, u64)> {
        let name = self.ctx.name().at("device name")?;
        let sms = self.ctx.attribute(drv_sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT).at("SM count")?;
        let mem = self.ctx.total_mem().at("total memory")?;
        Ok((name, sms as u32, mem as u64))
    }

    /// CUDA version supported by the driver ("13.0"), cuBLAS version, NVRTC version.
    pub fn versions(&self) -> Result<(String, String, String)> {
        let mut v = 0i32;
        // SAFETY: out-pointer to a local.
        unsafe { drv_sys::cuDriverGetVersion(&mut v) }.result().at("cuDriverGetVersion")?;
        let cuda = format!("{}.{}", v / 1000, (v % 1000) / 10);
        let mut bv = 0i32;
        // SAFETY: valid handle, out-pointer to a local.
        unsafe { blas_sys::cublasGetVersion_v2(self.blas, &mut bv) }.result().at("cublasGetVersion")?;
        let cublas = format!("{}.{}.{}", bv / 10000, (bv % 10000) / 100, bv % 100);
        let (mut maj, mut min) = (0i32, 0i32);
        // SAFETY: out-pointers to locals.
        unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut maj, &mut min) }
            .result()
            .map_err(|e| GpuError::Other(format!("nvrtcVersion: {e:?}")))?;
        Ok((cuda, cublas, format!("{maj}.{min}")))
    }

    // ---------------------------------------------------------------- random data

    /// Fills `n` bf16 values with uniform random numbers in [-scale, scale).
    pub fn fill_bf16(&self, buf: &DevBuf, n: usize, seed: u64, scale: f32) -> Result<()> {
        let (p, n64) = (buf.ptr, n as u64);
        launch(&self.k.fill_bf16, &self.stream, (2048, 1, 1), (256, 1, 1), &[Arg::U64(p), Arg::U64(n64), Arg::U64(seed), Arg::F32(scale)])
    }

    /// Fills `n` bytes with random non-zero, non-NaN FP8 e4m3 values.
    pub fn fill_fp8(&self, buf: &DevBuf, n: usize, seed: u64) -> Result<()> {
        let (p, n64) = (buf.ptr, n as u64);
        launch(&self.k.fill_fp8, &self.stream, (2048, 1, 1), (256, 1, 1), &[Arg::U64(p), Arg::U64(n64), Arg::U64(seed)])
    }

    pub fn memset(&self, buf: &DevBuf, byte: u8) -> Result<()> {
        // SAFETY: the range lies inside the allocation.
        unsafe { drv_sys::cuMemsetD8Async(buf.ptr, byte, buf.bytes, self.stream.cu_stream()) }.result().at("cuMemsetD8Async")
    }

    pub fn download<T: Copy + Default>(&self, buf: &DevBuf, n: usize) -> Result<Vec<T>> {
        self.sync()?;
        let mut out = vec![T::default(); n];
        // SAFETY: n elements of T fit in the buffer (callers size them so).
        unsafe { drv_sys::cuMemcpyDtoH_v2(out.as_mut_ptr() as *mut c_void, buf.ptr, n * std::mem::size_of::<T>()) }
            .result()
            .at("copy to host")?;
        Ok(out)
    }

    // ---------------------------------------------------------------- operations

    /// `Y[M,N] (bf16) = X[M,K] · W[N,K]ᵀ`, all row-major, through cublasGemmEx.
    pub fn gemm_bf16(&self, m: usize, n: usize, k: usize, w: u64, x: u64, y: u64) -> Result<()> {
        let (alpha, beta) = (1.0f32, 0.0f32);
        // Column-major view: Yᵀ[N,M] = op(W)ᵀ · Xᵀ with W seen as K×N.
        // SAFETY: buffers sized by the caller for these dimensions.
        unsafe {
            blas::gemm_ex(
                self.blas,
                blas_sys::cublasOperation_t::CUBLAS_OP_T,
                blas_sys::cublasOperation_t::CUBLAS_OP_N,
                n as i32,
                m as i32,
                k as i32,
                arg(&alpha) as *const c_void,
                w as *const c_void,
                blas_sys::cudaDataType_t::CUDA_R_16BF,
                k as i32,
                x as *const c_void,
                blas_sys::cudaDataType_t::CUDA_R_16BF,
                k as i32,
                arg(&beta) as *const c_void,
                y as *mut c_void,
                blas_sys::cudaDataType_t::CUDA_R_16BF,
                n as i32,
                blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                blas_sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .at("cublasGemmEx (bf16)")
    }

    /// `batch` independent bf16 GEMMs with strided operands (one per expert).
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_bf16_batched(&self, batch: usize, m: usize, n: usize, k: usize, w: u64, x: u64, y: u64) -> Result<()> {
        let (alpha, beta) = (1.0f32, 0.0f32);
        // SAFETY: buffers sized by the caller for `batch` strided problems.
        unsafe {
            blas::gemm_strided_batched_ex(
                self.blas,
                blas_sys::cublasOperation_t::CUBLAS_OP_T,
                blas_sys::cublasOperation_t::CUBLAS_OP_N,
                n as i32,
                m as i32,
                k as i32,
                arg(&alpha) as *const c_void,
                w as *const c_void,
                blas_sys::cudaDataType_t::CUDA_R_16BF,
                k as i32,
                (n * k) as i64,
                x as *const c_void,
                blas_sys::cudaDataType_t::CUDA_R_16BF,
                k as i32,
                (m * k) as i64,
                arg(&beta) as *const c_void,
                y as *mut c_void,
                blas_sys::cudaDataType_t::CUDA_R_16BF,
                n as i32,
                (m * n) as i64,
                batch as i32,
                blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                blas_sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .at("cublasGemmStridedBatchedEx (bf16)")
    }

    /// Plans an FP8 e4m3 GEMM (`batch` strided problems) with bf16 output through cuBLASLt.
    pub fn plan_fp8(&self, batch: usize, m: usize, n: usize, k: usize) -> Result<Fp8Plan> {
        Fp8Plan::new(self, batch, m, n, k)
    }

    /// Runs a planned FP8 GEMM.
    pub fn gemm_fp8(&self, plan: &Fp8Plan, w: u64, x: u64, y: u64) -> Result<()> {
        let (alpha, beta) = (1.0f32, 0.0f32);
        // SAFETY: the plan's layouts match the buffers the caller sized.
        unsafe {
            lt::matmul(
                self.lt,
                plan.desc,
                arg(&alpha) as *const c_void,
                arg(&beta) as *const c_void,
                w as *const c_void,
                plan.a,
                x as *const c_void,
                plan.b,
                y as *const c_void,
                plan.c,
                y as *mut c_void,
                plan.c,
                &plan.algo,
                self.lt_ws.ptr as *mut c_void,
                LT_WORKSPACE,
                self.stream.cu_stream() as _,
            )
        }
        .map_err(|e| GpuError::Other(format!("cublasLtMatmul (fp8): {e:?}")))
    }

    pub fn empty_kernel(&self) -> Result<()> {
        launch(&self.k.empty, &self.stream, (1, 1, 1), (32, 1, 1), &[])
    }

    pub fn rmsnorm(&self, rows: usize, hidden: usize, x: u64, w: u64, y: u64) -> Result<()> {
        let h = hidden as i32;
        launch(&self.k.rmsnorm, &self.stream, (rows as u32, 1, 1), (256, 1, 1), &[Arg::U64(x), Arg::U64(w), Arg::U64(y), Arg::I32(h)])
    }

    pub fn add_inplace(&self, n: usize, x: u64, y: u64) -> Result<()> {
        let n64 = n as u64;
        let blocks = n.div_ceil(256).clamp(1, 4096) as u32;
        launch(&self.k.add_inplace, &self.stream, (blocks, 1, 1), (256, 1, 1), &[Arg::U64(x), Arg::U64(y), Arg::U64(n64)])
    }

    pub fn silu_mul(&self, tokens: usize, ffn: usize, gu: u64, out: u64) -> Result<()> {
        let (t, f) = (tokens as i32, ffn as i32);
        let blocks = (tokens * ffn).div_ceil(256).clamp(1, 4096) as u32;
        launch(&self.k.silu_mul, &self.stream, (blocks, 1, 1), (256, 1, 1), &[Arg::U64(gu), Arg::U64(out), Arg::I32(t), Arg::I32(f)])
    }

    /// Rotary embedding of the new token's q and k, and its k, v appended at `pos` of caches
    /// `[batch, kv_heads, ctx, head_dim]`.
    #[allow(clippy::too_many_arguments)]
    pub fn rope_kv_append(&self, batch: usize, qkv: u64, qkv_stride: usize, k: u64, v: u64, ctx: usize, pos: usize) -> Result<()> {
        launch(
            &self.k.rope_kv_append,
            &self.stream,
            (batch as u32, 1, 1),
            (256, 1, 1),
            &[
                Arg::U64(qkv),
                Arg::I32(qkv_stride as i32),
                Arg::U64(k),
                Arg::U64(v),
                Arg::I32(self.attn.kv_heads as i32),
                Arg::I32(ctx as i32),
                Arg::I32(pos as i32),
            ],
        )
    }

    /// Splits for the decode-attention kernel: about 16 blocks per SM (several waves, so the
    /// last one is short), chunks of at least 256 tokens (shorter ones spend more on the
    /// merge than they save).
    pub fn attn_splits(&self, batch: usize, ctx: usize) -> usize {
        let want_blocks: usize = 16 * 132;
        let per = batch * self.attn.kv_heads as usize;
        let by_fill = want_blocks.div_ceil(per);
        let by_chunk = ctx.div_ceil(256);
        by_fill.min(by_chunk).max(1)
    }

    /// Bytes of the split-K scratch for `batch` requests.
    pub fn attn_scratch_bytes(&self, batch: usize, splits: usize) -> usize {
        let hq = (self.attn.kv_heads * self.attn.q_per_kv) as usize;
        batch * hq * splits * (self.attn.head_dim as usize + 2) * 4
    }

    /// Decode attention: `q` rows of `q_stride` bf16 (query head h at column h·head_dim),
    /// K and V caches `[batch, kv_heads, ctx, head_dim]`; output rows of `out_stride`.
    #[allow(clippy::too_many_arguments)]
    pub fn decode_attention(
        &self,
        batch: usize,
        ctx: usize,
        q: u64,
        q_stride: usize,
        k: u64,
        v: u64,
        out: u64,
        out_stride: usize,
        scratch: u64,
        splits: usize,
    ) -> Result<()> {
        let a = self.attn;
        let hq = (a.kv_heads * a.q_per_kv) as usize;
        let chunk = ctx.div_ceil(splits) as i32;
        let partial = scratch;
        let ml = scratch + (batch * hq * splits * a.head_dim as usize * 4) as u64;
        let scale_log2 = std::f32::consts::LOG2_E / (a.head_dim as f32).sqrt();
        let (qs, hkv, c) = (q_stride as i32, a.kv_heads as i32, ctx as i32);
        launch(
            &self.k.attn_partial,
            &self.stream,
            (splits as u32, a.kv_heads, batch as u32),
            (128, 1, 1),
            &[
                Arg::U64(q),
                Arg::I32(qs),
                Arg::U64(k),
                Arg::U64(v),
                Arg::U64(partial),
                Arg::U64(ml),
                Arg::I32(hkv),
                Arg::I32(c),
                Arg::I32(chunk),
                Arg::F32(scale_log2),
            ],
        )?;
        let (os, hq32, sp) = (out_stride as i32, hq as i32, splits as i32);
        launch(
            &self.k.attn_combine,
            &self.stream,
            ((batch * hq) as u32, 1, 1),
            (a.head_dim, 1, 1),
            &[Arg::U64(partial), Arg::U64(ml), Arg::U64(out), Arg::I32(os), Arg::I32(hq32), Arg::I32(sp)],
        )
    }

    // ---------------------------------------------------------------- timing

    /// Copies `bytes` device to device.
    pub fn copy(&self, dst: u64, src: u64, bytes: usize) -> Result<()> {
        // SAFETY: both ranges lie inside their allocations.
        unsafe { drv::memcpy_dtod_async(dst, src, bytes, self.stream.cu_stream()) }.at("cuMemcpyDtoDAsync")
    }

    /// Copies `bytes` (a multiple of 16) with the SM copy kernel.
    pub fn copy_kernel(&self, dst: u64, src: u64, bytes: usize) -> Result<()> {
        let n16 = (bytes / 16) as u64;
        launch(&self.k.copy_kernel, &self.stream, (132 * 8, 1, 1), (512, 1, 1), &[Arg::U64(src), Arg::U64(dst), Arg::U64(n16)])
    }

    /// Elapsed ms of `body` enqueued once between two events.
    pub fn time_once(&self, body: &mut dyn FnMut() -> Result<()>) -> Result<f64> {
        // SAFETY: events and stream are valid for the life of self.
        unsafe { drv::event::record(self.ev0, self.stream.cu_stream()) }.at("event record")?;
        body()?;
        unsafe { drv::event::record(self.ev1, self.stream.cu_stream()) }.at("event record")?;
        unsafe { drv::event::synchronize(self.ev1) }.at("event sync")?;
        let ms = unsafe { drv::event::elapsed(self.ev0, self.ev1) }.at("event elapsed")?;
        Ok(ms as f64)
    }

    /// Median µs per operation: `op(i)` enqueued `n` times into a CUDA graph, the graph
    /// replayed `replays` times. `n` is sized from one eager run so a replay lasts about
    /// `target_ms`.
    pub fn time_graph(&self, target_ms: f64, replays: usize, op: &mut dyn FnMut(usize) -> Result<()>) -> Result<f64> {
        for i in 0..3 {
            op(i)?;
        }
        self.sync()?;
        let one = self.time_once(&mut || op(0))?;
        let n = ((target_ms / one.max(1e-3)).ceil() as usize).clamp(1, 256);
        self.graph_replay_us(n, replays, op)
    }

    /// Median µs per operation for a graph of exactly `n` operations.
    pub fn graph_replay_us(&self, n: usize, replays: usize, op: &mut dyn FnMut(usize) -> Result<()>) -> Result<f64> {
        self.stream.begin_capture(drv_sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL).at("begin graph capture")?;
        let mut captured = Ok(());
        for i in 0..n {
            captured = op(i);
            if captured.is_err() {
                break;
            }
        }
        let graph = self.stream.end_capture(drv_sys::CUgraphInstantiate_flags(0)).at("end graph capture")?;
        captured?;
        let graph = graph.ok_or_else(|| GpuError::Other("captured an empty graph".into()))?;
        graph.upload().at("graph upload")?;
        graph.launch().at("graph launch")?;
        self.sync()?;
        let mut times = Vec::with_capacity(replays);
        for _ in 0..replays {
            let ms = self.time_once(&mut || graph.launch().at("graph launch"))?;
            times.push(ms * 1e3 / n as f64);
        }
        Ok(median(&mut times))
    }
}

impl Drop for Gpu {
    fn drop(&mut self) {
        // SAFETY: handles created in new() and not destroyed elsewhere.
        unsafe {
            let _ = self.stream.synchronize();
            let _ = blas::destroy_handle(self.blas);
            let _ = lt::destroy_handle(self.lt);
            let _ = drv::event::destroy(self.ev0);
            let _ = drv::event::destroy(self.ev1);
        }
    }
}

pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

/// A cuBLASLt FP8 (e4m3 × e4m3 → bf16) matmul with its chosen algorithm.
pub struct Fp8Plan {
    desc: lt_sys::cublasLtMatmulDesc_t,
    a: lt_sys::cublasLtMatrixLayout_t,
    b: lt_sys::cublasLtMatrixLayout_t,
    c: lt_sys::cublasLtMatrixLayout_t,
    algo: lt_sys::cublasLtMatmulAlgo_t,
}

impl Fp8Plan {
    fn new(gpu: &Gpu, batch: usize, m: usize, n: usize, k: usize) -> Result<Self> {
        let e = |what: &str| {
            let what = what.to_string();
            move |err: cudarc::cublaslt::result::CublasError| GpuError::Other(format!("cuBLASLt fp8 {what} (m={m} n={n} k={k}): {err:?}"))
        };
        let desc = lt::create_matmul_desc(lt_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F, lt_sys::cudaDataType::CUDA_R_32F)
            .map_err(e("descriptor"))?;
        // Hopper FP8 needs the "TN" layout: W (K×N column-major) transposed, X not.
        let ta: i32 = 1; // CUBLAS_OP_T
        // SAFETY: attribute buffers are locals of the documented types.
        unsafe {
            lt::set_matmul_desc_attribute(
                desc,
                lt_sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSA,
                arg(&ta) as *const c_void,
                std::mem::size_of_val(&ta),
            )
            .map_err(e("transa"))?;
        }
        let layout = |ty, rows: usize, cols: usize, ld: usize, stride: usize| -> Result<_> {
            let l = lt::create_matrix_layout(ty, rows as u64, cols as u64, ld as i64).map_err(e("layout"))?;
            if batch > 1 {
                let (bc, st) = (batch as i32, stride as i64);
                // SAFETY: attribute buffers are locals of the documented types.
                unsafe {
                    lt::set_matrix_layout_attribute(
                        l,
                        lt_sys::cublasLtMatrixLayoutAttribute_t::CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                        arg(&bc) as *const c_void,
                        4,
                    )
                    .map_err(e("batch count"))?;
                    lt::set_matrix_layout_attribute(
                        l,
                        lt_sys::cublasLtMatrixLayoutAttribute_t::CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                        arg(&st) as *const c_void,
                        8,
                    )
                    .map_err(e("batch stride"))?;
                }
            }
            Ok(l)
        };
        let a = layout(lt_sys::cudaDataType::CUDA_R_8F_E4M3, k, n, k, n * k)?;
        let b = layout(lt_sys::cudaDataType::CUDA_R_8F_E4M3, k, m, k, m * k)?;
        let c = layout(lt_sys::cudaDataType::CUDA_R_16BF, n, m, n, m * n)?;
        let pref = lt::create_matmul_pref().map_err(e("preference"))?;
        let ws = LT_WORKSPACE as u64;
        // SAFETY: as above.
        let heur = unsafe {
            lt::set_matmul_pref_attribute(
                pref,
                lt_sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                arg(&ws) as *const c_void,
                8,
            )
            .map_err(e("workspace preference"))?;
            let h = lt::get_matmul_algo_heuristic(gpu.lt, desc, a, b, c, c, pref);
            let _ = lt::destroy_matmul_pref(pref);
            h.map_err(e("heuristic"))?
        };
        Ok(Fp8Plan { desc, a, b, c, algo: heur.algo })
    }
}

impl Drop for Fp8Plan {
    fn drop(&mut self) {
        // SAFETY: created in new() and destroyed once.
        unsafe {
            let _ = lt::destroy_matrix_layout(self.a);
            let _ = lt::destroy_matrix_layout(self.b);
            let _ = lt::destroy_matrix_layout(self.c);
            let _ = lt::destroy_matmul_desc(self.desc);
        }
    }
}

// ---------------------------------------------------------------- host references

/// bf16 bits → f32.
pub fn bf16_to_f32(b: u16) -> f32 {
    f32::from_bits((b as u32) << 16)
}

/// FP8 e4m3 (finite) bits → f32.
pub fn fp8_e4m3_to_f32(b: u8) -> f32 {
    let s = if b & 0x80 != 0 { -1.0 } else { 1.0 };
    let e = ((b >> 3) & 0xF) as i32;
    let m = (b & 7) as f32;
    if e == 0 { s * m / 8.0 * 2f32.powi(-6) } else { s * (1.0 + m / 8.0) * 2f32.powi(e - 7) }
}

/// ‖out − ref‖ / ‖ref‖; NaN or infinity anywhere gives infinity.
pub fn rel_err(out: &[f64], reference: &[f64]) -> f64 {
    let (mut num, mut den) = (0.0, 0.0);
    for (o, r) in out.iter().zip(reference) {
        if !o.is_finite() {
            return f64::INFINITY;
        }
        num += (o - r) * (o - r);
        den += r * r;
    }
    (num / den).sqrt()
}

/// Checks the GEMM paths and the attention kernel against float64 CPU references on fresh
/// random inputs, with outputs poisoned first so unwritten elements fail.
pub fn correctness_checks(gpu: &Gpu, seed: u64) -> Result<Vec<CheckResult>> {
    let mut out = Vec::new();
    let (m, n, k) = (96usize, 320usize, 512usize);
    let batch = 3usize;
    // bf16 GEMM and batched GEMM.
    for b in [1usize, batch] {
        let w = gpu.alloc(b * n * k * 2)?;
        let x = gpu.alloc(b * m * k * 2)?;
        let y = gpu.alloc(b * m * n * 2)?;
        gpu.fill_bf16(&w, b * n * k, seed + 1, 1.0)?;
        gpu.fill_bf16(&x, b * m * k, seed + 2, 1.0)?;
        gpu.memset(&y, 0xFF)?;
        if b == 1 {
            gpu.gemm_bf16(m, n, k, w.ptr, x.ptr, y.ptr)?;
        } else {
            gpu.gemm_bf16_batched(b, m, n, k, w.ptr, x.ptr, y.ptr)?;
        }
        let wh: Vec<u16> = gpu.download(&w, b * n * k)?;
        let xh: Vec<u16> = gpu.download(&x, b * m * k)?;
        let yh: Vec<u16> = gpu.download(&y, b * m * n)?;
        let (got, want) = gemm_ref(b, m, n, k, |i| bf16_to_f32(wh[i]), |i| bf16_to_f32(xh[i]), &yh);
        let e = rel_err(&got, &want);
        let name = if b == 1 { "gemm_bf16" } else { "gemm_bf16_batched" };
        out.push(CheckResult { name: name.into(), rel_err: e, tolerance: 1e-2, pass: e < 1e-2 });
    }
    // FP8 GEMM and batched FP8 GEMM.
    for b in [1usize, batch] {
        let w = gpu.alloc(b * n * k)?;
        let x = gpu.alloc(b * m * k)?;
        let y = gpu.alloc(b * m * n * 2)?;
        gpu.fill_fp8(&w, b * n * k, seed + 3)?;
        gpu.fill_fp8(&x, b * m * k, seed + 4)?;
        gpu.memset(&y, 0xFF)?;
        let plan = gpu.plan_fp8(b, m, n, k)?;
        gpu.gemm_fp8(&plan, w.ptr, x.ptr, y.ptr)?;
        let wh: Vec<u8> = gpu.download(&w, b * n * k)?;
        let xh: Vec<u8> = gpu.download(&x, b * m * k)?;
        let yh: Vec<u16> = gpu.download(&y, b * m * n)?;
        let (got, want) = gemm_ref(b, m, n, k, |i| fp8_e4m3_to_f32(wh[i]), |i| fp8_e4m3_to_f32(xh[i]), &yh);
        let e = rel_err(&got, &want);
        let name = if b == 1 { "gemm_fp8" } else { "gemm_fp8_batched" };
        out.push(CheckResult { name: name.into(), rel_err: e, tolerance: 1e-2, pass: e < 1e-2 });
    }
    // Decode attention with a context that leaves partial chunks.
    let a = gpu.attn;
    let (bsz, ctx) = (3usize, 1000usize);
    let (hkv, g, d) = (a.kv_heads as usize, a.q_per_kv as usize, a.head_dim as usize);
    let hq = hkv * g;
    let q = gpu.alloc(bsz * hq * d * 2)?;
    let kc = gpu.alloc(bsz * hkv * ctx * d * 2)?;
    let vc = gpu.alloc(bsz * hkv * ctx * d * 2)?;
    let o = gpu.alloc(bsz * hq * d * 2)?;
    gpu.fill_bf16(&q, bsz * hq * d, seed + 5, 1.0)?;
    gpu.fill_bf16(&kc, bsz * hkv * ctx * d, seed + 6, 1.0)?;
    gpu.fill_bf16(&vc, bsz * hkv * ctx * d, seed + 7, 1.0)?;
    gpu.memset(&o, 0xFF)?;
    let splits = gpu.attn_splits(bsz, ctx);
    let scratch = gpu.alloc(gpu.attn_scratch_bytes(bsz, splits))?;
    gpu.decode_attention(bsz, ctx, q.ptr, hq * d, kc.ptr, vc.ptr, o.ptr, hq * d, scratch.ptr, splits)?;
    let qh: Vec<u16> = gpu.download(&q, bsz * hq * d)?;
    let kh: Vec<u16> = gpu.download(&kc, bsz * hkv * ctx * d)?;
    let vh: Vec<u16> = gpu.download(&vc, bsz * hkv * ctx * d)?;
    let oh: Vec<u16> = gpu.download(&o, bsz * hq * d)?;
    let mut got = Vec::new();
    let mut want = Vec::new();
    let scale = 1.0 / (d as f64).sqrt();
    for b in 0..bsz {
        for h in 0..hq {
            let kvh = h / g;
            let base = (b * hkv + kvh) * ctx * d;
            let qrow = &qh[(b * hq + h) * d..][..d];
            let scores: Vec<f64> = (0..ctx)
                .map(|t| (0..d).map(|j| bf16_to_f32(qrow[j]) as f64 * bf16_to_f32(kh[base + t * d + j]) as f64).sum::<f64>() * scale)
                .collect();
            let mx = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let p: Vec<f64> = scores.iter().map(|s| (s - mx).exp()).collect();
            let sum: f64 = p.iter().sum();
            for j in 0..d {
                let r: f64 = (0..ctx).map(|t| p[t] * bf16_to_f32(vh[base + t * d + j]) as f64).sum::<f64>() / sum;
                want.push(r);
                got.push(bf16_to_f32(oh[(b * hq + h) * d + j]) as f64);
            }
        }
    }
    let e = rel_err(&got, &want);
    out.push(CheckResult { name: "decode_attention".into(), rel_err: e, tolerance: 1e-2, pass: e < 1e-2 });
    Ok(out)
}

/// Reference for `b` problems `Y = X·Wᵀ`; returns (device result, reference) as f64.
fn gemm_ref(b: usize, m: usize, n: usize, k: usize, w: impl Fn(usize) -> f32, x: impl Fn(usize) -> f32, y: &[u16]) -> (Vec<f64>, Vec<f64>) {
    let mut got = Vec::with_capacity(b * m * n);
    let mut want = Vec::with_capacity(b * m * n);
    for p in 0..b {
        for i in 0..m {
            for j in 0..n {
                let mut s = 0.0f64;
                for t in 0..k {
                    s += x(p * m * k + i * k + t) as f64 * w(p * n * k + j * k + t) as f64;
                }
                want.push(s);
                got.push(bf16_to_f32(y[p * m * n + i * n + j]) as f64);
            }
        }
    }
    (got, want)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fp8_decoding_matches_the_e4m3_table() {
        assert_eq!(fp8_e4m3_to_f32(0x38), 1.0); // e=7, m=0
        assert_eq!(fp8_e4m3_to_f32(0xB8), -1.0);
        assert_eq!(fp8_e4m3_to_f32(0x3C), 1.5);
        assert_eq!(fp8_e4m3_to_f32(0x20), 0.125); // e=4
        assert_eq!(fp8_e4m3_to_f32(0x7E), 448.0); // largest finite
    }

    #[test]
    fn rel_err_rejects_nan_and_measures_relative_norm() {
        assert_eq!(rel_err(&[f64::NAN], &[1.0]), f64::INFINITY);
        assert!((rel_err(&[1.1, 0.0], &[1.0, 0.0]) - 0.1).abs() < 1e-12);
    }

    /// Needs libnvrtc (CUDA 13) on the library path, no GPU: `cargo test -p engine --features
    /// cuda -- --ignored kernels_compile`.
    #[test]
    #[ignore = "needs libnvrtc.so.13 on the library path"]
    fn kernels_compile_with_nvrtc() {
        for (kv, g) in [(8, 4), (8, 8), (1, 16)] {
            let attn = AttnLayout { kv_heads: kv, q_per_kv: g, head_dim: 128 };
            let ptx = compile_kernels(attn, 90).unwrap();
            let src = ptx.to_src();
            for k in ["decode_attn_partial", "decode_attn_combine", "rope_kv_append", "copy_kernel", "fill_fp8"] {
                assert!(src.contains(k), "{k} missing from the PTX");
            }
        }
    }

    #[test]
    fn median_of_even_and_odd() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
