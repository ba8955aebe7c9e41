/* bench_common: the end-to-end benchmarks' shared helpers (engine/bench_common.h). */
#include "engine/bench_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/synthetic.h" /* sd_synth_pattern_parse */

int sd_bench_parse_ints(char *s, int *out, int max)
{
    int n = 0;
    for (char *tok = strtok(s, ","); tok; tok = strtok(NULL, ",")) {
        char *end;
        long v = strtol(tok, &end, 10);
        if (*end || v <= 0 || v > 1 << 20 || n == max)
            return -1;
        out[n++] = (int)v;
    }
    return n > 0 ? n : -1;
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
