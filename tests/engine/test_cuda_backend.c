/* test_cuda_backend: the CUDA backend against the CPU backend (its fp32 twin) on the bundled
 * models, dense and 2:4-pruned, and the tiny model's weights under a Mistral config with a
 * sliding window; batched vs single sequences; CUDA-graph replay vs eager; synthetic weights.
 * GPU tests skip without a device. */
#include "tests/harness.h"

#include <limits.h>
#include <stdint.h>
#include <unistd.h>

#include "engine/backend.h"
#include "engine/checkpoint.h"
#include "engine/model.h"
#include "engine/synthetic.h"
#ifdef SD_HAVE_CUDA
#include "engine/cuda_backend.h"
#endif

#define TINY "models/tiny"
#define KV_BLOCKS 64
#define BS 16

static void test_pattern_parse(void)
{
    int n = -1, m = -1;
    CHECK(sd_synth_pattern_parse("dense", &n, &m) == 0 && n == 0 && m == 0);
    CHECK(sd_synth_pattern_parse("2:4", &n, &m) == 0 && n == 2 && m == 4);
    CHECK(sd_synth_pattern_parse("16:32", &n, &m) == 0 && n == 16 && m == 32);
    CHECK(sd_synth_pattern_parse("3:4", &n, &m) == SD_EINVAL); /* not 50% */
    CHECK(sd_synth_pattern_parse("3:6", &n, &m) == SD_EINVAL); /* 6 does not divide 32 */
    CHECK(sd_synth_pattern_parse("2:4x", &n, &m) == SD_EINVAL);
    CHECK(sd_synth_pattern_parse(NULL, &n, &m) == SD_EINVAL);
}

#ifndef SD_HAVE_CUDA
int main(void)
{
    RUN(test_pattern_parse);
    fprintf(stderr, "  SKIP cuda backend tests: built without CUDA\n");
    sd__t_skip++;
    return sd_test_done();
}
#else
#include "engine/cuda_cslt.h"
#include "tests/engine/logits_util.h"
#include "tests/engine/pruned_ckpt.h"

static double rel_l2(const float *a, const float *ref, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double e = (double)a[i] - ref[i];
        num += e * e;
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : (num > 0 ? INFINITY : 0);
}

/* One sequence, blocks [first_block, ...) of the pool. */
static int fwd1(sd_backend *b, int32_t pos, const int32_t *toks, int n, int first_block, int all,
                float *logits)
{
    int32_t bt[KV_BLOCKS];
    for (int i = 0; i < KV_BLOCKS; i++)
        bt[i] = first_block + i;
    sd_batch_seq s = {pos, n, toks, bt, all};
    sd_diag d = {0};
    int rc = sd_backend_forward(b, &s, 1, logits, &d);
    if (rc)
        fprintf(stderr, "  forward: %s\n", sd_diag_str(&d, rc));
    return rc;
}

static int have_gpu(void)
{
    return sd_cuda_device_count() > 0;
}

static void backend_opts(sd_backend_opts *o)
{
    sd_backend_opts_default(o);
    o->kv_blocks = KV_BLOCKS;
    o->block_size = BS;
    o->max_batch_tokens = 256;
    o->n_threads = 2;
}

/* ---- CUDA vs CPU on one model directory ---- */

#define PROMPT 37 /* crosses two KV block boundaries */
#define STEPS 32

static void compare_with_cpu(const char *dir, size_t *ret_weight_bytes)
{
    sd_diag d = {0};
    sd_model *m = NULL;
    sd_backend *cpu = NULL, *gpu = NULL;
    float *lc = NULL, *lg = NULL;
    int rc = sd_model_open(&m, dir, &d);
    REQUIRE(rc == 0 || (fprintf(stderr, "  %s\n", sd_diag_str(&d, rc)), 0));
    sd_backend_opts o;
    backend_opts(&o);
    int32_t V = sd_model_cfg(m)->vocab;
    if ((rc = sd_backend_cpu_init(&cpu, m, &o, &d)) || (rc = sd_backend_cuda_init(&gpu, m, &o, &d))) {
        CHECK_MSG(0, "backend init: %s", sd_diag_str(&d, rc));
        goto out;
    }
    *ret_weight_bytes = sd_backend_cuda_step_weight_bytes(gpu);
    lc = malloc((size_t)PROMPT * V * 4);
    lg = malloc((size_t)PROMPT * V * 4);
    int32_t toks[PROMPT];
    rand_tokens(toks, PROMPT, V, 1234);
    if (fwd1(cpu, 0, toks, PROMPT, 0, 1, lc) || fwd1(gpu, 0, toks, PROMPT, 0, 1, lg)) {
        CHECK_MSG(0, "prefill failed");
        goto out;
    }
    double e = rel_l2(lg, lc, (size_t)PROMPT * V), prefill_e = e;
    CHECK_MSG(e <= 1e-2, "%s: prefill logits rel L2 %.3g", dir, e);
    /* greedy: the CPU runs free, the GPU is fed the CPU's tokens and must pick the same
     * ones; a differing pick is tolerated only at a near-tie of the CPU's logits */
    const float *c_last = lc + (size_t)(PROMPT - 1) * V, *g_last = lg + (size_t)(PROMPT - 1) * V;
    int32_t tok = argmax(c_last, V);
    int mismatches = argmax(g_last, V) != tok, near_ties = 0;
    double worst = 0, num = 0, den = 0;
    for (int s = 0; s < STEPS; s++) {
        if (fwd1(cpu, PROMPT + s, &tok, 1, 0, 0, lc) || fwd1(gpu, PROMPT + s, &tok, 1, 0, 0, lg)) {
            CHECK_MSG(0, "decode step %d failed", s);
            goto out;
        }
        e = rel_l2(lg, lc, (size_t)V);
        worst = e > worst ? e : worst;
        for (int32_t i = 0; i < V; i++) {
            num += ((double)lg[i] - lc[i]) * ((double)lg[i] - lc[i]);
            den += (double)lc[i] * lc[i];
        }
        int32_t tc = argmax(lc, V), tg = argmax(lg, V);
        if (tc != tg) {
            if (near_tie(lc, tc, tg))
                near_ties++;
            else
                mismatches++;
        }
        tok = tc;
    }
    /* bf16 activations and KV against fp32: the error grows along the sequence, so the
     * bound is on all decode logits together, with a looser guard on any single step */
    double all = sqrt(num / den);
    CHECK_MSG(all <= 1e-2, "%s: decode logits rel L2 %.3g over %d steps", dir, all, STEPS);
    CHECK_MSG(worst <= 2e-2, "%s: decode logits rel L2 up to %.3g in one step", dir, worst);
    CHECK_MSG(mismatches == 0 && near_ties <= 1, "%s: greedy: %d mismatches, %d near-ties in %d steps", dir,
              mismatches, near_ties, STEPS);
    fprintf(stderr, "  %s: rel L2 prefill %.2e, decode %.2e (worst step %.2e), near-ties %d\n", dir,
            prefill_e, all, worst, near_ties);
out:
    free(lc);
    free(lg);
    sd_backend_free(gpu);
    sd_backend_free(cpu);
    sd_model_free(m);
}

static void test_dense_tiny(void)
{
    if (!have_gpu())
        SKIP("no CUDA device");
    size_t bytes = 0;
    compare_with_cpu(TINY, &bytes);
}

static void test_dense_small(void)
{
    if (!have_gpu())
        SKIP("no CUDA device");
    const char *dir = sd_test_shared("models/small/config.json");
    if (!dir)
        SKIP("../shared/models/small absent");
    char buf[4096];
    snprintf(buf, sizeof buf, "%.*s", (int)(strlen(dir) - strlen("/config.json")), dir);
    size_t bytes = 0;
    compare_with_cpu(buf, &bytes);
}

/* ---- a 2:4 magnitude-pruned copy of the tiny model (tests/engine/pruned_ckpt.h) ---- */

static void test_pruned_2of4_tiny(void)
{
    if (!have_gpu())
        SKIP("no CUDA device");
    char dir[] = "/tmp/sd_cuda_2of4_XXXXXX";
    REQUIRE(mkdtemp(dir) != NULL);
    int rc = make_pruned(TINY, dir);
    CHECK_MSG(rc == 0, "writing the pruned checkpoint");
    if (!rc) {
        size_t dense = 0, sparse = 0;
        compare_with_cpu(TINY, &dense);
        compare_with_cpu(dir, &sparse);
        /* the linears must be on the device as values + masks, not expanded */
        CHECK_MSG(sparse < dense, "bitmask weights %zu bytes, dense %zu", sparse, dense);
    }
    rm_model_dir(dir);
}

/* Prefills of 65, 130 and 200 tokens on the 2:4 checkpoint in dir, CUDA (created with the
 * environment variable `var` set to `val`, SD_TUNE_LOG=1 showing the path each problem took)
 * against the CPU backend: rel L2 within 1e-2, as test_pruned_2of4_tiny. */
static void long_prefills_vs_cpu(const char *dir, const char *var, const char *val)
{
    sd_model *m = NULL;
    sd_backend *cpu = NULL, *gpu = NULL;
    sd_diag d = {0};
    sd_backend_opts o;
    backend_opts(&o);
    int rc = sd_model_open(&m, dir, &d);
    if (!rc)
        rc = sd_backend_cpu_init(&cpu, m, &o, &d);
    setenv(var, val, 1);
    setenv("SD_TUNE_LOG", "1", 1);
    const char *tiles = getenv("SD_NM_TILES");
    const int tiled = !(tiles && !strcmp(tiles, "0")) && !(!strcmp(var, "SD_NM_GEMM") && !strcmp(val, "1"));
    if (!rc)
        rc = sd_backend_cuda_init(&gpu, m, &o, &d);
    unsetenv(var);
    unsetenv("SD_TUNE_LOG");
    CHECK_MSG(rc == 0, "%s=%s: %s", var, val, sd_diag_str(&d, rc));
    if (!rc &&
        !strcmp(var, "SD_CUSPARSELT")) /* on (1, 2, unset): every linear of the tiny model has a copy */
        CHECK_MSG(sd_backend_cuda_cslt(gpu, NULL) == 4 * sd_model_cfg(m)->n_layers, "%d cuSPARSELt copies",
                  sd_backend_cuda_cslt(gpu, NULL));
    const int lens[] = {65, 130, 200};
    for (int i = 0; !rc && i < 3; i++) {
        const int32_t V = sd_model_cfg(m)->vocab, n = lens[i];
        float *lc = malloc((size_t)n * V * 4), *lg = malloc((size_t)n * V * 4);
        int32_t *toks = malloc((size_t)n * 4);
        REQUIRE(lc && lg && toks);
        rand_tokens(toks, n, V, 4321u + (uint32_t)n);
        rc = fwd1(cpu, 0, toks, n, 0, 1, lc) || fwd1(gpu, 0, toks, n, 0, 1, lg);
        CHECK_MSG(rc == 0, "%s=%s: prefill of %d tokens failed", var, val, n);
        if (!rc) {
            const double e = rel_l2(lg, lc, (size_t)n * V);
            fprintf(stderr, "  %s=%s: 2:4 prefill of %d tokens: rel L2 %.2e\n", var, val, n, e);
            CHECK_MSG(e <= 1e-2, "%s=%s: 2:4 prefill of %d tokens: logits rel L2 %.3g", var, val, n, e);
        }
        free(lc);
        free(lg);
        free(toks);
    }
    /* With the tiles (the default) each of the tiny model's four linear shapes has its wide-kernel
     * choice timed for the buckets of 65, 130 and 200 rows (128, 192, 256), also where cuSPARSELt
     * ran them: a decode graph of that many rows cannot time it later (kernels/NOTES.md v31).
     * Without the tiles, or with SD_NM_GEMM=1 (untimed), no wide kernel runs there. */
    if (!rc && tiled)
        CHECK_MSG(sd_backend_cuda_tuned_here(gpu) >= 12, "%s=%s: %d problems tuned", var, val,
                  sd_backend_cuda_tuned_here(gpu));
    sd_backend_free(gpu);
    sd_backend_free(cpu);
    sd_model_free(m);
}

/* long_prefills_vs_cpu on the tiny model pruned 2:4, once per (variable, value) of env. */
static void pruned_long_prefills(const char *const (*env)[2], int n)
{
    char dir[] = "/tmp/sd_cuda_t2of4_XXXXXX";
    REQUIRE(mkdtemp(dir) != NULL);
    const int rc = make_pruned(TINY, dir);
    CHECK_MSG(rc == 0, "writing the pruned checkpoint");
    for (int i = 0; !rc && i < n; i++)
        long_prefills_vs_cpu(dir, env[i][0], env[i][1]);
    rm_model_dir(dir);
}

/* Prefill chunks above 64 rows of a 2:4 checkpoint without cuSPARSELt: by default (SD_NM_TILES=1) up
 * to 256 rows may take the wide kernels in tiles (or cuBLAS, whichever first use timed faster; the
 * tiles themselves are checked kernel by kernel in test_spmv_gpu / test_sp24_gpu); with
 * SD_NM_TILES=0 every chunk above 64 rows runs cuBLAS on the vectorised expansion
 * (kernels/nm_expand.h), with SD_EXPAND_WARP=1 by the warp kernel; with SD_NM_GEMM=1 on the N:M
 * GEMM of kernels/nm_gemm.h (checked kernel by kernel in test_nm_gemm_gpu), with =2 where first use
 * timed it fastest. */
static void test_long_prefill_2of4(void)
{
    if (!have_gpu())
        SKIP("no CUDA device");
    const char *const env[][2] = {
        {"SD_NM_TILES", "1"}, {"SD_NM_TILES", "0"}, {"SD_NM_GEMM", "1"}, {"SD_NM_GEMM", "2"}};
    setenv("SD_CUSPARSELT", "0", 1);
    pruned_long_prefills(env, 4);
    setenv("SD_NM_TILES", "0", 1);
    const char *const warp[][2] = {{"SD_EXPAND_WARP", "1"}};
    pruned_long_prefills(warp, 1);
    unsetenv("SD_NM_TILES");
    unsetenv("SD_CUSPARSELT");
}

/* The same prefills with the 2:4 GEMMs on cuSPARSELt (engine/cuda_cslt.h): as by default (unset:
 * searched configs, where the copies fit), with its default algorithm config, and searched. */
static void test_long_prefill_cslt(void)
{
    if (!have_gpu())
        SKIP("no CUDA device");
    char v[512];
    sd_diag d = {0};
    const int rc0 = sd_cslt_probe(v, sizeof v, &d);
    if (rc0)
        SKIP("cuSPARSELt: %s", sd_diag_str(&d, rc0));
    const char *const env[][2] = {{"SD_CUSPARSELT", ""}, {"SD_CUSPARSELT", "1"}, {"SD_CUSPARSELT", "2"}};
    pruned_long_prefills(env, 3);
}

/* A bad SD_CUSPARSELT (not empty, 0, 1 or 2: a switch that costs a copy of the weights) is
 * refused at creation, naming the variable, before the device is looked for or anything is
 * loaded: so this runs without a GPU. */
static void test_cslt_switch_refused(void)
{
    sd_model *m = NULL;
    sd_diag d = {0};
    sd_backend_opts o;
    backend_opts(&o);
    REQUIRE(sd_model_open(&m, TINY, &d) == 0);
    const char *const bad[][2] = {
        {"SD_CUSPARSELT", "12"}, {"SD_CUSPARSELT", "-1"}, {"SD_CUSPARSELT", "3"}, {"SD_CUSPARSELT", "yes"}};
    for (int i = 0; i < 4; i++) {
        sd_backend *b = NULL;
        setenv(bad[i][0], bad[i][1], 1);
        const int rc = sd_backend_cuda_init(&b, m, &o, &d);
        unsetenv(bad[i][0]);
        CHECK_MSG(rc == SD_EINVAL && strstr(sd_diag_str(&d, rc), bad[i][0]), "%s='%s': %s", bad[i][0],
                  bad[i][1], sd_diag_str(&d, rc));
        sd_backend_free(b); /* NULL unless the refusal failed */
    }
    sd_model_free(m);
}

/* ---- a sliding window: the tiny model's weights under a Mistral config with window 20 ---- */

#define WINDOW 20 /* < PROMPT: the prefill's later rows and every decode step drop keys */

/* dir/config.json = the tiny model's as MistralForCausalLM with sliding_window WINDOW (0: none);
 * dir/model.safetensors links to the tiny model's. */
static int make_windowed(const char *dir, int window)
{
    char p[512], src[PATH_MAX], *cfg = NULL;
    size_t n = 0;
    FILE *f = fopen(TINY "/config.json", "rb");
    if (!f)
        return -1;
    if (!realpath(TINY "/model.safetensors", src)) {
        fclose(f);
        return -1;
    }
    cfg = calloc(1, 1 << 16);
    n = cfg ? fread(cfg, 1, (1 << 16) - 1, f) : 0;
    fclose(f);
    char *arch = cfg ? strstr(cfg, "\"LlamaForCausalLM\"") : NULL,
         *mt = cfg ? strstr(cfg, "\"llama\"") : NULL;
    if (!n || !arch || !mt || mt < arch || cfg[0] != '{') {
        free(cfg);
        return -1;
    }
    snprintf(p, sizeof p, "%s/config.json", dir);
    f = fopen(p, "wb");
    int ok = f != NULL;
    if (ok) { /* {"sliding_window": W, ... "MistralForCausalLM" ... "mistral" ... */
        ok = fprintf(f, "{\"sliding_window\": %d, %.*s\"MistralForCausalLM\"%.*s\"mistral\"%s", window,
                     (int)(arch - cfg - 1), cfg + 1, (int)(mt - arch - 18), arch + 18, mt + 7) > 0;
        ok &= fclose(f) == 0;
    }
    free(cfg);
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    return ok && symlink(src, p) == 0 ? 0 : -1;
}

/* Last-position prefill logits of PROMPT tokens on the CPU backend; 0 on success. */
static int cpu_prefill_last(const char *dir, float *out, int32_t V)
{
    sd_diag d = {0};
    sd_model *m = NULL;
    sd_backend *cpu = NULL;
    sd_backend_opts o;
    backend_opts(&o);
    float *l = malloc((size_t)PROMPT * V * 4);
    int32_t toks[PROMPT];
    rand_tokens(toks, PROMPT, V, 1234);
    int rc = !l ? -1 : sd_model_open(&m, dir, &d);
    if (!rc && sd_model_cfg(m)->vocab != V)
        rc = -1;
    if (!rc)
        rc = sd_backend_cpu_init(&cpu, m, &o, &d);
    if (!rc)
        rc = fwd1(cpu, 0, toks, PROMPT, 0, 1, l);
    if (!rc)
        memcpy(out, l + (size_t)(PROMPT - 1) * V, (size_t)V * 4);
    else
        fprintf(stderr, "  %s: %s\n", dir, sd_diag_str(&d, rc));
    free(l);
    sd_backend_free(cpu);
    sd_model_free(m);
    return rc;
}

/* The CUDA backend (tiled prefill, fused decode) applies the config's window as the CPU backend
 * does (which test_sliding_window_hf.py checks against transformers); the window moves the
 * CPU's logits, so a backend that ignored it would fail the comparison. */
static void test_windowed_tiny(void)
{
    char dir[] = "/tmp/sd_cuda_swa_XXXXXX", full[] = "/tmp/sd_cuda_swa_full_XXXXXX";
    REQUIRE(mkdtemp(dir) != NULL && mkdtemp(full) != NULL);
    int rc = make_windowed(dir, WINDOW) || make_windowed(full, 0);
    CHECK_MSG(rc == 0, "writing the windowed configs");
    int32_t V = 8192;
    float *a = malloc((size_t)V * 4), *b = malloc((size_t)V * 4);
    if (!rc && a && b && !cpu_prefill_last(dir, a, V) && !cpu_prefill_last(full, b, V)) {
        double e = rel_l2(a, b, (size_t)V);
        CHECK_MSG(e > 1e-2, "window %d moves the CPU's logits by only %.3g", WINDOW, e);
        fprintf(stderr, "  window %d vs none: CPU last-position logits rel L2 %.3g\n", WINDOW, e);
        if (have_gpu()) {
            size_t bytes = 0;
            compare_with_cpu(dir, &bytes);
        }
    } else if (!rc) {
        CHECK_MSG(0, "CPU prefill of the windowed model failed");
    }
    free(a);
    free(b);
    rm_model_dir(dir);
    rm_model_dir(full);
    if (!have_gpu())
        SKIP("no CUDA device (the CPU part ran)");
}

/* ---- batching and graphs ---- */

#define NB 3
static const int prompt_len[NB] = {5, 19, 33};
#define DSTEPS 6

/* Runs NB sequences (prefill then DSTEPS decode steps of fixed random tokens), batched or one
 * by one; out: [(1 + DSTEPS) * NB, V] last-token logits. Sequence i uses blocks from base_block
 * + 8*i. */
static int run_seqs(sd_backend *b, int batched, int base_block, int32_t V, float *out)
{
    int32_t toks[NB][64], bt[NB][8];
    for (int i = 0; i < NB; i++) {
        rand_tokens(toks[i], prompt_len[i] + DSTEPS, V, 77 + i);
        for (int k = 0; k < 8; k++)
            bt[i][k] = base_block + 8 * i + k;
    }
    sd_diag d = {0};
    for (int s = 0; s <= DSTEPS; s++) {
        sd_batch_seq q[NB];
        for (int i = 0; i < NB; i++) {
            q[i] = (sd_batch_seq){s ? prompt_len[i] + s - 1 : 0, s ? 1 : prompt_len[i],
                                  s ? &toks[i][prompt_len[i] + s - 1] : toks[i], bt[i], 0};
        }
        float *o = out + (size_t)s * NB * V;
        if (batched) {
            int rc = sd_backend_forward(b, q, NB, o, &d);
            if (rc)
                return fprintf(stderr, "  %s\n", sd_diag_str(&d, rc)), rc;
        } else {
            for (int i = 0; i < NB; i++) {
                int rc = sd_backend_forward(b, &q[i], 1, o + (size_t)i * V, &d);
                if (rc)
                    return fprintf(stderr, "  %s\n", sd_diag_str(&d, rc)), rc;
            }
        }
    }
    return 0;
}

/* NB sequences batched against one by one on the model in dir: logits within `tol` (rel L2),
 * same greedy picks but at most one near-tie. Different row counts take different kernels, whose
 * sums differ in order (results/2026-12-04-s22/r2: one 2:4 pick flipped). */
static void batch_vs_single(const char *dir, double tol)
{
    sd_diag d = {0};
    sd_model *m = NULL;
    sd_backend *b = NULL;
    int rc = sd_model_open(&m, dir, &d);
    REQUIRE(rc == 0);
    sd_backend_opts o;
    backend_opts(&o);
    rc = sd_backend_cuda_init(&b, m, &o, &d);
    CHECK_MSG(rc == 0, "%s", sd_diag_str(&d, rc));
    int32_t V = sd_model_cfg(m)->vocab;
    size_t n = (size_t)(1 + DSTEPS) * NB * V;
    float *a = malloc(n * 4), *s = malloc(n * 4);
    int near_ties = 0;
    if (!rc && !(rc = run_seqs(b, 1, 0, V, a)) && !(rc = run_seqs(b, 0, 32, V, s))) {
        for (int st = 0; st <= DSTEPS; st++)
            for (int i = 0; i < NB; i++) {
                const float *x = a + ((size_t)st * NB + i) * V, *y = s + ((size_t)st * NB + i) * V;
                double e = rel_l2(x, y, (size_t)V);
                CHECK_MSG(e <= tol, "%s step %d seq %d: batched vs single rel L2 %.3g", dir, st, i, e);
                const int32_t tx = argmax(x, V), ty = argmax(y, V);
                if (tx == ty)
                    continue;
                /* the sums' order differs with the row count: a pick may flip only where the
                 * single run's top two are as close as the CPU comparison allows (above) */
                const float gap = y[ty] - y[tx];
                const int tie = near_tie(y, ty, tx);
                near_ties += tie;
                fprintf(stderr, "  step %d seq %d: picks %d / %d, single-run gap %.4g%s\n", st, i, (int)tx,
                        (int)ty, gap, tie ? " (near-tie)" : "");
                CHECK_MSG(tie, "step %d seq %d: argmax differs beyond a near-tie", st, i);
            }
    }
    CHECK_MSG(near_ties <= 1, "%d near-ties in %d rows", near_ties, (1 + DSTEPS) * NB);
    CHECK(rc == 0);
    free(a);
    free(s);
    sd_backend_free(b);
    sd_model_free(m);
}

static void test_batch_vs_single(void)
{
    if (!have_gpu())
        SKIP("no CUDA device");
    batch_vs_single(TINY, 5e-3);
}

/* The same on a 2:4 checkpoint: the batched prefill (57 rows) and decode steps take the bitmask
 * kernels for many rows (the wide tensor-core kernel, or cuBLAS on expanded weights, whichever
 * the first-use timing picked), the single runs fewer rows. The pruned tiny model amplifies
 * rounding more than the dense one (the H200 measured up to 7.4e-3 here, and 7.6e-3 against the
 * CPU backend, test_pruned_2of4_tiny): held to the CPU comparison's 1e-2. */
static void test_batch_vs_single_2of4(void)
{
    if (!have_gpu())
        SKIP("no CUDA device");
    char dir[] = "/tmp/sd_cuda_b2of4_XXXXXX";
    REQUIRE(mkdtemp(dir) != NULL);
    int rc = make_pruned(TINY, dir);
    CHECK_MSG(rc == 0, "writing the pruned checkpoint");
    if (!rc)
        batch_vs_single(dir, 1e-2);
    rm_model_dir(dir);
}

/* With opts.deterministic the same batch gives bit-identical logits on every run of one backend
 * (no split-K atomics; the first run's first-use tuning fixes every kernel choice), on the dense
 * and on a 2:4 checkpoint. The second run uses other KV blocks. */
static void same_bits_twice(const char *dir)
{
    sd_model *m = NULL;
    sd_backend *b = NULL;
    sd_diag d = {0};
    REQUIRE(sd_model_open(&m, dir, &d) == 0);
    int32_t V = sd_model_cfg(m)->vocab;
    size_t n = (size_t)(1 + DSTEPS) * NB * V;
    float *out[2] = {malloc(n * 4), malloc(n * 4)};
    sd_backend_opts o;
    backend_opts(&o);
    o.deterministic = 1;
    int rc = sd_backend_cuda_init(&b, m, &o, &d);
    CHECK_MSG(rc == 0, "%s", sd_diag_str(&d, rc));
    for (int r = 0; r < 2 && !rc; r++)
        rc = run_seqs(b, 1, 32 * r, V, out[r]);
    sd_backend_free(b);
    CHECK(rc == 0);
    if (!rc) {
        size_t k = 0;
        while (k < n && memcmp(&out[0][k], &out[1][k], 4) == 0)
            k++;
        CHECK_MSG(k == n, "%s: run 2 differs from run 1 at logit %zu (%.9g vs %.9g)", dir, k, out[0][k],
                  out[1][k]);
    }
    free(out[0]);
    free(out[1]);
    sd_model_free(m);
}

static void test_deterministic(void)
{
    if (!have_gpu())
        SKIP("no CUDA device");
    same_bits_twice(TINY);
    char dir[] = "/tmp/sd_cuda_d2of4_XXXXXX";
    REQUIRE(mkdtemp(dir) != NULL);
    int rc = make_pruned(TINY, dir);
    CHECK_MSG(rc == 0, "writing the pruned checkpoint");
    if (!rc)
        same_bits_twice(dir);
    rm_model_dir(dir);
}

static void test_graph_vs_eager(void)
{
    if (!have_gpu())
        SKIP("no CUDA device");
    sd_diag d = {0};
    sd_model *m = NULL;
    sd_backend *b = NULL;
    int rc = sd_model_open(&m, TINY, &d);
    REQUIRE(rc == 0);
    sd_backend_opts o;
    backend_opts(&o);
    rc = sd_backend_cuda_init(&b, m, &o, &d);
    CHECK_MSG(rc == 0, "%s", sd_diag_str(&d, rc));
    int32_t V = sd_model_cfg(m)->vocab;
    size_t n = (size_t)(1 + DSTEPS) * NB * V;
    float *e = malloc(n * 4), *g = malloc(n * 4);
    for (size_t i = 0; i < n; i++)
        g[i] = NAN; /* poisoned: every row must be written */
    if (!rc) {
        sd_backend_cuda_set_graphs(b, 0);
        rc = run_seqs(b, 1, 0, V, e);
        CHECK(sd_backend_cuda_graph_replays(b) == 0);
    }
    if (!rc) {
        sd_backend_cuda_set_graphs(b, 1);
        rc = run_seqs(b, 1, 32, V, g);
        /* batch of 3 runs in the bucket of 4 (one padding row): the first decode step captures */
        CHECK_MSG(sd_backend_cuda_graph_replays(b) == DSTEPS - 1, "%lld replays",
                  (long long)sd_backend_cuda_graph_replays(b));
    }
    CHECK(rc == 0);
    if (!rc) {
        CHECK_MSG(!memcmp(e, g, (size_t)NB * V * 4), "prefill differs"); /* both eager */
        for (int st = 1; st <= DSTEPS; st++) {
            double x = rel_l2(g + (size_t)st * NB * V, e + (size_t)st * NB * V, (size_t)NB * V);
            /* the padded bucket runs T = 4 where eager runs T = 3: other kernel configs, so
             * bf16-level differences (the exact-bucket test below is the strict one) */
            CHECK_MSG(x <= 5e-3, "decode step %d: graph vs eager rel L2 %.3g", st, x);
        }
    }
    free(e);
    free(g);
    sd_backend_free(b);
    sd_model_free(m);
}

/* A bucket the batch fills exactly: replay runs the very kernels eager runs. Deterministic mode
 * (no split-K with atomics): with atomics, the order of the partial sums could flip a bf16
 * rounding of an activation, which then shows in the logits at ~1e-3 (seen once in the ninth
 * session's GPU runs, results/2026-12-01-c24b/r5), whenever the autotuner picked a split. */
static void test_graph_exact_bucket(void)
{
    if (!have_gpu())
        SKIP("no CUDA device");
    sd_diag d = {0};
    sd_model *m = NULL;
    sd_backend *b = NULL;
    int rc = sd_model_open(&m, TINY, &d);
    REQUIRE(rc == 0);
    sd_backend_opts o;
    backend_opts(&o);
    o.deterministic = 1;
    rc = sd_backend_cuda_init(&b, m, &o, &d);
    CHECK_MSG(rc == 0, "%s", sd_diag_str(&d, rc));
    int32_t V = sd_model_cfg(m)->vocab, toks[40];
    rand_tokens(toks, 40, V, 99);
    float *e = malloc((size_t)V * 4 * 8), *g = malloc((size_t)V * 4 * 8);
    for (int pass = 0; pass < 2 && !rc; pass++) {
        sd_backend_cuda_set_graphs(b, pass);
        float *out = pass ? g : e;
        rc = fwd1(b, 0, toks, 30, 16 * pass, 0, out);
        for (int s = 0; s < 8 && !rc; s++)
            rc = fwd1(b, 30 + s, &toks[30 + s], 1, 16 * pass, 0, out + (size_t)s * V);
    }
    CHECK(rc == 0);
    CHECK_MSG(sd_backend_cuda_graph_replays(b) == 7, "%lld replays",
              (long long)sd_backend_cuda_graph_replays(b));
    /* the same kernels in the same order */
    for (int s = 0; s < 8 && !rc; s++) {
        double x = rel_l2(g + (size_t)s * V, e + (size_t)s * V, (size_t)V);
        CHECK_MSG(x <= 1e-4, "decode step %d: graph vs eager rel L2 %.3g", s, x);
        CHECK_MSG(argmax(g + (size_t)s * V, V) == argmax(e + (size_t)s * V, V), "step %d argmax", s);
    }
    free(e);
    free(g);
    sd_backend_free(b);
    sd_model_free(m);
}

/* ---- synthetic weights ---- */

static void test_synthetic(void)
{
    if (!have_gpu())
        SKIP("no CUDA device");
    sd_diag d = {0};
    sd_model_config cfg;
    char path[256];
    snprintf(path, sizeof path, "%s/config.json", TINY);
    REQUIRE(sd_model_config_load(&cfg, path, &d) == 0);
    sd_backend_opts o;
    backend_opts(&o);
    sd_backend *b = NULL;
    CHECK(sd_backend_cuda_init_synthetic(&b, &cfg, "3:4", 1, &o, &d) == SD_EINVAL);
    const char *pats[] = {"dense", "2:4", "16:32"};
    for (int p = 0; p < 3; p++) {
        int n, mm;
        REQUIRE(sd_synth_pattern_parse(pats[p], &n, &mm) == 0);
        int rc = sd_backend_cuda_init_synthetic(&b, &cfg, pats[p], 42, &o, &d);
        CHECK_MSG(rc == 0, "%s: %s", pats[p], sd_diag_str(&d, rc));
        if (rc)
            continue;
        CHECK_MSG(sd_backend_cuda_step_weight_bytes(b) == sd_synth_step_weight_bytes(&cfg, n, mm),
                  "%s: %zu vs %zu bytes", pats[p], sd_backend_cuda_step_weight_bytes(b),
                  sd_synth_step_weight_bytes(&cfg, n, mm));
        CHECK(sd_backend_cuda_kv_bytes_per_token(b) == sd_synth_kv_bytes_per_token(&cfg));
        int32_t toks[20];
        rand_tokens(toks, 20, cfg.vocab, 5);
        float *l = malloc((size_t)cfg.vocab * 4);
        rc = fwd1(b, 0, toks, 19, 0, 0, l);
        if (!rc)
            rc = fwd1(b, 19, &toks[19], 1, 0, 0, l);
        CHECK(rc == 0);
        int finite = 1, nonconst = 0;
        for (int32_t i = 0; i < cfg.vocab; i++) {
            finite &= isfinite(l[i]);
            nonconst |= l[i] != l[0];
        }
        CHECK_MSG(finite && nonconst, "%s: logits not finite or constant", pats[p]);
        free(l);
        sd_backend_free(b);
        b = NULL;
    }
}

int main(void)
{
    RUN(test_pattern_parse);
    RUN(test_dense_tiny);
    RUN(test_dense_small);
    RUN(test_pruned_2of4_tiny);
    RUN(test_long_prefill_2of4);
    RUN(test_long_prefill_cslt);
    RUN(test_cslt_switch_refused);
    RUN(test_batch_vs_single);
    RUN(test_batch_vs_single_2of4);
    RUN(test_deterministic);
    RUN(test_graph_vs_eager);
    RUN(test_graph_exact_bucket);
    RUN(test_synthetic);
    RUN(test_windowed_tiny);
    return sd_test_done();
}
#endif
