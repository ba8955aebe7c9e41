/* test_capture_cuda: calibration capture on the CUDA backend (engine/cuda_capture.h) against the
 * CPU backend's (engine/cpu_capture.h) on models/tiny — the Hessians of every layer and input
 * from the same token sequences, and whole `--device cuda` prunes with the GPU capture against
 * the CPU-captured ones (SD_PRUNE_CPU_CAPTURE=1). GPU tests skip without a device; the CPU-side
 * checks (refusals, provenance) run everywhere. */
#include "tests/harness.h"

#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/backend.h"
#include "engine/cpu_capture.h"
#include "engine/cpu_pool.h"
#include "engine/cuda_capture.h"
#include "engine/dtype.h"
#include "engine/model.h"
#include "prune/calib.h"
#include "prune/eval.h"
#include "prune/hess.h"
#include "prune/prune.h"
#include "prune/prune_cuda.h"

#define MODEL "models/tiny"
#define PROMPTS "prune/prompts/calib_code_prose.jsonl"

static int have_gpu(void)
{
    sd_prune_gpu *g = NULL;
    sd_diag d = {0};
    if (sd_prune_gpu_init(&g, 0, &d) != 0)
        return 0;
    sd_prune_gpu_free(g);
    return 1;
}

static int cuda_backend(sd_backend **ret, const sd_model *m, const sd_backend_opts *bo, sd_diag *d)
{
#ifdef SD_HAVE_CUDA
    return sd_backend_cuda_init(ret, m, bo, d);
#else
    return sd_diag_set(d, SD_ENOTSUP, "no CUDA in this build");
#endif
}

/* ---- CPU side ------------------------------------------------------------------------------- */

/* Device rows need a GPU accumulator; the CUDA hook cannot go on a CPU backend. */
static void test_refusals(void)
{
    sd_hess *h = NULL;
    sd_diag d = {0};
    REQUIRE(sd_hess_init(&h, 64, 0, &d) == 0);
    uint16_t rows[2 * 64] = {0};
    CHECK(sd_hess_add_dev(h, rows, 64, 2, &d) == SD_EINVAL);
    CHECK(sd_hess_rows(h) == 0);
    sd_hess_free(h);

    sd_model *m = NULL;
    sd_backend *b = NULL;
    REQUIRE(sd_model_open(&m, MODEL, &d) == 0);
    sd_backend_opts bo;
    sd_backend_opts_default(&bo);
    bo.n_threads = 2;
    REQUIRE(sd_backend_cpu_init(&b, m, &bo, &d) == 0);
    int rc = sd_backend_cuda_set_capture(b, NULL, NULL, -1, &d);
    CHECK_MSG(rc == SD_EINVAL || rc == SD_ENOTSUP, "rc %d", rc);
    sd_backend_free(b);
    sd_model_free(m);
}

static const char *prov_str(const char *dir, const char *key, char *buf, size_t len)
{
    char path[600];
    snprintf(path, sizeof path, "%s/sparsity.json", dir);
    json_t *js = json_load_file(path, 0, NULL);
    const char *v = json_string_value(json_object_get(json_object_get(js, "provenance"), key));
    snprintf(buf, len, "%s", v ? v : "(none)");
    json_decref(js);
    return buf;
}

static void rm_rf(const char *dir)
{
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

/* A --device cpu prune records that its calibration was captured on the CPU. */
static void test_cpu_job_provenance(void)
{
    char tmp[] = "/tmp/sd_capture_cuda_XXXXXX";
    REQUIRE(mkdtemp(tmp) != NULL);
    char out[300], buf[64];
    snprintf(out, sizeof out, "%s/cpu", tmp);
    sd_prune_spec s;
    sd_prune_spec_default(&s);
    s.model_dir = MODEL;
    s.out_dir = out;
    s.source = SD_CALIB_TEXT;
    s.input = "tests/fixtures/prune/calib_stdlib.txt";
    s.tokens_budget = 256;
    s.seq_len = 128;
    s.threads = 2;
    sd_diag d = {0};
    int rc = sd_prune_run(&s, NULL, NULL, NULL, NULL, &d);
    CHECK_MSG(rc == 0, "%s", d.msg);
    if (rc == 0)
        CHECK_MSG(strcmp(prov_str(out, "capture_device", buf, sizeof buf), "cpu") == 0, "capture_device %s",
                  buf);
    rm_rf(tmp);
}

/* ---- GPU: Hessians from both backends --------------------------------------------------------- */

typedef struct cap_state {
    sd_hess *h[8][SD_CAP_N];  /* [layer][site] */
    sd_hess *hb[8][SD_CAP_N]; /* CPU rows rounded to bf16 (the rounding part of the difference) */
    const sd_calib_set *set;
    int32_t prefill[SD_CALIB_REPLAY_MAX_SEQS];
    sd_cpu_pool *pool;
    float *round; /* scratch for bf16-rounded rows */
} cap_state;

static void cap_begin(void *ud, const int32_t *ids, int n)
{
    cap_state *c = ud;
    for (int k = 0; k < n; k++)
        c->prefill[k] = c->set->seqs[ids[k]].prefill_len;
}

/* Both hooks keep rows at decode positions (pos >= the sequence's prefill length), one at a time. */
static int cpu_hook(void *ud, int32_t layer, sd_capture_site site, const float *x, int64_t cols, int T,
                    const int32_t *pos, const int32_t *seq)
{
    cap_state *c = ud;
    for (int t = 0; t < T; t++) {
        if (pos[t] < c->prefill[seq[t]])
            continue;
        int rc = sd_hess_add(c->h[layer][site], c->pool, x + (int64_t)t * cols, cols, 1, NULL);
        for (int64_t j = 0; j < cols && rc == 0; j++)
            c->round[j] = sd_bf16_to_f32(sd_f32_to_bf16(x[t * cols + j]));
        if (rc == 0)
            rc = sd_hess_add(c->hb[layer][site], c->pool, c->round, cols, 1, NULL);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static int cuda_hook(void *ud, int32_t layer, sd_capture_site site, const void *x, int64_t cols, int T,
                     const int32_t *pos, const int32_t *seq)
{
    cap_state *c = ud;
    const uint16_t *rows = x;
    for (int t = 0; t < T; t++) {
        if (pos[t] < c->prefill[seq[t]])
            continue;
        int rc = sd_hess_add_dev(c->h[layer][site], rows + (int64_t)t * cols, cols, 1, NULL);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static double rel_fro(const double *a, const double *ref, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        num += (a[i] - ref[i]) * (a[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : (num > 0 ? INFINITY : 0);
}

/* The dense model generates from the prompts (CPU, greedy); both backends replay the finished
 * sequences with their hooks; every layer's four Hessians are compared. */
static void test_hessians_match_cpu(void)
{
    if (!have_gpu())
        SKIP("no CUDA device");
    sd_diag d = {0};
    sd_model *m = NULL;
    sd_backend *bc = NULL, *bg = NULL;
    sd_prune_gpu *g = NULL;
    sd_calib_set prompts = {0}, set = {0};
    cap_state cc = {0}, cg = {0};
    REQUIRE(sd_model_open(&m, MODEL, &d) == 0);
    const sd_model_config *cfg = sd_model_cfg(m);
    REQUIRE(cfg->n_layers <= 8);
    REQUIRE(sd_prune_gpu_init(&g, 0, &d) == 0);
    REQUIRE(sd_cpu_pool_init(&cc.pool, 0, &d) == 0);
    sd_backend_opts bo;
    sd_backend_opts_default(&bo);
    REQUIRE(sd_backend_cpu_init(&bc, m, &bo, &d) == 0);
    bo.kv_blocks = 1024;
    int brc = cuda_backend(&bg, m, &bo, &d);
    CHECK_MSG(brc == 0, "cuda backend: %s", d.msg);
    REQUIRE(brc == 0);
    REQUIRE(sd_calib_load_prompts(m, MODEL, PROMPTS, &prompts, &d) == 0);
    sd_calib_gen_opts go;
    sd_calib_gen_opts_default(&go);
    go.max_new_tokens = 48;
    go.budget = 768;
    REQUIRE(sd_calib_generate(bc, m, &prompts, &go, NULL, NULL, NULL, &set, &d) == 0);
    int64_t cols[SD_CAP_N] = {cfg->hidden, (int64_t)cfg->n_heads * cfg->head_dim, cfg->hidden,
                              cfg->intermediate};
    cc.round = malloc((size_t)cfg->intermediate * sizeof *cc.round);
    for (int l = 0; l < cfg->n_layers; l++)
        for (int s = 0; s < SD_CAP_N; s++) {
            REQUIRE(sd_hess_init(&cc.h[l][s], cols[s], 0, &d) == 0);
            REQUIRE(sd_hess_init(&cc.hb[l][s], cols[s], 0, &d) == 0);
            REQUIRE(sd_hess_init_gpu(&cg.h[l][s], cols[s], g, &d) == 0);
        }
    cc.set = cg.set = &set;
    sd_calib_replay_cb cbc = {.begin = cap_begin, .ud = &cc}, cbg = {.begin = cap_begin, .ud = &cg};
    sd_backend_cpu_set_capture(bc, cpu_hook, &cc, -1);
    REQUIRE(sd_calib_replay(bc, &set, &cbc, 0, NULL, NULL, NULL, &d) == 0);
    REQUIRE(sd_backend_cuda_set_capture(bg, cuda_hook, &cg, -1, &d) == 0);
    int rc = sd_calib_replay(bg, &set, &cbg, 0, NULL, NULL, NULL, &d);
    CHECK_MSG(rc == 0, "cuda replay: %s", d.msg);
    REQUIRE(sd_backend_cuda_set_capture(bg, NULL, NULL, -1, &d) == 0);
    fprintf(stderr, "  %d sequences, %lld decode rows\n", set.n, (long long)set.kept);
    double worst = 0;
    for (int l = 0; l < cfg->n_layers && rc == 0; l++)
        for (int s = 0; s < SD_CAP_N; s++) {
            double *Hc = NULL, *Hb = NULL, *Hg = NULL;
            int64_t n = cols[s] * cols[s];
            CHECK(sd_hess_rows(cc.h[l][s]) == set.kept);
            CHECK_MSG(sd_hess_rows(cg.h[l][s]) == sd_hess_rows(cc.h[l][s]),
                      "layer %d site %d: %lld vs %lld rows", l, s, (long long)sd_hess_rows(cg.h[l][s]),
                      (long long)sd_hess_rows(cc.h[l][s]));
            REQUIRE(sd_hess_finish(cc.h[l][s], cc.pool, &Hc, &d) == 0);
            REQUIRE(sd_hess_finish(cc.hb[l][s], cc.pool, &Hb, &d) == 0);
            int frc = sd_hess_finish(cg.h[l][s], cc.pool, &Hg, &d);
            CHECK_MSG(frc == 0, "gpu Hessian: %s", d.msg);
            REQUIRE(frc == 0);
            double e = rel_fro(Hg, Hc, n), eb = rel_fro(Hb, Hc, n);
            worst = fmax(worst, e);
            fprintf(
                stderr,
                "  layer %d input %d: |H_cuda - H_cpu| / |H_cpu| = %.3g (CPU rows rounded to bf16: %.3g)\n",
                l, s, e, eb);
            /* the CUDA backend forms every linear input in bf16 (8 significant bits: a relative
             * rounding of up to 2^-9 per element; on H about 1e-3, the second number above) and
             * runs its matmuls on bf16 weights with fp32 sums in another order; those
             * differences propagate through the layers. HF transformers with tiny entirely in
             * bf16 (a pessimistic proxy: its residual stream is bf16 too) moves these Hessians
             * by 0.7e-3 to 1.1e-2 relative on 1024 tokens of text. 2e-2 leaves room above that
             * and is far below a wrong row, site, layer or position selection (order 1). */
            CHECK_MSG(e < 2e-2, "layer %d site %d: %.3g", l, s, e);
            free(Hc);
            free(Hb);
            free(Hg);
        }
    fprintf(stderr, "  worst relative Frobenius difference %.3g\n", worst);
    for (int l = 0; l < cfg->n_layers; l++)
        for (int s = 0; s < SD_CAP_N; s++) {
            sd_hess_free(cc.h[l][s]);
            sd_hess_free(cc.hb[l][s]);
            sd_hess_free(cg.h[l][s]);
        }
    free(cc.round);
    sd_calib_set_clear(&set);
    sd_calib_set_clear(&prompts);
    sd_backend_free(bg);
    sd_backend_free(bc);
    sd_cpu_pool_free(cc.pool);
    sd_prune_gpu_free(g);
    sd_model_free(m);
}

static const sd_linear *lin(const sd_layer_weights *lw, int which)
{
    const sd_linear *ls[SD_LIN_N] = {&lw->q, &lw->k, &lw->v, &lw->o, &lw->gate, &lw->up, &lw->down};
    return ls[which];
}

/* ---- GPU: weights written into the CUDA backend (sequential pruning) -------------------------- */

static double rel_l2(const float *a, const float *ref, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        num += ((double)a[i] - ref[i]) * ((double)a[i] - ref[i]);
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : INFINITY;
}

/* Logits of every position of a fixed 24-token sequence. */
static int forward_all(sd_backend *b, float *logits, sd_diag *d)
{
    int32_t toks[24], bt[2] = {0, 1};
    for (int i = 0; i < 24; i++)
        toks[i] = (i * 37 + 11) % 500;
    sd_batch_seq q = {.pos = 0, .n_tokens = 24, .tokens = toks, .block_table = bt, .all_logits = 1};
    return sd_backend_forward(b, &q, 1, logits, d);
}

/* Each linear of layer 1 in turn: negated on both backends, the CUDA logits follow the CPU's
 * (rel L2 <= 1e-2, the bound test_cuda_backend holds the two backends to) where the change moves
 * them by far more; written back, the CUDA logits return to the unmodified ones. A wrong row
 * offset inside the fused q/k/v or gate/up matrices, or a short write, fails one or the other. */
static void test_set_linear_matches_cpu(void)
{
    if (!have_gpu())
        SKIP("no CUDA device");
    sd_diag d = {0};
    sd_model *m = NULL;
    sd_backend *bc = NULL, *bg = NULL;
    REQUIRE(sd_model_open(&m, MODEL, &d) == 0);
    const sd_model_config *cfg = sd_model_cfg(m);
    sd_backend_opts bo;
    sd_backend_opts_default(&bo);
    bo.kv_blocks = 64;
    REQUIRE(sd_backend_cpu_init(&bc, m, &bo, &d) == 0);
    int brc = cuda_backend(&bg, m, &bo, &d);
    CHECK_MSG(brc == 0, "cuda backend: %s", d.msg);
    REQUIRE(brc == 0);
    CHECK(sd_backend_cuda_set_linear(bg, cfg->n_layers, 0, NULL, &d) == SD_EINVAL);
    CHECK(sd_backend_cuda_set_linear(bg, 0, SD_LIN_N, NULL, &d) == SD_EINVAL);
    int64_t n = 24 * (int64_t)cfg->vocab;
    float *g0 = malloc((size_t)n * 4), *c0 = malloc((size_t)n * 4), *g = malloc((size_t)n * 4),
          *c = malloc((size_t)n * 4);
    REQUIRE(g0 && c0 && g && c);
    REQUIRE(forward_all(bg, g0, &d) == 0 && forward_all(bc, c0, &d) == 0);
    const sd_layer_weights *lw = &sd_model_w(m)->layers[1];
    for (int which = 0; which < SD_LIN_N; which++) {
        const sd_linear *l = lin(lw, which);
        size_t ne = (size_t)(l->rows * l->cols);
        float *W = malloc(ne * 4), *H = malloc(ne * 4);
        REQUIRE(W && H && sd_dtype_to_f32(l->dtype, l->w, W, ne) == 0);
        for (size_t i = 0; i < ne; i++)
            H[i] = -W[i]; /* exact in bf16 */
        CHECK(sd_backend_cuda_set_linear(bg, 1, which, H, &d) == 0);
        CHECK(sd_backend_cpu_set_linear(bc, 1, which, H, &d) == 0);
        CHECK(forward_all(bg, g, &d) == 0 && forward_all(bc, c, &d) == 0);
        double effect = rel_l2(c, c0, n), err = rel_l2(g, c, n);
        fprintf(stderr, "  %s negated: logits move %.3g; CUDA vs CPU %.3g\n", l->name, effect, err);
        CHECK_MSG(effect > 5e-2 && err <= 1e-2, "%s: effect %.3g, cuda vs cpu %.3g", l->name, effect, err);
        CHECK(sd_backend_cuda_set_linear(bg, 1, which, W, &d) == 0);
        CHECK(sd_backend_cpu_set_linear(bc, 1, which, W, &d) == 0);
        CHECK(forward_all(bg, g, &d) == 0);
        CHECK_MSG(rel_l2(g, g0, n) <= 1e-6, "%s restored: %.3g", l->name, rel_l2(g, g0, n));
        free(W);
        free(H);
    }
    free(g0);
    free(c0);
    free(g);
    free(c);
    sd_backend_free(bg);
    sd_backend_free(bc);
    sd_model_free(m);
}

/* ---- GPU: whole jobs ---------------------------------------------------------------------------- */

/* The fraction of 2:4 groups (4 mask bits) with the same mask in both checkpoints, and of whole
 * rows (every group of the row); -1 if one does not load. */
static double mask_agreement(const char *a_dir, const char *b_dir, double *rows_frac)
{
    sd_model *m[2] = {0};
    sd_diag d = {0};
    double frac = -1;
    *rows_frac = -1;
    if (sd_model_open(&m[0], a_dir, &d) != 0 || sd_model_open(&m[1], b_dir, &d) != 0) {
        fprintf(stderr, "  load: %s\n", d.msg);
        goto out;
    }
    int64_t rows = 0, same = 0, groups = 0, gsame = 0;
    const sd_model_config *cfg = sd_model_cfg(m[0]);
    for (int32_t l = 0; l < cfg->n_layers; l++)
        for (int which = 0; which < SD_LIN_N; which++) {
            const sd_linear *a = lin(&sd_model_w(m[0])->layers[l], which);
            const sd_linear *b = lin(&sd_model_w(m[1])->layers[l], which);
            if (!a->mask || !b->mask)
                continue;
            for (int64_t r = 0; r < a->rows; r++, rows++) {
                const uint32_t *ma = a->mask + r * (a->cols / 32), *mb = b->mask + r * (b->cols / 32);
                same += memcmp(ma, mb, (size_t)(a->cols / 32) * 4) == 0;
                for (int64_t w = 0; w < a->cols / 32; w++)
                    for (int sh = 0; sh < 32; sh += 4, groups++)
                        gsame += ((ma[w] >> sh) & 15) == ((mb[w] >> sh) & 15);
            }
        }
    frac = groups ? (double)gsame / (double)groups : -1;
    *rows_frac = rows ? (double)same / (double)rows : -1;
    fprintf(stderr, "  same mask: %.2f%% of %lld groups, %.2f%% of %lld rows\n", 100 * frac,
            (long long)groups, 100 * *rows_frac, (long long)rows);
out:
    sd_model_free(m[0]);
    sd_model_free(m[1]);
    return frac;
}

/* KL(dense || model) on the dense model's greedy continuations of the eval prompts; -1 on error. */
static double kl_to_dense(const char *dir)
{
    sd_eval_spec e;
    sd_eval_spec_default(&e);
    e.model_dir = dir;
    e.ref_dir = MODEL;
    e.prompts = "prune/prompts/eval_code_prose.jsonl";
    e.gen_tokens = 32;
    sd_eval_result r = {0};
    sd_diag d = {0};
    int rc = sd_eval_run(&e, NULL, NULL, NULL, &r, &d);
    CHECK_MSG(rc == 0, "eval %s: %s", dir, d.msg);
    return rc == 0 ? r.kl : -1;
}

/* The CUDA-captured checkpoint against the CPU-captured one: >= 90% of the 2:4 groups with the
 * same mask, and its KL to the dense model at most kl_ratio times the CPU-captured one's.
 * Why groups, not whole rows: the GPU forms every linear input in bf16. On models/tiny (this
 * job's settings, CPU only), rounding the CPU's own captured rows to bf16 and changing nothing
 * else already leaves only 90.2% of the rows with every group equal but 98.6% of the groups (a
 * down_proj row holds 192 groups; one near-tie decided the other way makes the row differ).
 * With rounding errors 2, 4, 8, 16 times larger: 97.5, 95.6, 92.8, 89.4% of the groups; the
 * GPU forward's own differences come on top of the rounding (a whole-bf16 HF forward of tiny
 * moves H 2 to 10 times more than the rounding alone). A wrong capture is far lower: SparseGPT
 * calibrated on other text agrees on 56%, magnitude pruning on 63%. KL(dense || pruned) of
 * those runs: 3.23 (CPU rows), 3.25 (bf16), 3.24 (4x), 3.11 (8x), 3.04 (16x) — noise of a few
 * percent either way — and 4.65 for magnitude pruning. */
static void compare_jobs(const char *gpu_dir, const char *cpu_dir, double kl_ratio)
{
    double rows = 0, groups = mask_agreement(gpu_dir, cpu_dir, &rows);
    CHECK_MSG(groups >= 0.90, "%.4f of the groups with the CPU capture's masks", groups);
    double kg = kl_to_dense(gpu_dir), kc = kl_to_dense(cpu_dir);
    fprintf(stderr, "  KL(dense || pruned): GPU capture %.4f, CPU capture %.4f nats/token\n", kg, kc);
    CHECK_MSG(kg >= 0 && kc > 0 && kg <= kl_ratio * kc, "KL %.4f vs %.4f", kg, kc);
}

/* The checkpoint loads as 2:4 and the CPU backend runs it to finite logits. */
static void check_loadable(const char *dir)
{
    sd_model *m = NULL;
    sd_backend *b = NULL;
    sd_diag d = {0};
    int rc = sd_model_open(&m, dir, &d);
    CHECK_MSG(rc == 0, "%s: %s", dir, d.msg);
    if (rc != 0)
        return;
    CHECK(strcmp(sd_model_sparsity(m), "2:4") == 0);
    sd_backend_opts bo;
    sd_backend_opts_default(&bo);
    if (sd_backend_cpu_init(&b, m, &bo, &d) == 0) {
        int32_t toks[4] = {0, 5, 17, 42}, bt[1] = {0};
        sd_batch_seq q = {.pos = 0, .n_tokens = 4, .tokens = toks, .block_table = bt, .all_logits = 0};
        float *logits = malloc((size_t)sd_model_cfg(m)->vocab * sizeof *logits);
        CHECK(sd_backend_forward(b, &q, 1, logits, &d) == 0);
        int finite = 1;
        for (int32_t i = 0; i < sd_model_cfg(m)->vocab; i++)
            finite &= isfinite(logits[i]);
        CHECK(finite);
        free(logits);
    } else {
        CHECK_MSG(0, "cpu backend: %s", d.msg);
    }
    sd_backend_free(b);
    sd_model_free(m);
}

/* One --device cuda job; cpu_capture sets SD_PRUNE_CPU_CAPTURE=1 for it. */
static int run_job(const char *out, sd_calib_source src, const char *input, const char *save, int cpu_capture,
                   sd_prune_mode mode)
{
    sd_prune_spec s;
    sd_prune_spec_default(&s);
    s.model_dir = MODEL;
    s.out_dir = out;
    s.source = src;
    s.input = input;
    s.tokens_budget = 768;
    s.max_new_tokens = 48;
    s.save_tokens = save;
    s.device = SD_PRUNE_DEV_CUDA;
    s.mode = mode;
    if (cpu_capture)
        setenv("SD_PRUNE_CPU_CAPTURE", "1", 1);
    else
        unsetenv("SD_PRUNE_CPU_CAPTURE");
    sd_diag d = {0};
    sd_prune_result r = {0};
    int rc = sd_prune_run(&s, NULL, NULL, NULL, &r, &d);
    unsetenv("SD_PRUNE_CPU_CAPTURE");
    CHECK_MSG(rc == 0, "%s: %s", out, d.msg);
    if (rc == 0)
        fprintf(stderr, "  %s: %lld calibration rows, %.2f s\n", out, (long long)r.calib_tokens, r.seconds);
    return rc;
}

static int files_equal(const char *a, const char *b)
{
    char cmd[700];
    snprintf(cmd, sizeof cmd, "cmp -s '%s' '%s'", a, b);
    return system(cmd) == 0;
}

/* Decode calibration generated and captured on the GPU against the CPU-captured job; then the
 * CPU job's sequences (--source tokens) replayed through both captures. */
static void test_jobs_match_cpu_capture(void)
{
    if (!have_gpu())
        SKIP("no CUDA device");
    char tmp[] = "/tmp/sd_capture_cuda_XXXXXX";
    REQUIRE(mkdtemp(tmp) != NULL);
    char dec_gpu[300], dec_cpu[300], tok_gpu[300], tok_cpu[300], seq_gpu[300], seq_cpu[300], buf[64];
    snprintf(dec_gpu, sizeof dec_gpu, "%s/decode-gpu", tmp);
    snprintf(dec_cpu, sizeof dec_cpu, "%s/decode-cpu", tmp);
    snprintf(tok_gpu, sizeof tok_gpu, "%s/tokens-gpu", tmp);
    snprintf(tok_cpu, sizeof tok_cpu, "%s/tokens-cpu", tmp);
    snprintf(seq_gpu, sizeof seq_gpu, "%s/seq-gpu.jsonl", tmp);
    snprintf(seq_cpu, sizeof seq_cpu, "%s/seq-cpu.jsonl", tmp);
    char seq_gpu_dir[300], seq_cpu_dir[300];
    snprintf(seq_gpu_dir, sizeof seq_gpu_dir, "%s/sequential-gpu", tmp);
    snprintf(seq_cpu_dir, sizeof seq_cpu_dir, "%s/sequential-cpu", tmp);
    if (run_job(dec_gpu, SD_CALIB_DECODE, PROMPTS, seq_gpu, 0, SD_PRUNE_ONESHOT) != 0 ||
        run_job(dec_cpu, SD_CALIB_DECODE, PROMPTS, seq_cpu, 1, SD_PRUNE_ONESHOT) != 0)
        goto out;
    check_loadable(dec_gpu);
    CHECK_MSG(strcmp(prov_str(dec_gpu, "capture_device", buf, sizeof buf), "cuda") == 0, "%s", buf);
    CHECK_MSG(strcmp(prov_str(dec_cpu, "capture_device", buf, sizeof buf), "cpu") == 0, "%s", buf);
    int same_seqs = files_equal(seq_gpu, seq_cpu);
    fprintf(stderr, "  decode: the GPU generated %s sequences as the CPU\n",
            same_seqs ? "the same" : "other");
    /* other sequences (greedy near-ties decided the other way in bf16) change the Hessians by
     * more than the capture does: then only the quality is held to the CPU job's */
    if (same_seqs) {
        compare_jobs(dec_gpu, dec_cpu, 1.15);
    } else {
        double rows = 0, groups = mask_agreement(dec_gpu, dec_cpu, &rows);
        CHECK(groups >= 0);
        double kg = kl_to_dense(dec_gpu), kc = kl_to_dense(dec_cpu);
        fprintf(stderr, "  KL(dense || pruned): GPU capture %.4f, CPU capture %.4f nats/token\n", kg, kc);
        CHECK_MSG(kg >= 0 && kc > 0 && kg <= 1.25 * kc, "KL %.4f vs %.4f", kg, kc);
    }
    /* the same sequences through both captures */
    if (run_job(tok_gpu, SD_CALIB_TOKENS, seq_cpu, NULL, 0, SD_PRUNE_ONESHOT) != 0 ||
        run_job(tok_cpu, SD_CALIB_TOKENS, seq_cpu, NULL, 1, SD_PRUNE_ONESHOT) != 0)
        goto out;
    check_loadable(tok_gpu);
    CHECK_MSG(strcmp(prov_str(tok_gpu, "capture_device", buf, sizeof buf), "cuda") == 0, "%s", buf);
    compare_jobs(tok_gpu, tok_cpu, 1.15);
    /* sequential: the pruned layers go into the CUDA backend's weights between layers. Each
     * layer's inputs come through the layers already pruned, so one near-tie decided the other
     * way changes every later Hessian: on the CPU, bf16-rounded rows alone leave 80% of the
     * groups equal (4x that error: 77%), so only the quality is held to the CPU job's (KL 3.10
     * CPU rows, 3.06 bf16, 3.15 4x) */
    if (run_job(seq_gpu_dir, SD_CALIB_TOKENS, seq_cpu, NULL, 0, SD_PRUNE_SEQUENTIAL) != 0 ||
        run_job(seq_cpu_dir, SD_CALIB_TOKENS, seq_cpu, NULL, 1, SD_PRUNE_SEQUENTIAL) != 0)
        goto out;
    check_loadable(seq_gpu_dir);
    double rows = 0, groups = mask_agreement(seq_gpu_dir, seq_cpu_dir, &rows);
    CHECK(groups >= 0);
    double kg = kl_to_dense(seq_gpu_dir), kc = kl_to_dense(seq_cpu_dir);
    fprintf(stderr, "  sequential KL(dense || pruned): GPU capture %.4f, CPU capture %.4f nats/token\n", kg,
            kc);
    CHECK_MSG(kg >= 0 && kc > 0 && kg <= 1.15 * kc, "sequential KL %.4f vs %.4f", kg, kc);
out:
    rm_rf(tmp);
}

int main(void)
{
    RUN(test_refusals);
    RUN(test_cpu_job_provenance);
    RUN(test_hessians_match_cpu);
    RUN(test_set_linear_matches_cpu);
    RUN(test_jobs_match_cpu_capture);
    return sd_test_done();
}
