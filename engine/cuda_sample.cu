/* cuda_sample: sampling on the GPU — one block per logits row: raw log-softmax and top
 * logprobs, penalties from the row's token list, argmax, then temperature, top-k, top-p,
 * min-p and the inverse-CDF pick with the host's uniform, each a radix descent over the row
 * (engine/sample_radix.h explains the method; engine/sample_req.c is its CPU twin). Nothing
 * sorts the vocabulary: a descent histograms 8 key bits per pass over the row, 2-7 passes. */
#include "engine/cuda_impl.cuh"
#include "engine/cuda_sample.cuh"
#include "engine/sample_radix.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SMP_THREADS 1024
#define SMP_WARPS (SMP_THREADS / 32)
/* Histogram copies, one per group of warps: the first passes of a descent put most of a row in
 * a few buckets, and 8 copies cut the shared-atomic collisions on them by 8. */
#define SMP_COPIES 8

/* One row's work order, built on the host from an sd_sample_req. */
typedef struct cu_row {
    float *logits;                   /* [vocab], device */
    const sd_sample_pen *pen;        /* [n_pen], device */
    const unsigned long long *allow; /* [(vocab + 63) / 64] tokens that may be picked, device; NULL: all */
    float *pen_raw;                  /* [n_pen], device: raw logits of the penalised tokens */
    int32_t n_pen, greedy, rep_on, pf_on, top_k, n_top;
    float temperature, top_p, min_p, rep, presence, frequency;
    double u;
} cu_row;

typedef struct smp_shared {
    uint32_t cnt[SMP_COPIES][SD_SR_BUCKETS]; /* [0] holds the merged histogram */
    unsigned long long w[SMP_COPIES][SD_SR_BUCKETS];
    int32_t first[SMP_COPIES][SD_SR_BUCKETS];
    int fixed, done, result;
    unsigned long long pre, target;
    float rf[SMP_WARPS];
    int ri[SMP_WARPS];
    double rd[SMP_WARPS];
    int n_col;
    unsigned long long ckey[SD_SAMPLE_MAX_TOP];
    int32_t cid[SD_SAMPLE_MAX_TOP];
    float bf;
} smp_shared;

/* ---- block reductions (every thread gets the result) ---- */

/* sd_sample's argmax order: non-NaN before NaN, larger first, lower id on ties. */
static __device__ __forceinline__ bool am_better(float v, int i, float bv, int bi)
{
    if (bv != bv)
        return v == v || i < bi;
    if (v != v)
        return false;
    return v > bv || (v == bv && i < bi);
}

static __device__ int block_argmax(const float *row, int V, smp_shared &sh)
{
    float bv = __int_as_float(0x7fc00000); /* NaN: anything real beats it */
    int bi = INT_MAX;
    for (int i = threadIdx.x; i < V; i += SMP_THREADS)
        if (am_better(row[i], i, bv, bi)) {
            bv = row[i];
            bi = i;
        }
    for (int o = 16; o > 0; o >>= 1) {
        float v = __shfl_xor_sync(0xffffffffu, bv, o);
        int i = __shfl_xor_sync(0xffffffffu, bi, o);
        if (am_better(v, i, bv, bi)) {
            bv = v;
            bi = i;
        }
    }
    __syncthreads(); /* the scratch may still be read by a previous reduction */
    if ((threadIdx.x & 31) == 0) {
        sh.rf[threadIdx.x >> 5] = bv;
        sh.ri[threadIdx.x >> 5] = bi;
    }
    __syncthreads();
    bv = sh.rf[0];
    bi = sh.ri[0];
    for (int w = 1; w < SMP_WARPS; w++)
        if (am_better(sh.rf[w], sh.ri[w], bv, bi)) {
            bv = sh.rf[w];
            bi = sh.ri[w];
        }
    return bi == INT_MAX ? 0 : bi;
}

/* sd_logprob_of's normaliser: m = the largest non-NaN logit, lse = log sum exp(x - m) in double. */
static __device__ void block_lse(const float *row, int V, smp_shared &sh, float *ret_m, double *ret_lse)
{
    float m = -INFINITY;
    for (int i = threadIdx.x; i < V; i += SMP_THREADS)
        m = fmaxf(m, row[i]);
    for (int o = 16; o > 0; o >>= 1)
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    __syncthreads();
    if ((threadIdx.x & 31) == 0)
        sh.rf[threadIdx.x >> 5] = m;
    __syncthreads();
    m = sh.rf[0];
    for (int w = 1; w < SMP_WARPS; w++)
        m = fmaxf(m, sh.rf[w]);
    double s = 0;
    for (int i = threadIdx.x; i < V; i += SMP_THREADS)
        s += exp((double)row[i] - (double)m);
    for (int o = 16; o > 0; o >>= 1)
        s += __shfl_xor_sync(0xffffffffu, s, o);
    if ((threadIdx.x & 31) == 0)
        sh.rd[threadIdx.x >> 5] = s;
    __syncthreads();
    s = 0;
    for (int w = 0; w < SMP_WARPS; w++)
        s += sh.rd[w];
    *ret_m = m;
    *ret_lse = log(s);
}

/* ---- the radix descent (engine/sample_radix.h) ---- */

static __device__ __forceinline__ void flush(smp_shared &sh, int b, uint32_t c, unsigned long long w,
                                             int first)
{
    const int k = (threadIdx.x >> 5) % SMP_COPIES;
    atomicAdd(&sh.cnt[k][b], c);
    atomicAdd(&sh.w[k][b], w);
    atomicMin(&sh.first[k][b], first);
}

/* Sums the copies into copy 0. */
static __device__ void merge_copies(smp_shared &sh)
{
    for (int b = threadIdx.x; b < SD_SR_BUCKETS; b += SMP_THREADS) {
        for (int k = 1; k < SMP_COPIES; k++) {
            sh.cnt[0][b] += sh.cnt[k][b];
            sh.w[0][b] += sh.w[k][b];
            sh.first[0][b] = min(sh.first[0][b], sh.first[k][b]);
        }
    }
}

/* Thread 0's part of a pass: the total and target on the first, then the crossing bucket. */
static __device__ void descend_choose(smp_shared &sh, int keybits, int ge, double frac)
{
    if (sh.fixed == 0) {
        unsigned long long total = 0;
        for (int b = 0; b < SD_SR_BUCKETS; b++)
            total += sh.w[0][b];
        if (frac >= 0)
            sh.target = sd_sr_target(frac, total, ge);
        if (!sd_sr_crosses(total, sh.target, ge)) {
            sh.done = 1;
            return;
        }
    }
    uint64_t before = 0;
    int b = sd_sr_pick_bucket(sh.cnt[0], sh.w[0], sh.target, ge, &before);
    if (b < 0) {
        sh.done = 1;
        return;
    }
    sh.target -= before;
    if (sh.cnt[0][b] == 1 || sh.fixed + SD_SR_DIGIT >= keybits) {
        sh.result = sh.first[0][b];
        sh.done = 1;
        return;
    }
    sh.fixed += SD_SR_DIGIT;
    sh.pre = (sh.pre << SD_SR_DIGIT) | (unsigned long long)b;
}

/* The element of `set` at which the running sum (of p with `mass`, else of 1) in key order
 * crosses frac * total (frac >= 0) or abs_target; -1 when nothing does. Each thread merges
 * runs of equal digits before touching shared memory: the first passes put most of the row in
 * a few buckets. */
static __device__ int descend(const float *row, int V, const sd_sr_set &set, int mass, int ge, double frac,
                              unsigned long long abs_target, smp_shared &sh)
{
    __syncthreads(); /* every thread has read the previous descent's result */
    if (threadIdx.x == 0) {
        sh.fixed = 0;
        sh.pre = 0;
        sh.target = abs_target;
        sh.done = 0;
        sh.result = -1;
    }
    const int kb = set.keybits;
    for (;;) {
        for (int j = threadIdx.x; j < SMP_COPIES * SD_SR_BUCKETS; j += SMP_THREADS) {
            sh.cnt[j / SD_SR_BUCKETS][j % SD_SR_BUCKETS] = 0;
            sh.w[j / SD_SR_BUCKETS][j % SD_SR_BUCKETS] = 0;
            sh.first[j / SD_SR_BUCKETS][j % SD_SR_BUCKETS] = INT_MAX;
        }
        __syncthreads();
        const int fixed = sh.fixed;
        const unsigned long long pre = sh.pre;
        int cur = -1, first = 0;
        uint32_t c = 0;
        unsigned long long w = 0;
        for (int i = threadIdx.x; i < V; i += SMP_THREADS) {
            float x, p = 0;
            uint64_t key;
            if (!sd_sr_member(&set, row[i], i, mass, &x, &key, &p))
                continue;
            if (fixed && (key >> (kb - fixed)) != pre)
                continue;
            int dg = (int)((key >> (kb - fixed - SD_SR_DIGIT)) & (SD_SR_BUCKETS - 1));
            if (dg != cur) {
                if (cur >= 0)
                    flush(sh, cur, c, w, first);
                cur = dg;
                c = 0;
                w = 0;
                first = i;
            }
            c++;
            w += mass ? sd_sr_weight(p, set.sbits) : 1;
        }
        if (cur >= 0)
            flush(sh, cur, c, w, first);
        __syncthreads();
        merge_copies(sh);
        __syncthreads();
        if (threadIdx.x == 0)
            descend_choose(sh, kb, ge, frac);
        __syncthreads();
        if (sh.done)
            return sh.result;
    }
}

static __device__ void set_init(sd_sr_set &s, int V, float scale, float floor, float top)
{
    s.scale = scale;
    s.floor = floor;
    s.top = top;
    s.min_p = 0;
    s.minp_on = 0;
    s.limit = ~0ull;
    s.idbits = sd_sr_idbits(V);
    s.keybits = sd_sr_keybits(s.idbits);
    s.sbits = sd_sr_sbits(s.idbits);
}

/* ---- the steps of one row ---- */

/* The n_top largest raw logits (NaN skipped), ties by lower id, as sd_logprobs_top. */
static __device__ void top_logprobs(const float *row, int V, int n_top, float m, double lse, sd_sample_out *o,
                                    smp_shared &sh)
{
    sd_sr_set set;
    set_init(set, V, 1.0f, -INFINITY, 0);
    int e = descend(row, V, set, 0, 1, -1, (unsigned long long)n_top, sh);
    if (e >= 0)
        set.limit = sd_sr_key(row[e], e, set.idbits);
    if (threadIdx.x == 0)
        sh.n_col = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < V; i += SMP_THREADS) {
        float x, p;
        uint64_t key;
        if (!sd_sr_member(&set, row[i], i, 0, &x, &key, &p))
            continue;
        int slot = atomicAdd(&sh.n_col, 1);
        if (slot < SD_SAMPLE_MAX_TOP) {
            sh.ckey[slot] = key;
            sh.cid[slot] = i;
        }
    }
    __syncthreads();
    if (threadIdx.x != 0)
        return;
    int n = sh.n_col < n_top ? sh.n_col : n_top;
    for (int a = 1; a < n; a++) /* insertion sort of at most 20 by key */
        for (int b = a; b > 0 && sh.ckey[b - 1] > sh.ckey[b]; b--) {
            unsigned long long k = sh.ckey[b];
            int32_t id = sh.cid[b];
            sh.ckey[b] = sh.ckey[b - 1];
            sh.cid[b] = sh.cid[b - 1];
            sh.ckey[b - 1] = k;
            sh.cid[b - 1] = id;
        }
    for (int j = 0; j < n_top; j++) {
        o->top_ids[j] = j < n ? sh.cid[j] : -1;
        o->top_lps[j] = j < n ? (float)((double)row[sh.cid[j]] - (double)m - lse) : -INFINITY;
    }
}

/* The allow mask, then sd_sample's logit bias and penalties, in place, each listed token's value
 * kept in pen_raw. The products and
 * sums are rounded one by one (no FMA) as on the CPU. */
static __device__ void penalties(const cu_row &q, int V)
{
    __syncthreads(); /* the raw row has been read by everyone */
    if (q.allow) {   /* JSON mode: what may not come next cannot be picked */
        for (int i = threadIdx.x; i < V; i += SMP_THREADS)
            if (!((q.allow[i >> 6] >> (i & 63)) & 1ull))
                q.logits[i] = -INFINITY;
        __syncthreads(); /* before the list reads tokens another thread may have masked */
    }
    for (int j = threadIdx.x; j < q.n_pen; j += SMP_THREADS) {
        int32_t t = q.pen[j].token;
        float v = q.logits[t];
        q.pen_raw[j] = v;
        v = __fadd_rn(v, q.pen[j].bias);
        if (q.rep_on && q.pen[j].n_gen >= 0)
            v = v > 0 ? __fdiv_rn(v, q.rep) : __fmul_rn(v, q.rep);
        if (q.pf_on && q.pen[j].n_gen > 0)
            v = __fsub_rn(v, __fadd_rn(q.presence, __fmul_rn(q.frequency, (float)q.pen[j].n_gen)));
        q.logits[t] = v;
    }
    __syncthreads();
}

/* Temperature, top-k, top-p, min-p and the draw (the CPU twin's twin_pick). */
static __device__ int pick(const cu_row &q, int V, int best, smp_shared &sh)
{
    const float *row = q.logits;
    float inv_t = __fdiv_rn(1.0f, q.temperature), top = __fmul_rn(row[best], inv_t);
    sd_sr_set set;
    set_init(set, V, inv_t, __fsub_rn(top, SD_SR_WINDOW), top);
    int e;
    if (q.top_k > 0 && (e = descend(row, V, set, 0, 1, -1, (unsigned long long)q.top_k, sh)) >= 0)
        set.limit = sd_sr_key(__fmul_rn(row[e], inv_t), e, set.idbits);
    if (q.top_p < 1.0f && (e = descend(row, V, set, 1, 1, q.top_p, 0, sh)) >= 0)
        set.limit = sd_sr_key(__fmul_rn(row[e], inv_t), e, set.idbits);
    if (q.min_p > 1.0f && (e = descend(row, V, set, 0, 1, -1, 1, sh)) >= 0) {
        set.limit = sd_sr_key(__fmul_rn(row[e], inv_t), e, set.idbits);
    } else if (q.min_p > 0) {
        set.minp_on = 1;
        set.min_p = q.min_p;
    }
    e = descend(row, V, set, 1, 0, q.u, 0, sh);
    return e >= 0 ? e : best;
}

static __global__ void __launch_bounds__(SMP_THREADS)
    sample_kernel(const cu_row *__restrict__ rows, int V, sd_sample_out *__restrict__ outs)
{
    __shared__ smp_shared sh;
    const cu_row q = rows[blockIdx.x];
    sd_sample_out *o = &outs[blockIdx.x];
    float m = 0;
    double lse = 0;
    if (q.n_top >= 0) {
        block_lse(q.logits, V, sh, &m, &lse);
        if (q.n_top > 0)
            top_logprobs(q.logits, V, q.n_top, m, lse, o, sh);
    }
    penalties(q, V);
    int best = block_argmax(q.logits, V, sh);
    int token = q.greedy ? best : pick(q, V, best, sh);
    if (q.n_top < 0) {
        if (threadIdx.x == 0)
            o->token = token;
        return;
    }
    __syncthreads();
    if (threadIdx.x == 0)
        sh.bf = q.logits[token];
    __syncthreads();
    for (int j = threadIdx.x; j < q.n_pen; j += SMP_THREADS) /* distinct tokens: one match at most */
        if (q.pen[j].token == token)
            sh.bf = q.pen_raw[j];
    __syncthreads();
    if (threadIdx.x == 0) {
        o->token = token;
        o->logprob = (float)((double)sh.bf - (double)m - lse);
    }
}

/* ---- host side ---- */

void sd__cu_sampler_free(sd_cu_sampler *sm)
{
    if (!sm)
        return;
    cudaFreeHost(sm->h_buf);
    cudaFree(sm->d_buf);
    cudaFree(sm->stage);
    memset(sm, 0, sizeof *sm);
}

int sd__cu_sampler_stage(sd_cu_sampler *sm, int rows, int32_t vocab, float **ret, sd_diag *d)
{
    if ((size_t)rows > sm->stage_rows) {
        cudaFree(sm->stage);
        sm->stage = NULL;
        sm->stage_rows = 0;
        SD_CU(d, cudaMalloc((void **)&sm->stage, (size_t)rows * (size_t)vocab * sizeof(float)));
        sm->stage_rows = (size_t)rows;
    }
    *ret = sm->stage;
    return 0;
}

static size_t align256(size_t n)
{
    return (n + 255) & ~(size_t)255;
}

/* Byte offsets of the five regions for n rows, n_pen penalty entries and n_allow allow masks of
 * `words` words (rows, penalties and masks go up in one copy). */
typedef struct smp_layout {
    size_t rows, pen, allow, raw, out, total;
} smp_layout;

static smp_layout layout_of(int n, size_t n_pen, size_t n_allow, size_t words)
{
    smp_layout l;
    l.rows = 0;
    l.pen = align256((size_t)n * sizeof(cu_row));
    l.allow = l.pen + align256(n_pen * sizeof(sd_sample_pen));
    l.raw = l.allow + align256(n_allow * words * sizeof(uint64_t));
    l.out = l.raw + align256(n_pen * sizeof(float));
    l.total = l.out + align256((size_t)n * sizeof(sd_sample_out));
    return l;
}

static int reserve(sd_cu_sampler *sm, size_t bytes, sd_diag *d)
{
    if (bytes <= sm->cap)
        return 0;
    cudaFreeHost(sm->h_buf);
    cudaFree(sm->d_buf);
    sm->h_buf = sm->d_buf = NULL;
    sm->cap = 0;
    bytes += bytes / 2;
    SD_CU(d, cudaMallocHost(&sm->h_buf, bytes));
    SD_CU(d, cudaMalloc(&sm->d_buf, bytes));
    sm->cap = bytes;
    return 0;
}

static int check_reqs(int32_t vocab, const sd_sample_req *reqs, int n, size_t *ret_pen, size_t *ret_allow,
                      sd_diag *d)
{
    size_t n_pen = 0, n_allow = 0;
    for (int i = 0; i < n; i++) {
        const sd_sample_req *q = &reqs[i];
        if (q->n_top > SD_SAMPLE_MAX_TOP || q->n_pen < 0 || (q->n_pen > 0 && !q->pen))
            return sd_diag_set(d, SD_EINVAL, "cuda sample: request %d: n_top %d, %d penalty entries", i,
                               q->n_top, (int)q->n_pen);
        for (int32_t j = 0; j < q->n_pen; j++)
            if (q->pen[j].token < 0 || q->pen[j].token >= vocab)
                return sd_diag_set(d, SD_EINVAL, "cuda sample: request %d: penalty token %d outside [0, %d)",
                                   i, (int)q->pen[j].token, (int)vocab);
        n_pen += (size_t)q->n_pen;
        n_allow += q->allow != NULL;
    }
    *ret_pen = n_pen;
    *ret_allow = n_allow;
    return 0;
}

/* The row descriptors and penalty lists in the pinned buffer, pointing into the device one. */
static void fill_rows(sd_cu_sampler *sm, const smp_layout *l, float *const *rows, const sd_sample_req *reqs,
                      int n, size_t words)
{
    char *h = (char *)sm->h_buf, *dv = (char *)sm->d_buf;
    cu_row *cr = (cu_row *)(h + l->rows);
    sd_sample_pen *pen = (sd_sample_pen *)(h + l->pen);
    uint64_t *allow = (uint64_t *)(h + l->allow);
    size_t off = 0, a = 0;
    for (int i = 0; i < n; i++) {
        const sd_sample_req *q = &reqs[i];
        cu_row *c = &cr[i];
        memset(c, 0, sizeof *c);
        c->logits = rows[i];
        c->pen = (const sd_sample_pen *)(dv + l->pen) + off;
        c->pen_raw = (float *)(dv + l->raw) + off;
        c->n_pen = q->n_pen;
        c->greedy = q->greedy;
        c->rep_on = q->rep_on;
        c->pf_on = q->pf_on;
        c->top_k = q->s.top_k;
        c->n_top = q->n_top;
        c->temperature = q->s.temperature;
        c->top_p = q->s.top_p;
        c->min_p = q->s.min_p;
        c->rep = q->s.repetition_penalty;
        c->presence = q->s.presence_penalty;
        c->frequency = q->s.frequency_penalty;
        c->u = q->u;
        if (q->n_pen)
            memcpy(pen + off, q->pen, sizeof *pen * (size_t)q->n_pen);
        off += (size_t)q->n_pen;
        if (q->allow) {
            memcpy(allow + a * words, q->allow, words * sizeof *allow);
            c->allow = (const unsigned long long *)(dv + l->allow) + a * words;
            a++;
        }
    }
}

int sd__cu_sample(sd_cu_sampler *sm, float *const *rows, int32_t vocab, const sd_sample_req *reqs, int n,
                  sd_sample_out *out, cudaStream_t st, sd_diag *d)
{
    if (n <= 0)
        return 0;
    if (n > 65535 || vocab <= 0 || vocab > (1 << 30))
        return sd_diag_set(d, SD_EINVAL, "cuda sample: %d rows of %d", n, (int)vocab);
    size_t n_pen = 0, n_allow = 0, words = ((size_t)vocab + 63) / 64;
    SD_TRY(check_reqs(vocab, reqs, n, &n_pen, &n_allow, d));
    smp_layout l = layout_of(n, n_pen, n_allow, words);
    SD_TRY(reserve(sm, l.total, d));
    fill_rows(sm, &l, rows, reqs, n, words);
    char *dv = (char *)sm->d_buf;
    SD_CU(d, cudaMemcpyAsync(dv, sm->h_buf, l.raw, cudaMemcpyHostToDevice, st));
    sample_kernel<<<n, SMP_THREADS, 0, st>>>((const cu_row *)dv, vocab, (sd_sample_out *)(dv + l.out));
    SD_CU_LAUNCH(d);
    char *ho = (char *)sm->h_buf + l.out;
    SD_CU(d, cudaMemcpyAsync(ho, dv + l.out, (size_t)n * sizeof(sd_sample_out), cudaMemcpyDeviceToHost, st));
    SD_CU(d, cudaStreamSynchronize(st));
    memcpy(out, ho, (size_t)n * sizeof(sd_sample_out));
    sm->rows_sampled += n;
    return 0;
}
