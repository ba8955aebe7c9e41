/* cuda_attn_prefill: tiled causal attention for the query runs of a step that belong to one
 * sequence (prefill chunks), with bf16 tensor-core mma and the online softmax in registers;
 * the step-level dispatch between it and the split kernel of cuda_ops.cu; a C entry for tests. */
#include "engine/cuda_impl.cuh"

#include "engine/cuda_attn_fused.h"
#include "engine/cuda_attn_prefill.h"
#include "kernels/pdl.cuh"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

using sd_pdl::pdl_trigger;
using sd_pdl::pdl_wait;
using sd_pdl::sd_launch;

#define SD_PF_BM 64       /* query rows per block: 16 per warp */
#define SD_PF_BN 64       /* keys per tile */
#define SD_PF_THREADS 128 /* 4 warps */

/* d (16x8 fp32) += a (16x16 bf16, row) * b (16x8 bf16, col); PTX fragment layouts. */
static __device__ __forceinline__ void mma_bf16(float *d, const uint32_t *a, uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                 "{%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* Two floats as a bf16 pair: x in the low half (the lower column / key index). */
static __device__ __forceinline__ uint32_t pack_bf16(float x, float y)
{
    __nv_bfloat162 v = __floats2bfloat162_rn(x, y);
    uint32_t u;
    memcpy(&u, &v, 4);
    return u;
}

/* Keys [kv0, kv0 + BN) of this head into shared rows of LD bf16 (LD = HD + 8: the pad puts the
 * 8 rows a B-fragment load touches on distinct banks); keys at or past kv_end are zeros so that
 * masked scores (p = 0) never meet garbage (0 * NaN) in the PV product. */
template <int HD, int LD>
static __device__ __forceinline__ void load_kv_tile(const sd_cu_attn_args &a, const int32_t *bt, int kvh,
                                                    int kv0, int kv_end, __nv_bfloat16 *sk, __nv_bfloat16 *sv)
{
    constexpr int CPR = HD / 8; /* uint4 per row */
    for (int i = threadIdx.x; i < SD_PF_BN * CPR; i += SD_PF_THREADS) {
        int r = i / CPR, c = i % CPR, key = kv0 + r;
        uint4 kx = make_uint4(0, 0, 0, 0), vx = kx;
        if (key < kv_end) {
            long long off =
                (((long long)bt[key / a.block_size] * a.n_kv + kvh) * a.block_size + key % a.block_size) *
                    HD +
                c * 8;
            kx = *(const uint4 *)(a.k_cache + off);
            vx = *(const uint4 *)(a.v_cache + off);
        }
        *(uint4 *)(sk + r * LD + c * 8) = kx;
        *(uint4 *)(sv + r * LD + c * 8) = vx;
    }
}

/* grid (ceil(T/BM), n_heads), block 128. All T query rows belong to sequence tok_seq[0] (one
 * block table); row t at p = tok_pos[t] attends keys [0, p], or with a sliding window keys k with
 * p - window < k <= p (transformers' masking_utils.sliding_window_overlay: k > p - window); key
 * tiles left of every row's window are skipped (their cache rows stay, unread). Warp w owns rows
 * 16w..16w+15 of the block's tile: its Q fragments stay in registers, S = Q K^T and O += P V run
 * on mma.sync m16n8k16 (bf16 in, fp32 accumulate), the running max/sum live in registers (base-2
 * exponent). Lane (g = lane/4, tq = lane%4) holds rows g and g+8 of the warp, columns 2tq, 2tq+1
 * of each 8-wide n-tile. Tiles run in reverse order so the longest (last) rows start first. */
template <int HD>
static __global__ void __launch_bounds__(SD_PF_THREADS) attn_prefill_kernel(sd_cu_attn_args a)
{
    pdl_wait();
    pdl_trigger();
    constexpr int LD = HD + 8, KC = HD / 16, ND = HD / 8, NS = SD_PF_BN / 8;
    __shared__ __align__(16) __nv_bfloat16 sk[SD_PF_BN * LD], sv[SD_PF_BN * LD]; /* [BN, LD] */
    __shared__ int s_kv_end, s_kv_begin;
    int tile = gridDim.x - 1 - blockIdx.x, h = blockIdx.y, t0 = tile * SD_PF_BM;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, tq = lane & 3;
    int kvh = h / (a.n_heads / a.n_kv), last = min(a.T, t0 + SD_PF_BM) - 1;
    const int32_t *bt = a.block_tables + (size_t)a.tok_seq[0] * a.max_bt;
    /* rows past T copy the last row's position: finite scores, never written */
    int r0 = t0 + warp * 16 + g, r1 = r0 + 8;
    int p0 = a.tok_pos[min(r0, last)], p1 = a.tok_pos[min(r1, last)];
    /* first key of each row's window (may be negative: no lower bound then) */
    int lo0 = a.window > 0 ? p0 + 1 - a.window : 0, lo1 = a.window > 0 ? p1 + 1 - a.window : 0;
    if (threadIdx.x == 0) {
        s_kv_end = 0;
        s_kv_begin = INT_MAX;
    }
    __syncthreads();
    atomicMax(&s_kv_end, max(p0, p1) + 1);
    atomicMin(&s_kv_begin, min(lo0, lo1));
    __syncthreads();
    int kv_end = s_kv_end, kv_begin = max(s_kv_begin, 0) / SD_PF_BN * SD_PF_BN; /* a whole tile */

    uint32_t qf[KC][4]; /* A fragments of Q, [16 rows, HD] of this warp */
    {
        const float *q0 = a.q + ((size_t)r0 * a.n_heads + h) * HD,
                    *q1 = a.q + ((size_t)r1 * a.n_heads + h) * HD;
        bool v0 = r0 < a.T, v1 = r1 < a.T;
#pragma unroll
        for (int kc = 0; kc < KC; kc++) {
            int c = kc * 16 + 2 * tq;
            float2 z = make_float2(0.f, 0.f);
            float2 x00 = v0 ? *(const float2 *)(q0 + c) : z, x02 = v0 ? *(const float2 *)(q0 + c + 8) : z;
            float2 x10 = v1 ? *(const float2 *)(q1 + c) : z, x12 = v1 ? *(const float2 *)(q1 + c + 8) : z;
            qf[kc][0] = pack_bf16(x00.x, x00.y);
            qf[kc][1] = pack_bf16(x10.x, x10.y);
            qf[kc][2] = pack_bf16(x02.x, x02.y);
            qf[kc][3] = pack_bf16(x12.x, x12.y);
        }
    }
    float o[ND][4]; /* O fragments, [16 rows, HD] */
#pragma unroll
    for (int n = 0; n < ND; n++)
        o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;  /* this lane's columns only, for l */
    const float sl2 = rsqrtf((float)HD) * 1.4426950408889634f; /* softmax scale, in base 2 */
    const unsigned short *svu = (const unsigned short *)sv;

    for (int kv0 = kv_begin; kv0 < kv_end; kv0 += SD_PF_BN) {
        __syncthreads(); /* the previous tile is no longer read */
        load_kv_tile<HD, LD>(a, bt, kvh, kv0, kv_end, sk, sv);
        __syncthreads();
        float s[NS][4]; /* S fragments, [16 rows, BN keys] */
#pragma unroll
        for (int j = 0; j < NS; j++) {
            s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
            const __nv_bfloat16 *kr = sk + (j * 8 + g) * LD + 2 * tq;
#pragma unroll
            for (int kc = 0; kc < KC; kc++)
                mma_bf16(s[j], qf[kc], *(const uint32_t *)(kr + kc * 16),
                         *(const uint32_t *)(kr + kc * 16 + 8));
        }
        float mx0 = m0, mx1 = m1;
#pragma unroll
        for (int j = 0; j < NS; j++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                int key = kv0 + j * 8 + 2 * tq + e;
                s[j][e] = key <= p0 && key >= lo0 ? s[j][e] * sl2 : -INFINITY;
                s[j][2 + e] = key <= p1 && key >= lo1 ? s[j][2 + e] * sl2 : -INFINITY;
                mx0 = fmaxf(mx0, s[j][e]);
                mx1 = fmaxf(mx1, s[j][2 + e]);
            }
        /* the 4 lanes of a row group (lane ^ 1, lane ^ 2) share rows g and g+8 */
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
        /* a row with no key yet keeps -inf: subtract 0 so exp2 gives 0, not NaN */
        float b0 = mx0 == -INFINITY ? 0.f : mx0, b1 = mx1 == -INFINITY ? 0.f : mx1;
        float c0 = exp2f(m0 - b0), c1 = exp2f(m1 - b1);
        m0 = mx0;
        m1 = mx1;
        l0 *= c0;
        l1 *= c1;
#pragma unroll
        for (int n = 0; n < ND; n++) {
            o[n][0] *= c0;
            o[n][1] *= c0;
            o[n][2] *= c1;
            o[n][3] *= c1;
        }
#pragma unroll
        for (int j = 0; j < NS; j++) {
            s[j][0] = exp2f(s[j][0] - b0);
            s[j][1] = exp2f(s[j][1] - b0);
            s[j][2] = exp2f(s[j][2] - b1);
            s[j][3] = exp2f(s[j][3] - b1);
            l0 += s[j][0] + s[j][1];
            l1 += s[j][2] + s[j][3];
        }
        /* O += P V: the S fragments of n-tiles 2k, 2k+1 are the A fragment of key chunk k */
#pragma unroll
        for (int k = 0; k < SD_PF_BN / 16; k++) {
            uint32_t pa[4] = {pack_bf16(s[2 * k][0], s[2 * k][1]), pack_bf16(s[2 * k][2], s[2 * k][3]),
                              pack_bf16(s[2 * k + 1][0], s[2 * k + 1][1]),
                              pack_bf16(s[2 * k + 1][2], s[2 * k + 1][3])};
            const unsigned short *vr = svu + (k * 16 + 2 * tq) * LD + g; /* V[key 2tq][dim g] */
#pragma unroll
            for (int n = 0; n < ND; n++) {
                const unsigned short *v = vr + n * 8;
                uint32_t vb0 = (uint32_t)v[0] | ((uint32_t)v[LD] << 16);
                uint32_t vb1 = (uint32_t)v[8 * LD] | ((uint32_t)v[9 * LD] << 16);
                mma_bf16(o[n], pa, vb0, vb1);
            }
        }
    }
    l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
    l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
    l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
    float i0 = l0 > 0.f ? 1.f / l0 : 0.f, i1 = l1 > 0.f ? 1.f / l1 : 0.f;
    __nv_bfloat16 *out0 = a.out + ((size_t)r0 * a.n_heads + h) * HD + 2 * tq;
    __nv_bfloat16 *out1 = a.out + ((size_t)r1 * a.n_heads + h) * HD + 2 * tq;
#pragma unroll
    for (int n = 0; n < ND; n++) {
        if (r0 < a.T)
            *(__nv_bfloat162 *)(out0 + n * 8) = __floats2bfloat162_rn(o[n][0] * i0, o[n][1] * i0);
        if (r1 < a.T)
            *(__nv_bfloat162 *)(out1 + n * 8) = __floats2bfloat162_rn(o[n][2] * i1, o[n][3] * i1);
    }
}

int sd__cu_attn_prefill_supported(int head_dim)
{
    return head_dim == 64 || head_dim == 128;
}

int sd__cu_attn_prefill(const sd_cu_attn_args *a, int pdl, cudaStream_t st, sd_diag *d)
{
    void (*k)(sd_cu_attn_args) = a->head_dim == 64    ? attn_prefill_kernel<64>
                                 : a->head_dim == 128 ? attn_prefill_kernel<128>
                                                      : NULL;
    if (!k)
        return sd_diag_set(d, SD_ENOTSUP, "cuda prefill attention: head_dim %d (64 or 128 supported)",
                           a->head_dim);
    if (a->T < 1 || a->n_kv < 1 || a->n_heads % a->n_kv)
        return sd_diag_set(d, SD_EINVAL, "cuda prefill attention: %d tokens, %d heads over %d KV heads", a->T,
                           a->n_heads, a->n_kv);
    dim3 grid((a->T + SD_PF_BM - 1) / SD_PF_BM, a->n_heads);
    SD_CU(d, sd_launch(k, grid, dim3(SD_PF_THREADS), 0, st, pdl, *a));
    return 0;
}

/* On by default since the H200 run checked the tiled kernel against the split kernel and an
 * fp64 reference (tests/engine/test_attn_prefill_gpu.c; 14x the split kernel at T = 2048,
 * results/2026-11-30-gpu-last/); SD_ATTN_PREFILL=0 forces the split kernel. */
#define SD_ATTN_PREFILL_DEFAULT 1

extern "C" int sd_cu_attn_prefill_min_run(void)
{
    const char *e = getenv("SD_ATTN_PREFILL");
    int on = e && *e ? strcmp(e, "0") != 0 : SD_ATTN_PREFILL_DEFAULT;
    return on ? SD_ATTN_PREFILL_MIN_RUN : 0;
}

/* The same arguments restricted to tokens [t0, t0 + n) of the step. */
static sd_cu_attn_args attn_slice(const sd_cu_attn_args *a, int t0, int n)
{
    sd_cu_attn_args s = *a;
    size_t row = (size_t)a->n_heads * a->head_dim;
    s.q = a->q + (size_t)t0 * row;
    s.tok_pos = a->tok_pos + t0;
    s.tok_seq = a->tok_seq + t0;
    s.out = a->out + (size_t)t0 * row;
    s.T = n;
    return s;
}

static int attn_split_range(const sd_cu_attn_args *a, int t0, int t1, int pdl, cudaStream_t st, sd_diag *d)
{
    if (t1 <= t0)
        return 0;
    sd_cu_attn_args s = attn_slice(a, t0, t1 - t0); /* a->n_splits still fits: fewer rows */
    return sd__cu_attention(&s, pdl, st, d);
}

int sd__cu_attn_step(const sd_cu_attn_args *a, const int *run_len, int n_runs, int min_run, int pdl,
                     cudaStream_t st, sd_diag *d)
{
    if (min_run <= 0 || !sd__cu_attn_prefill_supported(a->head_dim))
        return sd__cu_attention(a, pdl, st, d);
    int t = 0, old0 = 0; /* tokens [old0, t) still wait for the split kernel */
    for (int i = 0; i < n_runs && t < a->T; i++) {
        int n = run_len[i] < a->T - t ? run_len[i] : a->T - t;
        if (n >= min_run) {
            SD_TRY(attn_split_range(a, old0, t, pdl, st, d));
            sd_cu_attn_args s = attn_slice(a, t, n);
            SD_TRY(sd__cu_attn_prefill(&s, pdl, st, d));
            old0 = t + n;
        }
        t += n;
    }
    return attn_split_range(a, old0, a->T, pdl, st, d); /* short runs and any padding rows */
}

/* ---- C entry for tests ---- */

extern "C" int sd_cu_attn_test_run(int path, const sd_cu_attn_test *t, sd_diag *d)
{
    sd_cu_attn_args a = sd__cu_attn_test_args(t);
    a.cluster = SD_ATTN_CLUSTER_ALWAYS;
    switch (path) {
    case SD_ATTN_PATH_SPLIT:
        return sd__cu_attention(&a, 0, 0, d);
    case SD_ATTN_PATH_TILED:
        return sd__cu_attn_prefill(&a, 0, 0, d);
    case SD_ATTN_PATH_STEP:
        return sd__cu_attn_step(&a, t->run_len, t->n_runs, t->min_run, 0, 0, d);
    default:
        return sd_diag_set(d, SD_EINVAL, "attention test: path %d", path);
    }
}
