/* harness: a minimal C test runner. Each tests/<dir>/test_<module>.c is its own binary
 * (so GPU tests run in fresh processes); its last line is "N passed, N failed, N skipped",
 * which tools/run_tests.sh adds up.
 *
 *   static void test_thing(void) { CHECK(x == 1); CHECK_MSG(y, "y was %d", y); }
 *   int main(void) { RUN(test_thing); return sd_test_done(); }
 *
 * SKIP("reason") inside a test marks it skipped (and returns). SD_TEST_ONLY=substring runs only
 * the tests whose names contain it (the others count as skipped, each with a line saying so):
 * for running one part under a slow tool, e.g. compute-sanitizer. */
#ifndef SD_TEST_HARNESS_H
#define SD_TEST_HARNESS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int sd__t_pass, sd__t_fail, sd__t_skip, sd__t_cur_failed, sd__t_cur_skipped;
static const char *sd__t_name;

#define CHECK_MSG(cond, ...)                                                                                 \
    do {                                                                                                     \
        if (!(cond)) {                                                                                       \
            fprintf(stderr, "  FAIL %s (%s:%d): %s: ", sd__t_name, __FILE__, __LINE__, #cond);               \
            fprintf(stderr, __VA_ARGS__);                                                                    \
            fputc('\n', stderr);                                                                             \
            sd__t_cur_failed = 1;                                                                            \
        }                                                                                                    \
    } while (0)
#define CHECK(cond) CHECK_MSG(cond, "check failed")
/* Stops the current test if the condition fails (for preconditions of later checks). */
/* (evaluates cond once: it may have side effects, e.g. REQUIRE(step() == 0)) */
#define REQUIRE(cond)                                                                                        \
    do {                                                                                                     \
        if (!(cond)) {                                                                                       \
            fprintf(stderr, "  FAIL %s (%s:%d): %s: required\n", sd__t_name, __FILE__, __LINE__, #cond);     \
            sd__t_cur_failed = 1;                                                                            \
            return;                                                                                          \
        }                                                                                                    \
    } while (0)
#define SKIP(...)                                                                                            \
    do {                                                                                                     \
        fprintf(stderr, "  SKIP %s: ", sd__t_name);                                                          \
        fprintf(stderr, __VA_ARGS__);                                                                        \
        fputc('\n', stderr);                                                                                 \
        sd__t_cur_skipped = 1;                                                                               \
        return;                                                                                              \
    } while (0)

/* SD_TEST_ONLY=substring runs only the tests whose names contain it; SD_TEST_SKIP=substring
 * leaves out those that do (the GPU scripts run a path that may fail apart from the rest). */
static inline int sd__t_selected(const char *name)
{
    const char *only = getenv("SD_TEST_ONLY"), *skip = getenv("SD_TEST_SKIP");
    if (skip && *skip && strstr(name, skip)) {
        fprintf(stderr, "  SKIP %s: left out by SD_TEST_SKIP=%s\n", name, skip);
        return 0;
    }
    if (!only || !*only || strstr(name, only))
        return 1;
    fprintf(stderr, "  SKIP %s: not selected by SD_TEST_ONLY=%s\n", name, only);
    return 0;
}

#define RUN(fn)                                                                                              \
    do {                                                                                                     \
        sd__t_name = #fn;                                                                                    \
        sd__t_cur_failed = sd__t_cur_skipped = 0;                                                            \
        if (sd__t_selected(#fn))                                                                             \
            fn();                                                                                            \
        else                                                                                                 \
            sd__t_cur_skipped = 1;                                                                           \
        if (sd__t_cur_failed) {                                                                              \
            sd__t_fail++;                                                                                    \
            fprintf(stderr, "not ok %s\n", #fn);                                                             \
        } else if (sd__t_cur_skipped) {                                                                      \
            sd__t_skip++;                                                                                    \
        } else {                                                                                             \
            sd__t_pass++;                                                                                    \
            fprintf(stderr, "ok %s\n", #fn);                                                                 \
        }                                                                                                    \
    } while (0)

static inline int sd_test_done(void)
{
    printf("%d passed, %d failed, %d skipped\n", sd__t_pass, sd__t_fail, sd__t_skip);
    return sd__t_fail ? 1 : 0;
}

/* Path of a folder of ../shared (relative to the repo root), or NULL when absent; tests that
 * need it SKIP with a message naming it. */
static inline const char *sd_test_shared(const char *sub)
{
    static char buf[4096];
    const char *root = getenv("SD_SHARED_DIR");
    snprintf(buf, sizeof buf, "%s/%s", root ? root : "../shared", sub);
    FILE *f = fopen(buf, "r");
    if (!f)
        return NULL;
    fclose(f);
    return buf;
}

#endif
