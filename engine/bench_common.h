/* bench_common: what the end-to-end benchmarks (`sparsed bench decode`, `bench prefill`) share:
 * their list options, the wall clock, and the percentiles of a run's times. */
#ifndef SD_BENCH_COMMON_H
#define SD_BENCH_COMMON_H

#ifdef __cplusplus
extern "C" {
#endif

#include <stdint.h>

/* Parses "a,b,c" (ints in 1..max_value, at most max_n of them) into out; the count, or -1 on a
 * bad list. */
int sd_bench_parse_ints(const char *list, int *out, int max_n, int max_value);

/* One command-line option of a benchmark: "--name VALUE" into a string (const char **) or an int
 * (int *, a whole decimal number), or "--name" alone setting an int flag to 1. */
typedef enum { SD_BENCH_STR, SD_BENCH_INT, SD_BENCH_FLAG } sd_bench_opt_kind;
typedef struct sd_bench_opt {
    const char *name; /* with its dashes: "--preset" */
    sd_bench_opt_kind kind;
    void *dst;
} sd_bench_opt;

/* Parses argv[1..argc) against opts[0..n): 1 on --help or -h, -1 on an unknown option, a missing
 * value or a value that is not a number where one is wanted, else 0. Values not given keep what
 * the caller put in their destinations. */
int sd_bench_parse_opts(int argc, char **argv, const sd_bench_opt *opts, int n);

/* Parses a pattern list ("all" = dense and every N:M pattern) into pats, pointing into buf (len
 * bytes); the count, or -1 on an unknown pattern or an empty list. */
int sd_bench_parse_patterns(const char *list, char *buf, int len, const char **pats, int max);

/* n random token ids below vocab from an LCG in state; returns the state after them, so that
 * successive calls continue one stream. */
uint32_t sd_bench_random_tokens(int32_t *toks, int n, int32_t vocab, uint32_t state);

/* Monotonic wall clock in ms. */
double sd_bench_now_ms(void);

/* Sorts t[0..n) and returns its median; *p10 and *p90 (may be NULL) its 10th and 90th
 * percentiles. */
double sd_bench_median(double *t, int n, double *p10, double *p90);

#include <stdio.h>

#include "engine/model_config.h"

/* What a benchmark measures against: the preset's shapes, and the device's name and read-only
 * bandwidth (measured now). */
typedef struct sd_bench_env {
    sd_model_config cfg;
    char gpu[128];
    double gbps;
} sd_bench_env;

/* Loads preset, checks that `device` exists, names it and measures its read bandwidth (then
 * prints a line: what, bandwidth, preset). On failure prints "sparsed bench WHAT: why" and
 * returns nonzero. Builds without CUDA: refuses (there is no device to measure). */
int sd_bench_env_init(sd_bench_env *e, const char *what, const char *preset, int device);

/* The head of a results file: "## WHAT: preset", the date, the GPU and its bandwidth, and the
 * command line (NAME=value in front for each of env_names, a NULL-ended list, that is set). */
void sd_bench_md_head(FILE *f, const char *what, const char *preset, const sd_bench_env *e, int argc,
                      char **argv, const char *const *env_names);

#ifdef __cplusplus
}
#endif
#endif
