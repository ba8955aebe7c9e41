/* bench_common: what the end-to-end benchmarks (`sparsed bench decode`, `bench prefill`) share:
 * their list options, the wall clock, and the percentiles of a run's times. */
#ifndef SD_BENCH_COMMON_H
#define SD_BENCH_COMMON_H

#ifdef __cplusplus
extern "C" {
#endif

/* Parses "a,b,c" (positive ints, at most max) into out; the count, or -1 on a bad list. s is
 * consumed (strtok). */
int sd_bench_parse_ints(char *s, int *out, int max);

/* Parses a pattern list ("all" = dense and every N:M pattern) into pats, pointing into buf (len
 * bytes); the count, or -1 on an unknown pattern or an empty list. */
int sd_bench_parse_patterns(const char *list, char *buf, int len, const char **pats, int max);

/* Monotonic wall clock in ms. */
double sd_bench_now_ms(void);

/* Sorts t[0..n) and returns its median; *p10 and *p90 (may be NULL) its 10th and 90th
 * percentiles. */
double sd_bench_median(double *t, int n, double *p10, double *p90);

#ifdef __cplusplus
}
#endif
#endif
