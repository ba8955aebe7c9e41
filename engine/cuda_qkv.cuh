/* cuda_qkv: the per-head q/k/v post-processing math (bias, Qwen3 q/k RMSNorm, RoPE) as one warp's
 * device function, shared by qkv_post_kernel (engine/cuda_ops.cu) and the decode attention kernel
 * that does the same work itself (engine/cuda_attn_decode.cu), so that both compute the same bits.
 * Not a public header. */
#ifndef SD_CUDA_QKV_CUH
#define SD_CUDA_QKV_CUH

#include "engine/cuda_impl.cuh"

/* Head dims the warp function takes: 64 * SD_QKV_PAIRS(hd) with 1, 2 or 4 pairs per lane. */
#define SD_QKV_PAIRS(hd) ((hd) / 64)

/* One head of one token's row of the qkv linear output, by one whole warp (call it with every
 * lane, from warp-uniform control flow). HD = 64*H; lane owns the RoPE pairs (i, i + HD/2) for
 * i = 32*j + lane, j < H. In order: x += bias (bias NULL: none); RMSNorm with weight nw (NULL:
 * none); RoPE at pos (inv_freq NULL: none, the v heads). The operations are spelled with
 * explicit rounding intrinsics so that no caller's inlining can contract them differently.
 * The norm's sum of squares adds the H warp sums in order j = 0, 1 ...: the same order as a
 * block of HD/2 threads, one pair each, summing its warps (block_sum in cuda_ops.cu). */
template <int H>
static __device__ __forceinline__ void
sd_qkv_head(const float *__restrict__ row, const float *__restrict__ bias, const float *__restrict__ nw,
            const float *__restrict__ inv_freq, int pos, float eps, float (&x1)[H], float (&x2)[H])
{
    constexpr int HALF = 32 * H;
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int j = 0; j < H; j++) {
        const int i = 32 * j + lane;
        x1[j] = row[i];
        x2[j] = row[i + HALF];
        if (bias) {
            x1[j] = __fadd_rn(x1[j], bias[i]);
            x2[j] = __fadd_rn(x2[j], bias[i + HALF]);
        }
    }
    if (nw) {
        float ss = 0.f;
#pragma unroll
        for (int j = 0; j < H; j++)
            ss = __fadd_rn(ss, sd_warp_sum(__fmaf_rn(x1[j], x1[j], __fmul_rn(x2[j], x2[j]))));
        const float r = rsqrtf(__fadd_rn(__fdiv_rn(ss, (float)(2 * HALF)), eps));
#pragma unroll
        for (int j = 0; j < H; j++) {
            const int i = 32 * j + lane;
            x1[j] = __fmul_rn(__fmul_rn(x1[j], r), nw[i]);
            x2[j] = __fmul_rn(__fmul_rn(x2[j], r), nw[i + HALF]);
        }
    }
    if (inv_freq)
#pragma unroll
        for (int j = 0; j < H; j++) {
            /* fp32 angle then accurate sin/cos, as the HF rotary embedding computes it */
            float s, c;
            sincosf(__fmul_rn((float)pos, inv_freq[32 * j + lane]), &s, &c);
            const float y1 = __fmaf_rn(x1[j], c, -__fmul_rn(x2[j], s));
            const float y2 = __fmaf_rn(x2[j], c, __fmul_rn(x1[j], s));
            x1[j] = y1;
            x2[j] = y2;
        }
}

/* Element offset of (token position pos of sequence seq, KV head kvh) in a layer's paged cache
 * [n_blocks, n_kv, block_size, head_dim]. */
static __device__ __forceinline__ size_t sd_kv_row(const int32_t *__restrict__ block_tables, int max_bt,
                                                   int block_size, int n_kv, int head_dim, int seq, int pos,
                                                   int kvh)
{
    const int blk = block_tables[(size_t)seq * max_bt + pos / block_size];
    return (((size_t)blk * n_kv + kvh) * block_size + pos % block_size) * head_dim;
}

#endif
