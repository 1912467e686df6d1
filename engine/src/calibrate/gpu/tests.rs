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
