/* cuda_ops: the per-layer kernels of the CUDA backend — embedding, fused residual-add +
 * RMSNorm, q/k/v post-processing (bias, Qwen3 q/k norm, RoPE, paged-KV write), SwiGLU, row
 * gather, bitmask
 * expansion, and the hash-based fills used for synthetic weights. */
#include "engine/cuda_impl.cuh"
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

int sd__cu_embed(const __nv_bfloat16 *embed, const int32_t *tokens, float *x, int T, int hidden, int pdl,
                 cudaStream_t st, sd_diag *d)
{
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

int sd__cu_add_rmsnorm(float *x, const float *y, const float *w, __nv_bfloat16 *out, int T, int hidden,
                       float eps, int pdl, cudaStream_t st, sd_diag *d)
{
    int threads = hidden >= 4096 ? 1024 : hidden >= 1024 ? 512 : 256;
    SD_CU(d, sd_launch(add_rmsnorm_kernel, dim3(T), dim3(threads), 0, st, pdl, x, y, w, out, hidden, eps));
    return 0;
}

/* ---- q/k/v post-processing: bias, q/k RMSNorm, RoPE, KV write ---- */

/* grid (n_heads + 2*n_kv, T), block head_dim/2: thread i owns the RoPE pair (i, i + hd/2). */
static __global__ void qkv_post_kernel(sd_cu_qkv_args a)
{
    SD_PDL_ENTRY();
    __shared__ float red[32];
    int hh = blockIdx.x, t = blockIdx.y, i = threadIdx.x, hd = a.head_dim, half = hd / 2;
    int n_qkv = a.n_heads + 2 * a.n_kv;
    const float *row = a.qkv + (size_t)t * n_qkv * hd + (size_t)hh * hd;
    float x1 = row[i], x2 = row[i + half];
    if (a.bias) {
        x1 += a.bias[hh * hd + i];
        x2 += a.bias[hh * hd + i + half];
    }
    int pos = a.tok_pos[t];
    if (hh < a.n_heads + a.n_kv) {
        const float *nw = hh < a.n_heads ? a.q_norm : a.k_norm;
        if (nw) { /* uniform per block, so the barrier inside block_sum is safe */
            float r = rsqrtf(block_sum(x1 * x1 + x2 * x2, red) / (float)hd + a.eps);
            x1 = x1 * r * nw[i];
            x2 = x2 * r * nw[i + half];
        }
        /* fp32 angle then accurate sin/cos, as the HF rotary embedding computes it */
        float ang = (float)pos * a.inv_freq[i], s, c;
        sincosf(ang, &s, &c);
        float y1 = x1 * c - x2 * s, y2 = x2 * c + x1 * s;
        if (hh < a.n_heads) {
            float *q = a.q_out + (size_t)t * a.n_heads * hd + (size_t)hh * hd;
            q[i] = y1;
            q[i + half] = y2;
            return;
        }
        x1 = y1;
        x2 = y2;
    }
    int kvh = hh < a.n_heads + a.n_kv ? hh - a.n_heads : hh - a.n_heads - a.n_kv;
    int blk = a.block_tables[(size_t)a.tok_seq[t] * a.max_bt + pos / a.block_size];
    size_t off = (((size_t)blk * a.n_kv + kvh) * a.block_size + pos % a.block_size) * hd;
    __nv_bfloat16 *dst = (hh < a.n_heads + a.n_kv ? a.k_cache : a.v_cache) + off;
    dst[i] = __float2bfloat16(x1);
    dst[i + half] = __float2bfloat16(x2);
}

int sd__cu_qkv_post(const sd_cu_qkv_args *a, int pdl, cudaStream_t st, sd_diag *d)
{
    dim3 grid(a->n_heads + 2 * a->n_kv, a->T);
    SD_CU(d, sd_launch(qkv_post_kernel, grid, dim3(a->head_dim / 2), 0, st, pdl, *a));
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

/* One thread per mask word: word w of a row owns values [16w, 16w + 16) of that row. */
static __global__ void expand_kernel(const __nv_bfloat16 *__restrict__ values,
                                     const uint32_t *__restrict__ mask, __nv_bfloat16 *__restrict__ out,
                                     size_t n_words)
{
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < n_words;
         k += (size_t)gridDim.x * blockDim.x) {
        uint32_t mw = mask[k];
        const __nv_bfloat16 *v = values + k * 16;
        __nv_bfloat16 buf[32];
        int j = 0;
#pragma unroll
        for (int b = 0; b < 32; b++) {
            buf[b] = (mw >> b) & 1u ? v[j] : __float2bfloat16(0.f);
            j += (mw >> b) & 1u;
        }
        uint4 *dst = (uint4 *)(out + k * 32);
#pragma unroll
        for (int q = 0; q < 4; q++)
            dst[q] = ((const uint4 *)buf)[q];
    }
}

int sd__cu_expand_bitmask(const __nv_bfloat16 *values, const uint32_t *mask, __nv_bfloat16 *out, int64_t rows,
                          int64_t cols, cudaStream_t st, sd_diag *d)
{
    size_t n_words = (size_t)rows * (size_t)(cols / 32);
    expand_kernel<<<grid_for(n_words, 256), 256, 0, st>>>(values, mask, out, n_words);
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
