/* test_attn_fused_gpu: the fused q/k/v post-processing + decode attention kernel
 * (sd__cu_attn_fused, engine/cuda_attn_decode.cu) against the two kernels it replaces
 * (sd__cu_qkv_post then sd__cu_attention) on copies of one paged cache: bit-identical attention
 * output and byte-identical caches, over head_dim 64/128/256, GQA 4/1/8/7 (32/8, 8/8, 16/2, 14/2
 * heads), bias and q/k norm on and off, T = 1, 2, 5 (two graph padding rows in the spare block),
 * 16 single-token sequences at positions 0 to 2047 (block edges, several splits). Each token's
 * own cache row holds a poison (K 0, V 64) before the step: a third run reads a cache that nothing
 * writes (the fused kernel's rows go to a copy), so a read of the stale row would move its output,
 * and the two-kernel attention on that cache is checked to be far from the true output. The two-kernel path
 * (q, written K/V, output) is checked against a CPU fp64 reference. The same with sliding windows
 * (1, 7, 16, 33, 5000), keys left of each window poisoned. Skips without a device. */
#include "tests/harness.h"

#include <stdint.h>

#ifdef SD_HAVE_CUDA
#include <cuda_runtime.h>

#include "engine/cuda_attn_fused.h"
#include "engine/cuda_attn_prefill.h"
#include "engine/cuda_backend.h"
#include "engine/dtype.h"

#define BS 16   /* KV block size, as the backend's default */
#define SPARE 3 /* pool blocks no sequence uses (poison); the last takes the padding rows */
/* Rows no step has written (the tokens' own rows among them): K 0 and V 64 in bf16. A stale read
 * of an own row then gives the key a weight near 1/n and pulls the output towards 64, which no
 * real output is near. (NaN would not do: a split whose only key scores NaN keeps max -inf and the
 * merge gives it weight 0, so the poison can vanish.) */
#define POISON_K 0x0000
#define POISON_V 0x4280
#define EPS 1e-6f
#define REF_TOKENS 4 /* tokens per case checked against the fp64 reference */

typedef struct rng {
    uint64_t s;
} rng;

static double urand(rng *r) /* uniform in [-1, 1) */
{
    r->s = r->s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(r->s >> 11) / (double)(1ull << 52) - 1.0;
}

/* One decode step: T single-token sequences, the last n_pad of them graph padding rows. */
typedef struct fcase {
    int n_heads, n_kv, hd, T, n_pad, bias, norm, min_chunk;
    const int *pos; /* [T - n_pad] */
    int window;     /* sliding window (0: none): the token at p attends keys (p - window, p] */
} fcase;

typedef struct fstep {
    fcase c;
    int n_qkv, n_blocks, max_bt, n_splits;
    size_t kvn;                  /* cache elements */
    float *qkv, *bias, *qn, *kn; /* host: [T, n_qkv*hd], [n_qkv*hd], [hd], [hd] */
    float *inv;                  /* [hd/2] */
    int32_t *pos, *seq, *bt;     /* [T], [T], [T, max_bt] */
    uint16_t *k0, *v0;           /* the cache before the step */
    float *dqkv, *dbias, *dqn, *dkn, *dinv, *dq, *dacc, *dml;
    int32_t *dpos, *dseq, *dbt;
    int *dcnt;
    uint16_t *dk[4], *dv[4], *dout; /* caches: two-kernel, fused, read-only, fused's writes */
} fstep;

static int upload(void **dst, const void *src, size_t bytes)
{
    if (cudaMalloc(dst, bytes ? bytes : 1) != cudaSuccess)
        return -1;
    return src && cudaMemcpy(*dst, src, bytes, cudaMemcpyHostToDevice) != cudaSuccess ? -1 : 0;
}

static void fstep_free(fstep *s)
{
    free(s->qkv);
    free(s->bias);
    free(s->qn);
    free(s->kn);
    free(s->inv);
    free(s->pos);
    free(s->seq);
    free(s->bt);
    free(s->k0);
    free(s->v0);
    void *dev[] = {s->dqkv,  s->dbias, s->dqn,   s->dkn,   s->dinv,  s->dq,    s->dacc,
                   s->dml,   s->dpos,  s->dseq,  s->dbt,   s->dcnt,  s->dout,  s->dk[0],
                   s->dk[1], s->dk[2], s->dk[3], s->dv[0], s->dv[1], s->dv[2], s->dv[3]};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        cudaFree(dev[i]);
}

/* First key the token at position p attends (transformers' sliding_window_overlay: k > p - W). */
static int first_key(const fcase *c, int p)
{
    return c->window > 0 && p + 1 > c->window ? p + 1 - c->window : 0;
}

/* Random qkv rows (the padding rows all equal, as the engine's are), weights, and a cache whose
 * slots hold random keys from each token's window start to below its position and the poison
 * everywhere else (the token's own slot and the keys left of its window included: a read of
 * those shows); block tables drawn from a shuffled pool. */
static int fstep_make(fstep *s, const fcase *c, uint64_t seed)
{
    memset(s, 0, sizeof *s);
    s->c = *c;
    rng r = {seed};
    int hd = c->hd, T = c->T, real = T - c->n_pad, used = 0;
    s->n_qkv = c->n_heads + 2 * c->n_kv;
    s->max_bt = 1;
    for (int t = 0; t < real; t++) {
        int nb = c->pos[t] / BS + 1;
        used += nb;
        s->max_bt = nb > s->max_bt ? nb : s->max_bt;
    }
    s->n_blocks = used + SPARE;
    s->kvn = (size_t)s->n_blocks * c->n_kv * BS * hd;
    size_t row = (size_t)s->n_qkv * hd;
    s->qkv = malloc((size_t)T * row * 4);
    s->bias = malloc(row * 4);
    s->qn = malloc((size_t)hd * 4);
    s->kn = malloc((size_t)hd * 4);
    s->inv = malloc((size_t)hd / 2 * 4);
    s->pos = malloc((size_t)T * 4);
    s->seq = malloc((size_t)T * 4);
    s->bt = calloc((size_t)T * s->max_bt, 4);
    s->k0 = malloc(s->kvn * 2);
    s->v0 = malloc(s->kvn * 2);
    int *perm = malloc((size_t)s->n_blocks * sizeof(int));
    if (!s->qkv || !s->bias || !s->qn || !s->kn || !s->inv || !s->pos || !s->seq || !s->bt || !s->k0 ||
        !s->v0 || !perm) {
        free(perm);
        return -1;
    }
    for (size_t i = 0; i < (size_t)T * row; i++)
        s->qkv[i] = (float)(2.0 * urand(&r));
    for (int t = real + 1; t < T; t++) /* padding rows: the same token at position 0 */
        memcpy(s->qkv + (size_t)t * row, s->qkv + (size_t)real * row, row * 4);
    for (size_t i = 0; i < row; i++)
        s->bias[i] = (float)(0.5 * urand(&r));
    for (int i = 0; i < hd; i++) {
        s->qn[i] = (float)(1.0 + 0.5 * urand(&r));
        s->kn[i] = (float)(1.0 + 0.5 * urand(&r));
    }
    for (int i = 0; i < hd / 2; i++) /* Llama's RoPE frequencies, theta 500000 */
        s->inv[i] = (float)(1.0 / pow(500000.0, 2.0 * i / hd));
    for (size_t i = 0; i < s->kvn; i++)
        s->k0[i] = POISON_K, s->v0[i] = POISON_V;
    for (int i = 0; i < s->n_blocks - 1; i++) /* the last block stays the spare one */
        perm[i] = i;
    for (int i = s->n_blocks - 2; i > 0; i--) {
        int j = (int)((urand(&r) + 1.0) * 0.5 * (i + 1)) % (i + 1), x = perm[i];
        perm[i] = perm[j];
        perm[j] = x;
    }
    int next = 0;
    for (int t = 0; t < T; t++) {
        s->seq[t] = t;
        if (t >= real) {
            s->pos[t] = 0;
            s->bt[(size_t)t * s->max_bt] = s->n_blocks - 1;
            continue;
        }
        s->pos[t] = c->pos[t];
        for (int b = 0; b <= c->pos[t] / BS; b++)
            s->bt[(size_t)t * s->max_bt + b] = perm[next++];
        for (int key = first_key(c, c->pos[t]); key < c->pos[t]; key++) /* own slot: the poison */
            for (int kv = 0; kv < c->n_kv; kv++) {
                size_t o =
                    (((size_t)s->bt[(size_t)t * s->max_bt + key / BS] * c->n_kv + kv) * BS + key % BS) * hd;
                for (int e = 0; e < hd; e++) {
                    s->k0[o + e] = sd_f32_to_bf16((float)urand(&r));
                    s->v0[o + e] = sd_f32_to_bf16((float)urand(&r));
                }
            }
    }
    free(perm);
    int sms = 132;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    s->n_splits = sd__cu_attn_splits(sms, T, c->n_heads, c->n_kv); /* as the backend */
    size_t qn = (size_t)T * c->n_heads * hd, parts = qn * s->n_splits;
    if (upload((void **)&s->dqkv, s->qkv, (size_t)T * row * 4) ||
        upload((void **)&s->dbias, s->bias, row * 4) || upload((void **)&s->dqn, s->qn, (size_t)hd * 4) ||
        upload((void **)&s->dkn, s->kn, (size_t)hd * 4) ||
        upload((void **)&s->dinv, s->inv, (size_t)hd / 2 * 4) || upload((void **)&s->dq, NULL, qn * 4) ||
        upload((void **)&s->dacc, NULL, parts * 4) || upload((void **)&s->dml, NULL, parts / hd * 2 * 4) ||
        upload((void **)&s->dpos, s->pos, (size_t)T * 4) ||
        upload((void **)&s->dseq, s->seq, (size_t)T * 4) ||
        upload((void **)&s->dbt, s->bt, (size_t)T * s->max_bt * 4) ||
        upload((void **)&s->dcnt, NULL, (size_t)T * c->n_heads * sizeof(int)) ||
        cudaMemset(s->dcnt, 0, (size_t)T * c->n_heads * sizeof(int)) != cudaSuccess ||
        upload((void **)&s->dout, NULL, qn * 2))
        return -1;
    for (int i = 0; i < 4; i++)
        if (upload((void **)&s->dk[i], s->k0, s->kvn * 2) || upload((void **)&s->dv[i], s->v0, s->kvn * 2))
            return -1;
    return 0;
}

/* Runs mode (0 two kernels on cache 0, 1 fused on cache 1, 2 fused reading cache 2 and writing
 * cache 3, the splits merged in a thread-block cluster wherever the device can; 3 and 4: modes 0
 * and 1 again with the splits merged through global memory; 5 and 6: modes 1 and 4 with each warp's
 * first K/V tile loaded before the PDL wait, sd_cu_attn_args.early) into out (bf16 bits, [T,
 * n_heads*hd]; NaN-filled first). Modes 3 to 6 rewrite the token's own rows of caches 0 and 1 with
 * the same bits. */
static int fstep_run(fstep *s, int mode, uint16_t *out)
{
    const fcase *c = &s->c;
    size_t qn = (size_t)c->T * c->n_heads * c->hd;
    const int early = mode >= 5;
    if (early)
        mode = mode == 5 ? 1 : 4;
    const int global = mode >= 3;
    if (global)
        mode -= 3;
    int ci = mode == 0 ? 0 : mode == 1 ? 1 : 2;
    if (cudaMemset(s->dout, 0xff, qn * 2) != cudaSuccess)
        return -1;
    sd_cu_fused_test a = {s->dqkv,
                          c->bias ? s->dbias : NULL,
                          c->norm ? s->dqn : NULL,
                          c->norm ? s->dkn : NULL,
                          s->dinv,
                          EPS,
                          s->dpos,
                          s->dseq,
                          s->dbt,
                          s->max_bt,
                          BS,
                          c->T,
                          c->n_heads,
                          c->n_kv,
                          c->hd,
                          s->dk[ci],
                          s->dv[ci],
                          mode == 2 ? s->dk[3] : NULL,
                          mode == 2 ? s->dv[3] : NULL,
                          s->dq,
                          s->n_splits,
                          s->dacc,
                          s->dml,
                          s->dcnt,
                          c->min_chunk,
                          s->dout,
                          c->window,
                          global ? SD_ATTN_CLUSTER_NEVER : SD_ATTN_CLUSTER_ALWAYS,
                          early};
    sd_diag d = {0};
    int rc = sd_cu_attn_fused_test_run(mode != 0, &a, &d);
    if (rc) {
        fprintf(stderr, "  mode %d: %s\n", mode, sd_diag_str(&d, rc));
        return rc;
    }
    cudaError_t e = cudaDeviceSynchronize();
    if (e == cudaSuccess)
        e = cudaMemcpy(out, s->dout, qn * 2, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) {
        fprintf(stderr, "  mode %d: %s\n", mode, cudaGetErrorString(e));
        return -1;
    }
    return 0;
}

/* fp64 twin of qkv_post for head hh of token t: bias, norm (q and k heads), RoPE (q and k). */
static void ref_head(const fstep *s, int t, int hh, double *x)
{
    const fcase *c = &s->c;
    int hd = c->hd, half = hd / 2, is_q = hh < c->n_heads, is_v = hh >= c->n_heads + c->n_kv;
    const float *row = s->qkv + ((size_t)t * s->n_qkv + hh) * hd;
    for (int i = 0; i < hd; i++)
        x[i] = (double)row[i] + (c->bias ? s->bias[(size_t)hh * hd + i] : 0.0);
    if (is_v)
        return;
    if (c->norm) {
        double ss = 0;
        for (int i = 0; i < hd; i++)
            ss += x[i] * x[i];
        double r = 1.0 / sqrt(ss / hd + EPS);
        for (int i = 0; i < hd; i++)
            x[i] *= r * (is_q ? s->qn[i] : s->kn[i]);
    }
    for (int i = 0; i < half; i++) {
        float af = (float)s->pos[t] * s->inv[i]; /* an fp32 angle, as the kernel and HF compute it */
        double a = af, x1 = x[i], x2 = x[i + half];
        x[i] = x1 * cos(a) - x2 * sin(a);
        x[i + half] = x2 * cos(a) + x1 * sin(a);
    }
}

static double bf16_round(double x)
{
    return sd_bf16_to_f32(sd_f32_to_bf16((float)x));
}

/* Relative L2 of the two-kernel path against fp64, over REF_TOKENS real tokens: q (fp32 in dq),
 * the K/V rows it wrote into cache 0 (kc, vc: host copies) and the attention output. */
static void check_reference(const fstep *s, const uint16_t *out, const uint16_t *kc, const uint16_t *vc,
                            double err[3])
{
    const fcase *c = &s->c;
    int hd = c->hd, g = c->n_heads / c->n_kv, real = c->T - c->n_pad;
    size_t qn = (size_t)c->T * c->n_heads * hd;
    float *q = malloc(qn * 4);
    double *x = malloc((size_t)hd * sizeof(double)), *kcur = malloc((size_t)c->n_kv * hd * sizeof(double)),
           *vcur = malloc((size_t)c->n_kv * hd * sizeof(double)), *o = malloc((size_t)hd * sizeof(double));
    double num[3] = {0, 0, 0}, den[3] = {0, 0, 0};
    if (!q || !x || !kcur || !vcur || !o ||
        cudaMemcpy(q, s->dq, qn * 4, cudaMemcpyDeviceToHost) != cudaSuccess)
        goto out;
    for (int k = 0; k < REF_TOKENS; k++) {
        int t = k == REF_TOKENS - 1 ? real - 1 : k * real / REF_TOKENS, n = s->pos[t] + 1,
            lo = first_key(c, s->pos[t]);
        if (k && t == (k - 1) * real / REF_TOKENS)
            continue; /* fewer real tokens than REF_TOKENS */
        const int32_t *bt = s->bt + (size_t)t * s->max_bt;
        for (int kv = 0; kv < c->n_kv; kv++) { /* the token's own K/V: written rows vs fp64 */
            size_t o0 = (((size_t)bt[s->pos[t] / BS] * c->n_kv + kv) * BS + s->pos[t] % BS) * hd;
            ref_head(s, t, c->n_heads + kv, kcur + (size_t)kv * hd);
            ref_head(s, t, c->n_heads + c->n_kv + kv, vcur + (size_t)kv * hd);
            for (int e = 0; e < hd; e++) {
                double dk = sd_bf16_to_f32(kc[o0 + e]) - kcur[kv * hd + e];
                double dv = sd_bf16_to_f32(vc[o0 + e]) - vcur[kv * hd + e];
                num[1] += dk * dk + dv * dv;
                den[1] += kcur[kv * hd + e] * kcur[kv * hd + e] + vcur[kv * hd + e] * vcur[kv * hd + e];
                kcur[kv * hd + e] = bf16_round(kcur[kv * hd + e]); /* the attention sees the cache's bf16 */
                vcur[kv * hd + e] = bf16_round(vcur[kv * hd + e]);
            }
        }
        for (int h = 0; h < c->n_heads; h++) {
            ref_head(s, t, h, x);
            const float *qg = q + ((size_t)t * c->n_heads + h) * hd;
            for (int e = 0; e < hd; e++) {
                num[0] += (qg[e] - x[e]) * (qg[e] - x[e]);
                den[0] += x[e] * x[e];
            }
            double mx = -INFINITY, sum = 0, *sc = malloc((size_t)n * sizeof(double));
            if (!sc)
                goto out;
            for (int j = lo; j < n; j++) {
                size_t oj = (((size_t)bt[j / BS] * c->n_kv + h / g) * BS + j % BS) * hd;
                double dot = 0;
                for (int e = 0; e < hd; e++)
                    dot +=
                        x[e] * (j == n - 1 ? kcur[(size_t)(h / g) * hd + e] : sd_bf16_to_f32(s->k0[oj + e]));
                sc[j] = dot / sqrt((double)hd);
                mx = sc[j] > mx ? sc[j] : mx;
            }
            for (int e = 0; e < hd; e++)
                o[e] = 0;
            for (int j = lo; j < n; j++) {
                size_t oj = (((size_t)bt[j / BS] * c->n_kv + h / g) * BS + j % BS) * hd;
                double p = exp(sc[j] - mx);
                sum += p;
                for (int e = 0; e < hd; e++)
                    o[e] += p * (j == n - 1 ? vcur[(size_t)(h / g) * hd + e] : sd_bf16_to_f32(s->v0[oj + e]));
            }
            free(sc);
            const uint16_t *og = out + ((size_t)t * c->n_heads + h) * hd;
            for (int e = 0; e < hd; e++) {
                double r = o[e] / sum, d = sd_bf16_to_f32(og[e]) - r;
                num[2] += d * d;
                den[2] += r * r;
            }
        }
    }
out:
    for (int i = 0; i < 3; i++)
        err[i] = num[i] == num[i] && den[i] > 0 ? sqrt(num[i] / den[i]) : INFINITY; /* NaN: fails */
    free(q);
    free(x);
    free(kcur);
    free(vcur);
    free(o);
}

/* 1 when every real token's output row, computed by the two-kernel attention on the cache that
 * lacks the own rows, is far from the true output `good` (rel L2 > 0.1): the poison shows. */
static int stale_shows(const fstep *s, const uint16_t *good)
{
    const fcase *c = &s->c;
    size_t row = (size_t)c->n_heads * c->hd, qn = (size_t)c->T * row;
    sd_cu_attn_test a = {s->dq, s->dk[2],   s->dv[2], s->dpos, s->dseq,      s->dbt,   s->max_bt, BS,
                         c->T,  c->n_heads, c->n_kv,  c->hd,   s->n_splits,  s->dacc,  s->dml,    s->dout,
                         NULL,  0,          0,        s->dcnt, c->min_chunk, c->window};
    uint16_t *h = malloc(qn * 2);
    int all = h && sd_cu_attn_test_run(SD_ATTN_PATH_SPLIT, &a, NULL) == 0 &&
              cudaDeviceSynchronize() == cudaSuccess &&
              cudaMemcpy(h, s->dout, qn * 2, cudaMemcpyDeviceToHost) == cudaSuccess;
    for (int t = 0; all && t < c->T - c->n_pad; t++) {
        double num = 0, den = 0;
        for (size_t i = t * row; i < (t + 1) * row; i++) {
            double x = sd_bf16_to_f32(h[i]), y = sd_bf16_to_f32(good[i]);
            num += (x - y) * (x - y);
            den += y * y;
        }
        all = num > 0.01 * den;
    }
    free(h);
    return all;
}

static int cache_equal(const fstep *s, int i, const uint16_t *kref, const uint16_t *vref, uint16_t *kbuf,
                       uint16_t *vbuf)
{
    if (cudaMemcpy(kbuf, s->dk[i], s->kvn * 2, cudaMemcpyDeviceToHost) != cudaSuccess ||
        cudaMemcpy(vbuf, s->dv[i], s->kvn * 2, cudaMemcpyDeviceToHost) != cudaSuccess)
        return 0;
    return !memcmp(kbuf, kref, s->kvn * 2) && !memcmp(vbuf, vref, s->kvn * 2);
}

/* One case: the three runs, bit and byte comparisons, the poison check, the fp64 reference. */
static void one_case(const fcase *c, uint64_t seed, double worst[3])
{
    fstep s;
    uint16_t *o[7] = {NULL}, *kc = NULL, *vc = NULL, *kb = NULL, *vb = NULL;
    char name[128];
    snprintf(name, sizeof name, "hd %d heads %d/%d T %d (pad %d) bias %d norm %d chunk %d window %d", c->hd,
             c->n_heads, c->n_kv, c->T, c->n_pad, c->bias, c->norm, c->min_chunk, c->window);
    if (fstep_make(&s, c, seed)) {
        CHECK_MSG(0, "%s: set-up failed", name);
        goto out;
    }
    size_t qn = (size_t)c->T * c->n_heads * c->hd;
    for (int i = 0; i < 7; i++)
        o[i] = malloc(qn * 2);
    kc = malloc(s.kvn * 2), vc = malloc(s.kvn * 2), kb = malloc(s.kvn * 2), vb = malloc(s.kvn * 2);
    if (!o[0] || !o[1] || !o[2] || !o[3] || !o[4] || !o[5] || !o[6] || !kc || !vc || !kb || !vb) {
        CHECK_MSG(0, "%s: out of memory", name);
        goto out;
    }
    int ok = 1;
    for (int m = 0; m < 7; m++)
        ok &= fstep_run(&s, m, o[m]) == 0;
    CHECK_MSG(ok, "%s: a run failed", name);
    if (!ok || cudaMemcpy(kc, s.dk[0], s.kvn * 2, cudaMemcpyDeviceToHost) != cudaSuccess ||
        cudaMemcpy(vc, s.dv[0], s.kvn * 2, cudaMemcpyDeviceToHost) != cudaSuccess)
        goto out;
    CHECK_MSG(!memcmp(o[0], o[1], qn * 2), "%s: fused output differs from the two kernels'", name);
    CHECK_MSG(!memcmp(o[0], o[2], qn * 2), "%s: fused output on the never-written cache differs", name);
    CHECK_MSG(!memcmp(o[0], o[3], qn * 2), "%s: the global-memory merge differs from the cluster's", name);
    CHECK_MSG(!memcmp(o[0], o[4], qn * 2), "%s: fused, the global-memory merge differs", name);
    CHECK_MSG(!memcmp(o[0], o[5], qn * 2), "%s: fused, the first tile loaded early differs", name);
    CHECK_MSG(!memcmp(o[0], o[6], qn * 2), "%s: fused, early and the global merge, differs", name);
    CHECK_MSG(cache_equal(&s, 1, kc, vc, kb, vb), "%s: fused cache differs from the two kernels'", name);
    CHECK_MSG(cache_equal(&s, 3, kc, vc, kb, vb), "%s: fused writes differ from the two kernels'", name);
    CHECK_MSG(cache_equal(&s, 2, s.k0, s.v0, kb, vb), "%s: the read-only cache was written", name);
    double err[3];
    check_reference(&s, o[0], kc, vc, err);
    CHECK_MSG(err[0] <= 1e-5, "%s: q vs fp64 rel L2 %.3g", name, err[0]);
    CHECK_MSG(err[1] <= 1e-2, "%s: written K/V vs fp64 rel L2 %.3g", name, err[1]);
    CHECK_MSG(err[2] <= 1e-2, "%s: output vs fp64 rel L2 %.3g", name, err[2]);
    for (int i = 0; i < 3; i++)
        worst[i] = err[i] > worst[i] ? err[i] : worst[i];
    /* last: it overwrites the output and partials */
    CHECK_MSG(stale_shows(&s, o[0]),
              "%s: attention on the stale cache is close to the true output: the "
              "poison would not show",
              name);
out:
    for (int i = 0; i < 7; i++)
        free(o[i]);
    free(kc);
    free(vc);
    free(kb);
    free(vb);
    fstep_free(&s);
}

static void test_fused_vs_two_kernels(void)
{
    if (sd_cuda_device_count() <= 0)
        SKIP("no CUDA device");
    static const int positions[16] = {0, 15, 16, 2047, 31, 1000, 5, 130, 17, 511, 64, 700, 1, 300, 33, 1500};
    static const int heads[4][2] = {{32, 8}, {8, 8}, {16, 2}, {14, 2}}, hds[3] = {64, 128, 256};
    static const int Ts[4] = {1, 2, 5, 16};
    double worst[3] = {0, 0, 0};
    int cases = 0;
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 4; b++)
            for (int k = 0; k < 4; k++) {
                int ci = 16 * a + 4 * b + k, pos[16];
                for (int i = 0; i < 16; i++) /* a different position set per case */
                    pos[i] = positions[(i + ci) % 16];
                fcase c = {heads[b][0],  heads[b][1],       hds[a],         Ts[k], Ts[k] == 5 ? 2 : 0,
                           (ci + a) & 1, (ci + a) >> 1 & 1, k & 1 ? 0 : 64, pos,   0};
                one_case(&c, 1000003u * (uint64_t)ci + 17u, worst);
                cases++;
            }
    fprintf(stderr, "  %d cases: worst rel L2 vs fp64: q %.2e, written K/V %.2e, output %.2e\n", cases,
            worst[0], worst[1], worst[2]);
}

/* The same with sliding windows: 1 (only the own key, from the prologue's rows), 7 and 33 (not
 * multiples of the block size), 16 (one block), 5000 (past every context: full attention). The
 * keys left of each window hold the poison, so a kernel that read them would be far from the
 * fp64 reference, which attends the window only. */
static void test_fused_window(void)
{
    if (sd_cuda_device_count() <= 0)
        SKIP("no CUDA device");
    static const int positions[16] = {0, 15, 16, 2047, 31, 1000, 5, 130, 17, 511, 64, 700, 1, 300, 33, 1500};
    static const int heads[2][2] = {{32, 8}, {14, 2}}, hds[3] = {64, 128, 256},
                     windows[5] = {1, 7, 16, 33, 5000};
    static const int Ts[3] = {1, 5, 16};
    double worst[3] = {0, 0, 0};
    int cases = 0;
    for (int w = 0; w < 5; w++)
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 2; b++)
                for (int k = 0; k < 3; k++) {
                    int ci = 18 * w + 6 * a + 3 * b + k, pos[16];
                    for (int i = 0; i < 16; i++)
                        pos[i] = positions[(i + ci) % 16];
                    fcase c = {
                        heads[b][0],   heads[b][1],       hds[a], Ts[k],     Ts[k] == 5 ? 2 : 0, ci & 1,
                        (ci >> 1) & 1, (ci % 3) ? 64 : 0, pos,    windows[w]};
                    one_case(&c, 7919u * (uint64_t)ci + 3u, worst);
                    cases++;
                }
    fprintf(stderr, "  %d windowed cases: worst rel L2 vs fp64: q %.2e, written K/V %.2e, output %.2e\n",
            cases, worst[0], worst[1], worst[2]);
}

static void test_env_switch(void)
{
    const char *was = getenv("SD_ATTN_FUSED");
    char *saved = was ? strdup(was) : NULL;
    unsetenv("SD_ATTN_FUSED");
    CHECK(sd_cu_attn_fused_enabled() == 1);
    setenv("SD_ATTN_FUSED", "0", 1);
    CHECK(sd_cu_attn_fused_enabled() == 0);
    setenv("SD_ATTN_FUSED", "1", 1);
    CHECK(sd_cu_attn_fused_enabled() == 1);
    if (saved)
        setenv("SD_ATTN_FUSED", saved, 1);
    else
        unsetenv("SD_ATTN_FUSED");
    free(saved);
}

int main(void)
{
    RUN(test_env_switch);
    RUN(test_fused_vs_two_kernels);
    RUN(test_fused_window);
    return sd_test_done();
}

#else

static void test_no_cuda(void)
{
    SKIP("built without CUDA");
}

int main(void)
{
    RUN(test_no_cuda);
    return sd_test_done();
}

#endif
