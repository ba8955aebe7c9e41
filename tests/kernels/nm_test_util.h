/* nm_test_util: shared helpers for the kernel tests (seeded RNG, random bf16, random masks). */
#ifndef SD_NM_TEST_UTIL_H
#define SD_NM_TEST_UTIL_H

#include <stdint.h>
#include <stdlib.h>

#include "engine/dtype.h"
#include "kernels/nm_format.h"

static inline uint64_t nmt_rand(uint64_t *s)
{
    /* splitmix64: a fresh, well-mixed stream per seed */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1). */
static inline float nmt_uniform(uint64_t *s)
{
    return (float)((double)(nmt_rand(s) >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static inline void nmt_fill_bf16(uint16_t *p, int64_t n, uint64_t *s)
{
    for (int64_t i = 0; i < n; i++)
        p[i] = sd_f32_to_bf16(nmt_uniform(s));
}

static inline void nmt_fill_f32(float *p, int64_t n, uint64_t *s)
{
    for (int64_t i = 0; i < n; i++)
        p[i] = nmt_uniform(s);
}

/* A random valid mask for pattern (n, m) (0,0 = unstructured) via random scores. */
static inline int nmt_random_mask(uint32_t *mask, int64_t rows, int64_t cols, int n, int m, uint64_t *s)
{
    float *sc = malloc((size_t)(rows * cols) * sizeof *sc);
    if (!sc)
        return SD_ENOMEM;
    nmt_fill_f32(sc, rows * cols, s);
    int rc = sd_nm_mask_from_scores(sc, rows, cols, n, m, mask, NULL);
    free(sc);
    return rc;
}

#endif
