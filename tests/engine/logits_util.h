/* logits_util: helpers shared by the backend-against-reference tests (test_cuda_backend,
 * test_tp_gpu) — deterministic random token ids to feed a backend, the argmax of a logits
 * row, and when two picks are a near-tie. */
#ifndef SD_TEST_LOGITS_UTIL_H
#define SD_TEST_LOGITS_UTIL_H

#include <math.h>
#include <stdint.h>

/* n token ids in [1, vocab) from an LCG seeded with `seed` (id 0 left out). */
static void rand_tokens(int32_t *t, int n, int32_t vocab, uint32_t seed)
{
    for (int i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        t[i] = 1 + (int32_t)((seed >> 8) % (uint32_t)(vocab - 1));
    }
}

/* Index of the largest of x[0..n) (the first one on ties). */
static int32_t argmax(const float *x, int32_t n)
{
    int32_t k = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[k])
            k = i;
    return k;
}

/* Whether ref's top pick `top` leads `other` by so little that another summation order may
 * swap them: the tolerance the GPU-against-CPU and batched-against-single checks share. */
static inline int near_tie(const float *ref, int32_t top, int32_t other)
{
    return ref[top] - ref[other] < 0.02f * (fabsf(ref[top]) + 1.f);
}

#endif
