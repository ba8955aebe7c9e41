/* test_cuda_sample: sampling on the GPU. The kernel on random logits rows (vocab 1 to 151936
 * and odd sizes; every option alone and combined, logit_bias and JSON-style allow masks too;
 * many seeds; several rows per launch) picks
 * sd_sample's token on the same logits and u, up to near-boundaries of the cumulative mass
 * (counted, and bounded), with logprobs within 1e-4 of sd_logprob_of / sd_logprobs_top. Then
 * the scheduler on the CUDA backend with models/tiny gives the same greedy, seeded and JSON-mode
 * tokens with GPU sampling as with SD_CPU_SAMPLING=1 on the same backend (same logits), and, with two
 * GPUs, so does the tensor-parallel backend. Skips without CUDA or a GPU. */
#include "engine/sample_req.h"

#ifdef SD_HAVE_CUDA
#include <cuda_runtime.h>
#include <time.h>

#include "tests/engine/sched_sample.h"

#include "engine/cuda_backend.h"
#include "engine/cuda_sample.cuh"
#include "engine/tp.h"

#define BATCH 32

/* n_cases of one vocabulary, BATCH rows per launch. */
static void run_vocab(int32_t vocab, int n_cases, sc_stats *st)
{
    sc_rng r = {(uint64_t)vocab * 104729u + 5};
    size_t row_bytes = sizeof(float) * (size_t)vocab;
    float *host = malloc(row_bytes * BATCH), *dev = NULL;
    sd_sample_prep p;
    sd_cu_sampler sm;
    memset(&sm, 0, sizeof sm);
    REQUIRE(host && sd_sample_prep_init(&p, vocab, NULL) == 0);
    REQUIRE(cudaMalloc((void **)&dev, row_bytes * BATCH) == cudaSuccess);
    static sc_case ks[BATCH];
    static sd_sample_req qs[BATCH];
    static sd_sample_out os[BATCH];
    float *rows[BATCH];
    for (int c0 = 0; c0 < n_cases; c0 += BATCH) {
        int n = n_cases - c0 < BATCH ? n_cases - c0 : BATCH;
        REQUIRE(sd_sample_prep_begin(&p, (size_t)n * (96 + 8), NULL) == 0);
        for (int i = 0; i < n; i++) {
            sc_make(&r, &ks[i], vocab, c0 + i, host + (size_t)i * vocab);
            sd_rng rng;
            sd_rng_seed(&rng, ks[i].s.seed);
            REQUIRE(sd_sample_prep_add(&p, &qs[i], i, &ks[i].s, ks[i].hist, ks[i].n_hist, ks[i].n_prompt,
                                       &rng, ks[i].n_top) == 0);
            qs[i].allow = ks[i].allow;
            rows[i] = dev + (size_t)i * vocab;
        }
        REQUIRE(cudaMemcpy(dev, host, row_bytes * (size_t)n, cudaMemcpyHostToDevice) == cudaSuccess);
        sd_diag d = {0};
        int rc = sd__cu_sample(&sm, rows, vocab, qs, n, os, 0, &d);
        CHECK_MSG(rc == 0, "sd__cu_sample: %s", sd_diag_str(&d, rc));
        if (rc)
            break;
        for (int i = 0; i < n; i++)
            sc_check(&ks[i], &qs[i], &os[i], st);
    }
    for (int i = 0; i < BATCH; i++)
        sc_free(&ks[i]);
    cudaFree(dev);
    sd__cu_sampler_free(&sm);
    sd_sample_prep_free(&p);
    free(host);
}

static void test_kernel_matches_sd_sample(void)
{
    if (sd_cuda_device_count() <= 0)
        SKIP("no CUDA device");
    static const int32_t vocabs[] = {1, 2, 7, 33, 1000, 4099, 32000, 128256, 151936};
    static const int cases[] = {64, 64, 256, 256, 512, 256, 256, 96, 192};
    for (size_t i = 0; i < sizeof vocabs / sizeof vocabs[0]; i++) {
        sc_stats st = {0};
        run_vocab(vocabs[i], cases[i], &st);
        fprintf(stderr, "  vocab %d: %d cases, %d near-boundary disagreements, logprobs within %.2g\n",
                (int)vocabs[i], st.cases, st.near, st.worst_lp);
        CHECK_MSG(st.near * 20 <= st.cases, "vocab %d: %d of %d cases disagree near a boundary",
                  (int)vocabs[i], st.near, st.cases);
    }
}

static void test_bad_requests(void)
{
    if (sd_cuda_device_count() <= 0)
        SKIP("no CUDA device");
    float *dev = NULL;
    REQUIRE(cudaMalloc((void **)&dev, 64 * sizeof(float)) == cudaSuccess);
    sd_cu_sampler sm;
    memset(&sm, 0, sizeof sm);
    sd_sample_pen pen = {64, 1, 0.0f}; /* outside a 64-token vocabulary */
    sd_sample_req q;
    memset(&q, 0, sizeof q);
    sd_sampling_default(&q.s);
    q.rep_on = 1;
    q.s.repetition_penalty = 1.2f;
    q.pen = &pen;
    q.n_pen = 1;
    q.n_top = -1;
    sd_sample_out o;
    float *rows[1] = {dev};
    sd_diag d = {0};
    CHECK(sd__cu_sample(&sm, rows, 64, &q, 1, &o, 0, &d) == SD_EINVAL);
    q.n_pen = 0;
    q.n_top = SD_SAMPLE_MAX_TOP + 1;
    CHECK(sd__cu_sample(&sm, rows, 64, &q, 1, &o, 0, &d) == SD_EINVAL);
    sd__cu_sampler_free(&sm);
    sd__cu_sampler_free(&sm);
    cudaFree(dev);
}

/* ---- the scheduler on the CUDA backend: GPU sampling against host sampling ---- */

#define N_SREQ 8
#define SGEN 32
_Static_assert(N_SREQ <= SS_N_TEXTS, "a prompt per request");

static void sched_params(sd_request_params *ps, int32_t **ids, int32_t *n_ids)
{
    for (int i = 0; i < N_SREQ; i++) {
        greedy_params(&ps[i], ids[i], n_ids[i], SGEN);
        sd_sampling *s = &ps[i].sampling;
        s->seed = 77 + (uint64_t)i;
        ps[i].logprobs = i % 3 == 0 ? 3 : -1;
        if (i == 5) {
            s->temperature = 0;
            s->repetition_penalty = 1.3f;
        } else if (i != 0 && i != 6) { /* 0 and 6 greedy */
            ss_sampling(&ps[i], i);
        }
        if (i == 6 || i == 7) /* JSON mode: the mask goes to the GPU sampler as sd_sample_req.allow */
            ps[i].json_object = 1;
    }
}

/* Runs the requests with GPU sampling and with SD_CPU_SAMPLING=1 on backend b; `rank0` is
 * the CUDA backend that samples (b itself, or TP's rank 0). */
static void gpu_vs_host(sd_backend *b, const sd_backend *rank0, const char *what)
{
    int32_t *ids[N_SREQ], n_ids[N_SREQ];
    for (int i = 0; i < N_SREQ; i++) {
        ids[i] = encode(SS_TEXTS[i], &n_ids[i]);
        REQUIRE(ids[i]);
    }
    sd_request_params ps[N_SREQ];
    sched_params(ps, ids, n_ids);
    sd_engine_opts o;
    opts(&o, 8, 64);
    static res gpu[N_SREQ], host[N_SREQ];
    int64_t before = sd_backend_cuda_sampled_rows(rank0);
    CHECK(run_all(b, &o, ps, gpu, N_SREQ, NULL) == 0);
    int64_t rows = sd_backend_cuda_sampled_rows(rank0) - before;
    fprintf(stderr, "  %s: %lld rows sampled on the GPU\n", what, (long long)rows);
    CHECK(rows >= N_SREQ * (SGEN - 1));
    setenv("SD_CPU_SAMPLING", "1", 1);
    before = sd_backend_cuda_sampled_rows(rank0);
    CHECK(run_all(b, &o, ps, host, N_SREQ, NULL) == 0);
    unsetenv("SD_CPU_SAMPLING");
    CHECK(sd_backend_cuda_sampled_rows(rank0) == before);
    ss_compare_runs(gpu, host, N_SREQ, SGEN, what);
    CHECK(gpu[4].n_prompt_ev == 1 && gpu[4].plp != NULL);
    for (int i = 0; i < N_SREQ; i++) {
        res_reset(&gpu[i]);
        res_reset(&host[i]);
        free(ids[i]);
    }
}

static void test_sched_gpu_sampling(void)
{
    if (sd_cuda_device_count() <= 0)
        SKIP("no CUDA device");
    if (!M)
        SKIP("%s not found", MODEL_DIR);
    sd_backend_opts bo;
    sd_backend_opts_default(&bo);
    bo.kv_blocks = 256;
    bo.max_batch_tokens = 256;
    bo.deterministic = 1; /* both runs must see the same logits (split-K atomics add in any order) */
    sd_backend *b = NULL;
    sd_diag d = {0};
    int rc = sd_backend_cuda_init(&b, M, &bo, &d);
    CHECK_MSG(rc == 0, "cuda backend: %s", sd_diag_str(&d, rc));
    if (rc)
        return;
    gpu_vs_host(b, b, "cuda, graphs");
    sd_backend_cuda_set_graphs(b, 0);
    gpu_vs_host(b, b, "cuda, eager");
    sd_backend_free(b);
}

static void test_sched_gpu_sampling_tp(void)
{
    if (sd_cuda_device_count() < 2)
        SKIP("tensor parallel needs 2 GPUs");
    if (!M)
        SKIP("%s not found", MODEL_DIR);
    sd_backend_opts bo;
    sd_backend_opts_default(&bo);
    bo.kv_blocks = 256;
    bo.max_batch_tokens = 256;
    bo.deterministic = 1; /* both runs must see the same logits (split-K atomics add in any order) */
    sd_tp_opts to;
    sd_tp_opts_default(&to);
    to.world = 2;
    sd_backend *b = NULL;
    sd_diag d = {0};
    int rc = sd_tp_backend_init(&b, M, &bo, &to, &d);
    CHECK_MSG(rc == 0, "tp backend: %s", sd_diag_str(&d, rc));
    if (rc)
        return;
    gpu_vs_host(b, sd_tp_local_rank(b), "tensor parallel 2");
    sd_backend_free(b);
}

/* ---- SD_SAMPLE_BENCH=1: how long sampling takes (printed, never asserted) ---- */

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median ms of REPS launches of n rows, and of sd_sample (+ logprobs when asked) for n rows on
 * the host (what the host path pays after copying [n, vocab] floats over PCIe, not counted). */
static void bench_one(int32_t vocab, int n, const char *name, const sd_sampling *s, int n_hist, int n_top)
{
    enum { REPS = 9 };
    sc_rng r = {42};
    size_t row_bytes = sizeof(float) * (size_t)vocab;
    float *host = malloc(row_bytes * (size_t)n), *work = malloc(row_bytes), *dev = NULL;
    int32_t *hist = malloc(sizeof *hist * (size_t)(n_hist + 1));
    void *scratch = malloc(sd_sampler_scratch_bytes(vocab));
    sd_sample_req *qs = calloc((size_t)n, sizeof *qs);
    sd_sample_out *os = calloc((size_t)n, sizeof *os);
    float **rows = calloc((size_t)n, sizeof *rows);
    sd_sample_prep p;
    sd_cu_sampler sm;
    memset(&sm, 0, sizeof sm);
    if (!host || !work || !hist || !scratch || !qs || !os || !rows || sd_sample_prep_init(&p, vocab, NULL) ||
        cudaMalloc((void **)&dev, row_bytes * (size_t)n) != cudaSuccess)
        return;
    for (int i = 0; i < n; i++)
        sc_fill_row(&r, host + (size_t)i * vocab, vocab, 0);
    for (int i = 0; i < n_hist; i++)
        hist[i] = (int32_t)(sc_next(&r) % (uint64_t)vocab);
    double gpu[REPS], cpu[REPS];
    for (int rep = 0; rep < REPS; rep++) {
        sd_sample_prep_begin(&p, (size_t)n * (size_t)n_hist, NULL);
        for (int i = 0; i < n; i++) {
            sd_rng rng;
            sd_rng_seed(&rng, (uint64_t)(rep * n + i));
            sd_sample_prep_add(&p, &qs[i], i, s, hist, n_hist, n_hist / 2, &rng, n_top);
            rows[i] = dev + (size_t)i * vocab;
        }
        cudaMemcpy(dev, host, row_bytes * (size_t)n, cudaMemcpyHostToDevice);
        double t0 = now_ms();
        sd__cu_sample(&sm, rows, vocab, qs, n, os, 0, NULL);
        gpu[rep] = now_ms() - t0;
        t0 = now_ms();
        int n_cpu = n < 4 ? n : 4; /* the host cost is per row: time a few, scale to n */
        for (int i = 0; i < n_cpu; i++) {
            sd_rng rng;
            sd_rng_seed(&rng, (uint64_t)i);
            memcpy(work, host + (size_t)i * vocab, row_bytes);
            sd_sample(work, vocab, s, hist, n_hist, n_hist / 2, &rng, scratch);
            if (n_top >= 0) {
                int32_t ids[SD_SAMPLE_MAX_TOP];
                float lps[SD_SAMPLE_MAX_TOP];
                sd_logprob_of(host + (size_t)i * vocab, vocab, 0);
                sd_logprobs_top(host + (size_t)i * vocab, vocab, n_top, ids, lps);
            }
        }
        cpu[rep] = (now_ms() - t0) * n / n_cpu;
    }
    qsort(gpu, REPS, sizeof gpu[0], cmp_d);
    qsort(cpu, REPS, sizeof cpu[0], cmp_d);
    printf("| %-28s | %6d | %4d | %9.3f | %9.3f |\n", name, (int)vocab, n, gpu[REPS / 2], cpu[REPS / 2]);
    cudaFree(dev);
    sd__cu_sampler_free(&sm);
    sd_sample_prep_free(&p);
    free(host), free(work), free(hist), free(scratch), free(qs), free(os), free(rows);
}

static void bench_sampling(void)
{
    const char *e = getenv("SD_SAMPLE_BENCH");
    if (!e || strcmp(e, "1") != 0 || sd_cuda_device_count() <= 0)
        return;
    printf("| sampling (random normal logits, sd 3) | vocab | rows | GPU ms (launch to tokens) | CPU "
           "sd_sample ms |\n");
    printf("| --- | ---: | ---: | ---: | ---: |\n");
    sd_sampling g, t1, tp, all;
    sd_sampling_default(&g);
    g.temperature = 0;
    sd_sampling_default(&t1);
    sd_sampling_default(&tp);
    tp.temperature = 0.8f;
    tp.top_p = 0.9f;
    tp.top_k = 50;
    sd_sampling_default(&all);
    all.temperature = 0.7f;
    all.top_p = 0.95f;
    all.min_p = 0.05f;
    all.repetition_penalty = 1.1f;
    all.presence_penalty = 0.3f;
    all.frequency_penalty = 0.2f;
    static const int ns[] = {1, 16, 64};
    for (int i = 0; i < 3; i++) {
        bench_one(151936, ns[i], "greedy", &g, 0, -1);
        bench_one(151936, ns[i], "T=1 (no cut-off)", &t1, 0, -1);
        bench_one(151936, ns[i], "T=0.8 top-k 50 top-p 0.9", &tp, 0, -1);
        bench_one(151936, ns[i], "all + 512 history + top-5 lp", &all, 512, 5);
    }
}

int main(void)
{
    (void)backend_new; /* sched_util.h's CPU backend is not needed here */
    RUN(test_kernel_matches_sd_sample);
    RUN(test_bad_requests);
    sd_diag d = {0};
    int rc = sd_model_open(&M, MODEL_DIR, &d);
    if (rc < 0 || !sd_model_tokenizer(M)) {
        fprintf(stderr, "  %s: %s\n", MODEL_DIR, sd_diag_str(&d, rc));
        sd_model_free(M);
        M = NULL;
    }
    RUN(test_sched_gpu_sampling);
    RUN(test_sched_gpu_sampling_tp);
    bench_sampling();
    sd_model_free(M);
    return sd_test_done();
}
#else
#include "tests/harness.h"

static void test_cuda_sample(void)
{
    SKIP("built without CUDA");
}

int main(void)
{
    RUN(test_cuda_sample);
    return sd_test_done();
}
#endif
