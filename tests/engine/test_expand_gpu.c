/* test_expand_gpu: the bitmask expansion on the GPU (sd__cu_expand_bitmask, both kernels: one
 * thread a word, and the warp kernel of SD_EXPAND_WARP) against the CPU's sd_nm_expand, bit for
 * bit, for every pattern, on shapes whose word counts end inside a warp's run of 32 and on an 8B
 * shape. The output is poisoned first, so a column left unwritten fails. Skips without a GPU. */
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

static void test_expand_matches_cpu(void)
{
    if (sd_cuda_device_count() <= 0)
        SKIP("no CUDA device");
    const int pats[4][2] = {{2, 4}, {4, 8}, {8, 16}, {16, 32}};
    /* words: 3 (one short run), 25, 7000 (218 runs and 24 words), 1184 (37 whole runs), the 8B o */
    const int64_t shapes[5][2] = {{3, 32}, {5, 160}, {1000, 224}, {37, 1024}, {4096, 4096}};
    for (int p = 0; p < 4; p++)
        for (int s = 0; s < 5; s++) {
            size_t diff[2] = {1, 1};
            sd_diag d = {0};
            const int rc = sd_cuda_expand_check(0, shapes[s][0], shapes[s][1], pats[p][0], pats[p][1],
                                                (uint64_t)(100 * p + s), diff, &d);
            CHECK_MSG(rc == 0, "%d:%d [%lld, %lld]: %s", pats[p][0], pats[p][1], (long long)shapes[s][0],
                      (long long)shapes[s][1], sd_diag_str(&d, rc));
            CHECK_MSG(diff[0] == 0 && diff[1] == 0,
                      "%d:%d [%lld, %lld]: %zu / %zu bf16 differ from the CPU's", pats[p][0], pats[p][1],
                      (long long)shapes[s][0], (long long)shapes[s][1], diff[0], diff[1]);
        }
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
    RUN(test_expand_check_refuses);
    return sd_test_done();
}
#endif
