/* bench_prefill: 'sparsed bench prefill' — the time of one prompt chunk of T tokens through the
 * CUDA backend on synthetic weights at a preset's shapes, dense vs N:M bitmask. A chunk's linears
 * read the weights once and do 2 T flops a weight, so a chunk is bound by bytes at small T and by
 * the tensor cores at large T: each row prints the time the weights' bytes take at the read
 * bandwidth measured in the same run (the floor at small T) and the dense-equivalent TFLOPS the
 * linears reached (what bounds large T). Bitmask linears of more than 64 rows run (2:4) cuSPARSELt
 * where its copies fit, else the wide kernels in tiles up to 256 rows or cuBLAS on weights expanded
 * into a dense scratch (engine/cuda_linear.cu; SD_CUSPARSELT, SD_NM_TILES); the table's command line
 * names the switches in force. */
#include "engine/bench_prefill.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/backend.h"
#include "engine/bench_common.h"
#include "engine/model_config.h"
#include "engine/synthetic.h"
#ifdef SD_HAVE_CUDA
#include "engine/cuda_backend.h"
#endif

#define BP_MAX_CHUNKS 12
#define BP_MAX_PATTERNS 8
#define BP_BLOCK 16

typedef struct bp_opts {
    const char *preset, *out;
    const char *patterns[BP_MAX_PATTERNS];
    int n_patterns;
    int chunks[BP_MAX_CHUNKS];
    int n_chunks;
    int warmup, reps, device;
} bp_opts;

typedef struct bp_result {
    char pattern[16];
    int chunk;
    double ms, p10, p90; /* median, 10th and 90th percentile ms of a chunk */
    double floor_ms;     /* the weights' bytes at the measured read bandwidth */
    double tflops;       /* the linears' dense-equivalent flops / ms */
    int ok;
    char err[160];
} bp_result;

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: sparsed bench prefill --preset CONFIG.json [--pattern dense|2:4|4:8|8:16|16:32|all|A,B..]\n"
        "       [--chunk 64,128,256,512,2048] [--warmup 3] [--reps 10] [--device 0] [--out FILE.md]\n");
}

/* 0 ok, 1 --help, -1 bad arguments. */
static int parse_args(int argc, char **argv, bp_opts *o)
{
    static char pat_buf[256]; /* the patterns point into it */
    *o = (bp_opts){.warmup = 3, .reps = 10};
    const char *pat = "all", *chunk = "64,128,256,512,2048";
    const sd_bench_opt opts[] = {
        {"--preset", SD_BENCH_STR, &o->preset}, {"--pattern", SD_BENCH_STR, &pat},
        {"--chunk", SD_BENCH_STR, &chunk},      {"--warmup", SD_BENCH_INT, &o->warmup},
        {"--reps", SD_BENCH_INT, &o->reps},     {"--device", SD_BENCH_INT, &o->device},
        {"--out", SD_BENCH_STR, &o->out}};
    const int p = sd_bench_parse_opts(argc, argv, opts, sizeof opts / sizeof opts[0]);
    if (p)
        return p;
    if (!o->preset || o->warmup < 1 || o->warmup > 100 || o->reps < 1 || o->reps > 1000 || o->device < 0)
        return -1;
    o->n_patterns = sd_bench_parse_patterns(pat, pat_buf, sizeof pat_buf, o->patterns, BP_MAX_PATTERNS);
    o->n_chunks = sd_bench_parse_ints(chunk, o->chunks, BP_MAX_CHUNKS, 65536);
    return o->n_chunks > 0 && o->n_patterns > 0 ? 0 : -1;
}

#ifdef SD_HAVE_CUDA

/* Flops of the layers' linears for one token (2 a weight): q/k/v, o, gate/up, down. The lm_head
 * runs for the chunk's last token only, and the attention's T^2 part is left out (a few percent at
 * 2048 tokens of an 8B). */
static double linear_flops_per_token(const sd_model_config *c)
{
    const double h = c->hidden, q = (double)c->n_heads * c->head_dim,
                 kv = (double)c->n_kv_heads * c->head_dim;
    return 2.0 * c->n_layers * (h * (q + 2 * kv) + q * h + 3.0 * h * c->intermediate);
}

static int max_chunk(const bp_opts *o)
{
    int m = 0;
    for (int i = 0; i < o->n_chunks; i++)
        m = o->chunks[i] > m ? o->chunks[i] : m;
    return m;
}

/* warmup + reps chunks of x->chunk random tokens from position 0 of one sequence (the first
 * warm-up chunk pays the first-use tuning of its row count). */
static int time_chunks(sd_backend *b, const bp_opts *o, int32_t *bt, int32_t *toks, bp_result *x, sd_diag *d)
{
    double *t = malloc((size_t)o->reps * sizeof *t);
    int rc = t ? 0 : SD_ENOMEM;
    sd_bench_random_tokens(toks, x->chunk, b->vocab, 2024u + (uint32_t)x->chunk);
    for (int r = 0; r < o->warmup + o->reps && !rc; r++) {
        sd_batch_seq q = {0, x->chunk, toks, bt, 0};
        const double t0 = sd_bench_now_ms();
        rc = sd_backend_forward(b, &q, 1, NULL, d);
        if (r >= o->warmup)
            t[r - o->warmup] = sd_bench_now_ms() - t0;
    }
    if (!rc)
        x->ms = sd_bench_median(t, o->reps, &x->p10, &x->p90);
    free(t);
    return rc;
}

/* Every chunk size of one pattern on one backend; results appended to r. */
static void run_pattern(const bp_opts *o, const sd_model_config *cfg, const char *pat, double gbps,
                        bp_result *r, int *n_r)
{
    const int maxc = max_chunk(o), blocks = maxc / BP_BLOCK + 1;
    sd_backend_opts bo;
    sd_backend_opts_default(&bo);
    bo.device = o->device;
    bo.block_size = BP_BLOCK;
    bo.kv_blocks = blocks;
    bo.max_batch_tokens = maxc;
    sd_backend *b = NULL;
    sd_diag d = {0};
    int32_t *bt = malloc((size_t)blocks * 4), *toks = malloc((size_t)maxc * 4);
    for (int i = 0; bt && i < blocks; i++)
        bt[i] = i;
    int rc = !bt || !toks ? SD_ENOMEM : sd_backend_cuda_init_synthetic(&b, cfg, pat, 1, &bo, &d);
    const double fpt = linear_flops_per_token(cfg);
    for (int i = 0; i < o->n_chunks; i++) {
        bp_result *x = &r[(*n_r)++];
        memset(x, 0, sizeof *x);
        snprintf(x->pattern, sizeof x->pattern, "%s", pat);
        x->chunk = o->chunks[i];
        if (!rc)
            rc = time_chunks(b, o, bt, toks, x, &d);
        if (rc) {
            snprintf(x->err, sizeof x->err, "%s", sd_diag_str(&d, rc));
            continue;
        }
        x->floor_ms = (double)sd_backend_cuda_step_weight_bytes(b) / (gbps * 1e9) * 1e3;
        x->tflops = fpt * x->chunk / (x->ms * 1e-3) / 1e12;
        x->ok = 1;
        fprintf(stderr,
                "  %-6s T=%-5d %9.3f ms (%.3f-%.3f) %9.0f tok/s, linears %.0f TFLOPS, read floor %.3f ms\n",
                pat, x->chunk, x->ms, x->p10, x->p90, x->chunk / (x->ms * 1e-3), x->tflops, x->floor_ms);
    }
    sd_backend_free(b);
    free(bt);
    free(toks);
}

static double dense_ms(const bp_result *r, int n, int chunk)
{
    for (int i = 0; i < n; i++)
        if (r[i].ok && r[i].chunk == chunk && !strcmp(r[i].pattern, "dense"))
            return r[i].ms;
    return 0;
}

static void print_table(FILE *f, const bp_result *r, int n)
{
    fprintf(
        f, "| pattern | chunk | ms (p10-p90) | tokens/s | speedup vs dense | linears TFLOPS (dense-equiv.) | "
           "read floor ms |\n");
    fprintf(f, "| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (int i = 0; i < n; i++) {
        if (!r[i].ok) {
            fprintf(f, "| %s | %d | failed: %s | | | | |\n", r[i].pattern, r[i].chunk, r[i].err);
            continue;
        }
        const double dm = dense_ms(r, n, r[i].chunk);
        char sp[32] = "n/a";
        if (dm > 0)
            snprintf(sp, sizeof sp, "%.2fx", dm / r[i].ms);
        fprintf(f, "| %s | %d | %.3f (%.3f-%.3f) | %.0f | %s | %.0f | %.3f |\n", r[i].pattern, r[i].chunk,
                r[i].ms, r[i].p10, r[i].p90, r[i].chunk / (r[i].ms * 1e-3), sp, r[i].tflops, r[i].floor_ms);
    }
}

/* The switches of the path a chunk's bitmask linears take (engine/cuda_backend.cu), which the
 * tables name. */
static const char *const gemm_switches[] = {"SD_NM_TILES", "SD_CUSPARSELT", NULL};

static int write_md(const bp_opts *o, int argc, char **argv, const sd_bench_env *e, const bp_result *r, int n)
{
    FILE *f = fopen(o->out, "w");
    if (!f) {
        fprintf(stderr, "sparsed bench prefill: cannot write %s\n", o->out);
        return 1;
    }
    sd_bench_md_head(f, "prefill", o->preset, e, argc, argv, gemm_switches);
    fprintf(
        f,
        "- protocol: synthetic weights, one sequence, a chunk of T tokens from position 0, %d warm-up "
        "(first-use tuning) + %d timed forward calls, median; linears TFLOPS = 2 x layer weights x T / time; "
        "read floor = the step's weight bytes / bandwidth\n\n",
        o->warmup, o->reps);
    print_table(f, r, n);
    fclose(f);
    return 0;
}

/* Every pattern at every chunk size; the exit status. */
static int run_all(const bp_opts *o, int argc, char **argv)
{
    sd_bench_env e;
    if (sd_bench_env_init(&e, "prefill", o->preset, o->device))
        return 1;
    for (int i = 0; gemm_switches[i]; i++)
        fprintf(stderr, "%s=%s%s", gemm_switches[i],
                getenv(gemm_switches[i]) ? getenv(gemm_switches[i]) : "(unset)",
                gemm_switches[i + 1] ? " " : "\n");
    bp_result r[BP_MAX_PATTERNS * BP_MAX_CHUNKS];
    int n = 0;
    for (int p = 0; p < o->n_patterns; p++)
        run_pattern(o, &e.cfg, o->patterns[p], e.gbps, r, &n);
    print_table(stdout, r, n);
    if (o->out && write_md(o, argc, argv, &e, r, n))
        return 1;
    for (int i = 0; i < n; i++)
        if (!r[i].ok)
            return 1;
    return 0;
}
#endif

int sd_bench_prefill_main(int argc, char **argv)
{
    bp_opts o;
    int prc = parse_args(argc, argv, &o);
    if (prc) {
        usage(prc > 0 ? stdout : stderr);
        return prc > 0 ? 0 : 2;
    }
#ifdef SD_HAVE_CUDA
    return run_all(&o, argc, argv);
#else
    fprintf(stderr, "sparsed bench prefill: this build has no CUDA backend\n");
    return 2;
#endif
}
