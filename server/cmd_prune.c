/* cmd_prune: the 'prune' subcommand — argument parsing, a progress bar with ETA on a terminal
 * (plain lines otherwise), Ctrl-C as cancellation, and the test-only '--solve' mode that runs
 * one solver on raw fp32 matrices (tests/prune/test_solvers.py compares it with NumPy). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/cmd.h"

#include "engine/cpu_pool.h"
#include "kernels/nm_format.h"
#include "prune/cancel.h"
#include "prune/prune.h"
#include "prune/prune_bench.h"
#include "prune/prune_cuda.h"
#include "prune/sgpt.h"
#include "prune/wanda.h"

static volatile int g_cancel; /* signal flag: set by SIGINT/SIGTERM, read by the job */

/* Atomic store: the signal may land on a CPU pool worker while the job thread polls it. */
static void on_signal(int sig)
{
    sd_cancel_request(&g_cancel);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: sparsed prune --model DENSE_DIR --out DIR [options]\n"
               "  --pattern 2:4|4:8|8:16|16:32|unstructured   (default 2:4; all keep 50%%)\n"
               "  --solver sparsegpt|wanda|magnitude          (default sparsegpt)\n"
               "  --source decode|text|tokens                 (default decode)\n"
               "  --prompts FILE    decode: JSONL {\"prompt\"} / {\"messages\"} or one prompt per line\n"
               "  --text FILE       text: teacher-forced calibration text\n"
               "  --tokens FILE     tokens: JSONL {\"tokens\": [...], \"prefill_len\": n}\n"
               "  --tokens-budget N calibration tokens (decode: generated tokens only; default 16384)\n"
               "  --seq-len N       text: tokens per sequence (default 512)\n"
               "  --max-new-tokens N decode: per prompt (default 256)\n"
               "  --temperature T --top-k K --top-p P --seed S   decode sampling (default greedy)\n"
               "  --mode oneshot|sequential  (default oneshot)\n"
               "  --damping X (0.01)  --block-size N (128)  --threads N (all cores)\n"
               "  --modules q,k,v,o,gate,up,down   linears to prune (default all)\n"
               "  --save-tokens FILE  write the calibration sequences as JSONL\n"
               "  --device cpu|cuda[:N]  where SparseGPT folds Hessians, factorises and sweeps\n"
               "                      (default cpu); one-shot SparseGPT on cuda also generates and\n"
               "                      captures there (SD_PRUNE_CPU_CAPTURE=1: on the CPU backend)\n"
               "  --quiet             no progress output\n"
               "test-only: sparsed prune --solve W.bin --rows R --cols C [--hessian H.bin] --pattern P\n"
               "           --solver S --out-weights Q.bin [--out-mask M.bin] [--damping X --block-size N]\n"
               "           [--device cuda]  (SparseGPT on the GPU)\n"
               "test-only: sparsed prune --bench-solver --rows R --cols C [--pattern P --device D --seed S]\n"
               "  (times SparseGPT on a synthetic Hessian; prints one JSON line)\n"
               "  (raw little-endian fp32 W [R, C] and H [C, C]; writes pruned fp32 Q and u32 mask)\n");
}

typedef struct prune_args {
    sd_prune_spec s;
    int quiet, bench;
    const char *solve, *hessian, *out_w, *out_mask;
    int64_t rows, cols;
} prune_args;

static int parse_modules(const char *v, unsigned *ret)
{
    static const char *names[] = {"q", "k", "v", "o", "gate", "up", "down"};
    unsigned bits = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", v);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int k = -1;
        for (int i = 0; i < 7; i++)
            if (!strcmp(t, names[i]))
                k = i;
        if (k < 0)
            return -1;
        bits |= 1u << k;
    }
    *ret = bits;
    return bits ? 0 : -1;
}

/* "cpu", "cuda" or "cuda:N". */
static int parse_device(const char *v, sd_prune_spec *s)
{
    char *end;
    if (!strcmp(v, "cpu")) {
        s->device = SD_PRUNE_DEV_CPU;
        return 0;
    }
    if (strncmp(v, "cuda", 4) != 0 || (v[4] && v[4] != ':'))
        return -1;
    s->device = SD_PRUNE_DEV_CUDA;
    s->cuda_device = 0;
    if (!v[4])
        return 0;
    errno = 0;
    long n = strtol(v + 5, &end, 10);
    if (errno || end == v + 5 || *end || n < 0 || n > 1024)
        return -1;
    s->cuda_device = (int)n;
    return 0;
}

static int num(const char *k, const char *v, double *ret)
{
    char *end;
    errno = 0;
    *ret = strtod(v, &end);
    if (errno || end == v || *end) {
        fprintf(stderr, "sparsed prune: %s wants a number, not '%s'\n", k, v);
        return -1;
    }
    return 0;
}

/* Options with a value; returns 0, or -1 after printing why. */
static int parse_opt(prune_args *a, const char *k, const char *v)
{
    sd_prune_spec *s = &a->s;
    double x = 0;
    const char *numeric[] = {"--tokens-budget", "--seq-len", "--max-new-tokens", "--temperature",
                             "--top-k",         "--top-p",   "--seed",           "--damping",
                             "--block-size",    "--threads", "--rows",           "--cols"};
    for (size_t i = 0; i < sizeof numeric / sizeof numeric[0]; i++)
        if (!strcmp(k, numeric[i]) && num(k, v, &x) != 0)
            return -1;
    if (!strcmp(k, "--model"))
        s->model_dir = v;
    else if (!strcmp(k, "--out"))
        s->out_dir = v;
    else if (!strcmp(k, "--pattern"))
        s->pattern = v;
    else if (!strcmp(k, "--solver")) {
        int i = sd_prune_solver_parse(v);
        if (i < 0)
            return fprintf(stderr, "sparsed prune: unknown solver '%s'\n", v), -1;
        s->solver = (sd_prune_solver)i;
    } else if (!strcmp(k, "--source")) {
        int i = sd_calib_source_parse(v);
        if (i < 0)
            return fprintf(stderr, "sparsed prune: unknown source '%s'\n", v), -1;
        s->source = (sd_calib_source)i;
    } else if (!strcmp(k, "--prompts") || !strcmp(k, "--text") || !strcmp(k, "--tokens"))
        s->input = v;
    else if (!strcmp(k, "--mode")) {
        if (strcmp(v, "oneshot") && strcmp(v, "sequential"))
            return fprintf(stderr, "sparsed prune: --mode oneshot|sequential\n"), -1;
        s->mode = v[0] == 'o' ? SD_PRUNE_ONESHOT : SD_PRUNE_SEQUENTIAL;
    } else if (!strcmp(k, "--modules")) {
        if (parse_modules(v, &s->modules) != 0)
            return fprintf(stderr, "sparsed prune: --modules takes q,k,v,o,gate,up,down\n"), -1;
    } else if (!strcmp(k, "--device")) {
        if (parse_device(v, s) != 0)
            return fprintf(stderr, "sparsed prune: --device takes cpu, cuda or cuda:N, not '%s'\n", v), -1;
    } else if (!strcmp(k, "--save-tokens"))
        s->save_tokens = v;
    else if (!strcmp(k, "--tokens-budget"))
        s->tokens_budget = (int64_t)x;
    else if (!strcmp(k, "--seq-len"))
        s->seq_len = (int32_t)x;
    else if (!strcmp(k, "--max-new-tokens"))
        s->max_new_tokens = (int32_t)x;
    else if (!strcmp(k, "--temperature"))
        s->temperature = (float)x;
    else if (!strcmp(k, "--top-k"))
        s->top_k = (int32_t)x;
    else if (!strcmp(k, "--top-p"))
        s->top_p = (float)x;
    else if (!strcmp(k, "--seed"))
        s->seed = (uint64_t)x;
    else if (!strcmp(k, "--damping"))
        s->damping = x;
    else if (!strcmp(k, "--block-size"))
        s->block_size = (int)x;
    else if (!strcmp(k, "--threads"))
        s->threads = (int)x;
    else if (!strcmp(k, "--solve"))
        a->solve = v;
    else if (!strcmp(k, "--hessian"))
        a->hessian = v;
    else if (!strcmp(k, "--out-weights"))
        a->out_w = v;
    else if (!strcmp(k, "--out-mask"))
        a->out_mask = v;
    else if (!strcmp(k, "--rows"))
        a->rows = (int64_t)x;
    else if (!strcmp(k, "--cols"))
        a->cols = (int64_t)x;
    else
        return fprintf(stderr, "sparsed prune: unknown option %s\n", k), -1;
    return 0;
}

static int parse_args(int argc, char **argv, prune_args *a)
{
    memset(a, 0, sizeof *a);
    sd_prune_spec_default(&a->s);
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i];
        if (!strcmp(k, "--help") || !strcmp(k, "-h"))
            return 1;
        if (!strcmp(k, "--quiet")) {
            a->quiet = 1;
            continue;
        }
        if (!strcmp(k, "--bench-solver")) {
            a->bench = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "sparsed prune: %s needs a value\n", k);
            return -1;
        }
        if (parse_opt(a, k, argv[++i]) != 0)
            return -1;
    }
    /* without --source, the input flag given names the source */
    int explicit_source = 0;
    for (int i = 1; i < argc; i++)
        explicit_source |= !strcmp(argv[i], "--source");
    for (int i = 1; i < argc && !explicit_source; i++) {
        if (!strcmp(argv[i], "--text"))
            a->s.source = SD_CALIB_TEXT;
        else if (!strcmp(argv[i], "--tokens"))
            a->s.source = SD_CALIB_TOKENS;
    }
    return 0;
}

/* ---- progress ----------------------------------------------------------------------------- */

typedef struct prog {
    int tty, quiet;
    double last_frac, last_t;
    int last_phase;
    int solve_layer;   /* the layer being solved, -1 outside the solve phase */
    double layer_mark; /* elapsed time when the previous layer's solve ended */
} prog;

/* Plain output gets one line per solved layer with its time (capture included in sequential
 * mode), so a log shows where a long prune spends its time. */
static void layer_line(prog *g, const sd_prune_progress *p)
{
    int solving = p->phase == SD_PH_SOLVE;
    if (g->solve_layer >= 0 && (!solving || p->layer != g->solve_layer)) {
        fprintf(stderr, "prune: layer %d/%d solved in %.2fs\n", g->solve_layer + 1, p->n_layers,
                p->elapsed_s - g->layer_mark);
        g->layer_mark = p->elapsed_s;
    }
    if (!solving && p->phase != SD_PH_CAPTURE)
        g->layer_mark = p->elapsed_s;
    g->solve_layer = solving ? p->layer : -1;
}

static void on_progress(void *ud, const sd_prune_progress *p)
{
    prog *g = ud;
    if (g->quiet)
        return;
    double eta = p->fraction > 0.01 ? p->elapsed_s * (1 - p->fraction) / p->fraction : -1;
    char what[128] = "";
    if (p->tokens_target > 0 && (p->phase == SD_PH_GENERATE || p->phase == SD_PH_CAPTURE))
        snprintf(what, sizeof what, " %lld/%lld tokens", (long long)p->tokens, (long long)p->tokens_target);
    else if (p->layer >= 0)
        snprintf(what, sizeof what, " layer %d/%d", p->layer + 1, p->n_layers);
    if (g->tty) {
        int w = 30, fill = (int)(p->fraction * w + 0.5);
        char bar[64];
        for (int i = 0; i < w; i++)
            bar[i] = i < fill ? '#' : '.';
        bar[w] = 0;
        fprintf(stderr, "\r\033[K%-8s [%s] %3.0f%%%s  %.0fs", p->phase_name, bar, 100 * p->fraction, what,
                p->elapsed_s);
        if (eta >= 0)
            fprintf(stderr, " ETA %.0fs", eta);
        if (p->phase == SD_PH_DONE)
            fputc('\n', stderr);
        return;
    }
    layer_line(g, p);
    /* plain lines: on a phase change, every 10% and at most every 5 seconds otherwise */
    if ((int)p->phase == g->last_phase && p->fraction - g->last_frac < 0.1 && p->elapsed_s - g->last_t < 5)
        return;
    g->last_phase = (int)p->phase;
    g->last_frac = p->fraction;
    g->last_t = p->elapsed_s;
    fprintf(stderr, "prune: %s %.0f%%%s elapsed %.1fs", p->phase_name, 100 * p->fraction, what, p->elapsed_s);
    if (eta >= 0)
        fprintf(stderr, " eta %.0fs", eta);
    fputc('\n', stderr);
}

/* ---- test-only solver mode ---------------------------------------------------------------- */

static void *read_raw(const char *path, size_t n)
{
    FILE *f = fopen(path, "rb");
    void *buf = f ? malloc(n) : NULL;
    int ok = buf && fread(buf, 1, n, f) == n && fgetc(f) == EOF;
    if (f)
        fclose(f);
    if (!ok) {
        fprintf(stderr, "sparsed prune: %s: cannot read exactly %zu bytes\n", path, n);
        free(buf);
        return NULL;
    }
    return buf;
}

static int write_raw(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(p, 1, n, f) == n;
    if (f)
        ok &= fclose(f) == 0;
    if (!ok)
        fprintf(stderr, "sparsed prune: cannot write %s\n", path);
    return ok ? 0 : -1;
}

static int solve_mode(const prune_args *a)
{
    int64_t R = a->rows, C = a->cols;
    int n = 0, m = 0, rc = 1;
    sd_diag d = {0};
    if (R <= 0 || C <= 0 || !a->out_w || (a->s.solver != SD_SOLVER_MAGNITUDE && !a->hessian)) {
        fprintf(stderr, "sparsed prune --solve: needs --rows, --cols, --out-weights and --hessian\n");
        return 2;
    }
    if (sd_nm_pattern_parse(a->s.pattern, &n, &m, &d) != 0) {
        fprintf(stderr, "sparsed prune: %s\n", d.msg);
        return 2;
    }
    float *W = read_raw(a->solve, (size_t)(R * C) * 4), *Hf = NULL;
    double *H = malloc((size_t)(C * C) * sizeof *H);
    uint32_t *keep = malloc((size_t)(R * (C / 32)) * 4);
    sd_cpu_pool *pool = NULL;
    if (!W || !H || !keep || (a->hessian && !(Hf = read_raw(a->hessian, (size_t)(C * C) * 4))))
        goto out;
    for (int64_t i = 0; Hf && i < C * C; i++)
        H[i] = Hf[i];
    if (sd_cpu_pool_init(&pool, a->s.threads, &d) != 0)
        goto fail;
    if (a->s.solver == SD_SOLVER_SPARSEGPT) {
        sd_sgpt_opts o;
        sd_sgpt_opts_default(&o);
        o.n = n;
        o.m = m;
        o.damping = a->s.damping;
        o.block_size = a->s.block_size;
        if (a->s.device == SD_PRUNE_DEV_CUDA) {
            sd_prune_gpu *g = NULL;
            int grc = sd_prune_gpu_init(&g, a->s.cuda_device, &d);
            if (grc == 0)
                grc = sd_prune_gpu_prune(g, W, R, C, H, &o, keep, NULL, &d);
            sd_prune_gpu_free(g);
            if (grc != 0)
                goto fail;
        } else if (sd_sgpt_prune(pool, W, R, C, H, &o, keep, NULL, &d) != 0)
            goto fail;
    } else {
        for (int64_t j = 0; j < C; j++)
            H[j] = H[j * C + j]; /* Wanda ranks by diag H = (2/n) ||X_j||^2 */
        if (sd_wanda_prune(W, R, C, a->s.solver == SD_SOLVER_WANDA ? H : NULL, n, m, keep, &d) != 0)
            goto fail;
    }
    if (write_raw(a->out_w, W, (size_t)(R * C) * 4) == 0 &&
        (!a->out_mask || write_raw(a->out_mask, keep, (size_t)(R * (C / 32)) * 4) == 0))
        rc = 0;
    goto out;
fail:
    fprintf(stderr, "sparsed prune: %s\n", sd_diag_str(&d, d.code));
out:
    sd_cpu_pool_free(pool);
    free(W);
    free(Hf);
    free(H);
    free(keep);
    return rc;
}

/* ---- test-only solver timing -------------------------------------------------------------- */

static int bench_mode(const prune_args *a)
{
    sd_sgpt_opts o;
    sd_prune_bench r;
    sd_diag d = {0};
    sd_sgpt_opts_default(&o);
    o.damping = a->s.damping;
    o.block_size = a->s.block_size;
    if (sd_nm_pattern_parse(a->s.pattern, &o.n, &o.m, &d) != 0 ||
        sd_prune_bench_solver(a->rows, a->cols, &o, a->s.device, a->s.threads, a->s.seed, &r, &d) != 0) {
        fprintf(stderr, "sparsed prune --bench-solver: %s\n", d.msg);
        return 1;
    }
    printf("{\"rows\": %lld, \"cols\": %lld, \"pattern\": \"%s\", \"device\": \"%s\", \"factor_s\": %.3f, "
           "\"sweep_s\": %.3f, \"loss\": %.9g, \"mask_hash\": \"%016llx\"}\n",
           (long long)a->rows, (long long)a->cols, a->s.pattern,
           a->s.device == SD_PRUNE_DEV_CUDA ? "cuda" : "cpu", r.factor_s, r.sweep_s, r.loss,
           (unsigned long long)r.mask_hash);
    return 0;
}

int sd_cmd_prune(int argc, char **argv)
{
    prune_args a;
    int pr = parse_args(argc, argv, &a);
    if (pr != 0) {
        usage(pr > 0 ? stdout : stderr);
        return pr > 0 ? 0 : 2;
    }
    if (a.solve)
        return solve_mode(&a);
    if (a.bench)
        return bench_mode(&a);
    if (!a.s.model_dir || !a.s.out_dir) {
        usage(stderr);
        return 2;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    prog g = {.tty = isatty(2), .quiet = a.quiet, .last_phase = -1, .solve_layer = -1};
    sd_prune_result res;
    sd_diag d = {0};
    int rc = sd_prune_run(&a.s, on_progress, &g, &g_cancel, &res, &d);
    if (rc != 0) {
        if (g.tty && !a.quiet)
            fputc('\n', stderr);
        fprintf(stderr, "sparsed prune: %s\n", sd_diag_str(&d, rc));
        return rc == SD_ECANCEL ? 130 : 1;
    }
    printf("wrote %s: %d linears pruned to %s with %s, %lld calibration tokens in %d sequences (%s), %.1fs\n",
           a.s.out_dir, res.linears, a.s.pattern, sd_prune_solver_name(a.s.solver),
           (long long)res.calib_tokens, res.calib_seqs, sd_calib_source_name(a.s.source), res.seconds);
    return 0;
}
