/* test_tune_cache_gpu: a CUDA backend created with a tuning cache (sd_backend_opts.tune_cache)
 * that an earlier backend wrote runs the same kernels without timing any (no first-use tuning),
 * so in deterministic mode its logits equal the earlier ones bit for bit; a damaged cache, or one
 * made for another device key, is not used, and the backend rewrites it with what it tuned.
 * The refine pass (on by default, SD_TUNE_REFINE=0 off) leaves every step's logits as the plain
 * run's, and when it fails (SD_TUNE_REFINE=2 injects a failure) the steps still answer, with those
 * logits, and the pass is off. Synthetic weights of the bundled tiny model's shapes, dense, 2:4 and 4:8, one
 * and two sequences per step. Skips without a GPU. */
#include "tests/harness.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/backend.h"
#include "engine/model_config.h"
#include "engine/tune_cache.h"
#ifdef SD_HAVE_CUDA
#include "engine/cuda_backend.h"

#define TINY_CONFIG "models/tiny/config.json"
#define KV_BLOCKS 64
#define BS 16
#define PROMPT 21
#define STEPS 4

static char cache_path[64];

/* One backend of `pattern` (weights from seed 11) with the tuning cache: a prompt, then STEPS
 * decode steps at one and at two sequences; the decode logits into out ([2 * STEPS * 3, V]) and
 * how many problems it timed itself into *tuned. */
static int run_backend_opts(const sd_model_config *cfg, const char *pattern, float *out, int *tuned, int det,
                            const char *cache, int *refined, int *refine_failed)
{
    sd_backend_opts o;
    sd_backend_opts_default(&o);
    o.kv_blocks = KV_BLOCKS;
    o.block_size = BS;
    o.max_batch_tokens = 256;
    o.deterministic = det;
    o.tune_cache = cache;
    sd_backend *b = NULL;
    sd_diag d = {0};
    int rc = sd_backend_cuda_init_synthetic(&b, cfg, pattern, 11, &o, &d);
    if (rc) {
        fprintf(stderr, "  %s: %s\n", pattern, sd_diag_str(&d, rc));
        return rc;
    }
    const int32_t V = cfg->vocab;
    int32_t toks[2][PROMPT + STEPS], bt[2][8];
    for (int s = 0; s < 2; s++) {
        for (int i = 0; i < PROMPT + STEPS; i++)
            toks[s][i] = 1 + (int32_t)((7919u * (unsigned)(i + 31 * s + 1)) % (unsigned)(V - 1));
        for (int i = 0; i < 8; i++)
            bt[s][i] = 8 * s + i;
    }
    float *scratch = malloc((size_t)V * 4);
    rc = scratch ? 0 : SD_ENOMEM;
    for (int n_seq = 1; n_seq <= 2 && !rc; n_seq++) {
        for (int s = 0; s < n_seq && !rc; s++) {
            sd_batch_seq q = {0, PROMPT, toks[s], bt[s], 0};
            rc = sd_backend_forward(b, &q, 1, scratch, &d);
        }
        for (int st = 0; st < STEPS && !rc; st++) {
            sd_batch_seq q[2];
            for (int s = 0; s < n_seq; s++)
                q[s] = (sd_batch_seq){PROMPT + st, 1, &toks[s][PROMPT + st], bt[s], 0};
            rc = sd_backend_forward(b, q, n_seq, out, &d);
            out += (size_t)n_seq * V;
        }
    }
    if (rc)
        fprintf(stderr, "  forward: %s\n", sd_diag_str(&d, rc));
    *tuned = sd_backend_cuda_tuned_here(b);
    int kept = 0;
    sd_backend_cuda_refined(b, refined, &kept, refine_failed);
    free(scratch);
    sd_backend_free(b);
    return rc;
}

static int run_backend(const sd_model_config *cfg, const char *pattern, float *out, int *tuned)
{
    int refined = 0;
    return run_backend_opts(cfg, pattern, out, tuned, 1, cache_path, &refined, NULL);
}

/* dense, then 2:4, on one file (as bench decode shares one across patterns): each tunes and the
 * file keeps both; then each again, timing nothing, with the first run's logits. */
static void test_cache_reused(void)
{
    if (sd_cuda_device_count() < 1)
        SKIP("no CUDA device");
    sd_diag d = {0};
    sd_model_config cfg;
    REQUIRE(sd_model_config_load(&cfg, TINY_CONFIG, &d) == 0);
    const size_t n = (size_t)3 * STEPS * cfg.vocab;
    float *first[2] = {malloc(n * 4), malloc(n * 4)}, *again = malloc(n * 4);
    REQUIRE(first[0] && first[1] && again);
    const char *pats[] = {"dense", "2:4"};
    unlink(cache_path);
    int paths = 0;
    for (int p = 0; p < 2; p++) {
        int tuned = -1;
        REQUIRE(run_backend(&cfg, pats[p], first[p], &tuned) == 0);
        CHECK_MSG(tuned > 0, "%s: %d problems tuned", pats[p], tuned);
        paths += tuned;
        sd_tune_cache c;
        REQUIRE(sd_tune_cache_load(cache_path, &c, &d) == 0);
        CHECK_MSG(c.n_paths == paths && c.n_kernels >= p + 1,
                  "after %s: the file holds %d paths (%d tuned), %d configs", pats[p], c.n_paths, paths,
                  c.n_kernels);
        sd_tune_cache_free(&c);
    }
    for (int p = 0; p < 2; p++) {
        int tuned = -1;
        REQUIRE(run_backend(&cfg, pats[p], again, &tuned) == 0);
        CHECK_MSG(tuned == 0, "%s: %d problems tuned again despite the cache", pats[p], tuned);
        CHECK_MSG(!memcmp(first[p], again, n * 4), "%s: logits differ from the run that made the cache",
                  pats[p]);
    }
    sd_tune_cache c;
    REQUIRE(sd_tune_cache_load(cache_path, &c, &d) == 0);
    CHECK_MSG(c.n_paths == paths, "the reruns changed the file: %d paths, %d before", c.n_paths, paths);
    sd_tune_cache_free(&c);
    free(first[0]);
    free(first[1]);
    free(again);
    unlink(cache_path);
}

static void test_bad_or_foreign_cache_rewritten(void)
{
    if (sd_cuda_device_count() < 1)
        SKIP("no CUDA device");
    sd_diag d = {0};
    sd_model_config cfg;
    REQUIRE(sd_model_config_load(&cfg, TINY_CONFIG, &d) == 0);
    float *out = malloc((size_t)3 * STEPS * cfg.vocab * 4);
    REQUIRE(out);
    const char *texts[] = {"{ not json",
                           "{\"format\": 1, \"key\": \"some other GPU|kernels 1\", \"kernels\": [], "
                           "\"paths\": [{\"rows\": 1, \"cols\": 1, \"B\": 1, \"dense\": 1, "
                           "\"m\": 0, \"acc\": 0, \"use_blas\": 1, \"ms_kernel\": 1, \"ms_blas\": 0}]}"};
    for (int i = 0; i < 2; i++) {
        FILE *f = fopen(cache_path, "w");
        REQUIRE(f && fputs(texts[i], f) >= 0 && fclose(f) == 0);
        int tuned = -1;
        REQUIRE(run_backend(&cfg, "2:4", out, &tuned) == 0);
        CHECK_MSG(tuned > 0, "case %d: %d problems tuned", i, tuned);
        sd_tune_cache c;
        CHECK_MSG(sd_tune_cache_load(cache_path, &c, &d) == 0 && c.n_paths == tuned &&
                      strstr(c.key, "kernels"),
                  "case %d: not rewritten: %s", i, d.msg);
        CHECK(strstr(c.key, "some other GPU") == NULL);
        sd_tune_cache_free(&c);
    }
    free(out);
    unlink(cache_path);
}

/* The refine pass (the default): each bucket's first graph tries the linears' runner-up configs inside the
 * step (engine/cuda_step.cu refine_graph), replaying the step, recapturing, reverting. The logits
 * of every step stay those of the plain run (other kernels sum in another order, and bf16
 * activations may round the other way: within 1e-2 relative, the CUDA backend's bound), so the replays and
 * recaptures leave the step's outputs and the KV cache right. Not in the deterministic mode (the choice would
 * depend on timing). */
/* Every logits row of b within rel L2 1e-2 of a's (a run with other kernel configs). */
static void check_rows_close(const float *a, const float *b, int rows, int V, const char *what)
{
    for (int r = 0; r < rows; r++) {
        const float *x = a + (size_t)r * V, *y = b + (size_t)r * V;
        double num = 0, den = 0;
        for (int v = 0; v < V; v++)
            num += ((double)x[v] - y[v]) * ((double)x[v] - y[v]), den += (double)x[v] * x[v];
        CHECK_MSG(num <= 1e-4 * den, "%s: logits row %d differ: rel L2 %g", what, r,
                  den > 0 ? sqrt(num / den) : num);
    }
}

static void test_refine_keeps_logits(void)
{
    if (sd_cuda_device_count() < 1)
        SKIP("no CUDA device");
    sd_diag d = {0};
    sd_model_config cfg;
    REQUIRE(sd_model_config_load(&cfg, TINY_CONFIG, &d) == 0);
    const size_t n = (size_t)3 * STEPS * cfg.vocab;
    float *plain = malloc(n * 4), *refined = malloc(n * 4), *det = malloc(n * 4), *failed = malloc(n * 4);
    REQUIRE(plain && refined && det && failed);
    const char *pats[] = {"dense", "4:8"};
    for (int p = 0; p < 2; p++) {
        int tuned = 0, tried = -1, off = -1;
        char what[64];
        setenv("SD_TUNE_REFINE", "0", 1);
        REQUIRE(run_backend_opts(&cfg, pats[p], plain, &tuned, 0, NULL, &tried, &off) == 0);
        CHECK_MSG(tried == 0 && off == 0, "%s: refine off, %d runner-ups tried, failed %d", pats[p], tried,
                  off);
        unsetenv("SD_TUNE_REFINE"); /* the default: on */
        REQUIRE(run_backend_opts(&cfg, pats[p], refined, &tuned, 0, NULL, &tried, &off) == 0);
        CHECK_MSG(tried > 0 && off == 0, "%s: refine on, %d runner-ups tried, failed %d", pats[p], tried,
                  off);
        int det_tried = -1;
        REQUIRE(run_backend_opts(&cfg, pats[p], det, &tuned, 1, NULL, &det_tried, NULL) == 0);
        CHECK_MSG(det_tried == 0, "%s: deterministic, %d runner-ups tried", pats[p], det_tried);
        snprintf(what, sizeof what, "%s with refine", pats[p]);
        check_rows_close(plain, refined, 3 * STEPS, cfg.vocab, what);
        /* a failure after the first runner-up: every step answers, the pass is off from then on */
        setenv("SD_TUNE_REFINE", "2", 1);
        REQUIRE(run_backend_opts(&cfg, pats[p], failed, &tuned, 0, NULL, &tried, &off) == 0);
        unsetenv("SD_TUNE_REFINE");
        CHECK_MSG(tried == 1 && off == 1, "%s: injected failure: %d runner-ups tried, failed %d", pats[p],
                  tried, off);
        snprintf(what, sizeof what, "%s after the refine pass failed", pats[p]);
        check_rows_close(plain, failed, 3 * STEPS, cfg.vocab, what);
    }
    free(plain);
    free(refined);
    free(det);
    free(failed);
}
#else
static void test_unavailable(void)
{
    SKIP("built without CUDA (SD_HAVE_CUDA unset)");
}
#endif

int main(void)
{
#ifdef SD_HAVE_CUDA
    snprintf(cache_path, sizeof cache_path, "/tmp/sd_tune_gpu_%ld.json", (long)getpid());
    RUN(test_cache_reused);
    RUN(test_bad_or_foreign_cache_rewritten);
    RUN(test_refine_keeps_logits);
#else
    RUN(test_unavailable);
#endif
    return sd_test_done();
}
