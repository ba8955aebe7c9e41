/* cuda_ops: the per-layer kernels of the CUDA backend — embedding, fused residual-add +
 * RMSNorm, q/k/v post-processing (bias, Qwen3 q/k norm, RoPE, paged-KV write; decode steps of
 * single-token sequences do it inside the attention kernel instead, engine/cuda_attn_decode.cu),
 * SwiGLU, row gather, bitmask expansion, and the hash-based fills used for synthetic weights. */
#include "engine/cuda_impl.cuh"
#include "engine/cuda_qkv.cuh"
#include "kernels/nm_expand.h"
#include "kernels/pdl.cuh"

#include <math.h>

using sd_pdl::pdl_trigger;
using sd_pdl::pdl_wait;
using sd_pdl::sd_launch;

/* The decode step's kernels below start with pdl_wait(); pdl_trigger(); (kernels/pdl.cuh): they
 * read what the kernel before wrote, and let the next one (a GEMV whose weights can stream in
 * meanwhile) be scheduled while they run. */
#define SD_PDL_ENTRY()                                                                                       \
    do {                                                                                                     \
        pdl_wait();                                                                                          \
        pdl_trigger();                                                                                       \
    } while (0)

/* ---- reductions ---- */

/* Sum over the block; every thread gets the result. `red` holds 32 floats. */
static __device__ float block_sum(float v, float *red)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = sd_warp_sum(v);
    __syncthreads(); /* red may still be read by a previous call */
    if (lane == 0)
        red[warp] = v;
    __syncthreads();
    float s = 0.f;
    for (int i = 0; i < nw; i++)
        s += red[i];
    return s;
}

static __device__ __forceinline__ uint64_t splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static unsigned grid_for(size_t n, unsigned threads)
{
    size_t g = (n + threads - 1) / threads;
    return (unsigned)(g > 65535u * 32u ? 65535u * 32u : g);
}

/* ---- embedding ---- */

static __global__ void embed_kernel(const __nv_bfloat16 *__restrict__ embed,
                                    const int32_t *__restrict__ tokens, float *__restrict__ x, int hidden)
{
    SD_PDL_ENTRY();
    int t = blockIdx.x;
    const __nv_bfloat16 *row = embed + (size_t)tokens[t] * hidden;
    for (int i = threadIdx.x; i < hidden; i += blockDim.x)
        x[(size_t)t * hidden + i] = __bfloat162float(row[i]);
}

/* The same for rows of 16-byte units (hidden % 8 == 0, 16-byte aligned): every load of a thread
 * is issued before its first store. The step's first kernel, behind a host copy rather than a
 * PDL chain: the loop above, one L2/DRAM round trip per 256 columns, took ~8 us at hidden 4096
 * (Nsight Compute, results/2026-12-02-s14/r2); this takes one round trip. */
#define SD_EMBED_UNITS 4 /* 16-byte units per thread in flight */
static __global__ void embed8_kernel(const uint4 *__restrict__ embed, const int32_t *__restrict__ tokens,
                                     float4 *__restrict__ x, int units)
{
    SD_PDL_ENTRY();
    const int t = blockIdx.x;
    const uint4 *row = embed + (size_t)tokens[t] * units;
    float4 *out = x + (size_t)t * units * 2;
    for (int i0 = threadIdx.x; i0 < units; i0 += SD_EMBED_UNITS * blockDim.x) {
        uint4 u[SD_EMBED_UNITS];
#pragma unroll
        for (int k = 0; k < SD_EMBED_UNITS; k++) {
            const int i = i0 + k * blockDim.x;
            u[k] = i < units ? __ldg(row + i) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int k = 0; k < SD_EMBED_UNITS; k++) {
            const int i = i0 + k * blockDim.x;
            if (i >= units)
                break;
            out[2 * i] = make_float4(__uint_as_float(u[k].x << 16), __uint_as_float(u[k].x & 0xffff0000u),
                                     __uint_as_float(u[k].y << 16), __uint_as_float(u[k].y & 0xffff0000u));
            out[2 * i + 1] =
                make_float4(__uint_as_float(u[k].z << 16), __uint_as_float(u[k].z & 0xffff0000u),
                            __uint_as_float(u[k].w << 16), __uint_as_float(u[k].w & 0xffff0000u));
        }
    }
}

int sd__cu_embed(const __nv_bfloat16 *embed, const int32_t *tokens, float *x, int T, int hidden, int pdl,
                 cudaStream_t st, sd_diag *d)
{
    if (hidden % 8 == 0 && (((uintptr_t)embed | (uintptr_t)x) & 15) == 0) {
        const int units = hidden / 8, threads = units < 256 ? (units + 31) / 32 * 32 : 256;
        SD_CU(d, sd_launch(embed8_kernel, dim3(T), dim3(threads), 0, st, pdl, (const uint4 *)embed, tokens,
                           (float4 *)x, units));
        return 0;
    }
    SD_CU(d, sd_launch(embed_kernel, dim3(T), dim3(256), 0, st, pdl, embed, tokens, x, hidden));
    return 0;
}

/* ---- residual add + RMSNorm ---- */

static __global__ void add_rmsnorm_kernel(float *__restrict__ x, const float *__restrict__ y,
                                          const float *__restrict__ w, __nv_bfloat16 *__restrict__ out,
                                          int hidden, float eps)
{
    SD_PDL_ENTRY();
    __shared__ float red[32];
    float *xr = x + (size_t)blockIdx.x * hidden;
    const float *yr = y ? y + (size_t)blockIdx.x * hidden : NULL;
    float ss = 0.f;
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
        float v = xr[i];
        if (yr) {
            v += yr[i];
            xr[i] = v;
        }
        ss += v * v;
    }
    float r = rsqrtf(block_sum(ss, red) / (float)hidden + eps);
    __nv_bfloat16 *o = out + (size_t)blockIdx.x * hidden;
    for (int i = threadIdx.x; i < hidden; i += blockDim.x)
        o[i] = __float2bfloat16(xr[i] * r * w[i]);
}

/* The same for hidden % 4 == 0 and hidden <= 8 * blockDim.x (every model we serve): a thread
 * keeps its (at most two) float4 of x and of w in registers, so x is read once, w before the PDL
 * wait (weights never change during a step), and one barrier serves the sum. At batch 1 this
 * kernel sits between two linears on the step's critical path, where each dependent L2 round
 * trip counts. */
static __device__ __forceinline__ float4 f4_add(float4 a, float4 b)
{
    return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}

static __device__ __forceinline__ uint2 f4_norm_bf16(float4 v, float r, float4 w)
{
    __nv_bfloat162 lo = __floats2bfloat162_rn(v.x * r * w.x, v.y * r * w.y);
    __nv_bfloat162 hi = __floats2bfloat162_rn(v.z * r * w.z, v.w * r * w.w);
    return make_uint2(*reinterpret_cast<uint32_t *>(&lo), *reinterpret_cast<uint32_t *>(&hi));
}

static __global__ void add_rmsnorm4_kernel(float *__restrict__ x, const float *__restrict__ y,
                                           const float4 *__restrict__ w, __nv_bfloat16 *__restrict__ out,
                                           int hidden, float eps)
{
    __shared__ float red[32];
    const int n4 = hidden >> 2, i0 = threadIdx.x, i1 = threadIdx.x + blockDim.x;
    const float4 z = make_float4(0.f, 0.f, 0.f, 0.f);
    const float4 w0 = i0 < n4 ? __ldg(w + i0) : z, w1 = i1 < n4 ? __ldg(w + i1) : z;
    pdl_wait();
    pdl_trigger();
    float4 *xr = reinterpret_cast<float4 *>(x + (size_t)blockIdx.x * hidden);
    const float4 *yr = y ? reinterpret_cast<const float4 *>(y + (size_t)blockIdx.x * hidden) : NULL;
    float4 v0 = i0 < n4 ? xr[i0] : z, v1 = i1 < n4 ? xr[i1] : z;
    if (yr) {
        if (i0 < n4)
            xr[i0] = v0 = f4_add(v0, yr[i0]);
        if (i1 < n4)
            xr[i1] = v1 = f4_add(v1, yr[i1]);
    }
    float ss = v0.x * v0.x + v0.y * v0.y + v0.z * v0.z + v0.w * v0.w;
    ss += v1.x * v1.x + v1.y * v1.y + v1.z * v1.z + v1.w * v1.w;
    ss = sd_warp_sum(ss);
    const int lane = threadIdx.x & 31, nw = (blockDim.x + 31) >> 5;
    if (lane == 0)
        red[threadIdx.x >> 5] = ss;
    __syncthreads();
    const float r = rsqrtf(sd_warp_sum(lane < nw ? red[lane] : 0.f) / (float)hidden + eps);
    uint2 *o = reinterpret_cast<uint2 *>(out + (size_t)blockIdx.x * hidden);
    if (i0 < n4)
        o[i0] = f4_norm_bf16(v0, r, w0);
    if (i1 < n4)
        o[i1] = f4_norm_bf16(v1, r, w1);
}

int sd__cu_add_rmsnorm(float *x, const float *y, const float *w, __nv_bfloat16 *out, int T, int hidden,
                       float eps, int pdl, cudaStream_t st, sd_diag *d)
{
    const uintptr_t al = (uintptr_t)x | (uintptr_t)y | (uintptr_t)w | (uintptr_t)out;
    if (hidden % 4 == 0 && hidden <= 8192 && (al & 15) == 0) {
        int n4 = hidden / 4, threads = ((n4 + 1) / 2 + 31) / 32 * 32;
        SD_CU(d, sd_launch(add_rmsnorm4_kernel, dim3(T), dim3(threads), 0, st, pdl, x, y, (const float4 *)w,
                           out, hidden, eps));
        return 0;
    }
    int threads = hidden >= 4096 ? 1024 : hidden >= 1024 ? 512 : 256;
    SD_CU(d, sd_launch(add_rmsnorm_kernel, dim3(T), dim3(threads), 0, st, pdl, x, y, w, out, hidden, eps));
    return 0;
}

/* ---- q/k/v post-processing: bias, q/k RMSNorm, RoPE, KV write ---- */

#define SD_QKV_WARPS 4 /* heads per block, a warp each */

/* grid (ceil((n_heads + 2*n_kv) / SD_QKV_WARPS), T), block 32*SD_QKV_WARPS: a warp per head of a
 * token (engine/cuda_qkv.cuh, shared with the fused decode attention, which must get the same
 * bits); q heads go to q_out in fp32, k and v rows to the cache in bf16. */
template <int H> static __global__ void qkv_post_kernel(sd_cu_qkv_args a)
{
    SD_PDL_ENTRY();
    constexpr int HD = 64 * H;
    const int hh = blockIdx.x * SD_QKV_WARPS + (threadIdx.x >> 5), t = blockIdx.y, lane = threadIdx.x & 31;
    const int n_qkv = a.n_heads + 2 * a.n_kv;
    if (hh >= n_qkv) /* warp-uniform */
        return;
    const bool is_q = hh < a.n_heads, is_k = !is_q && hh < a.n_heads + a.n_kv;
    const int pos = a.tok_pos[t];
    const float *nw = is_q ? a.q_norm : is_k ? a.k_norm : NULL, *rope = is_q || is_k ? a.inv_freq : NULL;
    float x1[H], x2[H];
    sd_qkv_head<H>(a.qkv + ((size_t)t * n_qkv + hh) * HD, a.bias ? a.bias + (size_t)hh * HD : NULL, nw, rope,
                   pos, a.eps, x1, x2);
    if (is_q) {
        float *q = a.q_out + ((size_t)t * a.n_heads + hh) * HD;
#pragma unroll
        for (int j = 0; j < H; j++) {
            q[32 * j + lane] = x1[j];
            q[32 * j + lane + HD / 2] = x2[j];
        }
        return;
    }
    const int kvh = is_k ? hh - a.n_heads : hh - a.n_heads - a.n_kv;
    __nv_bfloat16 *dst = (is_k ? a.k_cache : a.v_cache) + sd_kv_row(a.block_tables, a.max_bt, a.block_size,
                                                                    a.n_kv, HD, a.tok_seq[t], pos, kvh);
#pragma unroll
    for (int j = 0; j < H; j++) {
        dst[32 * j + lane] = __float2bfloat16(x1[j]);
        dst[32 * j + lane + HD / 2] = __float2bfloat16(x2[j]);
    }
}

int sd__cu_qkv_post(const sd_cu_qkv_args *a, int pdl, cudaStream_t st, sd_diag *d)
{
    void (*k)(sd_cu_qkv_args) = a->head_dim == 64    ? qkv_post_kernel<1>
                                : a->head_dim == 128 ? qkv_post_kernel<2>
                                : a->head_dim == 256 ? qkv_post_kernel<4>
                                                     : NULL;
    if (!k)
        return sd_diag_set(d, SD_ENOTSUP, "cuda qkv post: head_dim %d (64, 128 or 256 supported)",
                           a->head_dim);
    dim3 grid((a->n_heads + 2 * a->n_kv + SD_QKV_WARPS - 1) / SD_QKV_WARPS, a->T);
    SD_CU(d, sd_launch(k, grid, dim3(32 * SD_QKV_WARPS), 0, st, pdl, *a));
    return 0;
}

/* ---- SwiGLU, row gather ---- */

static __global__ void swiglu_kernel(const float *__restrict__ gu, __nv_bfloat16 *__restrict__ out, int T,
                                     int inter)
{
    SD_PDL_ENTRY();
    size_t n = (size_t)T * inter;
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < n;
         k += (size_t)gridDim.x * blockDim.x) {
        size_t t = k / inter, i = k % inter;
        float g = gu[t * 2 * inter + i], u = gu[t * 2 * inter + inter + i];
        out[k] = __float2bfloat16(g / (1.f + expf(-g)) * u);
    }
}

int sd__cu_swiglu(const float *gu, __nv_bfloat16 *out, int T, int inter, int pdl, cudaStream_t st, sd_diag *d)
{
    SD_CU(d, sd_launch(swiglu_kernel, dim3(grid_for((size_t)T * inter, 256)), dim3(256), 0, st, pdl, gu, out,
                       T, inter));
    return 0;
}

static __global__ void gather_rows_kernel(const __nv_bfloat16 *__restrict__ in,
                                          const int32_t *__restrict__ rows, __nv_bfloat16 *__restrict__ out,
                                          int cols)
{
    SD_PDL_ENTRY();
    const __nv_bfloat16 *src = in + (size_t)rows[blockIdx.x] * cols;
    for (int i = threadIdx.x; i < cols; i += blockDim.x)
        out[(size_t)blockIdx.x * cols + i] = src[i];
}

int sd__cu_gather_rows(const __nv_bfloat16 *in, const int32_t *rows, __nv_bfloat16 *out, int R, int cols,
                       int pdl, cudaStream_t st, sd_diag *d)
{
    SD_CU(d, sd_launch(gather_rows_kernel, dim3(R), dim3(256), 0, st, pdl, in, rows, out, cols));
    return 0;
}

/* ---- bitmask expansion (prefill and large batches go through cuBLAS on the dense form) ---- */

/* One thread a mask word: its 16 values in two 16-byte loads, its 32 dense columns placed in
 * registers (kernels/nm_expand.h) and written in four. Every word of an N:M mask has 16 values, so
 * word k's start at value 16 k; values are 16-byte aligned as the SpMV kernels need them. */
static __global__ void expand_kernel(const uint4 *__restrict__ values, const uint32_t *__restrict__ mask,
                                     uint4 *__restrict__ out, size_t n_words)
{
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < n_words;
         k += (size_t)gridDim.x * blockDim.x) {
        const uint4 a = __ldg(values + 2 * k), b = __ldg(values + 2 * k + 1);
        const uint32_t v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
        uint32_t o[16];
        sd_nm_expand_word(__ldg(mask + k), v, o);
#pragma unroll
        for (int q = 0; q < 4; q++)
            out[4 * k + q] = make_uint4(o[4 * q], o[4 * q + 1], o[4 * q + 2], o[4 * q + 3]);
    }
}

/* One warp a run of 32 mask words: each lane expands its word in registers as expand_kernel does,
 * then the warp passes the run's 2 KB through shared memory and writes it 512 contiguous bytes a
 * store. expand_kernel's lanes store 16 bytes every 64 (a store instruction fills half of each
 * 32-byte sector it touches); the expansion of the 8B linears ran at about half the device's copy
 * rate (kernels/NOTES.md v31), which these stores may explain (v32: measured by `bench gemm`).
 * Lane i's quarter q sits at slot 4 i + (q ^ ((i >> 1) & 3)): conflict-free both ways. */
#define EXPAND_WARPS 8
static __global__ void __launch_bounds__(32 * EXPAND_WARPS)
    expand_warp_kernel(const uint4 *__restrict__ values, const uint32_t *__restrict__ mask,
                       uint4 *__restrict__ out, size_t n_words)
{
    __shared__ uint4 buf[EXPAND_WARPS][128];
    const int lane = threadIdx.x & 31;
    uint4 *b = buf[threadIdx.x >> 5];
    const size_t n_runs = (n_words + 31) / 32;
    for (size_t run = (size_t)blockIdx.x * EXPAND_WARPS + (threadIdx.x >> 5); run < n_runs;
         run += (size_t)gridDim.x * EXPAND_WARPS) {
        const size_t k = run * 32 + (size_t)lane;
        if (k < n_words) {
            const uint4 a = __ldg(values + 2 * k), c = __ldg(values + 2 * k + 1);
            const uint32_t v[8] = {a.x, a.y, a.z, a.w, c.x, c.y, c.z, c.w};
            uint32_t o[16];
            sd_nm_expand_word(__ldg(mask + k), v, o);
            const int f = (lane >> 1) & 3;
#pragma unroll
            for (int q = 0; q < 4; q++)
                b[4 * lane + (q ^ f)] = make_uint4(o[4 * q], o[4 * q + 1], o[4 * q + 2], o[4 * q + 3]);
        }
        __syncwarp();
        const size_t left = n_words - run * 32, chunks = 4 * (left < 32 ? left : 32);
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const int c = 32 * r + lane, i = c >> 2;
            if ((size_t)c < chunks)
                out[run * 128 + (size_t)c] = b[4 * i + ((c & 3) ^ ((i >> 1) & 3))];
        }
        __syncwarp(); /* the buffer is read before the next run writes it */
    }
}

int sd__cu_expand_bitmask(const __nv_bfloat16 *values, const uint32_t *mask, __nv_bfloat16 *out, int64_t rows,
                          int64_t cols, int warp, cudaStream_t st, sd_diag *d)
{
    size_t n_words = (size_t)rows * (size_t)(cols / 32);
    if (((uintptr_t)values & 15) || ((uintptr_t)out & 15))
        return sd_diag_set(d, SD_EINVAL, "cuda: bitmask expansion of unaligned values or scratch");
    if (warp)
        expand_warp_kernel<<<grid_for((n_words + 31) / 32, EXPAND_WARPS), 32 * EXPAND_WARPS, 0, st>>>(
            (const uint4 *)values, mask, (uint4 *)out, n_words);
    else
        expand_kernel<<<grid_for(n_words, 256), 256, 0, st>>>((const uint4 *)values, mask, (uint4 *)out,
                                                              n_words);
    SD_CU_LAUNCH(d);
    return 0;
}

/* ---- fills for synthetic weights ---- */

static __global__ void fill_uniform_bf16_kernel(__nv_bfloat16 *p, size_t n, float scale, uint64_t seed)
{
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < n;
         k += (size_t)gridDim.x * blockDim.x) {
        uint64_t r = splitmix64(seed ^ (k * 0x2545f4914f6cdd1dull));
        float u = (float)(r >> 40) * (1.f / 16777216.f); /* [0, 1) */
        p[k] = __float2bfloat16((2.f * u - 1.f) * scale);
    }
}

int sd__cu_fill_uniform_bf16(__nv_bfloat16 *p, size_t n, float scale, uint64_t seed, cudaStream_t st,
                             sd_diag *d)
{
    fill_uniform_bf16_kernel<<<grid_for(n, 256), 256, 0, st>>>(p, n, scale, seed);
    SD_CU_LAUNCH(d);
    return 0;
}

static __global__ void fill_f32_kernel(float *p, size_t n, float v)
{
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < n; k += (size_t)gridDim.x * blockDim.x)
        p[k] = v;
}

int sd__cu_fill_f32(float *p, size_t n, float v, cudaStream_t st, sd_diag *d)
{
    fill_f32_kernel<<<grid_for(n, 256), 256, 0, st>>>(p, n, v);
    SD_CU_LAUNCH(d);
    return 0;
}

/* Each group of m bits gets exactly n set, chosen by rejection from a per-word hash stream. */
static __global__ void fill_nm_mask_kernel(uint32_t *mask, size_t n_words, int n, int m, uint64_t seed)
{
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < n_words;
         k += (size_t)gridDim.x * blockDim.x) {
        uint64_t st = seed ^ (k * 0x9e3779b97f4a7c15ull);
        uint32_t word = 0;
        for (int g = 0; g < 32; g += m) {
            uint32_t bits = 0;
            for (int c = 0; c < n;) {
                st = splitmix64(st);
                int j = (int)((st >> 32) % (uint64_t)m);
                if (!(bits >> j & 1u)) {
                    bits |= 1u << j;
                    c++;
                }
            }
            word |= bits << g;
        }
        mask[k] = word;
    }
}

int sd__cu_fill_nm_mask(uint32_t *mask, size_t n_words, int n, int m, uint64_t seed, cudaStream_t st,
                        sd_diag *d)
{
    fill_nm_mask_kernel<<<grid_for(n_words, 256), 256, 0, st>>>(mask, n_words, n, m, seed);
    SD_CU_LAUNCH(d);
    return 0;
}
