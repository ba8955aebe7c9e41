/* bench_decode: 'sparsed bench decode' — end-to-end decode speed of the CUDA backend on
 * synthetic weights at a preset's shapes, dense vs N:M bitmask, against the bandwidth
 * roofline measured in the same run (the paper's protocol: context 512, 50 warm-up and 50
 * measured steps, median). --step-tokens T1,T2: also steps where each sequence carries T tokens
 * with a logits row each (speculative decoding's drafts, engine/spec.h: the graphs of that shape),
 * and their time against a one-token step's. */
#include "engine/bench_decode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/backend.h"
#include "engine/bench_common.h"
#include "engine/gpu_sensor.h"
#include "engine/model_config.h"
#include "engine/spec.h"
#include "engine/synthetic.h"
#include "engine/tp.h"
#ifdef SD_HAVE_CUDA
#include "engine/cuda_backend.h"
#endif

#define BD_MAX_BATCHES 16
#define BD_MAX_STEP_T 8
#define BD_MAX_PATTERNS 8

typedef struct bd_opts {
    const char *preset, *out;
    const char *patterns[BD_MAX_PATTERNS];
    int n_patterns;
    int batches[BD_MAX_BATCHES];
    int n_batches;
    int step_t[BD_MAX_STEP_T]; /* --step-tokens: tokens each sequence carries a step (1: decode; more:
                                  speculative decoding's drafts, a logits row each) */
    int n_step_t;
    int ctx, warmup, steps, device;
    int tp;                 /* --tensor-parallel N: N GPUs (devices 0..N-1), engine/tp.h */
    int copy_logits;        /* 1: every step copies its logits to the host, as the CPU sampler needs */
    int deterministic;      /* 1: the backend's deterministic option (no split-K atomics) */
    const char *tune_cache; /* --tune-cache FILE: the backend's tuning cache (engine/tune_cache.h) */
    sd_gpu_sensor *sensor;  /* the GPU's clocks and power during each row's steps, or NULL */
} bd_opts;

typedef struct bd_result {
    char pattern[16];
    int batch, step_t;
    double ms;       /* median ms per decode step */
    double p10, p90; /* the steps' 10th and 90th percentiles */
    double tok_s;    /* batch * step_t / step time: tokens run a second */
    double bytes;    /* bytes the step must read (weights + KV) */
    double roofline; /* fraction of the read-bandwidth floor reached */
    int ok;
    char err[160];
    char gpu[128]; /* clocks and power during the measured steps (gpu_sensor.h), or "" */
} bd_result;

static void usage(FILE *f)
{
    fprintf(
        f, "usage: sparsed bench decode --preset CONFIG.json [--pattern dense|2:4|4:8|8:16|16:32|all|A,B..]\n"
           "       [--batch 1,4,16,64] [--ctx 512] [--warmup 50] [--steps 50] [--device 0] [--copy-logits]\n"
           "       [--deterministic] [--tensor-parallel N] [--tune-cache FILE] [--step-tokens 1,5]\n"
           "       [--out FILE.md]\n");
}

static int parse_args(int argc, char **argv, bd_opts *o)
{
    static char pat_buf[256]; /* the patterns point into it */
    *o = (bd_opts){.ctx = 512, .warmup = 50, .steps = 50};
    const char *pat = "all", *batch = "1,4,16,64", *step_t = "1";
    const sd_bench_opt opts[] = {{"--preset", SD_BENCH_STR, &o->preset},
                                 {"--pattern", SD_BENCH_STR, &pat},
                                 {"--batch", SD_BENCH_STR, &batch},
                                 {"--step-tokens", SD_BENCH_STR, &step_t},
                                 {"--ctx", SD_BENCH_INT, &o->ctx},
                                 {"--warmup", SD_BENCH_INT, &o->warmup},
                                 {"--steps", SD_BENCH_INT, &o->steps},
                                 {"--device", SD_BENCH_INT, &o->device},
                                 {"--tensor-parallel", SD_BENCH_INT, &o->tp},
                                 {"--out", SD_BENCH_STR, &o->out},
                                 {"--tune-cache", SD_BENCH_STR, &o->tune_cache},
                                 {"--copy-logits", SD_BENCH_FLAG, &o->copy_logits},
                                 {"--deterministic", SD_BENCH_FLAG, &o->deterministic}};
    const int p = sd_bench_parse_opts(argc, argv, opts, sizeof opts / sizeof opts[0]);
    if (p)
        return p;
    if (!o->preset || o->ctx < 1 || o->warmup < 0 || o->steps < 1 || o->tp < 0)
        return -1;
    o->n_patterns = sd_bench_parse_patterns(pat, pat_buf, sizeof pat_buf, o->patterns, BD_MAX_PATTERNS);
    o->n_batches = sd_bench_parse_ints(batch, o->batches, BD_MAX_BATCHES, 1 << 20);
    o->n_step_t = sd_bench_parse_ints(step_t, o->step_t, BD_MAX_STEP_T, 1 + SD_SPEC_MAX_TOKENS);
    return o->n_batches > 0 && o->n_patterns > 0 && o->n_step_t > 0 ? 0 : -1;
}

#ifdef SD_HAVE_CUDA

/* Prefills `n_seqs` sequences of ctx random tokens; sequence i owns blocks [i*bps, (i+1)*bps). */
static int prefill(sd_backend *b, const bd_opts *o, int n_seqs, int bps, int32_t *bt, float *logits,
                   sd_diag *d)
{
    int32_t *toks = malloc((size_t)o->ctx * 4);
    if (!toks)
        return SD_ENOMEM;
    uint32_t s = 12345;
    int rc = 0;
    for (int i = 0; i < n_seqs && !rc; i++) {
        s = sd_bench_random_tokens(toks, o->ctx, b->vocab, s);
        sd_batch_seq q = {0, o->ctx, toks, bt + (size_t)i * bps, 0};
        rc = sd_backend_forward(b, &q, 1, logits, d);
    }
    free(toks);
    return rc;
}

/* warmup + steps decode steps of x->batch sequences from position ctx: x->ms the median step time,
 * x->p10 and x->p90 the spread, x->gpu the GPU's clocks and power during the measured steps. */
static int decode_steps(sd_backend *b, const bd_opts *o, int bps, int32_t *bt, float *logits, bd_result *x,
                        sd_diag *d)
{
    int n = o->warmup + o->steps, rc = 0, batch = x->batch, T = x->step_t;
    double *t = malloc((size_t)o->steps * sizeof *t);
    sd_batch_seq *q = calloc((size_t)batch, sizeof *q);
    int32_t *tok = calloc((size_t)batch * T, 4);
    sd_gpu_sampler *smp = NULL;
    if (!t || !q || !tok)
        rc = SD_ENOMEM;
    for (int s = 0; s < n && !rc; s++) {
        if (s == o->warmup && o->sensor && sd_gpu_sampler_start(&smp, o->sensor, 20, NULL))
            smp = NULL; /* the row without its GPU readings */
        for (int i = 0; i < batch; i++) {
            for (int k = 0; k < T; k++)
                tok[i * T + k] = (int32_t)((s * 7919 + i * 104729 + k * 31) % b->vocab);
            q[i] = (sd_batch_seq){o->ctx + s, T, &tok[i * T], bt + (size_t)i * bps, T > 1};
        }
        double t0 = sd_bench_now_ms();
        rc = sd_backend_forward(b, q, batch, o->copy_logits ? logits : NULL, d);
        if (s >= o->warmup)
            t[s - o->warmup] = sd_bench_now_ms() - t0;
    }
    if (smp) {
        sd_gpu_summary sum;
        sd_gpu_sampler_stop(smp, &sum);
        sd_gpu_summary_str(&sum, x->gpu, sizeof x->gpu);
    }
    if (!rc) {
        x->ms = sd_bench_median(t, o->steps, &x->p10, &x->p90);
    }
    free(t);
    free(q);
    free(tok);
    return rc;
}

static int max_of(const int *v, int n)
{
    int m = 0;
    for (int i = 0; i < n; i++)
        m = v[i] > m ? v[i] : m;
    return m;
}

/* All batches of one pattern on one backend; results appended to r. */
static void run_pattern(const bd_opts *o, const sd_model_config *cfg, const char *pat, double gbps,
                        bd_result *r, int *n_r)
{
    int maxb = max_of(o->batches, o->n_batches), maxt = max_of(o->step_t, o->n_step_t), bs = 16;
    int bps = (o->ctx + o->warmup + o->steps + maxt + bs) / bs + 1;
    sd_backend_opts bo;
    sd_backend_opts_default(&bo);
    bo.device = o->device;
    bo.block_size = bs;
    bo.kv_blocks = maxb * bps;
    bo.max_batch_tokens = o->ctx > maxb * maxt ? o->ctx : maxb * maxt;
    bo.deterministic = o->deterministic;
    bo.tune_cache = o->tune_cache;
    sd_backend *b = NULL;
    sd_diag d = {0};
    int32_t *bt = malloc((size_t)maxb * bps * 4);
    float *logits = malloc((size_t)maxb * maxt * cfg->vocab * 4);
    for (int i = 0; bt && i < maxb * bps; i++)
        bt[i] = i;
    sd_tp_opts to;
    sd_tp_opts_default(&to);
    to.world = o->tp;
    int rc = !bt || !logits ? SD_ENOMEM
             : o->tp > 1    ? sd_tp_backend_init_synthetic(&b, cfg, pat, 1, &bo, &to, &d)
                            : sd_backend_cuda_init_synthetic(&b, cfg, pat, 1, &bo, &d);
    const sd_backend *sb = o->tp > 1 ? sd_tp_local_rank(b) : b; /* TP: one GPU's share */
    if (!rc && o->tp <= 1) /* single GPU: the launch's share of a step (below) */
        sd_backend_cuda_time_launches(b, 1);
    if (!rc)
        rc = prefill(b, o, maxb, bps, bt, logits, &d);
    for (int i = 0; i < o->n_batches * o->n_step_t; i++) {
        bd_result *x = &r[(*n_r)++];
        memset(x, 0, sizeof *x);
        snprintf(x->pattern, sizeof x->pattern, "%s", pat);
        x->batch = o->batches[i / o->n_step_t];
        x->step_t = o->step_t[i % o->n_step_t];
        const int64_t replays0 = rc ? 0 : sd_backend_cuda_graph_replays(sb);
        double launch0 = 0, solo0 = 0, launch1 = 0, solo1 = 0;
        if (!rc && o->tp <= 1)
            rc = sd_backend_cuda_launch_times(b, &launch0, &solo0, &d);
        if (!rc)
            rc = decode_steps(b, o, bps, bt, logits, x, &d);
        if (rc) {
            snprintf(x->err, sizeof x->err, "%s", sd_diag_str(&d, rc));
            continue;
        }
        double avg_ctx = o->ctx + o->warmup + o->steps / 2.0;
        x->bytes = (double)sd_backend_cuda_step_weight_bytes(sb) +
                   x->batch * avg_ctx * (double)sd_backend_cuda_kv_bytes_per_token(sb);
        x->tok_s = x->batch * x->step_t / (x->ms / 1e3);
        x->roofline = x->bytes / (gbps * 1e9) / (x->ms / 1e3);
        x->ok = 1;
        /* Beside the step: the host's time in each launch, each graph's GPU time on its own
         * (events around the launch), and the same graph back to back. Step less graph: the
         * host's part of a step; graph less back to back: what a graph loses by starting from an
         * idle GPU (kernels/NOTES.md v26, v27). Single GPU only (TP: none is measured). */
        const int64_t replays = sd_backend_cuda_graph_replays(sb) - replays0;
        char host[128] = "";
        double gms = 0;
        sd_diag gd = {0};
        if (o->tp <= 1 && replays && x->step_t == 1 &&
            !sd_backend_cuda_launch_times(b, &launch1, &solo1, &gd) &&
            !sd_backend_cuda_graph_replay_ms(b, x->batch, &gms, &gd))
            snprintf(host, sizeof host, ", launch %.1f us, graph %.3f ms each; back to back %.3f ms",
                     (launch1 - launch0) / (double)replays, (solo1 - solo0) / (double)replays, gms);
        fprintf(
            stderr,
            "  %-6s B=%-3d T=%-2d %8.3f ms/step (%.3f-%.3f) %9.1f tok/s %5.1f%% of roofline (graph replays "
            "%lld%s)%s%s\n",
            pat, x->batch, x->step_t, x->ms, x->p10, x->p90, x->tok_s, 100 * x->roofline, (long long)replays,
            host, x->gpu[0] ? "; GPU " : "", x->gpu);
    }
    sd_backend_free(b);
    free(bt);
    free(logits);
}

static double dense_ms(const bd_result *r, int n, int batch, int step_t)
{
    for (int i = 0; i < n; i++)
        if (r[i].ok && r[i].batch == batch && r[i].step_t == step_t && !strcmp(r[i].pattern, "dense"))
            return r[i].ms;
    return 0;
}

static void print_table(FILE *f, const bd_result *r, int n)
{
    int sensed = 0, spec = 0; /* columns for the GPU's clocks and power, and the tokens a step */
    for (int i = 0; i < n; i++)
        sensed |= r[i].ok && r[i].gpu[0], spec |= r[i].step_t > 1;
    fprintf(
        f,
        "| pattern | batch |%s ms/step | tokens/s | speedup vs dense | GB read/step | %% of roofline |%s\n",
        spec ? " tokens a sequence | vs 1 token |" : "", sensed ? " GPU during the steps |" : "");
    fprintf(f, "| --- | ---: |%s ---: | ---: | ---: | ---: | ---: |%s\n", spec ? " ---: | ---: |" : "",
            sensed ? " --- |" : "");
    for (int i = 0; i < n; i++) {
        char st[64] = "";
        if (spec) {
            double one = 0;
            for (int j = 0; j < n; j++)
                if (r[j].ok && r[j].batch == r[i].batch && r[j].step_t == 1 &&
                    !strcmp(r[j].pattern, r[i].pattern))
                    one = r[j].ms;
            snprintf(st, sizeof st, " %d | %s |", r[i].step_t, "n/a");
            if (one > 0 && r[i].ok)
                snprintf(st, sizeof st, " %d | %.2fx |", r[i].step_t, r[i].ms / one);
        }
        if (!r[i].ok) {
            fprintf(f, "| %s | %d |%s failed: %s | | | | |%s\n", r[i].pattern, r[i].batch, st, r[i].err,
                    sensed ? " |" : "");
            continue;
        }
        double dm = dense_ms(r, n, r[i].batch, r[i].step_t);
        char sp[32] = "n/a";
        if (dm > 0)
            snprintf(sp, sizeof sp, "%.2fx", dm / r[i].ms);
        fprintf(f, "| %s | %d |%s %.3f | %.1f | %s | %.2f | %.1f%% |", r[i].pattern, r[i].batch, st, r[i].ms,
                r[i].tok_s, sp, r[i].bytes / 1e9, 100 * r[i].roofline);
        if (sensed)
            fprintf(f, " %s |", r[i].gpu[0] ? r[i].gpu : "n/a");
        fprintf(f, "\n");
    }
}

/* The GPU's sensor for the rows' readings, or NULL with a note why (the bench runs without). */
static sd_gpu_sensor *open_sensor(int device)
{
    char pci[32];
    sd_gpu_sensor *s = NULL;
    sd_diag d = {0};
    int rc = sd_cuda_device_pci_id(device, pci, sizeof pci);
    if (!rc)
        rc = sd_gpu_sensor_open(&s, pci, &d);
    if (rc)
        fprintf(stderr, "no clock and power readings: %s\n", sd_diag_str(&d, rc));
    return rc ? NULL : s;
}

/* Every pattern at every batch size; the exit status. */
static int run_all(bd_opts *o, int argc, char **argv)
{
    sd_bench_env e;
    if (sd_bench_env_init(&e, "decode", o->preset, o->device))
        return 1;
    o->sensor = open_sensor(o->device);
    if (o->tp > 1)
        fprintf(stderr, "tensor parallel %d (GPUs 0..%d): bytes and roofline are per GPU\n", o->tp,
                o->tp - 1);
    static bd_result r[BD_MAX_PATTERNS * BD_MAX_BATCHES * BD_MAX_STEP_T];
    int n = 0;
    for (int p = 0; p < o->n_patterns; p++)
        run_pattern(o, &e.cfg, o->patterns[p], e.gbps, r, &n);
    sd_gpu_sensor_free(o->sensor);
    print_table(stdout, r, n);
    if (o->out) {
        FILE *f = fopen(o->out, "w");
        if (!f) {
            fprintf(stderr, "sparsed bench decode: cannot write %s\n", o->out);
            return 1;
        }
        sd_bench_md_head(f, "decode", o->preset, &e, argc, argv, NULL);
        fprintf(f,
                "- protocol: synthetic weights, context %d (prefilled), %d warm-up + %d measured decode "
                "steps, median; logits %s%s%s%s; roofline = bytes read per step (weights + KV) / measured "
                "bandwidth\n\n",
                o->ctx, o->warmup, o->steps,
                o->copy_logits ? "copied to the host every step" : "left on the GPU",
                o->deterministic ? "; deterministic (no split-K)" : "",
                o->tune_cache ? "; kernels from the tuning cache " : "", o->tune_cache ? o->tune_cache : "");
        print_table(f, r, n);
        fclose(f);
    }
    for (int i = 0; i < n; i++)
        if (!r[i].ok)
            return 1;
    return 0;
}
#endif

int sd_bench_decode_main(int argc, char **argv)
{
    bd_opts o;
    int prc = parse_args(argc, argv, &o);
    if (prc) {
        usage(prc > 0 ? stdout : stderr);
        return prc > 0 ? 0 : 2;
    }
#ifdef SD_HAVE_CUDA
    return run_all(&o, argc, argv);
#else
    fprintf(stderr, "sparsed bench decode: this build has no CUDA backend\n");
    return 2;
#endif
}
