/* bench_common: the end-to-end benchmarks' shared helpers (engine/bench_common.h). */
#include "engine/bench_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/synthetic.h" /* sd_synth_pattern_parse */
#ifdef SD_HAVE_CUDA
#include "engine/cuda_backend.h"
#endif

int sd_bench_parse_ints(const char *list, int *out, int max_n, int max_value)
{
    char buf[256];
    if (snprintf(buf, sizeof buf, "%s", list) >= (int)sizeof buf)
        return -1;
    int n = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        char *end;
        long v = strtol(tok, &end, 10);
        if (*end || v <= 0 || v > max_value || n == max_n)
            return -1;
        out[n++] = (int)v;
    }
    return n > 0 ? n : -1;
}

static const sd_bench_opt *find_opt(const sd_bench_opt *opts, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(opts[i].name, name))
            return &opts[i];
    return NULL;
}

int sd_bench_parse_opts(int argc, char **argv, const sd_bench_opt *opts, int n)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h"))
            return 1;
        const sd_bench_opt *o = find_opt(opts, n, a);
        if (!o)
            return -1;
        if (o->kind == SD_BENCH_FLAG) {
            *(int *)o->dst = 1;
            continue;
        }
        if (!v)
            return -1;
        if (o->kind == SD_BENCH_STR) {
            *(const char **)o->dst = v;
        } else {
            char *end;
            const long x = strtol(v, &end, 10);
            if (!*v || *end || x < -(1L << 30) || x > (1L << 30))
                return -1;
            *(int *)o->dst = (int)x;
        }
        i++;
    }
    return 0;
}

uint32_t sd_bench_random_tokens(int32_t *toks, int n, int32_t vocab, uint32_t state)
{
    for (int k = 0; k < n; k++) {
        state = state * 1664525u + 1013904223u;
        toks[k] = (int32_t)((state >> 8) % (uint32_t)vocab);
    }
    return state;
}

int sd_bench_parse_patterns(const char *list, char *buf, int len, const char **pats, int max)
{
    snprintf(buf, (size_t)len, "%s", strcmp(list, "all") ? list : "dense,2:4,4:8,8:16,16:32");
    int n = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        int pn, pm;
        if (n == max || sd_synth_pattern_parse(tok, &pn, &pm))
            return -1;
        pats[n++] = tok;
    }
    return n > 0 ? n : -1;
}

double sd_bench_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double sd_bench_median(double *t, int n, double *p10, double *p90)
{
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    if (p10)
        *p10 = t[n / 10];
    if (p90)
        *p90 = t[n * 9 / 10 < n ? n * 9 / 10 : n - 1];
    return t[n / 2];
}

int sd_bench_env_init(sd_bench_env *e, const char *what, const char *preset, int device)
{
    memset(e, 0, sizeof *e);
    sd_diag d = {0};
    int rc = sd_model_config_load(&e->cfg, preset, &d);
    if (rc) {
        fprintf(stderr, "sparsed bench %s: %s\n", what, sd_diag_str(&d, rc));
        return rc;
    }
#ifdef SD_HAVE_CUDA
    if (sd_cuda_device_count() <= device) {
        fprintf(stderr, "sparsed bench %s: no CUDA device %d\n", what, device);
        return SD_ENODEV;
    }
    sd_cuda_device_name(device, e->gpu, sizeof e->gpu);
    if ((rc = sd_cuda_read_bandwidth(device, (size_t)4 << 30, &e->gbps, &d))) {
        fprintf(stderr, "sparsed bench %s: bandwidth: %s\n", what, sd_diag_str(&d, rc));
        return rc;
    }
    fprintf(stderr, "%s: read bandwidth %.0f GB/s; %s\n", e->gpu, e->gbps, preset);
    return 0;
#else
    fprintf(stderr, "sparsed bench %s: this build has no CUDA backend\n", what);
    return SD_ENOTSUP;
#endif
}

void sd_bench_md_head(FILE *f, const char *what, const char *preset, const sd_bench_env *e, int argc,
                      char **argv, const char *const *env_names)
{
    time_t now = time(NULL);
    char date[32];
    strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    fprintf(f, "## %s: %s\n\n- date: %s\n- GPU: %s, read-only bandwidth measured %.0f GB/s\n- command: `",
            what, preset, date, e->gpu, e->gbps);
    for (int i = 0; env_names && env_names[i]; i++) {
        const char *env = getenv(env_names[i]);
        if (env)
            fprintf(f, "%s=%s ", env_names[i], env);
    }
    fprintf(f, "sparsed bench");
    for (int i = 0; i < argc; i++)
        fprintf(f, " %s", argv[i]);
    fprintf(f, "`\n");
}
