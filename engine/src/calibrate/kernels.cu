// Kernels for GPU calibration, compiled at run time with NVRTC.
// HEAD_DIM and GQA (query heads per KV head) are set with -D by the loader.
typedef unsigned short bf16_t;
typedef unsigned long long u64;
#define NEG_INF (__int_as_float(0xff800000))

__device__ __forceinline__ float bf2f(bf16_t h) { return __uint_as_float(((unsigned)h) << 16); }
__device__ __forceinline__ bf16_t f2bf(float f) {
    unsigned u = __float_as_uint(f);
    u += 0x7FFFu + ((u >> 16) & 1u);  // round to nearest even
    return (bf16_t)(u >> 16);
}

// Counter-based hash (splitmix64): reproducible random data from (seed, index).
__device__ __forceinline__ u64 mix64(u64 z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// Uniform in [-scale, scale).
extern "C" __global__ void fill_bf16(bf16_t* out, u64 n, u64 seed, float scale) {
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        u64 r = mix64(seed * 0x100000001B3ull + i);
        float u = (float)(r >> 40) * (1.0f / 16777216.0f);
        out[i] = f2bf((2.0f * u - 1.0f) * scale);
    }
}

// Random FP8 e4m3 with magnitudes in [1/8, 4): never NaN, never zero.
extern "C" __global__ void fill_fp8(unsigned char* out, u64 n, u64 seed) {
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        u64 r = mix64(seed * 0x100000001B3ull + i);
        unsigned s = (unsigned)(r & 1u);
        unsigned e = 4u + (unsigned)((r >> 8) % 6u);
        unsigned m = (unsigned)((r >> 16) & 7u);
        out[i] = (unsigned char)((s << 7) | (e << 3) | m);
    }
}

extern "C" __global__ void empty_kernel() {}

// y = rmsnorm(x) * w, one block per row.
extern "C" __global__ void rmsnorm(const bf16_t* x, const bf16_t* w, bf16_t* y, int hidden) {
    const bf16_t* row = x + (u64)blockIdx.x * hidden;
    bf16_t* out = y + (u64)blockIdx.x * hidden;
    float ss = 0.f;
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) { float v = bf2f(row[i]); ss += v * v; }
    __shared__ float red[32];
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = ss;
    __syncthreads();
    if (threadIdx.x < 32) {
        float v = threadIdx.x < (blockDim.x >> 5) ? red[threadIdx.x] : 0.f;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (threadIdx.x == 0) red[0] = v;
    }
    __syncthreads();
    float inv = rsqrtf(red[0] / hidden + 1e-6f);
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) out[i] = f2bf(bf2f(row[i]) * inv * bf2f(w[i]));
}

// x += y (residual add).
extern "C" __global__ void add_inplace(bf16_t* x, const bf16_t* y, u64 n) {
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x)
        x[i] = f2bf(bf2f(x[i]) + bf2f(y[i]));
}

// out[t, j] = silu(gu[t, j]) * gu[t, ffn + j].
extern "C" __global__ void silu_mul(const bf16_t* gu, bf16_t* out, int tokens, int ffn) {
    u64 n = (u64)tokens * ffn;
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) {
        u64 t = i / ffn, j = i % ffn;
        float g = bf2f(gu[t * 2 * ffn + j]);
        float u = bf2f(gu[t * 2 * ffn + ffn + j]);
        out[i] = f2bf(g / (1.f + __expf(-g)) * u);
    }
}

// Split-K decode attention (flash-decoding) for one new token per request.
// q: [B, q_stride] with head h at q + b*q_stride + h*HEAD_DIM;
// k, v: [B, Hkv, ctx, HEAD_DIM] contiguous per (request, KV head);
// partial: [B, Hq, splits, HEAD_DIM] unnormalised sums, ml: [B, Hq, splits, 2] (max, sum) in log2 units.
// Block = 128 threads = 8 half-warps; each half-warp owns one token at a time, each lane 8 dims (16 B).
#define HALVES 8
#define TOK 4
extern "C" __global__ void __launch_bounds__(128) decode_attn_partial(
    const bf16_t* __restrict__ q, int q_stride, const bf16_t* __restrict__ k, const bf16_t* __restrict__ v,
    float* __restrict__ partial, float* __restrict__ ml, int hkv, int ctx, int chunk, float scale_log2) {
    const int split = blockIdx.x, kvh = blockIdx.y, b = blockIdx.z, splits = gridDim.x;
    const int lane = threadIdx.x & 15, half = threadIdx.x >> 4;
    const int hq = hkv * GQA;
    // The two half-warps of a warp may run different token counts: shuffle within the half only.
    const unsigned hmask = 0xFFFFu << (threadIdx.x & 16);
    float qr[GQA][8];
#pragma unroll
    for (int g = 0; g < GQA; g++) {
        const uint4 raw = *reinterpret_cast<const uint4*>(q + (u64)b * q_stride + (kvh * GQA + g) * HEAD_DIM + lane * 8);
        const bf16_t* h = reinterpret_cast<const bf16_t*>(&raw);
#pragma unroll
        for (int j = 0; j < 8; j++) qr[g][j] = bf2f(h[j]) * scale_log2;
    }
    float m[GQA], l[GQA], acc[GQA][8];
#pragma unroll
    for (int g = 0; g < GQA; g++) { m[g] = NEG_INF; l[g] = 0.f;
#pragma unroll
        for (int j = 0; j < 8; j++) acc[g][j] = 0.f; }
    const u64 base = ((u64)b * hkv + kvh) * (u64)ctx * HEAD_DIM;
    const int t0 = split * chunk, t1 = min(ctx, t0 + chunk);
    // TOK tokens per half-warp per iteration: 2·TOK 16-byte loads in flight per lane, TOK·GQA
    // independent dot-product reductions, and one softmax rescale per TOK tokens.
    for (int t = t0 + half; t < t1; t += TOK * HALVES) {
        uint4 kr[TOK], vr[TOK];
#pragma unroll
        for (int u = 0; u < TOK; u++) {
            const int tt = t + u * HALVES;
            if (tt < t1) {
                kr[u] = *reinterpret_cast<const uint4*>(k + base + (u64)tt * HEAD_DIM + lane * 8);
                vr[u] = *reinterpret_cast<const uint4*>(v + base + (u64)tt * HEAD_DIM + lane * 8);
            } else {
                kr[u] = make_uint4(0, 0, 0, 0);
                vr[u] = kr[u];
            }
        }
        float sc[TOK][GQA];
#pragma unroll
        for (int u = 0; u < TOK; u++) {
            const bf16_t* kh = reinterpret_cast<const bf16_t*>(&kr[u]);
            float kf[8];
#pragma unroll
            for (int j = 0; j < 8; j++) kf[j] = bf2f(kh[j]);
#pragma unroll
            for (int g = 0; g < GQA; g++) {
                float a = 0.f;
#pragma unroll
                for (int j = 0; j < 8; j++) a += qr[g][j] * kf[j];
                sc[u][g] = a;
            }
        }
#pragma unroll
        for (int o = 8; o > 0; o >>= 1) {
#pragma unroll
            for (int u = 0; u < TOK; u++) {
#pragma unroll
                for (int g = 0; g < GQA; g++) sc[u][g] += __shfl_xor_sync(hmask, sc[u][g], o);
            }
        }
#pragma unroll
        for (int u = 1; u < TOK; u++) {
            if (t + u * HALVES >= t1) {
#pragma unroll
                for (int g = 0; g < GQA; g++) sc[u][g] = NEG_INF;
            }
        }
#pragma unroll
        for (int g = 0; g < GQA; g++) {
            float mn = m[g];
#pragma unroll
            for (int u = 0; u < TOK; u++) mn = fmaxf(mn, sc[u][g]);
            const float corr = exp2f(m[g] - mn);
            float p[TOK], psum = 0.f;
#pragma unroll
            for (int u = 0; u < TOK; u++) { p[u] = exp2f(sc[u][g] - mn); psum += p[u]; }
            l[g] = l[g] * corr + psum;
#pragma unroll
            for (int j = 0; j < 8; j++) {
                float a = acc[g][j] * corr;
#pragma unroll
                for (int u = 0; u < TOK; u++) a += p[u] * bf2f(reinterpret_cast<const bf16_t*>(&vr[u])[j]);
                acc[g][j] = a;
            }
            m[g] = mn;
        }
    }
    // Merge the 8 half-warps through shared memory.
    __shared__ float sm_m[HALVES][GQA], sm_l[HALVES][GQA];
    __shared__ float sm_acc[HALVES][GQA][HEAD_DIM];
#pragma unroll
    for (int g = 0; g < GQA; g++) {
        if (lane == 0) { sm_m[half][g] = m[g]; sm_l[half][g] = l[g]; }
#pragma unroll
        for (int j = 0; j < 8; j++) sm_acc[half][g][lane * 8 + j] = acc[g][j];
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < GQA * HEAD_DIM; idx += blockDim.x) {
        const int g = idx / HEAD_DIM, d = idx % HEAD_DIM;
        float mm = NEG_INF;
        for (int h = 0; h < HALVES; h++) mm = fmaxf(mm, sm_m[h][g]);
        float ll = 0.f, aa = 0.f;
        if (mm != NEG_INF) {
            for (int h = 0; h < HALVES; h++) {
                const float w = exp2f(sm_m[h][g] - mm);
                ll += sm_l[h][g] * w;
                aa += sm_acc[h][g][d] * w;
            }
        }
        const u64 row = ((u64)b * hq + kvh * GQA + g) * splits + split;
        partial[row * HEAD_DIM + d] = aa;
        if (d == 0) { ml[row * 2] = mm; ml[row * 2 + 1] = ll; }
    }
}

// Combine the splits: out[b, h*HEAD_DIM + d] = sum_s a_s 2^(m_s - M) / sum_s l_s 2^(m_s - M).
extern "C" __global__ void decode_attn_combine(const float* partial, const float* ml, bf16_t* out, int out_stride,
                                               int hq, int splits) {
    const int bh = blockIdx.x, b = bh / hq, h = bh % hq, d = threadIdx.x;
    float mm = NEG_INF;
    for (int s = 0; s < splits; s++) mm = fmaxf(mm, ml[((u64)bh * splits + s) * 2]);
    float ll = 0.f, aa = 0.f;
    for (int s = 0; s < splits; s++) {
        const u64 row = (u64)bh * splits + s;
        const float w = exp2f(ml[row * 2] - mm);
        ll += ml[row * 2 + 1] * w;
        aa += partial[row * HEAD_DIM + d] * w;
    }
    out[(u64)b * out_stride + h * HEAD_DIM + d] = f2bf(aa / ll);
}

// Decode step: rotary embedding on the new token's q and k (in place in the fused qkv row),
// then append its k and v to the cache at position pos. One block per request, one thread per
// rotary pair of one head. qkv row: [q heads | k heads | v heads], each HEAD_DIM wide.
extern "C" __global__ void rope_kv_append(bf16_t* qkv, int qkv_stride, bf16_t* k_cache, bf16_t* v_cache,
                                          int hkv, int ctx, int pos) {
    const int b = blockIdx.x, hq = hkv * GQA, half = HEAD_DIM / 2;
    bf16_t* row = qkv + (u64)b * qkv_stride;
    for (int idx = threadIdx.x; idx < (hq + hkv) * half; idx += blockDim.x) {
        const int h = idx / half, i = idx % half;
        const float freq = exp2f(-(float)i / half * 19.93156857f);  // theta = 1e6 (log2 = 19.93)
        float sn, cs;
        __sincosf(pos * freq, &sn, &cs);
        bf16_t* x = row + h * HEAD_DIM;
        const float a = bf2f(x[i]), c = bf2f(x[i + half]);
        const bf16_t ra = f2bf(a * cs - c * sn), rc = f2bf(c * cs + a * sn);
        x[i] = ra; x[i + half] = rc;
        if (h >= hq) {
            const int kvh = h - hq;
            const u64 dst = (((u64)b * hkv + kvh) * ctx + pos) * HEAD_DIM;
            k_cache[dst + i] = ra; k_cache[dst + i + half] = rc;
            const bf16_t* vrow = row + (hq + hkv + kvh) * HEAD_DIM;
            v_cache[dst + i] = vrow[i]; v_cache[dst + i + half] = vrow[i + half];
        }
    }
}

// Device-to-device copy by the SMs (16-byte accesses, four in flight per thread): the
// bandwidth kernels see, as opposed to the copy engines a memcpy in a graph may use.
extern "C" __global__ void copy_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst, u64 n16) {
    const u64 stride = (u64)gridDim.x * blockDim.x;
    u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x;
    for (; i + 3 * stride < n16; i += 4 * stride) {
        const uint4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
        dst[i] = a; dst[i + stride] = b; dst[i + 2 * stride] = c; dst[i + 3 * stride] = d;
    }
    for (; i < n16; i += stride) dst[i] = src[i];
}
