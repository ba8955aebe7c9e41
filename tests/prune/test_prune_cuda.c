/* test_prune_cuda: the CUDA SparseGPT path against the CPU solver (the reference) — the inverse
 * factor, masks and weights on random matrices for every pattern and block shape, the GPU
 * Hessian accumulator against a naive fp64 sum, the same on real Hessians captured from
 * ../shared/models/small, a whole `--device cuda` prune; and the clear error without a GPU.
 * GPU tests skip without a device. */
#include "tests/harness.h"

#include <jansson.h>
#include <stdint.h>
#include <unistd.h>

#include "engine/backend.h"
#include "engine/cpu_capture.h"
#include "engine/cpu_pool.h"
#include "engine/dtype.h"
#include "engine/model.h"
#include "prune/calib.h"
#include "prune/hess.h"
#include "prune/prune.h"
#include "prune/prune_cuda.h"
#include "prune/sgpt.h"

static const char *patterns[] = {"2:4", "4:8", "8:16", "16:32", "unstructured"};
static const int pat_n[] = {2, 4, 8, 16, 0}, pat_m[] = {4, 8, 16, 32, 0};

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static double rng_normal(uint64_t *s)
{
    double u = ((double)(rng_next(s) >> 11) + 0.5) / 9007199254740992.0;
    double v = ((double)(rng_next(s) >> 11) + 0.5) / 9007199254740992.0;
    return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

/* A GPU context, or NULL (the caller skips). */
static sd_prune_gpu *gpu_or_null(void)
{
    sd_prune_gpu *g = NULL;
    sd_diag d = {0};
    if (sd_prune_gpu_init(&g, 0, &d) != 0)
        return NULL;
    return g;
}

/* H = X^T X / k for X [k, n] with some columns dead (all zero) and some outlier features. */
static double *random_hessian(uint64_t seed, int64_t n, int64_t k, int dead_every)
{
    uint64_t s = seed;
    double *X = malloc((size_t)(k * n) * sizeof *X), *H = calloc((size_t)(n * n), sizeof *H);
    for (int64_t t = 0; t < k; t++)
        for (int64_t j = 0; j < n; j++) {
            double scale = j % 17 == 3 ? 8 : 1;
            X[t * n + j] = dead_every && j % dead_every == 5 ? 0 : scale * rng_normal(&s);
        }
    for (int64_t t = 0; t < k; t++)
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < n; j++)
                H[i * n + j] += X[t * n + i] * X[t * n + j] / (double)k;
    free(X);
    return H;
}

static float *random_weights(uint64_t seed, int64_t rows, int64_t cols)
{
    uint64_t s = seed;
    float *W = malloc((size_t)(rows * cols) * sizeof *W);
    for (int64_t i = 0; i < rows * cols; i++)
        W[i] = (float)(0.02 * rng_normal(&s));
    return W;
}

/* Runs both solvers; counts rows whose masks differ and returns the worst relative weight error
 * over the rows whose masks agree (-1 if a solver failed). */
typedef struct cmp_out {
    int64_t rows_diff;
    double max_rel, loss_cpu, loss_gpu;
} cmp_out;

static int compare_solvers(sd_cpu_pool *pool, sd_prune_gpu *g, const float *W0, int64_t rows, int64_t cols,
                           const double *H0, const sd_sgpt_opts *o, cmp_out *out)
{
    size_t nw = (size_t)(rows * cols), nh = (size_t)(cols * cols), nk = (size_t)(rows * (cols / 32));
    float *Wc = malloc(nw * sizeof *Wc), *Wg = malloc(nw * sizeof *Wg);
    double *Hc = malloc(nh * sizeof *Hc);
    uint32_t *kc = malloc(nk * 4), *kg = malloc(nk * 4);
    memcpy(Wc, W0, nw * sizeof *Wc);
    memcpy(Wg, W0, nw * sizeof *Wg);
    memcpy(Hc, H0, nh * sizeof *Hc);
    sd_sgpt_stats sc = {0}, sg = {0};
    sd_diag d = {0};
    int rc = sd_sgpt_prune(pool, Wc, rows, cols, Hc, o, kc, &sc, &d);
    if (rc == 0)
        rc = sd_prune_gpu_prune(g, Wg, rows, cols, H0, o, kg, &sg, &d);
    if (rc != 0)
        fprintf(stderr, "  solver failed: %s\n", d.msg);
    *out = (cmp_out){0, 0, sc.loss, sg.loss};
    double wmax = 0;
    for (size_t i = 0; i < nw; i++)
        wmax = fmax(wmax, fabs(Wc[i]));
    for (int64_t r = 0; rc == 0 && r < rows; r++) {
        if (memcmp(kc + r * (cols / 32), kg + r * (cols / 32), (size_t)(cols / 32) * 4) != 0) {
            out->rows_diff++;
            continue;
        }
        for (int64_t j = 0; j < cols; j++) {
            double a = Wg[r * cols + j], b = Wc[r * cols + j];
            double rel = fabs(a - b) / (fabs(b) + 1e-9 * wmax);
            out->max_rel = fmax(out->max_rel, rel);
        }
    }
    free(Wc);
    free(Wg);
    free(Hc);
    free(kc);
    free(kg);
    return rc;
}

/* ---- without a GPU ---------------------------------------------------------------------------- */

static void test_no_gpu_is_a_clear_error(void)
{
    sd_prune_gpu *g = NULL;
    sd_diag d = {0};
    int rc = sd_prune_gpu_init(&g, 0, &d);
    if (rc == 0) {
        sd_prune_gpu_free(g);
        SKIP("a GPU is present");
    }
    CHECK_MSG(rc == SD_ENOTSUP || rc == SD_ENODEV, "rc %d", rc);
    CHECK_MSG(strstr(d.msg, "CUDA") != NULL, "message: %s", d.msg);
    /* the job fails the same way before any work, leaving no output */
    char out[] = "/tmp/sd_prune_cuda_XXXXXX";
    REQUIRE(mkdtemp(out) != NULL);
    char dir[128];
    snprintf(dir, sizeof dir, "%s/pruned", out);
    sd_prune_spec s;
    sd_prune_spec_default(&s);
    s.model_dir = "models/tiny";
    s.out_dir = dir;
    s.solver = SD_SOLVER_MAGNITUDE;
    s.device = SD_PRUNE_DEV_CUDA;
    sd_diag d2 = {0};
    int rc2 = sd_prune_run(&s, NULL, NULL, NULL, NULL, &d2);
    CHECK_MSG(rc2 == rc, "job rc %d (%s)", rc2, d2.msg);
    CHECK(access(dir, F_OK) != 0);
    rmdir(out);
}

/* ---- random matrices -------------------------------------------------------------------------- */

static void test_factor_matches_cpu(void)
{
    sd_prune_gpu *g = gpu_or_null();
    if (!g)
        SKIP("no CUDA device");
    sd_cpu_pool *pool = NULL;
    REQUIRE(sd_cpu_pool_init(&pool, 2, NULL) == 0);
    int64_t sizes[] = {96, 320};
    for (int c = 0; c < 3; c++) {
        int64_t n = sizes[c % 2];
        /* case 0: full rank with dead columns; 1: rank-deficient (k < n) with a NaN; 2: an
         * indefinite 2x2 minor that needs damping retries */
        double *H = random_hessian(11 + c, n, c == 1 ? n / 2 : 2 * n, 7);
        if (c == 1)
            H[3 * n + 9] = NAN;
        if (c == 2)
            H[0 * n + 1] = H[1 * n + 0] = 30 * sqrt(H[0] * H[n + 1]);
        double *Hc = malloc((size_t)(n * n) * sizeof *Hc), *Uc = malloc((size_t)(n * n) * sizeof *Uc),
               *Ug = malloc((size_t)(n * n) * sizeof *Ug);
        uint8_t *dc = malloc((size_t)n), *dg = malloc((size_t)n);
        memcpy(Hc, H, (size_t)(n * n) * sizeof *Hc);
        sd_sgpt_opts o;
        sd_sgpt_opts_default(&o);
        sd_sgpt_stats sc = {0}, sg = {0};
        sd_diag d = {0};
        REQUIRE(sd_sgpt_hinv(pool, Hc, n, &o, Uc, dc, &sc, &d) == 0);
        int rc = sd_prune_gpu_hinv(g, H, n, &o, Ug, dg, &sg, &d);
        CHECK_MSG(rc == 0, "case %d: %s", c, d.msg);
        double umax = 0, err = 0;
        for (int64_t i = 0; i < n * n; i++) {
            umax = fmax(umax, fabs(Uc[i]));
            err = fmax(err, fabs(Ug[i] - Uc[i]));
        }
        fprintf(stderr,
                "  factor n=%lld case %d: max |U_gpu - U_cpu| / max |U| = %.3g, retries %d/%d, dead %d\n",
                (long long)n, c, err / umax, sg.retries, sc.retries, sg.dead_cols);
        CHECK_MSG(err <= 1e-10 * umax, "case %d: U differs by %g (max %g)", c, err, umax);
        CHECK(memcmp(dc, dg, (size_t)n) == 0);
        CHECK(sc.dead_cols == sg.dead_cols && sc.dead_cols > 0);
        CHECK_MSG(sc.sanitized == sg.sanitized && sc.sanitized == (c == 1), "sanitized %d/%d", sg.sanitized,
                  sc.sanitized);
        CHECK_MSG(sc.retries == sg.retries && sc.damp_used == sg.damp_used, "retries %d/%d", sg.retries,
                  sc.retries);
        if (c == 2)
            CHECK(sg.retries > 0);
        free(H);
        free(Hc);
        free(Uc);
        free(Ug);
        free(dc);
        free(dg);
    }
    sd_cpu_pool_free(pool);
    sd_prune_gpu_free(g);
}

/* Every pattern, three block sizes (one leaves a partial last block, one spans all columns),
 * rows that do not fill the last thread block. */
static void test_sweep_matches_cpu(void)
{
    sd_prune_gpu *g = gpu_or_null();
    if (!g)
        SKIP("no CUDA device");
    sd_cpu_pool *pool = NULL;
    REQUIRE(sd_cpu_pool_init(&pool, 2, NULL) == 0);
    int64_t rows = 70, cols = 320;
    double *H = random_hessian(5, cols, 2 * cols, 11);
    float *W = random_weights(9, rows, cols);
    int bss[] = {128, 64, 512};
    for (int p = 0; p < 5; p++)
        for (int b = 0; b < 3; b++) {
            sd_sgpt_opts o;
            sd_sgpt_opts_default(&o);
            o.n = pat_n[p];
            o.m = pat_m[p];
            o.block_size = bss[b];
            cmp_out c;
            REQUIRE(compare_solvers(pool, g, W, rows, cols, H, &o, &c) == 0);
            fprintf(
                stderr,
                "  %-12s block %3d: rows with other masks %lld, max rel weight error %.3g, loss %.6g/%.6g\n",
                patterns[p], bss[b], (long long)c.rows_diff, c.max_rel, c.loss_gpu, c.loss_cpu);
            /* fp64 on both sides: only the DGEMM's summation order differs (~1e-16 relative), so
             * no score comes close enough to a tie to flip */
            CHECK_MSG(c.rows_diff == 0, "%s block %d: %lld rows", patterns[p], bss[b],
                      (long long)c.rows_diff);
            CHECK_MSG(c.max_rel < 1e-3, "%s block %d: %g", patterns[p], bss[b], c.max_rel);
            CHECK(fabs(c.loss_gpu - c.loss_cpu) <= 1e-9 * c.loss_cpu);
        }
    free(H);
    free(W);
    sd_cpu_pool_free(pool);
    sd_prune_gpu_free(g);
}

static void test_hess_gpu_matches_naive(void)
{
    sd_prune_gpu *g = gpu_or_null();
    if (!g)
        SKIP("no CUDA device");
    int64_t n = 96, k = 900;
    uint64_t s = 3;
    float *X = malloc((size_t)(k * n) * sizeof *X);
    for (int64_t i = 0; i < k * n; i++)
        X[i] = (float)rng_normal(&s);
    sd_hess *h = NULL;
    sd_diag d = {0};
    REQUIRE(sd_hess_init_gpu(&h, n, g, &d) == 0);
    int64_t pieces[] = {1, 255, 300, 344}, at = 0;
    for (int i = 0; i < 4; i++) {
        CHECK(sd_hess_add(h, NULL, X + at * n, n, pieces[i], &d) == 0);
        at += pieces[i];
    }
    CHECK(sd_hess_rows(h) == k);
    double *H = NULL;
    REQUIRE(sd_hess_finish(h, NULL, &H, &d) == 0);
    double err = 0, hmax = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) {
            double ref = 0;
            for (int64_t t = 0; t < k; t++)
                ref += (double)X[t * n + i] * X[t * n + j];
            ref *= 2.0 / (double)k;
            hmax = fmax(hmax, fabs(ref));
            err = fmax(err, fabs(H[i * n + j] - ref));
        }
    fprintf(stderr, "  gpu hessian: max error %.3g of max %.3g\n", err, hmax);
    CHECK(err <= 1e-12 * hmax);
    free(H);
    free(X);
    sd_hess_free(h);
    sd_prune_gpu_free(g);
}

/* ---- ../shared/models/small ------------------------------------------------------------------- */

/* ../shared/models/small (or $SD_SHARED_DIR/models/small); models/tiny, a real Llama checkpoint in
 * the repository, when it is absent, so a GPU run always checks one real model. */
static const char *real_model(void)
{
    static char dir[4096];
    const char *cfg = sd_test_shared("models/small/config.json");
    if (!cfg) {
        fprintf(stderr, "  ../shared/models/small is absent: using models/tiny\n");
        return "models/tiny";
    }
    snprintf(dir, sizeof dir, "%.*s", (int)(strlen(cfg) - strlen("/config.json")), cfg);
    return dir;
}

typedef struct cap2 {
    sd_hess *cpu[SD_CAP_N], *gpu[SD_CAP_N];
    sd_cpu_pool *pool;
    int32_t layer;
} cap2;

static int cap2_hook(void *ud, int32_t layer, sd_capture_site site, const float *x, int64_t cols, int T,
                     const int32_t *pos, const int32_t *seq)
{
    cap2 *c = ud;
    if (layer != c->layer)
        return 0;
    int rc = sd_hess_add(c->cpu[site], c->pool, x, cols, T, NULL);
    return rc ? rc : sd_hess_add(c->gpu[site], c->pool, x, cols, T, NULL);
}

static const sd_linear *lin(const sd_layer_weights *lw, int which)
{
    const sd_linear *ls[SD_LIN_N] = {&lw->q, &lw->k, &lw->v, &lw->o, &lw->gate, &lw->up, &lw->down};
    return ls[which];
}

static const int lin_site[SD_LIN_N] = {SD_CAP_QKV,    SD_CAP_QKV,    SD_CAP_QKV, SD_CAP_O,
                                       SD_CAP_GATEUP, SD_CAP_GATEUP, SD_CAP_DOWN};

/* Real Hessians of one layer (CPU and GPU accumulators fed the same rows), then every linear of
 * it through both solvers with the CPU's Hessian, for every pattern. */
static void test_small_model_layer(void)
{
    sd_prune_gpu *g = gpu_or_null();
    if (!g)
        SKIP("no CUDA device");
    const char *model = real_model();
    sd_model *m = NULL;
    sd_backend *b = NULL;
    sd_calib_set set = {0};
    cap2 c = {.layer = 5};
    sd_diag d = {0};
    REQUIRE(sd_cpu_pool_init(&c.pool, 0, &d) == 0);
    REQUIRE(sd_model_open(&m, model, &d) == 0);
    const sd_model_config *cfg = sd_model_cfg(m);
    c.layer = cfg->n_layers - 3;
    sd_backend_opts bo;
    sd_backend_opts_default(&bo);
    REQUIRE(sd_backend_cpu_init(&b, m, &bo, &d) == 0);
    REQUIRE(sd_calib_load_text(m, "tests/fixtures/prune/calib_stdlib.txt", 256, 2048, &set, &d) == 0);
    int64_t cols[SD_CAP_N] = {cfg->hidden, (int64_t)cfg->n_heads * cfg->head_dim, cfg->hidden,
                              cfg->intermediate};
    for (int s = 0; s < SD_CAP_N; s++) {
        REQUIRE(sd_hess_init(&c.cpu[s], cols[s], 0, &d) == 0);
        REQUIRE(sd_hess_init_gpu(&c.gpu[s], cols[s], g, &d) == 0);
    }
    sd_backend_cpu_set_capture(b, cap2_hook, &c, c.layer);
    sd_calib_replay_cb cb = {0};
    REQUIRE(sd_calib_replay(b, &set, &cb, 0, NULL, NULL, NULL, &d) == 0);
    double *Hc[SD_CAP_N] = {0}, *Hg[SD_CAP_N] = {0};
    for (int s = 0; s < SD_CAP_N; s++) {
        REQUIRE(sd_hess_finish(c.cpu[s], c.pool, &Hc[s], &d) == 0);
        REQUIRE(sd_hess_finish(c.gpu[s], c.pool, &Hg[s], &d) == 0);
        double num = 0, den = 0;
        for (int64_t i = 0; i < cols[s] * cols[s]; i++) {
            num += (Hg[s][i] - Hc[s][i]) * (Hg[s][i] - Hc[s][i]);
            den += Hc[s][i] * Hc[s][i];
        }
        fprintf(stderr, "  layer %d input %d: %lld rows, |H_gpu - H_cpu| / |H_cpu| = %.3g\n", c.layer, s,
                (long long)sd_hess_rows(c.cpu[s]), sqrt(num / den));
        /* the CPU sums 256-row chunks in fp32; the GPU sums in fp64 */
        CHECK(sqrt(num / den) < 1e-5);
    }
    const sd_layer_weights *lw = &sd_model_w(m)->layers[c.layer];
    int64_t diff_rows = 0, all_rows = 0;
    double worst = 0;
    for (int p = 0; p < 5; p++)
        for (int which = 0; which < SD_LIN_N; which++) {
            const sd_linear *l = lin(lw, which);
            float *W = malloc((size_t)(l->rows * l->cols) * sizeof *W);
            REQUIRE(sd_dtype_to_f32(l->dtype, l->w, W, (size_t)(l->rows * l->cols)) == 0);
            sd_sgpt_opts o;
            sd_sgpt_opts_default(&o);
            o.n = pat_n[p];
            o.m = pat_m[p];
            cmp_out r;
            CHECK(compare_solvers(c.pool, g, W, l->rows, l->cols, Hc[lin_site[which]], &o, &r) == 0);
            diff_rows += r.rows_diff;
            all_rows += l->rows;
            worst = fmax(worst, r.max_rel);
            CHECK_MSG(r.max_rel < 1e-3, "%s %s: %g", patterns[p], l->name, r.max_rel);
            CHECK_MSG(fabs(r.loss_gpu - r.loss_cpu) <= 1e-6 * r.loss_cpu, "%s %s: loss %g vs %g", patterns[p],
                      l->name, r.loss_gpu, r.loss_cpu);
            free(W);
        }
    fprintf(stderr,
            "  %s layer %d, 7 linears x 5 patterns: %lld of %lld rows with other masks, worst rel weight "
            "error %.3g\n",
            model, c.layer, (long long)diff_rows, (long long)all_rows, worst);
    CHECK_MSG(diff_rows == 0, "%lld rows", (long long)diff_rows);
    for (int s = 0; s < SD_CAP_N; s++) {
        free(Hc[s]);
        free(Hg[s]);
        sd_hess_free(c.cpu[s]);
        sd_hess_free(c.gpu[s]);
    }
    sd_calib_set_clear(&set);
    sd_backend_free(b);
    sd_model_free(m);
    sd_cpu_pool_free(c.pool);
    sd_prune_gpu_free(g);
}

/* A whole prune of small with --device cuda: a checkpoint that loads as 2:4, its provenance
 * naming the device, and masks close to the CPU job's (the Hessians differ by the CPU's fp32
 * chunk sums, so near-ties may go either way: the agreement is reported). */
static void test_small_model_job(void)
{
    sd_prune_gpu *g = gpu_or_null();
    if (!g)
        SKIP("no CUDA device");
    sd_prune_gpu_free(g);
    const char *model = real_model();
    char tmp[] = "/tmp/sd_prune_cuda_XXXXXX";
    REQUIRE(mkdtemp(tmp) != NULL);
    char out[2][256];
    /* both jobs capture on the CPU backend: this compares the solvers (test_capture_cuda compares
     * the GPU capture) */
    setenv("SD_PRUNE_CPU_CAPTURE", "1", 1);
    for (int k = 0; k < 2; k++) {
        snprintf(out[k], sizeof out[k], "%s/%s", tmp, k ? "cuda" : "cpu");
        sd_prune_spec s;
        sd_prune_spec_default(&s);
        s.model_dir = model;
        s.out_dir = out[k];
        s.source = SD_CALIB_TEXT;
        s.input = "tests/fixtures/prune/calib_stdlib.txt";
        s.tokens_budget = 2048;
        s.seq_len = 256;
        s.device = k ? SD_PRUNE_DEV_CUDA : SD_PRUNE_DEV_CPU;
        sd_diag d = {0};
        int rc = sd_prune_run(&s, NULL, NULL, NULL, NULL, &d);
        CHECK_MSG(rc == 0, "%s: %s", out[k], d.msg);
        if (rc != 0)
            goto out;
    }
    unsetenv("SD_PRUNE_CPU_CAPTURE");
    sd_model *m[2] = {0};
    sd_diag d = {0};
    CHECK(sd_model_open(&m[0], out[0], &d) == 0);
    CHECK_MSG(sd_model_open(&m[1], out[1], &d) == 0, "%s", d.msg);
    if (m[0] && m[1]) {
        CHECK(strcmp(sd_model_sparsity(m[1]), "2:4") == 0);
        int64_t rows = 0, same = 0;
        const sd_model_config *cfg = sd_model_cfg(m[0]);
        for (int32_t l = 0; l < cfg->n_layers; l++)
            for (int which = 0; which < SD_LIN_N; which++) {
                const sd_linear *a = lin(&sd_model_w(m[0])->layers[l], which);
                const sd_linear *b = lin(&sd_model_w(m[1])->layers[l], which);
                for (int64_t r = 0; r < a->rows; r++, rows++)
                    same += memcmp(a->mask + r * (a->cols / 32), b->mask + r * (b->cols / 32),
                                   (size_t)(a->cols / 32) * 4) == 0;
            }
        fprintf(stderr, "  %s job: %lld of %lld rows with the CPU job's masks (%.2f%%)\n", model,
                (long long)same, (long long)rows, 100.0 * (double)same / (double)rows);
        /* the solvers agree exactly on equal Hessians (test_small_model_layer); the Hessians here
         * differ by about 1e-7 relative, which flips only groups that were near-ties */
        CHECK_MSG(same >= rows - rows / 100, "%lld of %lld rows", (long long)same, (long long)rows);
    }
    sd_model_free(m[0]);
    sd_model_free(m[1]);
    char path[512];
    snprintf(path, sizeof path, "%s/sparsity.json", out[1]);
    json_t *js = json_load_file(path, 0, NULL);
    const char *dev = json_string_value(json_object_get(json_object_get(js, "provenance"), "solver_device"));
    CHECK_MSG(dev && strcmp(dev, "cuda") == 0, "%s: solver_device %s", path, dev ? dev : "(none)");
    json_decref(js);
out:
    unsetenv("SD_PRUNE_CPU_CAPTURE");
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    CHECK(system(cmd) == 0);
}

int main(void)
{
    RUN(test_no_gpu_is_a_clear_error);
    RUN(test_factor_matches_cpu);
    RUN(test_sweep_matches_cpu);
    RUN(test_hess_gpu_matches_naive);
    RUN(test_small_model_layer);
    RUN(test_small_model_job);
    return sd_test_done();
}
