//! cuBLASLt FP8 matmul plans: descriptors, layouts and the chosen algorithm.

use std::ffi::c_void;

use cudarc::cublaslt::result as lt;
use cudarc::cublaslt::sys as lt_sys;

use super::{Gpu, GpuError, LT_WORKSPACE, Result, arg};

/// A cuBLASLt FP8 (e4m3 × e4m3 → bf16) matmul with its chosen algorithm.
pub struct Fp8Plan {
    pub(super) desc: lt_sys::cublasLtMatmulDesc_t,
    pub(super) a: lt_sys::cublasLtMatrixLayout_t,
    pub(super) b: lt_sys::cublasLtMatrixLayout_t,
    pub(super) c: lt_sys::cublasLtMatrixLayout_t,
    pub(super) algo: lt_sys::cublasLtMatmulAlgo_t,
}

impl Fp8Plan {
    pub(super) fn new(gpu: &Gpu, batch: usize, m: usize, n: usize, k: usize) -> Result<Self> {
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
