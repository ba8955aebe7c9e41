/* bench_gemm: 'sparsed bench gemm' — each linear of a preset as a prompt chunk's GEMM of T rows,
 * every path the CUDA backend has above the bitmask kernels' rows side by side in one run: dense
 * cuBLAS (the dense model), the 2:4 bitmask expanded into a dense scratch (by either expansion
 * kernel, whose bits must agree) then cuBLAS (2:4's path without cuSPARSELt, and 4:8-16:32's), the
 * N:M GEMM of kernels/nm_gemm.h (not yet used by the engine), and cuSPARSELt on its own copy of the
 * 2:4 weight with its default and its searched config (SD_CUSPARSELT=1 / 2; searched is the
 * default). `bench prefill` times whole chunks; this says which linear gains or loses, and by how
 * much of the dense GEMM's time. */
#include "engine/bench_gemm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/bench_common.h"
#include "engine/model_config.h"
#ifdef SD_HAVE_CUDA
#include "engine/cuda_gemm_bench.h"
#endif

#define BG_MAX_ROWS 12

typedef struct bg_opts {
    const char *preset, *out;
    int rows[BG_MAX_ROWS];
    int n_rows;
    int reps, device;
} bg_opts;

static void usage(FILE *f)
{
    fprintf(f, "usage: sparsed bench gemm --preset CONFIG.json [--rows 128,256,512,1024,2048] [--reps 20]\n"
               "       [--device 0] [--out FILE.md]\n");
}

/* 0 ok, 1 --help, -1 bad arguments. */
static int parse_args(int argc, char **argv, bg_opts *o)
{
    *o = (bg_opts){.reps = 20};
    const char *rows = "128,256,512,1024,2048";
    const sd_bench_opt opts[] = {{"--preset", SD_BENCH_STR, &o->preset},
                                 {"--rows", SD_BENCH_STR, &rows},
                                 {"--reps", SD_BENCH_INT, &o->reps},
                                 {"--device", SD_BENCH_INT, &o->device},
                                 {"--out", SD_BENCH_STR, &o->out}};
    const int p = sd_bench_parse_opts(argc, argv, opts, sizeof opts / sizeof opts[0]);
    if (p)
        return p;
    if (!o->preset || o->reps < 1 || o->reps > 1000 || o->device < 0)
        return -1;
    o->n_rows = sd_bench_parse_ints(rows, o->rows, BG_MAX_ROWS, 65536);
    return o->n_rows > 0 ? 0 : -1;
}

#ifdef SD_HAVE_CUDA

/* The preset's four linears as the CUDA backend fuses them: [rows, cols]. */
static void linear_shapes(const sd_model_config *c, const char **names, int64_t (*shape)[2])
{
    const int64_t h = c->hidden, q = (int64_t)c->n_heads * c->head_dim,
                  kv = (int64_t)c->n_kv_heads * c->head_dim;
    const int64_t s[4][2] = {
        {q + 2 * kv, h}, {h, q}, {2 * (int64_t)c->intermediate, h}, {h, c->intermediate}};
    const char *n[4] = {"qkv", "o", "gate_up", "down"};
    for (int i = 0; i < 4; i++) {
        names[i] = n[i];
        shape[i][0] = s[i][0];
        shape[i][1] = s[i][1];
    }
}

static void row_head(FILE *f)
{
    fprintf(
        f,
        "| linear | rows x cols | T | dense cuBLAS µs (TFLOPS) | expansion µs | warp expansion µs (same "
        "bits) | 2:4 expand + cuBLAS µs (x dense) | N:M GEMM 64 µs (x dense) | N:M GEMM 128 µs (x dense) | "
        "2:4 cuSPARSELt µs (x dense) | cuSPARSELt searched µs (x dense) |\n"
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
}

/* "12.3 (1.45x)" of a path beside dense, or the reason it did not run. */
static void cell(char *buf, size_t n, double us, double dense_us, const char *err)
{
    if (us > 0)
        snprintf(buf, n, "%.1f (%.2fx)", us, dense_us / us);
    else
        snprintf(buf, n, "%s", err && *err ? err : "-");
}

static void row(FILE *f, const char *name, const int64_t *s, int T, const sd_gemm_times *t)
{
    char eb[64], g64[64], g128[64], cs[256], cs2[256];
    const double tflops = 2.0 * (double)s[0] * (double)s[1] * T / (t->dense_us * 1e-6) / 1e12;
    cell(eb, sizeof eb, t->expand_blas_us, t->dense_us, NULL);
    cell(g64, sizeof g64, t->nm_gemm_us[0], t->dense_us, NULL);
    cell(g128, sizeof g128, t->nm_gemm_us[1], t->dense_us, NULL);
    cell(cs, sizeof cs, t->cslt_us, t->dense_us, t->cslt_err);
    cell(cs2, sizeof cs2, t->cslt_search_us, t->dense_us, t->cslt_us > 0 ? t->cslt_err : "-");
    fprintf(f, "| %s | %lld x %lld | %d | %.1f (%.0f) | %.1f | %.1f (%s) | %s | %s | %s | %s | %s |\n", name,
            (long long)s[0], (long long)s[1], T, t->dense_us, tflops, t->expand_us, t->expand_warp_us,
            t->expand_same ? "same" : "DIFFERENT", eb, g64, g128, cs, cs2);
}

static int run(const bg_opts *o, int argc, char **argv)
{
    sd_bench_env e;
    if (sd_bench_env_init(&e, "gemm", o->preset, o->device))
        return 1;
    const char *names[4];
    int64_t shape[4][2];
    linear_shapes(&e.cfg, names, shape);
    FILE *f = o->out ? fopen(o->out, "w") : NULL;
    if (o->out && !f) {
        fprintf(stderr, "sparsed bench gemm: cannot write %s\n", o->out);
        return 1;
    }
    if (f) {
        sd_bench_md_head(f, "gemm", o->preset, &e, argc, argv, NULL);
        fprintf(f,
                "- protocol: y [T, rows] fp32 = x [T, cols] bf16 W^T, random data; median of %d runs after 2 "
                "warm-ups, each after a 128 MB write that evicts L2; x dense = the dense GEMM's time / the "
                "path's\n\n",
                o->reps);
        row_head(f);
    }
    row_head(stdout);
    int bad = 0;
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < o->n_rows; k++) {
            sd_gemm_times t;
            sd_diag d = {0};
            int rc = sd_cuda_gemm_bench(o->device, shape[i][0], shape[i][1], o->rows[k], o->reps, &t, &d);
            if (rc) {
                fprintf(stderr, "sparsed bench gemm: %s T=%d: %s\n", names[i], o->rows[k],
                        sd_diag_str(&d, rc));
                bad = 1;
                continue;
            }
            row(stdout, names[i], shape[i], o->rows[k], &t);
            if (f)
                row(f, names[i], shape[i], o->rows[k], &t);
            fflush(stdout);
            if (!t.expand_same) { /* the two expansion kernels disagree: a wrong kernel, not a slow one */
                fprintf(stderr, "sparsed bench gemm: %s T=%d: the expansion kernels give different bits\n",
                        names[i], o->rows[k]);
                bad = 1;
            }
        }
    if (f)
        fclose(f);
    return bad;
}
#endif

int sd_bench_gemm_main(int argc, char **argv)
{
    bg_opts o;
    const int p = parse_args(argc, argv, &o);
    if (p) {
        usage(p > 0 ? stdout : stderr);
        return p > 0 ? 0 : 2;
    }
#ifdef SD_HAVE_CUDA
    return run(&o, argc, argv);
#else
    fprintf(stderr, "sparsed bench gemm: this build has no CUDA backend\n");
    return 2;
#endif
}
