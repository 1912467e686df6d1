//! The device side of calibration: cudarc (driver API, cuBLAS, cuBLASLt, NVRTC).
//!
//! Every timing uses CUDA events around replays of a captured CUDA graph that holds `n` copies
//! of the operation (so launch gaps do not count, as under the serving engine's graphs), after
//! eager warm-up; the figure is the median over replays divided by `n`. Weights rotate over
//! enough copies that each operation reads them from HBM, not from the 50 MB L2.
//!
//! This file opens the device and holds its handles, kernels and buffers; the timed
//! operations are `ops.rs` (FP8 plans `fp8.rs`), the timing `timing.rs`, the checks
//! against CPU references `check.rs`.

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

mod check;
mod fp8;
mod ops;
#[cfg(test)]
mod tests;
mod timing;

pub use check::{bf16_to_f32, correctness_checks, fp8_e4m3_to_f32, rel_err};
pub use fp8::Fp8Plan;
pub use timing::median;

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
    compile_ptx_with_opts(include_str!("../kernels.cu"), opts).map_err(|e| GpuError::Nvrtc(format!("{e:?}")))
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
