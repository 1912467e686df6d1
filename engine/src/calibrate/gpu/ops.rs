//! The operations calibration times: bf16 and FP8 GEMMs (single and batched), the
//! elementwise kernels of a decode layer, decode attention, device copies.

use std::ffi::c_void;

use cudarc::cublas::result as blas;
use cudarc::cublas::sys as blas_sys;
use cudarc::cublaslt::result as lt;
use cudarc::driver::result as drv;

use super::{Arg, Ctx, Fp8Plan, Gpu, GpuError, LT_WORKSPACE, Result, arg, launch};

impl Gpu {
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
}
