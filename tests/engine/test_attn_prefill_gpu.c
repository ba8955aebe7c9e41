/* test_attn_prefill_gpu: the tiled causal prefill attention (engine/cuda_attn_prefill.cu) on
 * random q and bf16 K/V in a paged cache with shuffled block tables (unused slots hold NaN, so a
 * read outside the sequence's keys shows): T in {1, 17, 64, 300, 1000}, a first chunk and a
 * later one, GQA 1/4/8, head_dim 64/128, against a CPU fp64 reference and the split kernel; a
 * mixed step (decodes and chunks of several sequences) through the step dispatch; decode steps
 * (one token per sequence, GQA 1-16, head_dim 64-256) through the decode kernel; the
 * same with sliding windows (1, not a multiple of the block, past the context) in both kernels;
 * the SD_ATTN_PREFILL switch. Prints (does not check) the decode and tiled kernels' times for T = 2048. GPU
 * parts skip without a device. */
#include "tests/harness.h"

#include <stdint.h>

#ifdef SD_HAVE_CUDA
#include <cuda_runtime.h>

#include "engine/cuda_attn_prefill.h"
#include "engine/cuda_backend.h"
#include "engine/dtype.h"

#define BS 16           /* KV block size, as the backend's default */
#define SPARE_BLOCKS 5  /* pool blocks no sequence uses (NaN) */
#define CHECK_ROWS 64   /* rows checked against the fp64 reference in a long case */
#define NAN_BF16 0x7fc0 /* a quiet NaN in bf16 */

typedef struct rng {
    uint64_t s;
} rng;

static double urand(rng *r) /* uniform in [-1, 1) */
{
    r->s = r->s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(r->s >> 11) / (double)(1ull << 52) - 1.0;
}

/* One step: n_seqs sequences, sequence i with len[i] tokens from position start[i]. */
typedef struct step {
    int n_seqs, T, n_heads, n_kv, hd, n_blocks, max_bt, n_splits;
    const int *len, *start;
    float *q;           /* [T, n_heads*hd] */
    uint16_t *k, *v;    /* [n_blocks, n_kv, BS, hd] */
    int32_t *pos, *seq; /* [T] */
    int32_t *bt;        /* [n_seqs, max_bt] */
    /* device copies */
    float *dq, *dacc, *dml;
    uint16_t *dk, *dv, *dout;
    int32_t *dpos, *dseq, *dbt;
    int *dcnt;     /* the decode kernel's split counters */
    int min_chunk; /* the decode kernel's keys per split at least */
    int window;    /* sliding window (0: none): token at p attends keys (p - window, p] */
} step;

static int splits_for(int T, int n_heads, int n_kv)
{
    int sms = 132;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    return sd__cu_attn_splits(sms, T, n_heads, n_kv); /* as the backend */
}

static void step_free(step *s)
{
    free(s->q);
    free(s->k);
    free(s->v);
    free(s->pos);
    free(s->seq);
    free(s->bt);
    cudaFree(s->dq);
    cudaFree(s->dacc);
    cudaFree(s->dml);
    cudaFree(s->dk);
    cudaFree(s->dv);
    cudaFree(s->dout);
    cudaFree(s->dpos);
    cudaFree(s->dseq);
    cudaFree(s->dbt);
    cudaFree(s->dcnt);
}

static int upload(void **dst, const void *src, size_t bytes)
{
    if (cudaMalloc(dst, bytes ? bytes : 1) != cudaSuccess)
        return -1;
    return src && cudaMemcpy(*dst, src, bytes, cudaMemcpyHostToDevice) != cudaSuccess ? -1 : 0;
}

/* Random q, K, V; each sequence's blocks drawn from a shuffled pool; every slot of the pool
 * that holds no key of a sequence (spare blocks, the tail of a last block) is NaN. */
static int step_make(step *s, int n_seqs, const int *len, const int *start, int n_heads, int n_kv, int hd,
                     uint64_t seed)
{
    memset(s, 0, sizeof *s);
    rng r = {seed};
    s->n_seqs = n_seqs, s->len = len, s->start = start, s->n_heads = n_heads, s->n_kv = n_kv, s->hd = hd;
    int used = 0;
    for (int i = 0; i < n_seqs; i++) {
        int nb = (start[i] + len[i] + BS - 1) / BS;
        used += nb;
        s->max_bt = nb > s->max_bt ? nb : s->max_bt;
        s->T += len[i];
    }
    s->n_blocks = used + SPARE_BLOCKS;
    size_t qn = (size_t)s->T * n_heads * hd, kvn = (size_t)s->n_blocks * n_kv * BS * hd;
    s->q = malloc(qn * 4);
    s->k = malloc(kvn * 2);
    s->v = malloc(kvn * 2);
    s->pos = malloc((size_t)s->T * 4);
    s->seq = malloc((size_t)s->T * 4);
    s->bt = calloc((size_t)n_seqs * s->max_bt, 4);
    int *perm = malloc((size_t)s->n_blocks * sizeof(int));
    if (!s->q || !s->k || !s->v || !s->pos || !s->seq || !s->bt || !perm) {
        free(perm);
        return -1;
    }
    for (size_t i = 0; i < qn; i++)
        s->q[i] = (float)(4.0 * urand(&r)); /* scores of std ~1: a softmax far from flat */
    for (size_t i = 0; i < kvn; i++)
        s->k[i] = s->v[i] = NAN_BF16;
    for (int i = 0; i < s->n_blocks; i++)
        perm[i] = i;
    for (int i = s->n_blocks - 1; i > 0; i--) {
        int j = (int)((urand(&r) + 1.0) * 0.5 * (i + 1)) % (i + 1), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    int next = 0, t = 0;
    for (int i = 0; i < n_seqs; i++) {
        int n_keys = start[i] + len[i], nb = (n_keys + BS - 1) / BS;
        for (int b = 0; b < nb; b++)
            s->bt[(size_t)i * s->max_bt + b] = perm[next++];
        for (int key = 0; key < n_keys; key++)
            for (int kv = 0; kv < n_kv; kv++) {
                size_t o =
                    (((size_t)s->bt[(size_t)i * s->max_bt + key / BS] * n_kv + kv) * BS + key % BS) * hd;
                for (int e = 0; e < hd; e++) {
                    s->k[o + e] = sd_f32_to_bf16((float)urand(&r));
                    s->v[o + e] = sd_f32_to_bf16((float)urand(&r));
                }
            }
        for (int k = 0; k < len[i]; k++, t++) {
            s->pos[t] = start[i] + k;
            s->seq[t] = i;
        }
    }
    free(perm);
    s->n_splits = splits_for(s->T, n_heads, n_kv);
    size_t parts = (size_t)s->T * n_heads * s->n_splits;
    if (upload((void **)&s->dq, s->q, qn * 4) || upload((void **)&s->dk, s->k, kvn * 2) ||
        upload((void **)&s->dv, s->v, kvn * 2) || upload((void **)&s->dpos, s->pos, (size_t)s->T * 4) ||
        upload((void **)&s->dseq, s->seq, (size_t)s->T * 4) ||
        upload((void **)&s->dbt, s->bt, (size_t)n_seqs * s->max_bt * 4) ||
        upload((void **)&s->dout, NULL, qn * 2) || upload((void **)&s->dacc, NULL, parts * hd * 4) ||
        upload((void **)&s->dml, NULL, parts * 2 * 4) ||
        upload((void **)&s->dcnt, NULL, (size_t)s->T * n_heads * sizeof(int)) ||
        cudaMemset(s->dcnt, 0, (size_t)s->T * n_heads * sizeof(int)) != cudaSuccess)
        return -1;
    return 0;
}

/* Runs path into out (host, floats [T, n_heads*hd]); the output is NaN-filled first. */
static int step_run(step *s, int path, int min_run, float *out)
{
    size_t qn = (size_t)s->T * s->n_heads * s->hd;
    if (cudaMemset(s->dout, 0xff, qn * 2) != cudaSuccess)
        return -1;
    sd_cu_attn_test a = {s->dq,  s->dk,      s->dv,   s->dpos, s->dseq,      s->dbt,   s->max_bt, BS,
                         s->T,   s->n_heads, s->n_kv, s->hd,   s->n_splits,  s->dacc,  s->dml,    s->dout,
                         s->len, s->n_seqs,  min_run, s->dcnt, s->min_chunk, s->window};
    sd_diag d = {0};
    int rc = sd_cu_attn_test_run(path, &a, &d);
    if (rc) {
        fprintf(stderr, "  path %d: %s\n", path, sd_diag_str(&d, rc));
        return rc;
    }
    cudaError_t e = cudaDeviceSynchronize();
    uint16_t *h = malloc(qn * 2);
    if (e == cudaSuccess && h)
        e = cudaMemcpy(h, s->dout, qn * 2, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess || !h) {
        fprintf(stderr, "  path %d: %s\n", path, cudaGetErrorString(e));
        free(h);
        return -1;
    }
    for (size_t i = 0; i < qn; i++)
        out[i] = sd_bf16_to_f32(h[i]);
    free(h);
    return 0;
}

/* First key token t attends: with a window W, keys k > pos - W (transformers' sliding_window_overlay). */
static int first_key(const step *s, int t)
{
    int n = s->pos[t] + 1;
    return s->window > 0 && n > s->window ? n - s->window : 0;
}

/* fp64 attention of token t, all heads, into ref [n_heads*hd]: keys [first_key, pos]. */
static void ref_row(const step *s, int t, double *ref)
{
    int hd = s->hd, g = s->n_heads / s->n_kv, n = s->pos[t] + 1, lo = first_key(s, t);
    const int32_t *bt = s->bt + (size_t)s->seq[t] * s->max_bt;
    double *sc = malloc((size_t)n * sizeof(double));
    for (int h = 0; h < s->n_heads; h++) {
        const float *q = s->q + ((size_t)t * s->n_heads + h) * hd;
        double mx = -INFINITY, sum = 0;
        for (int j = lo; j < n; j++) {
            size_t o = (((size_t)bt[j / BS] * s->n_kv + h / g) * BS + j % BS) * hd;
            double dot = 0;
            for (int e = 0; e < hd; e++)
                dot += (double)q[e] * sd_bf16_to_f32(s->k[o + e]);
            sc[j] = dot / sqrt((double)hd);
            mx = sc[j] > mx ? sc[j] : mx;
        }
        double *r = ref + (size_t)h * hd;
        for (int e = 0; e < hd; e++)
            r[e] = 0;
        for (int j = lo; j < n; j++) {
            size_t o = (((size_t)bt[j / BS] * s->n_kv + h / g) * BS + j % BS) * hd;
            double p = exp(sc[j] - mx);
            sum += p;
            for (int e = 0; e < hd; e++)
                r[e] += p * sd_bf16_to_f32(s->v[o + e]);
        }
        for (int e = 0; e < hd; e++)
            r[e] /= sum;
    }
    free(sc);
}

/* Relative L2 of out against the fp64 reference over the checked rows: every row of a short
 * step; in a long one about CHECK_ROWS spread rows plus each 64-row tile's first and last. */
static double err_vs_ref(const step *s, const float *out)
{
    int row = s->n_heads * s->hd, stride = s->T <= CHECK_ROWS ? 1 : s->T / CHECK_ROWS;
    double *ref = malloc((size_t)row * sizeof(double)), num = 0, den = 0;
    for (int t = 0; t < s->T; t++) {
        if (t % stride && t != s->T - 1 && t % 64 != 0 && t % 64 != 63)
            continue;
        ref_row(s, t, ref);
        for (int i = 0; i < row; i++) {
            double e = out[(size_t)t * row + i] - ref[i];
            num += e * e;
            den += ref[i] * ref[i];
        }
    }
    free(ref);
    return num == num && den > 0 ? sqrt(num / den) : INFINITY; /* NaN anywhere: fails */
}

static double rel_l2(const float *a, const float *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double e = (double)a[i] - b[i];
        num += e * e;
        den += (double)b[i] * b[i];
    }
    return num == num && den > 0 ? sqrt(num / den) : INFINITY;
}

static int have_gpu(void)
{
    return sd_cuda_device_count() > 0;
}

/* One sequence's chunk of T tokens from position start, with a sliding window (0: none): tiled
 * and split vs fp64, tiled vs split. */
static void one_case(int T, int start, int gqa, int hd, int window, double *worst)
{
    int len[1] = {T}, st[1] = {start}, n_kv = 2, n_heads = 2 * gqa;
    step s;
    float *tiled = NULL, *split = NULL;
    if (step_make(&s, 1, len, st, n_heads, n_kv, hd,
                  1000003u * T + 7919u * start + 31u * gqa + hd + 104729u * (unsigned)window)) {
        CHECK_MSG(0, "T %d: set-up failed", T);
        goto out;
    }
    s.window = window;
    size_t qn = (size_t)T * n_heads * hd;
    tiled = malloc(qn * 4);
    split = malloc(qn * 4);
    if (!tiled || !split) {
        CHECK_MSG(0, "out of memory");
        goto out;
    }
    int rc_t = step_run(&s, SD_ATTN_PATH_TILED, 0, tiled), rc_s = step_run(&s, SD_ATTN_PATH_SPLIT, 0, split);
    CHECK_MSG(rc_t == 0 && rc_s == 0, "T %d start %d gqa %d hd %d: launch failed", T, start, gqa, hd);
    if (rc_t == 0 && rc_s == 0) {
        double et = err_vs_ref(&s, tiled), es = err_vs_ref(&s, split), ets = rel_l2(tiled, split, qn);
        CHECK_MSG(et <= 1e-2, "T %d start %d gqa %d hd %d window %d: tiled vs fp64 rel L2 %.3g", T, start,
                  gqa, hd, window, et);
        CHECK_MSG(es <= 1e-2, "T %d start %d gqa %d hd %d window %d: split vs fp64 rel L2 %.3g", T, start,
                  gqa, hd, window, es);
        CHECK_MSG(ets <= 1e-2, "T %d start %d gqa %d hd %d window %d: tiled vs split rel L2 %.3g", T, start,
                  gqa, hd, window, ets);
        worst[0] = et > worst[0] ? et : worst[0];
        worst[1] = es > worst[1] ? es : worst[1];
        worst[2] = ets > worst[2] ? ets : worst[2];
    }
out:
    free(tiled);
    free(split);
    step_free(&s);
}

static void test_tiled_vs_reference(void)
{
    if (!have_gpu())
        SKIP("no CUDA device");
    static const int Ts[] = {1, 17, 64, 300, 1000}, starts[] = {0, 77}, gqas[] = {1, 4, 8}, hds[] = {64, 128};
    double worst[3] = {0, 0, 0};
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 3; b++)
            for (int c = 0; c < 5; c++)
                for (int e = 0; e < 2; e++)
                    one_case(Ts[c], starts[e], gqas[b], hds[a], 0, worst);
    fprintf(stderr, "  60 cases: worst rel L2 tiled vs fp64 %.2e, split vs fp64 %.2e, tiled vs split %.2e\n",
            worst[0], worst[1], worst[2]);
}

/* Sliding windows in prefill chunks: window 1 (a token sees only itself), 5 and 100 (not
 * multiples of the block size nor of the 64-key tile), 16 (one block), 5000 (past the context:
 * full attention); first and later chunks, so the tiled kernel skips whole key tiles left of its
 * rows' windows; tiled and split vs the windowed fp64 reference. */
static void test_tiled_window(void)
{
    if (!have_gpu())
        SKIP("no CUDA device");
    static const int Ts[] = {1, 17, 64, 300}, starts[] = {0, 77}, hds[] = {64, 128};
    static const int windows[] = {1, 5, 16, 100, 5000};
    double worst[3] = {0, 0, 0};
    for (int w = 0; w < 5; w++)
        for (int a = 0; a < 2; a++)
            for (int c = 0; c < 4; c++)
                for (int e = 0; e < 2; e++)
                    one_case(Ts[c], starts[e], 4, hds[a], windows[w], worst);
    fprintf(stderr,
            "  80 windowed cases: worst rel L2 tiled vs fp64 %.2e, split vs fp64 %.2e, tiled vs split %.2e\n",
            worst[0], worst[1], worst[2]);
}

/* Decodes and chunks of five sequences in one step: the dispatch (runs of >= 16 tiled, the rest
 * split) matches the split kernel on the whole step and the fp64 reference. */
static void test_mixed_step(void)
{
    if (!have_gpu())
        SKIP("no CUDA device");
    static const int len[] = {1, 100, 5, 40, 1, 16, 15}, start[] = {50, 20, 0, 300, 0, 33, 200};
    int hds[] = {64, 128, 64, 128}, windows[] = {0, 0, 7, 100};
    for (int i = 0; i < 4; i++) {
        step s;
        float *mixed = NULL, *split = NULL;
        if (step_make(&s, 7, len, start, 8, 2, hds[i], 42 + i)) {
            CHECK_MSG(0, "set-up failed");
            step_free(&s);
            return;
        }
        s.window = windows[i];
        size_t qn = (size_t)s.T * s.n_heads * s.hd;
        mixed = malloc(qn * 4);
        split = malloc(qn * 4);
        if (mixed && split && step_run(&s, SD_ATTN_PATH_STEP, SD_ATTN_PREFILL_MIN_RUN, mixed) == 0 &&
            step_run(&s, SD_ATTN_PATH_SPLIT, 0, split) == 0) {
            double em = err_vs_ref(&s, mixed), ems = rel_l2(mixed, split, qn);
            CHECK_MSG(em <= 1e-2, "hd %d window %d: mixed step vs fp64 rel L2 %.3g", hds[i], windows[i], em);
            CHECK_MSG(ems <= 1e-2, "hd %d window %d: mixed step vs split rel L2 %.3g", hds[i], windows[i],
                      ems);
            fprintf(stderr, "  mixed step hd %d window %d: rel L2 vs fp64 %.2e, vs split %.2e\n", hds[i],
                    windows[i], em, ems);
        } else {
            CHECK_MSG(0, "hd %d window %d: mixed step failed", hds[i], windows[i]);
        }
        free(mixed);
        free(split);
        step_free(&s);
    }
}

/* Decode steps of the engine's shape: n one-token sequences at positions from 0 to 2000 (block
 * edges included), GQA groups 1-16 (5 and 6 take odd head groups per block, 16 two blocks per
 * KV head), head_dim 64/128/256, vs fp64; run twice, equal bits (the split counters reset). */
static void test_decode_vs_reference(void)
{
    if (!have_gpu())
        SKIP("no CUDA device");
    static const int start[] = {0, 1, 15, 16, 31, 200, 511, 777, 1024, 2000, 63, 5, 130, 999, 47, 300};
    static const int gqas[] = {1, 2, 4, 5, 6, 8, 16}, hds[] = {64, 128, 256}, ns[] = {1, 3, 16};
    int len[16], st[16];
    for (int i = 0; i < 16; i++)
        len[i] = 1;
    double worst = 0;
    int cases = 0;
    for (int a = 0; a < 7; a++)
        for (int b = 0; b < 3; b++)
            for (int c = 0; c < 3; c++) {
                int n = ns[c], n_kv = gqas[a] == 16 ? 1 : 2, n_heads = n_kv * gqas[a];
                step s;
                float *o1 = NULL, *o2 = NULL;
                for (int i = 0; i < 16; i++) /* a different position set per case */
                    st[i] = start[(i + a + b) % 16];
                if (step_make(&s, n, len, st, n_heads, n_kv, hds[b], 7 + 100 * a + 10 * b + c)) {
                    CHECK_MSG(0, "set-up failed");
                    step_free(&s);
                    continue;
                }
                size_t qn = (size_t)s.T * n_heads * s.hd;
                o1 = malloc(qn * 4);
                o2 = malloc(qn * 4);
                if (o1 && o2 && step_run(&s, SD_ATTN_PATH_SPLIT, 0, o1) == 0 &&
                    step_run(&s, SD_ATTN_PATH_SPLIT, 0, o2) == 0) {
                    double e = err_vs_ref(&s, o1);
                    CHECK_MSG(e <= 1e-2, "n %d gqa %d hd %d splits %d: rel L2 vs fp64 %.3g", n, gqas[a],
                              hds[b], s.n_splits, e);
                    CHECK_MSG(memcmp(o1, o2, qn * 4) == 0, "n %d gqa %d hd %d: second run differs", n,
                              gqas[a], hds[b]);
                    worst = e > worst ? e : worst;
                    cases++;
                } else {
                    CHECK_MSG(0, "n %d gqa %d hd %d: run failed", n, gqas[a], hds[b]);
                }
                free(o1);
                free(o2);
                step_free(&s);
            }
    fprintf(stderr, "  %d decode cases: worst rel L2 vs fp64 %.2e\n", cases, worst);
}

/* Keys left of each token's window get K 0 and V 64 (bf16): a read of one of them weighs about
 * as much as a real key and pulls the output towards 64, far from the reference. One token per
 * sequence only (a chunk's earlier rows need those keys). */
static int poison_left_of_window(step *s)
{
    for (int t = 0; t < s->T; t++)
        for (int key = 0; key < first_key(s, t); key++)
            for (int kv = 0; kv < s->n_kv; kv++) {
                size_t o = (((size_t)s->bt[(size_t)s->seq[t] * s->max_bt + key / BS] * s->n_kv + kv) * BS +
                            key % BS) *
                           s->hd;
                for (int e = 0; e < s->hd; e++)
                    s->k[o + e] = 0, s->v[o + e] = 0x4280;
            }
    size_t kvn = (size_t)s->n_blocks * s->n_kv * BS * s->hd * 2;
    return cudaMemcpy(s->dk, s->k, kvn, cudaMemcpyHostToDevice) != cudaSuccess ||
                   cudaMemcpy(s->dv, s->v, kvn, cudaMemcpyHostToDevice) != cudaSuccess
               ? -1
               : 0;
}

/* Decode steps with a sliding window: window 1, 7, 16 (the block size), 33, 500, 5000 (past most
 * contexts); positions 0 to 2000, so the window's first key falls anywhere in a block; the
 * splits share the windowed range (min_chunk 0 and 64, as the backend); keys left of the
 * window poisoned; vs the windowed fp64 reference; run twice, equal bits (counters reset). */
static void test_decode_window(void)
{
    if (!have_gpu())
        SKIP("no CUDA device");
    static const int start[] = {0, 1, 15, 16, 31, 200, 511, 777, 1024, 2000, 63, 5, 130, 999, 47, 300};
    static const int gqas[] = {1, 4, 8}, hds[] = {64, 128, 256}, windows[] = {1, 7, 16, 33, 500, 5000};
    int len[16], st[16];
    for (int i = 0; i < 16; i++)
        len[i] = 1;
    double worst = 0;
    int cases = 0;
    for (int w = 0; w < 6; w++)
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 3; b++) {
                int ci = 9 * w + 3 * a + b, n = ci % 3 == 0 ? 1 : 16, n_heads = 2 * gqas[a];
                step s;
                float *o1 = NULL, *o2 = NULL;
                for (int i = 0; i < 16; i++) /* a different position set per case */
                    st[i] = start[(i + ci) % 16];
                if (step_make(&s, n, len, st, n_heads, 2, hds[b], 5 + 101 * ci)) {
                    CHECK_MSG(0, "set-up failed");
                    step_free(&s);
                    continue;
                }
                s.window = windows[w];
                s.min_chunk = ci % 2 ? 64 : 0;
                size_t qn = (size_t)s.T * n_heads * s.hd;
                o1 = malloc(qn * 4);
                o2 = malloc(qn * 4);
                if (o1 && o2 && poison_left_of_window(&s) == 0 &&
                    step_run(&s, SD_ATTN_PATH_SPLIT, 0, o1) == 0 &&
                    step_run(&s, SD_ATTN_PATH_SPLIT, 0, o2) == 0) {
                    double e = err_vs_ref(&s, o1);
                    CHECK_MSG(e <= 1e-2,
                              "window %d n %d gqa %d hd %d splits %d chunk %d: rel L2 vs fp64 %.3g",
                              windows[w], n, gqas[a], hds[b], s.n_splits, s.min_chunk, e);
                    CHECK_MSG(memcmp(o1, o2, qn * 4) == 0, "window %d n %d gqa %d hd %d: second run differs",
                              windows[w], n, gqas[a], hds[b]);
                    worst = e > worst ? e : worst;
                    cases++;
                } else {
                    CHECK_MSG(0, "window %d n %d gqa %d hd %d: run failed", windows[w], n, gqas[a], hds[b]);
                }
                free(o1);
                free(o2);
                step_free(&s);
            }
    fprintf(stderr, "  %d windowed decode cases: worst rel L2 vs fp64 %.2e\n", cases, worst);
}

/* head_dim 256 is the split kernel's only: the tiled launcher refuses it, the step falls back. */
static void test_head_dim_256(void)
{
    if (!have_gpu())
        SKIP("no CUDA device");
    int len[1] = {40}, st[1] = {3};
    step s;
    float *a = NULL, *b = NULL;
    if (step_make(&s, 1, len, st, 4, 2, 256, 9) == 0 && (a = malloc((size_t)40 * 4 * 256 * 4)) &&
        (b = malloc((size_t)40 * 4 * 256 * 4))) {
        CHECK(step_run(&s, SD_ATTN_PATH_TILED, 0, a) == SD_ENOTSUP);
        CHECK(step_run(&s, SD_ATTN_PATH_STEP, SD_ATTN_PREFILL_MIN_RUN, a) == 0);
        CHECK(step_run(&s, SD_ATTN_PATH_SPLIT, 0, b) == 0);
        CHECK(rel_l2(a, b, (size_t)40 * 4 * 256) == 0);
    } else {
        CHECK_MSG(0, "set-up failed");
    }
    free(a);
    free(b);
    step_free(&s);
}

static float time_path(step *s, int path, int reps)
{
    sd_cu_attn_test a = {s->dq,  s->dk,      s->dv,   s->dpos, s->dseq,      s->dbt,   s->max_bt, BS,
                         s->T,   s->n_heads, s->n_kv, s->hd,   s->n_splits,  s->dacc,  s->dml,    s->dout,
                         s->len, s->n_seqs,  0,       s->dcnt, s->min_chunk, s->window};
    cudaEvent_t e0, e1;
    float ms = -1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    if (sd_cu_attn_test_run(path, &a, NULL) == 0 && cudaDeviceSynchronize() == cudaSuccess) { /* warm-up */
        cudaEventRecord(e0, 0);
        for (int i = 0; i < reps; i++)
            sd_cu_attn_test_run(path, &a, NULL);
        cudaEventRecord(e1, 0);
        if (cudaEventSynchronize(e1) == cudaSuccess)
            cudaEventElapsedTime(&ms, e0, e1);
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return ms / reps;
}

/* Printed, not checked: a 2048-token first chunk, head_dim 128, 32 heads over 8 KV heads. */
static void test_time_2048(void)
{
    if (!have_gpu())
        SKIP("no CUDA device");
    int len[1] = {2048}, st[1] = {0};
    step s;
    if (step_make(&s, 1, len, st, 32, 8, 128, 2048) == 0) {
        float dec = time_path(&s, SD_ATTN_PATH_SPLIT, 5), tiled = time_path(&s, SD_ATTN_PATH_TILED, 5);
        fprintf(stderr,
                "  | attention T=2048 hd=128 32/8 heads | decode kernel %.3f ms | tiled %.3f ms | %.1fx |\n",
                dec, tiled, tiled > 0 ? dec / tiled : 0.0);
        CHECK(dec > 0 && tiled > 0);
    } else {
        CHECK_MSG(0, "set-up failed");
    }
    step_free(&s);
}

static void test_env_switch(void)
{
    const char *was = getenv("SD_ATTN_PREFILL");
    char *saved = was ? strdup(was) : NULL;
    setenv("SD_ATTN_PREFILL", "1", 1);
    CHECK(sd_cu_attn_prefill_min_run() == SD_ATTN_PREFILL_MIN_RUN);
    setenv("SD_ATTN_PREFILL", "0", 1);
    CHECK(sd_cu_attn_prefill_min_run() == 0);
    if (saved)
        setenv("SD_ATTN_PREFILL", saved, 1);
    else
        unsetenv("SD_ATTN_PREFILL");
    free(saved);
}

int main(void)
{
    RUN(test_env_switch);
    RUN(test_tiled_vs_reference);
    RUN(test_mixed_step);
    RUN(test_head_dim_256);
    RUN(test_decode_vs_reference);
    RUN(test_tiled_window);
    RUN(test_decode_window);
    RUN(test_time_2048);
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
