/* test_expand_gpu: the bitmask expansion on the GPU (sd__cu_expand_bitmask, both kernels: one
 * thread a word, and the warp kernel of SD_EXPAND_WARP) against the CPU's sd_nm_expand, bit for
 * bit, for every pattern, on shapes whose word counts end inside a warp's run of 32 (odd rows, cols
 * of 129 * 32 among them) and on an 8B shape, and for 2:4 on an lm_head-sized one. The output is
 * poisoned first, so a column left unwritten fails. Skips without a GPU. */
#include "tests/harness.h"

#include <stdint.h>

#ifndef SD_HAVE_CUDA
int main(void)
{
    fprintf(stderr, "  SKIP expansion GPU tests: built without CUDA\n");
    sd__t_skip++;
    return sd_test_done();
}
#else
#include "engine/cuda_backend.h"
#include "engine/cuda_gemm_bench.h"

/* One shape and pattern through both kernels against the CPU. */
static void check_shape(int64_t rows, int64_t cols, int n, int m, uint64_t seed)
{
    size_t diff[2] = {1, 1};
    sd_diag d = {0};
    const int rc = sd_cuda_expand_check(0, rows, cols, n, m, seed, diff, &d);
    CHECK_MSG(rc == 0, "%d:%d [%lld, %lld]: %s", n, m, (long long)rows, (long long)cols, sd_diag_str(&d, rc));
    CHECK_MSG(diff[0] == 0 && diff[1] == 0, "%d:%d [%lld, %lld]: %zu / %zu bf16 differ from the CPU's", n, m,
              (long long)rows, (long long)cols, diff[0], diff[1]);
}

static void test_expand_matches_cpu(void)
{
    if (sd_cuda_device_count() <= 0)
        SKIP("no CUDA device");
    const int pats[4][2] = {{2, 4}, {4, 8}, {8, 16}, {16, 32}};
    /* words: 3 (one short run), 25, 7000 (218 runs and 24 words), 1184 (37 whole runs), the 8B o,
     * 1 (one lane of one warp), 903 (cols 129 * 32, not a multiple of 64: 28 runs and 7 words) */
    const int64_t shapes[7][2] = {{3, 32},      {5, 160}, {1000, 224}, {37, 1024},
                                  {4096, 4096}, {1, 32},  {7, 4128}};
    for (int p = 0; p < 4; p++)
        for (int s = 0; s < 7; s++)
            check_shape(shapes[s][0], shapes[s][1], pats[p][0], pats[p][1], (uint64_t)(100 * p + s));
}

/* An lm_head-sized [128256, 4096], larger than any 8B linear (16.4M words, 1 GB dense, ~64K blocks
 * of either kernel), one pattern: the index arithmetic is size_t throughout and the pattern does not
 * touch it. A few seconds of host work (the CPU expansion and the compares);
 * SD_TEST_SKIP=large leaves it out. */
static void test_expand_large(void)
{
    if (sd_cuda_device_count() <= 0)
        SKIP("no CUDA device");
    check_shape(128256, 4096, 2, 4, 7);
}

/* A shape the check refuses: cols not a multiple of 32. */
static void test_expand_check_refuses(void)
{
    if (sd_cuda_device_count() <= 0)
        SKIP("no CUDA device");
    size_t diff[2];
    sd_diag d = {0};
    CHECK(sd_cuda_expand_check(0, 4, 48, 2, 4, 1, diff, &d) == SD_EINVAL);
}

int main(void)
{
    RUN(test_expand_matches_cpu);
    RUN(test_expand_large);
    RUN(test_expand_check_refuses);
    return sd_test_done();
}
#endif
