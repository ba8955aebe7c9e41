/* cuda_attn_decode: paged attention for decode tokens (and short runs, and graph padding rows):
 * one block per (key split, group of query heads that share a KV head, token), the splits merged
 * through distributed shared memory within a thread-block cluster (or by the last block to finish,
 * through global memory), so a layer's attention is one kernel; and its fused twin for steps of
 * single-token sequences, which also does the q/k/v post-processing (sd__cu_attn_fused). */
#include "engine/cuda_impl.cuh"

#include <cooperative_groups.h>

#include "engine/cuda_qkv.cuh"

#include "engine/cuda_attn_fused.h"
#include "engine/cuda_attn_prefill.h"
#include "kernels/pdl.cuh"

#include <math.h>

using sd_pdl::pdl_trigger;
using sd_pdl::pdl_wait;
using sd_pdl::sd_launch_cl;

#define SD_ATTN_WARPS 4
#define SD_ATTN_MAX_GROUP 8   /* query heads per block: GQA groups of up to 8 read K/V once */
#define SD_ATTN_MAX_SPLITS 32 /* splits of one query's keys: one per lane in the merges */
#define SD_ATTN_MAX_CLUSTER 8 /* splits that can merge in one (portable) thread-block cluster */

namespace cg = cooperative_groups;

/* Query heads per block: the largest divisor of the GQA group size that is <= 8, so that a
 * block's heads share one KV head, except for batches of 1-2 tokens: one head per block.
 * Measured on Llama-3.1-8B (group 4, results/2026-11-30-s3/r4): at batch 1 one head per block
 * decodes faster at context 512 (4.63 vs 4.89 ms) and slower at 4096 (5.54 vs 5.23); at batch 16
 * the group is far ahead (5.89 vs 6.39 ms, 10.47 vs 15.35). A lane scores a whole key for every
 * head of the block, so grouping lengthens each warp's chain by the group size: at batch 1 that
 * latency, not the bytes, sets the time at short contexts. Both beat the kernel before
 * (4.83, 5.86 / 6.69, 16.71 ms). */
static int heads_per_block(int T, int n_heads, int n_kv)
{
    if (T <= 2)
        return 1;
    int g = n_heads / n_kv, gb = g < SD_ATTN_MAX_GROUP ? g : SD_ATTN_MAX_GROUP;
    while (g % gb)
        gb--;
    return gb;
}

/* About two blocks per SM, at most 32 splits; 9 rounded down to 8, so that the splits form one
 * thread-block cluster and can merge in distributed shared memory (use_cluster) for the loss of
 * one split in nine: Llama-3.1-8B at batch 1 and 4 on the 132 SMs of an H200, where the 64-key
 * floor of the backend (min_chunk) left the ninth split without keys at context 512 anyway. More
 * splits than that (few heads per GPU under TP, small models) stay, and merge through global
 * memory, for long contexts' sake. */
int sd__cu_attn_splits(int sms, int T, int n_heads, int n_kv)
{
    int groups = T * (n_heads / heads_per_block(T, n_heads, n_kv));
    int s = (2 * sms + groups - 1) / groups;
    if (s == SD_ATTN_MAX_CLUSTER + 1)
        s = SD_ATTN_MAX_CLUSTER;
    return s < 1 ? 1 : s > SD_ATTN_MAX_SPLITS ? SD_ATTN_MAX_SPLITS : s;
}

/* A lane's E dims of one V row as raw bf16 (E = head_dim / 32: 2, 4 or 8), and how many rows
 * of a 32-key tile are loaded at once (all 32 while that fits the registers). */
template <int E> struct VRow;
template <> struct VRow<2> {
    typedef uint32_t T;
    static constexpr int N = 32;
    static __device__ __forceinline__ T load(const __nv_bfloat16 *p)
    {
        return __ldg((const uint32_t *)p);
    }
    static __device__ __forceinline__ void unpack(T u, float *v)
    {
        v[0] = __uint_as_float(u << 16);
        v[1] = __uint_as_float(u & 0xffff0000u);
    }
};
template <> struct VRow<4> {
    typedef uint2 T;
    static constexpr int N = 32;
    static __device__ __forceinline__ T load(const __nv_bfloat16 *p)
    {
        return __ldg((const uint2 *)p);
    }
    static __device__ __forceinline__ void unpack(T u, float *v)
    {
        VRow<2>::unpack(u.x, v);
        VRow<2>::unpack(u.y, v + 2);
    }
};
template <> struct VRow<8> {
    typedef uint4 T;
    static constexpr int N = 16;
    static __device__ __forceinline__ T load(const __nv_bfloat16 *p)
    {
        return __ldg((const uint4 *)p);
    }
    static __device__ __forceinline__ void unpack(T u, float *v)
    {
        VRow<4>::unpack(make_uint2(u.x, u.y), v);
        VRow<4>::unpack(make_uint2(u.z, u.w), v + 4);
    }
};

/* A warp's tile of 32 keys in registers: lane j's whole K row (key kb + j; head_dim 256: the
 * first half), and the lanes' E dims of the first VRow<E>::N V rows; off is lane j's row offset.
 * Loaded apart from the arithmetic (tile_load) so that the fused kernel can issue its first
 * tile's loads before the PDL wait (sd_cu_attn_args.early). */
template <int E> struct KvTile {
    static constexpr int HD = 32 * E;
    static constexpr int KB = HD / 8 < 16 ? HD / 8 : 16; /* K loads in flight: 16 x 16 B */
    uint4 kq[KB];
    typename VRow<E>::T vr[VRow<E>::N];
    long long off;
};

/* Every load of the tile at once: the lane's K row, then the V rows (rows past k1 repeat a valid
 * one, their p is 0), so that a tile costs one DRAM round trip, not one per batch of loads
 * (batches made batch-1 attention latency-bound: 13 us per layer of Llama-3.1-8B at context 512,
 * results/2026-11-30-s4/r1). */
template <int E>
static __device__ __forceinline__ void tile_load(const sd_cu_attn_args &a, const int32_t *__restrict__ bt,
                                                 int kvh, int kb, int k1, KvTile<E> &r)
{
    const int lane = threadIdx.x & 31, key = kb + lane;
    long long off = 0;
    if (key < k1)
        off = (((long long)bt[key / a.block_size] * a.n_kv + kvh) * a.block_size + key % a.block_size) *
              KvTile<E>::HD;
    /* lanes past the range use key kb's row (always valid) with weight 0: slots outside the
     * sequence may hold anything, NaN included, and 0 * NaN would poison the sums */
    const long long off0 = __shfl_sync(0xffffffffu, off, 0);
    r.off = key < k1 ? off : off0;
    const uint4 *kr = (const uint4 *)(a.k_cache + r.off);
#pragma unroll
    for (int c = 0; c < KvTile<E>::KB; c++)
        r.kq[c] = __ldg(kr + c);
#pragma unroll
    for (int jj = 0; jj < VRow<E>::N; jj++)
        r.vr[jj] = VRow<E>::load(a.v_cache + __shfl_sync(0xffffffffu, r.off, jj) + lane * E);
}

/* One warp's tile of 32 keys from kb (keys below k1), loaded into r by tile_load: lane j scores
 * key kb + j for the GB heads (its whole K row, q from shared memory), the tile updates the
 * warp's online softmax per head, then the lanes, each owning E = head_dim/32 dims, accumulate
 * the tile's V rows. OWN (fused kernel, the tile that holds key `cur`): that key's K and V rows
 * come from own_k / own_v in shared memory, never from the cache, which another block of the
 * grid may be writing at that row (what was loaded from it is replaced); the arithmetic is the
 * same, so are the bits. */
template <int E, int GB, bool OWN>
static __device__ __forceinline__ void attn_tile(const sd_cu_attn_args &a, int kb, int k1, int cur,
                                                 const float (*sq)[32 * E], const __nv_bfloat16 *own_k,
                                                 const __nv_bfloat16 *own_v, KvTile<E> &r,
                                                 float (&acc)[GB][E], float (&m)[GB], float (&l)[GB])
{
    constexpr int HD = 32 * E, KB = KvTile<E>::KB;
    const int lane = threadIdx.x & 31;
    const int key = kb + lane;
    const bool valid = key < k1;
    const bool own = OWN && (valid ? key : kb) == cur; /* this lane's row is key cur's */
    const uint4 *kr = (const uint4 *)(a.k_cache + r.off);
    uint4(&kq)[KB] = r.kq;
    typename VRow<E>::T(&vr)[VRow<E>::N] = r.vr;
    const long long off = r.off;
    float sc[GB];
#pragma unroll
    for (int g = 0; g < GB; g++)
        sc[g] = 0.f;
#pragma unroll
    for (int c0 = 0; c0 < HD / 8; c0 += KB) {
        if (c0)
#pragma unroll
            for (int c = 0; c < KB; c++)
                kq[c] = __ldg(kr + c0 + c);
        if (own)
#pragma unroll
            for (int c = 0; c < KB; c++)
                kq[c] = ((const uint4 *)own_k)[c0 + c];
#pragma unroll
        for (int c = 0; c < KB; c++) {
            const __nv_bfloat162 *p2 = (const __nv_bfloat162 *)&kq[c];
#pragma unroll
            for (int j = 0; j < 4; j++) {
                float2 f = __bfloat1622float2(p2[j]);
                const int d = (c0 + c) * 8 + 2 * j;
#pragma unroll
                for (int g = 0; g < GB; g++)
                    sc[g] += sq[g][d] * f.x + sq[g][d + 1] * f.y;
            }
        }
    }
    float p[GB];
#pragma unroll
    for (int g = 0; g < GB; g++) {
        float mn = fmaxf(m[g], sd_warp_max(valid ? sc[g] : -INFINITY)); /* finite: key kb is valid */
        p[g] = valid ? expf(sc[g] - mn) : 0.f;
        float c = expf(m[g] - mn);
        l[g] = l[g] * c + sd_warp_sum(p[g]);
#pragma unroll
        for (int e = 0; e < E; e++)
            acc[g][e] *= c;
        m[g] = mn;
    }
    const int nk = min(32, k1 - kb);
    for (int j0 = 0; j0 < nk; j0 += VRow<E>::N) {
        if (j0) /* rows beyond the first batch (head_dim 256) */
#pragma unroll
            for (int jj = 0; jj < VRow<E>::N; jj++)
                vr[jj] = VRow<E>::load(a.v_cache + __shfl_sync(0xffffffffu, off, j0 + jj) + lane * E);
#pragma unroll
        for (int jj = 0; jj < VRow<E>::N; jj++) {
            float v[E];
            if (OWN && __shfl_sync(0xffffffffu, (int)own, j0 + jj)) /* warp-uniform: key cur's row */
                VRow<E>::unpack(*(const typename VRow<E>::T *)(own_v + lane * E), v);
            else
                VRow<E>::unpack(vr[jj], v);
#pragma unroll
            for (int g = 0; g < GB; g++) {
                float pj = __shfl_sync(0xffffffffu, p[g], j0 + jj);
#pragma unroll
                for (int e = 0; e < E; e++)
                    acc[g][e] += pj * v[e];
            }
        }
    }
}

/* L2 prefetch of key `key`'s K and V rows (nothing for keys at or past k1). */
template <int E>
static __device__ __forceinline__ void prefetch_rows(const sd_cu_attn_args &a, const int32_t *__restrict__ bt,
                                                     int kvh, int key, int k1)
{
    constexpr int HD = 32 * E;
    if (key >= k1)
        return;
    const long long off =
        (((long long)bt[key / a.block_size] * a.n_kv + kvh) * a.block_size + key % a.block_size) * HD;
#pragma unroll
    for (int c = 0; c < HD * 2; c += 128) { /* 128-byte lines of a bf16 row */
        asm volatile("prefetch.global.L2 [%0];" ::"l"((const char *)(a.k_cache + off) + c));
        asm volatile("prefetch.global.L2 [%0];" ::"l"((const char *)(a.v_cache + off) + c));
    }
}

/* The fused kernel's prologue: its GB query heads from the raw qkv row as qkv_post_kernel computes
 * them (sd_qkv_head), scaled into sq; in the split that holds key cur (k1 == n), also the token's
 * own K and V rows of this KV head, rounded to bf16 as the cache holds them, into own_k / own_v,
 * and written to the cache by the block of the KV head's first head group only. A warp per job:
 * the GB q heads, then k, then v. */
template <int E, int GB>
static __device__ __forceinline__ void
fused_prologue(const sd_cu_attn_args &a, const sd_cu_qkv_args &p, int t, int h0, int kvh, int pos,
               bool has_cur, float scale, float (*sq)[32 * E], __nv_bfloat16 *own_k, __nv_bfloat16 *own_v)
{
    constexpr int HD = 32 * E, H = E / 2;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, seq = a.tok_seq[t];
    const float *row = p.qkv + (size_t)t * (a.n_heads + 2 * a.n_kv) * HD;
    const int jobs = GB + (has_cur ? 2 : 0);
    for (int j = warp; j < jobs; j += SD_ATTN_WARPS) {
        const int hh = j < GB ? h0 + j : a.n_heads + (j - GB) * a.n_kv + kvh; /* q, k or v head */
        const bool is_v = j == GB + 1;
        const float *nw = j < GB ? p.q_norm : is_v ? NULL : p.k_norm, *rope = is_v ? NULL : p.inv_freq;
        float x1[H], x2[H];
        sd_qkv_head<H>(row + (size_t)hh * HD, p.bias ? p.bias + (size_t)hh * HD : NULL, nw, rope, pos, p.eps,
                       x1, x2);
        if (j < GB) {
#pragma unroll
            for (int i = 0; i < H; i++) {
                sq[j][32 * i + lane] = x1[i] * scale;
                sq[j][32 * i + lane + HD / 2] = x2[i] * scale;
            }
            continue;
        }
        __nv_bfloat16 *own = is_v ? own_v : own_k, *dst = NULL;
        if (h0 % (a.n_heads / a.n_kv) == 0) /* one writer per (token, KV head) */
            dst = (is_v ? p.v_cache : p.k_cache) +
                  sd_kv_row(a.block_tables, a.max_bt, a.block_size, a.n_kv, HD, seq, pos, kvh);
#pragma unroll
        for (int i = 0; i < H; i++) {
            const __nv_bfloat16 b1 = __float2bfloat16(x1[i]), b2 = __float2bfloat16(x2[i]);
            own[32 * i + lane] = b1;
            own[32 * i + lane + HD / 2] = b2;
            if (dst) {
                dst[32 * i + lane] = b1;
                dst[32 * i + lane + HD / 2] = b2;
            }
        }
    }
}

/* CL, a split without keys: no partial to give, but the cluster's barriers count every block. */
static __device__ __forceinline__ void cluster_idle()
{
    pdl_trigger(); /* the next grid may start; this block reads and writes nothing */
    cg::cluster_group c = cg::this_cluster();
    c.sync();
    c.sync();
}

/* The merge of the n_act splits with keys of (token t, heads h0..): one warp per head, lane k
 * takes split k's (max, sum) (ml(g, k): so the weights need no serial loop over round trips),
 * then each thread sums its dim over the splits (acc(g, c, k), loads unrolled) and writes the
 * output. Both merges run it, reading the partials from where they keep them, so that both give
 * the same bits. */
template <int GB, int HD, class ML, class ACC>
static __device__ __forceinline__ void merge_splits(const sd_cu_attn_args &a, int t, int h0, int n_act,
                                                    float (*sm_f)[32], ML ml, ACC acc)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int g = warp; g < GB; g += SD_ATTN_WARPS) {
        const float2 p = lane < n_act ? ml(g, lane) : make_float2(-INFINITY, 0.f);
        float M = sd_warp_max(p.x), f = lane < n_act ? expf(p.x - M) : 0.f;
        sm_f[g][lane] = f / sd_warp_sum(p.y * f);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < GB * HD; i += blockDim.x) {
        int g = i / HD, c = i % HD;
        float A = 0.f;
#pragma unroll 8
        for (int k = 0; k < n_act; k++)
            A += acc(g, c, k) * sm_f[g][k];
        a.out[((size_t)t * a.n_heads + h0 + g) * HD + c] = __float2bfloat16(A);
    }
}

/* CL: every split of the cluster left its merged (max, sum) per head in ml and its accumulator
 * in acc ([GB][HD], shared memory); rank 0 (split 0) merges them over distributed shared memory;
 * the second barrier keeps every block's shared memory alive until rank 0 has read it. */
template <int GB, int HD>
static __device__ __forceinline__ void cluster_merge(const sd_cu_attn_args &a, int t, int h0, int n_act,
                                                     float (*acc)[HD], float (*ml)[2], float (*sm_f)[32])
{
    cg::cluster_group cl = cg::this_cluster();
    cl.sync(); /* every split's partial is in its shared memory */
    if (cl.block_rank() == 0)
        merge_splits<GB, HD>(
            a, t, h0, n_act, sm_f,
            [&](int g, int k) {
                const float *r = cl.map_shared_rank(&ml[g][0], k);
                return make_float2(r[0], r[1]);
            },
            [&](int g, int c, int k) { return *cl.map_shared_rank(&acc[g][c], k); });
    cl.sync();
}

/* grid (n_splits, n_heads / GB, T), block 32*SD_ATTN_WARPS. Query t attends keys [lo, pos_t]:
 * lo = 0, or with a sliding window max(0, pos_t + 1 - window) (transformers keeps key k when
 * k > p - window, masking_utils.sliding_window_overlay; rows left of it stay in the cache,
 * unread). Split s takes an equal share of that range. Each warp takes tiles of 32 keys
 * (attn_tile). Warps merge in shared memory. With one split the block writes the output;
 * otherwise it writes a partial (max, sum, acc), and the block that finds it is the last of its
 * (token, group) to arrive merges them all. The merge reads each split's (max, sum) in one
 * warp-wide load: a loop over splits would pay an L2 round trip per split (measured: that made
 * batch-1 decode of Llama-3.1-8B 11% slower than two kernels). CL (launched in clusters of
 * n_splits blocks along x): the partials stay in each block's shared memory and the cluster's
 * rank 0 merges them over distributed shared memory (cluster_merge), with the same arithmetic in
 * the same order, so the same bits, without the fence, the counter and the two L2 round trips.
 * FUSED: q comes from the raw qkv rows (p), computed as qkv_post_kernel does, and key pos_t (the
 * token's own) from the rows the kernel computes itself (fused_prologue); each token must be its
 * sequence's only one in the step, so no other key it reads is written by this grid. Otherwise p is
 * unused and q is read from a.q. EARLY (FUSED, one head per block: a.early where steps have 1-2
 * tokens): each warp's first tile of K/V rows is loaded into registers before the PDL wait (a
 * template flag: held across the prologue, those registers would cost every instance occupancy,
 * ptxas: head_dim 128, 4 heads 153 -> 254; one head 152 -> 168. Head groups with it measured 7%
 * slower at batch 4 of the 8B, where the grid fits two such blocks per SM: kernels/NOTES.md v18). */
template <int E, int GB, bool FUSED, bool EARLY = false>
static __global__ void __launch_bounds__(32 * SD_ATTN_WARPS)
    attn_decode_kernel(sd_cu_attn_args a, sd_cu_qkv_args p, int cl)
{
    constexpr int HD = 32 * E;
    __shared__ __align__(16) float sq[GB][HD];
    __shared__ __align__(16) __nv_bfloat16 own_kv[2][FUSED ? HD : 8]; /* FUSED: this token's K, V rows */
    __shared__ float sm_m[SD_ATTN_WARPS][GB], sm_l[SD_ATTN_WARPS][GB];
    __shared__ float sm_acc[SD_ATTN_WARPS][GB][HD];
    __shared__ float sm_f[GB][32]; /* merge: weight of each split (n_splits <= 32) */
    __shared__ float cl_ml[GB][2]; /* cl: this split's (max, sum) per head */
    __shared__ int last;
    const int s = blockIdx.x, h0 = blockIdx.y * GB, t = blockIdx.z;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int kvh = h0 / (a.n_heads / a.n_kv), seq = a.tok_seq[t], n = a.tok_pos[t] + 1;
    const int lo = a.window > 0 && n > a.window ? n - a.window : 0, nr = n - lo; /* keys [lo, n) */
    /* with min_chunk, short ranges leave the last splits without keys: those blocks leave at
     * once (in a cluster, after its barriers), and the n_act splits with keys merge among
     * themselves */
    const int chunk = max((nr + a.n_splits - 1) / a.n_splits, a.min_chunk), k0 = lo + s * chunk,
              k1 = min(n, k0 + chunk), n_act = min(a.n_splits, (nr + chunk - 1) / chunk);
    if (k0 >= n) { /* a split without keys */
        if (cl && n_act > 1)
            cluster_idle();
        return;
    }
    /* The step's metadata was copied before its first kernel, and in the fused path every key
     * but the token's own was written by earlier steps: so the warp's first tile of K and V rows
     * can start moving into L2 while the kernel before (the qkv projection) still runs; EARLY:
     * into registers (what is loaded of the token's own row is replaced, OWN in attn_tile). */
    const int32_t *bt = a.block_tables + (size_t)seq * a.max_bt;
    const int kb0 = k0 + warp * 32; /* the warp's first tile */
    KvTile<E> r;
    if (FUSED && EARLY && kb0 < k1)
        tile_load<E>(a, bt, kvh, kb0, k1, r);
    else if (FUSED && kb0 < k1)
        prefetch_rows<E>(a, bt, kvh, kb0 + lane, k1);
    pdl_wait();
    pdl_trigger();
    const float scale = rsqrtf((float)HD);
    if (FUSED) {
        fused_prologue<E, GB>(a, p, t, h0, kvh, n - 1, k1 == n, scale, sq, own_kv[0], own_kv[1]);
    } else {
        const float *qp = a.q + ((size_t)t * a.n_heads + h0) * HD; /* the GB heads are contiguous */
        for (int i = threadIdx.x; i < GB * HD; i += blockDim.x)
            sq[i / HD][i % HD] = qp[i] * scale;
    }
    __syncthreads();
    float acc[GB][E], m[GB], l[GB];
#pragma unroll
    for (int g = 0; g < GB; g++) {
        m[g] = -INFINITY;
        l[g] = 0.f;
#pragma unroll
        for (int e = 0; e < E; e++)
            acc[g][e] = 0.f;
    }
    for (int kb = kb0; kb < k1; kb += SD_ATTN_WARPS * 32) {
        const bool own = FUSED && k1 == n && kb + 32 >= n; /* the tile holds key n - 1 */
        /* EARLY: every tile in r, the first loaded above. Otherwise a tile of its own in each
         * branch, as the arithmetic had before: one outside the loop, or one load before the
         * branch, cost ptxas ~100 registers (head_dim 128, 4 heads: 153 -> 254). */
        if constexpr (EARLY) {
            if (kb != kb0)
                tile_load<E>(a, bt, kvh, kb, k1, r);
            if (own)
                attn_tile<E, GB, true>(a, kb, k1, n - 1, sq, own_kv[0], own_kv[1], r, acc, m, l);
            else
                attn_tile<E, GB, false>(a, kb, k1, n - 1, sq, NULL, NULL, r, acc, m, l);
        } else if (own) {
            KvTile<E> t;
            tile_load<E>(a, bt, kvh, kb, k1, t);
            attn_tile<E, GB, true>(a, kb, k1, n - 1, sq, own_kv[0], own_kv[1], t, acc, m, l);
        } else {
            KvTile<E> t;
            tile_load<E>(a, bt, kvh, kb, k1, t);
            attn_tile<E, GB, false>(a, kb, k1, n - 1, sq, NULL, NULL, t, acc, m, l);
        }
    }
    if (lane == 0)
#pragma unroll
        for (int g = 0; g < GB; g++) {
            sm_m[warp][g] = m[g];
            sm_l[warp][g] = l[g];
        }
#pragma unroll
    for (int g = 0; g < GB; g++)
#pragma unroll
        for (int e = 0; e < E; e++)
            sm_acc[warp][g][lane * E + e] = acc[g][e];
    __syncthreads();
    for (int i = threadIdx.x; i < GB * HD; i += blockDim.x) {
        int g = i / HD, c = i % HD;
        float M = -INFINITY, A = 0.f, L = 0.f;
        for (int w = 0; w < SD_ATTN_WARPS; w++)
            M = fmaxf(M, sm_m[w][g]);
        if (M != -INFINITY)
            for (int w = 0; w < SD_ATTN_WARPS; w++) {
                float f = expf(sm_m[w][g] - M);
                A += sm_acc[w][g][c] * f;
                L += sm_l[w][g] * f;
            }
        size_t row = (size_t)t * a.n_heads + h0 + g;
        if (n_act == 1) { /* one split holds every key: no partial */
            a.out[row * HD + c] = __float2bfloat16(A / L);
            continue;
        }
        if (cl) { /* in place: this thread alone reads sm_acc[.][g][c] */
            sm_acc[0][g][c] = A;
            if (c == 0) {
                cl_ml[g][0] = M;
                cl_ml[g][1] = L;
            }
            continue;
        }
        size_t pi = row * a.n_splits + s;
        a.part_acc[pi * HD + c] = A;
        if (c == 0) {
            a.part_ml[pi * 2] = M;
            a.part_ml[pi * 2 + 1] = L;
        }
    }
    if (n_act == 1)
        return;
    if (cl) {
        cluster_merge<GB, HD>(a, t, h0, n_act, sm_acc[0], cl_ml, sm_f);
        return;
    }
    __threadfence(); /* the partial is visible before the count that announces it */
    __syncthreads();
    if (threadIdx.x == 0) {
        int *cnt = a.counters + (size_t)t * gridDim.y + blockIdx.y;
        last = atomicAdd(cnt, 1) == n_act - 1;
        if (last)
            *cnt = 0; /* every split with keys has counted: ready for the next launch */
    }
    __syncthreads();
    if (!last)
        return;
    __threadfence();
    const size_t head0 = (size_t)t * a.n_heads + h0; /* __ldcg: from L2, where the other blocks wrote */
    merge_splits<GB, HD>(
        a, t, h0, n_act, sm_f,
        [&](int g, int k) {
            const float *p = a.part_ml + ((head0 + g) * a.n_splits + k) * 2;
            return make_float2(__ldcg(p), __ldcg(p + 1));
        },
        [&](int g, int c, int k) { return __ldcg(a.part_acc + ((head0 + g) * a.n_splits + k) * HD + c); });
}

typedef void (*attn_kernel_fn)(sd_cu_attn_args, sd_cu_qkv_args, int);

/* Whether a grid of `blocks` merges its n_splits splits in clusters under a->cluster
 * (SD_ATTN_CLUSTER_*; the caller chose NEVER where the device cannot launch clusters): for PAYS,
 * where the grid fits two blocks per SM (a->sms). Measured on Llama-3.1-8B
 * (results/2026-12-02-tune/r3, kernels/NOTES.md v17): batch 1 and 4 (256 blocks on 132 SMs) ~1%
 * faster in clusters; batch 2 and 8 (320) from 2% faster to 5% slower by pattern; batch 16 (384)
 * 10% slower. Host arithmetic only: it runs at every eager launch. */
static int use_cluster(const sd_cu_attn_args *a, long long blocks)
{
    if (a->n_splits < 2 || a->n_splits > SD_ATTN_MAX_CLUSTER)
        return 0;
    return a->cluster == SD_ATTN_CLUSTER_ALWAYS ||
           (a->cluster == SD_ATTN_CLUSTER_PAYS && blocks <= 2LL * a->sms);
}

template <int E, bool FUSED> static attn_kernel_fn pick_gb(int gb)
{
    switch (gb) {
    case 1:
        return attn_decode_kernel<E, 1, FUSED>;
    case 2:
        return attn_decode_kernel<E, 2, FUSED>;
    case 3:
        return attn_decode_kernel<E, 3, FUSED>;
    case 4:
        return attn_decode_kernel<E, 4, FUSED>;
    case 5:
        return attn_decode_kernel<E, 5, FUSED>;
    case 6:
        return attn_decode_kernel<E, 6, FUSED>;
    case 7:
        return attn_decode_kernel<E, 7, FUSED>;
    case 8:
        return attn_decode_kernel<E, 8, FUSED>;
    default:
        return NULL;
    }
}

template <bool FUSED>
static int attn_launch(const sd_cu_attn_args *a, const sd_cu_qkv_args *p, int pdl, cudaStream_t st,
                       sd_diag *d)
{
    if (a->n_kv <= 0 || a->n_heads % a->n_kv)
        return sd_diag_set(d, SD_EINVAL, "cuda attention: %d heads over %d KV heads", a->n_heads, a->n_kv);
    if (a->n_splits < 1 || a->n_splits > SD_ATTN_MAX_SPLITS || (a->n_splits > 1 && !a->counters))
        return sd_diag_set(d, SD_EINVAL, "cuda attention: %d splits (1..32, more than 1 with counters)",
                           a->n_splits);
    int gb = heads_per_block(a->T, a->n_heads, a->n_kv);
    attn_kernel_fn k = a->head_dim == 64    ? pick_gb<2, FUSED>(gb)
                       : a->head_dim == 128 ? pick_gb<4, FUSED>(gb)
                       : a->head_dim == 256 ? pick_gb<8, FUSED>(gb)
                                            : NULL;
    if (k && FUSED && a->early && gb == 1)
        k = a->head_dim == 64    ? attn_decode_kernel<2, 1, true, true>
            : a->head_dim == 128 ? attn_decode_kernel<4, 1, true, true>
                                 : attn_decode_kernel<8, 1, true, true>;
    if (!k)
        return sd_diag_set(d, SD_ENOTSUP, "cuda attention: head_dim %d (64, 128 or 256 supported)",
                           a->head_dim);
    dim3 grid(a->n_splits, a->n_heads / gb, a->T), block(32 * SD_ATTN_WARPS);
    const int cl = use_cluster(a, (long long)grid.x * grid.y * grid.z);
    SD_CU(d, sd_launch_cl(k, grid, block, 0, st, pdl, cl ? a->n_splits : 1, *a, *p, cl));
    return 0;
}

int sd__cu_attention(const sd_cu_attn_args *a, int pdl, cudaStream_t st, sd_diag *d)
{
    const sd_cu_qkv_args unused = {};
    return attn_launch<false>(a, &unused, pdl, st, d);
}

int sd__cu_attn_fused(const sd_cu_qkv_args *p, const sd_cu_attn_args *a, int pdl, cudaStream_t st, sd_diag *d)
{
    if (p->T != a->T || p->n_heads != a->n_heads || p->n_kv != a->n_kv || p->head_dim != a->head_dim)
        return sd_diag_set(d, SD_EINVAL,
                           "cuda fused attention: q/k/v shape (%d tokens, %d/%d heads, dim %d) "
                           "is not the attention's (%d, %d/%d, %d)",
                           p->T, p->n_heads, p->n_kv, p->head_dim, a->T, a->n_heads, a->n_kv, a->head_dim);
    return attn_launch<true>(a, p, pdl, st, d);
}
