/* GPU tests for kernels/nm_spmv*.cu: every pattern, the unstructured path and the dense GEMV
 * against their CPU twins (fp64 accumulation), on fresh random data, many shapes (odd rows, cols
 * not a multiple of the tile), B = 1..16, every config, fp32/bf16 output and accumulate; outputs
 * poisoned (NaN) first; relative L2 error < 1e-3; every CUDA call checked. Skips without a GPU. */
#include "tests/harness.h"

#ifdef SD_HAVE_CUDA
#include "kernels/nm_spmv_impl.h" /* sd__nm_cache_lookup: what the autotuner cached */
#include "tests/kernels/spmv_gpu_prob.h"

static const shp k_shapes[] = {{1, 32},      {7, 96},     {33, 544},   {257, 1056},
                               {1000, 4096}, {61, 14336}, {130, 24608}};
#define N_SHAPES (int)(sizeof k_shapes / sizeof k_shapes[0])

/* For a pattern (or dense): every shape, B in a spread of 1..16 (all 16 on one shape), configs. */
static void check_kind(int dense, int n, int m, uint64_t seed)
{
    if (!have_gpu())
        SKIP("no CUDA device (cudaGetDeviceCount failed or returned 0)");
    int worst_cfg = 0;
    double worst = 0;
    for (int si = 0; si < N_SHAPES; si++) {
        int64_t rows = k_shapes[si].rows, cols = k_shapes[si].cols;
        for (int B = 1; B <= SD_NM_MAX_B; B++) {
            if (si != 3 && B != 1 && B != 3 && B != 8 && B != 16)
                continue;
            prob p;
            REQUIRE(prob_init(&p, dense, n, m, rows, cols, B, seed + 1000 * si + B) == 0);
            /* (rw, split, y_bf16, accumulate): explicit configs, then the heuristic (0, 0) */
            const int cfg[][4] = {{1, 1, 0, 0}, {2, 3, 0, 0}, {4, 8, 0, 1},
                                  {4, 1, 1, 0}, {2, 1, 1, 1}, {0, 0, 0, 0}};
            check_cfgs(&p, cfg, 6, dense ? "gemv" : "spmv", seed, 0, &worst, &worst_cfg);
            prob_free(&p);
        }
    }
    fprintf(stderr, "  %s %d:%d worst rel L2 %.3g (config %d)\n", dense ? "gemv" : "spmv", n, m, worst,
            worst_cfg);
}

static void test_gpu_2_4(void)
{
    check_kind(0, 2, 4, 1);
}
static void test_gpu_4_8(void)
{
    check_kind(0, 4, 8, 2);
}
static void test_gpu_8_16(void)
{
    check_kind(0, 8, 16, 3);
}
static void test_gpu_16_32(void)
{
    check_kind(0, 16, 32, 4);
}
static void test_gpu_unstructured(void)
{
    check_kind(0, 0, 0, 5);
}
static void test_gpu_dense_gemv(void)
{
    check_kind(1, 0, 0, 6);
}

/* The row-per-lane kernels (rows_per_warp 32 / 48, stream-K twins 64 / 96; B <= 4, cols % 128
 * == 0; the values mirror kernels/nm_spmv_impl.h): shapes with a partial row group, fewer tiles
 * than warps, tiles not divisible by the warps, stream-K shares that cross row groups (3000 x
 * 4096, 700 x 14336), x too large for one block (split forced; stream-K falls back), explicit
 * split-K, every B, fp32/bf16 output (stream-K: falls back), accumulate. */
#define RW_ROWS 32
#define RW_ROWS3 48
#define RW_SK 64
#define RW_SK3 96
static void check_rows(int n, int m, uint64_t seed)
{
    if (!have_gpu())
        SKIP("no CUDA device (cudaGetDeviceCount failed or returned 0)");
    static const shp shapes[] = {{1, 128},    {40, 640},  {33, 1152},   {257, 4096},
                                 {61, 14336}, {9, 57344}, {3000, 4096}, {700, 14336}};
    double worst = 0;
    int worst_cfg = 0;
    for (int si = 0; si < (int)(sizeof shapes / sizeof shapes[0]); si++)
        for (int B = 1; B <= 4; B++) {
            prob p;
            REQUIRE(prob_init(&p, 0, n, m, shapes[si].rows, shapes[si].cols, B, seed + 100 * si + B) == 0);
            const int cfg[][4] = {{RW_ROWS, 1, 0, 0},  {RW_ROWS3, 1, 0, 1}, {RW_ROWS, 3, 0, 1},
                                  {RW_ROWS3, 2, 0, 0}, {RW_ROWS, 1, 1, 0},  {RW_ROWS3, 1, 1, 1},
                                  {RW_SK, 1, 0, 0},    {RW_SK3, 1, 0, 1},   {RW_SK, 1, 1, 0}};
            check_cfgs(&p, cfg, 9, "rows", seed, 0, &worst, &worst_cfg);
            prob_free(&p);
        }
    fprintf(stderr, "  rows %d:%d worst rel L2 %.3g (config %d)\n", n, m, worst, worst_cfg);
}

static void test_gpu_rows_2_4(void)
{
    check_rows(2, 4, 11);
}
static void test_gpu_rows_16_32(void)
{
    check_rows(16, 32, 12);
}
static void test_gpu_rows_4_8_8_16(void)
{
    check_rows(4, 8, 13);
    check_rows(8, 16, 14);
}

/* Asking for the row kernels where they do not apply (cols % 128 != 0, a mask pointer that is
 * not 16-byte aligned, B > 4, unstructured) falls back to a kernel that does, with the same result. */
static void test_gpu_rows_fallback(void)
{
    if (!have_gpu())
        SKIP("no CUDA device (cudaGetDeviceCount failed or returned 0)");
    prob p;
    REQUIRE(prob_init(&p, 0, 2, 4, 70, 544, 2, 21) == 0); /* cols % 128 != 0 */
    sd_nm_spmv_args a = prob_args(&p, 0, 0, RW_ROWS, 1);
    double e = run_check(&p, &a, 1);
    CHECK_MSG(e >= 0 && e < 1e-3, "cols 544: rel L2 %g", e);
    prob_free(&p);
    REQUIRE(prob_init(&p, 0, 8, 16, 70, 1024, 6, 22) == 0); /* B > 4 */
    a = prob_args(&p, 0, 1, RW_ROWS3, 1);
    e = run_check(&p, &a, 2);
    CHECK_MSG(e >= 0 && e < 1e-3, "B=6: rel L2 %g", e);
    prob_free(&p);
    REQUIRE(prob_init(&p, 0, 0, 0, 70, 1024, 1, 23) == 0); /* unstructured */
    a = prob_args(&p, 0, 0, RW_ROWS, 1);
    e = run_check(&p, &a, 3);
    CHECK_MSG(e >= 0 && e < 1e-3, "unstructured: rel L2 %g", e);
    prob_free(&p);
    /* mask 4 bytes past a 16-byte boundary: a copy of the mask, shifted */
    REQUIRE(prob_init(&p, 0, 4, 8, 70, 1024, 1, 24) == 0);
    uint32_t *shifted = NULL;
    REQUIRE(CU(cudaMalloc((void **)&shifted, (size_t)(70 * 1024 / 32) * 4 + 16)));
    REQUIRE(CU(cudaMemcpy(shifted + 1, p.mask, (size_t)(70 * 1024 / 32) * 4, cudaMemcpyHostToDevice)));
    a = prob_args(&p, 0, 0, RW_ROWS, 1);
    a.mask = shifted + 1;
    e = run_check(&p, &a, 4);
    CHECK_MSG(e >= 0 && e < 1e-3, "unaligned mask: rel L2 %g", e);
    cudaFree(shifted);
    prob_free(&p);
}

/* Corrupt masks (all bits set, none set) give wrong numbers, never a fault. */
static void test_gpu_rows_corrupt_mask(void)
{
    if (!have_gpu())
        SKIP("no CUDA device (cudaGetDeviceCount failed or returned 0)");
    const int rws[] = {RW_ROWS, RW_ROWS3, RW_SK, RW_SK3};
    check_corrupt_masks(2, 4, 64, 1024, 4, rws, 4, 31);
}

/* The word-per-lane gather kernels (rows_per_warp 1 / 2 / 4) on corrupt masks: a word with no bit
 * set sends nm_word's scan to bfind = -1 (the padding row 0 of an x group), one with all 32 set to
 * columns 31..16; wrong numbers, never a fault (memcheck: results/2026-12-03-s20/run3.sh). */
static void test_gpu_gather_corrupt_mask(void)
{
    if (!have_gpu())
        SKIP("no CUDA device (cudaGetDeviceCount failed or returned 0)");
    const int rws[] = {1, 2, 4};
    const int Bs[] = {1, 2, 4, 16};
    for (int i = 0; i < 4; i++) {
        check_corrupt_masks(8, 16, 70, 1024, Bs[i], rws, 3, 1410 + i);
        check_corrupt_masks(16, 32, 70, 1024, Bs[i], rws, 3, 1420 + i);
    }
}

/* The 2:4 / 4:8 / 8:16 / 16:32 kernels that expand the fragments in registers (rows_per_warp 24, and 128 /
 * 256: the wide twins for B up to 64, 16 / 32 rows a warp, weights and x staged in shared memory;
 * kernels/nm_tcx.h): rows not a multiple of 16 (and of 128, 256), cols an odd number of 64-column pieces,
 * fewer steps than warps, uneven split-K shares, every B up to 16 on one shape and B = 17..64 for the wide
 * kernel, 65..256 in tiles of it (65, 130, 200, 256), fp32/bf16 output, accumulate; corrupt masks give wrong
 * numbers, never a fault. */
#define RW_TCX 24
#define RW_TCXW 128
#define RW_TCXW2 256
static const int k_tcx_rws[3] = {RW_TCX, RW_TCXW, RW_TCXW2};
static void check_tcx(int n, int m, uint64_t seed)
{
    if (!have_gpu())
        SKIP("no CUDA device (cudaGetDeviceCount failed or returned 0)");
    static const shp shapes[] = {{1, 64},      {17, 128},   {37, 320},   {257, 1088},
                                 {1000, 4096}, {61, 14336}, {130, 24640}};
    const int cfg[][4] = {{RW_TCX, 1, 0, 0},   {RW_TCX, 2, 0, 1},   {RW_TCX, 3, 0, 0},   {RW_TCX, 1, 1, 0},
                          {RW_TCX, 1, 1, 1},   {RW_TCX, 5, 0, 1},   {RW_TCXW, 1, 0, 0},  {RW_TCXW, 2, 0, 1},
                          {RW_TCXW, 3, 0, 0},  {RW_TCXW, 1, 1, 0},  {RW_TCXW, 1, 1, 1},  {RW_TCXW, 4, 0, 1},
                          {RW_TCXW2, 1, 0, 0}, {RW_TCXW2, 3, 0, 1}, {RW_TCXW2, 1, 1, 0}, {RW_TCXW2, 2, 0, 0},
                          {0, 0, 0, 0}};
    const int n_cfg = (int)(sizeof cfg / sizeof cfg[0]);
    double worst = 0;
    int worst_cfg = 0;
    for (int si = 0; si < (int)(sizeof shapes / sizeof shapes[0]); si++)
        for (int B = 1; B <= SD_NM_MAX_B_TILED; B++) {
            if (si != 3 && B != 1 && B != 2 && B != 5 && B != 8 && B != 9 && B != 16 && B != 17 && B != 40 &&
                B != 64 && !(B == 130 && si < 5))
                continue;
            if (si == 3 && B > SD_NM_MAX_B && B != 17 && B != 24 && B != 33 && B != 64 && B != 65 &&
                B != 200 && B != SD_NM_MAX_B_TILED)
                continue;
            prob p;
            REQUIRE(prob_init(&p, 0, n, m, shapes[si].rows, shapes[si].cols, B, seed + 100 * si + B) == 0);
            /* above SD_NM_MAX_B, 24 would only fall back to the wide kernel: covered by 128 */
            check_cfgs(&p, cfg, n_cfg, "tcx", 40, RW_TCX, &worst, &worst_cfg);
            prob_free(&p);
        }
    fprintf(stderr, "  tcx %d:%d worst rel L2 %.3g (config %d)\n", n, m, worst, worst_cfg);
    check_corrupt_masks(n, m, 64, 1024, 8, k_tcx_rws, 3, seed + 99);
}

static void test_gpu_tcx_2_4(void)
{
    check_tcx(2, 4, 500);
}
static void test_gpu_tcx_4_8(void)
{
    check_tcx(4, 8, 800);
}
static void test_gpu_tcx_8_16(void)
{
    check_tcx(8, 16, 900);
}
static void test_gpu_tcx_16_32(void)
{
    check_tcx(16, 32, 950);
}

/* Asking for the register-expanding kernels where they do not apply (cols % 64 != 0) falls back to
 * a kernel that does, with the same result. */
static void test_gpu_tcx_fallback(void)
{
    if (!have_gpu())
        SKIP("no CUDA device (cudaGetDeviceCount failed or returned 0)");
    const int fb[][4] = {{16, 32, 70, 1056}, {2, 4, 70, 544}, {4, 8, 70, 544}, {8, 16, 70, 544}};
    for (int i = 0; i < 4; i++) {
        prob p;
        REQUIRE(prob_init(&p, 0, fb[i][0], fb[i][1], fb[i][2], fb[i][3], 8, 600 + i) == 0);
        for (int w = 0; w < 3; w++) {
            sd_nm_spmv_args a = prob_args(&p, 0, 0, k_tcx_rws[w], 1);
            double e = run_check(&p, &a, 50 + i);
            CHECK_MSG(e >= 0 && e < 1e-3, "tcx fallback %d:%d cols %d rw %d: rel L2 %g", fb[i][0], fb[i][1],
                      fb[i][3], k_tcx_rws[w], e);
        }
        prob_free(&p);
    }
}

/* The batch-1 2:4 and 4:8 kernels that compact x beside the values (rows_per_warp 101 / 102 / 103: 1
 * row per warp, 2, 1 with registers capped; the values mirror kernels/nm_spmv_impl.h): odd rows, partial
 * row groups, x in several K-tiles (57344 columns), fewer words than lanes, explicit and uneven split-K,
 * fp32 / bf16 output, accumulate; where they do not apply (8:16, B > 2 or 4:8 B > 1, x not 16-byte aligned)
 * the gather kernel takes the problem with the same result; corrupt masks give wrong numbers, never a fault.
 */
#define RW_C24 100
static void test_gpu_c24(void)
{
    if (!have_gpu())
        SKIP("no CUDA device (cudaGetDeviceCount failed or returned 0)");
    static const shp shapes[] = {{1, 32},     {7, 96},      {33, 544},  {257, 1056}, {1000, 4096},
                                 {61, 14336}, {130, 24608}, {9, 57344}, {3000, 4096}};
    const int cfg[][4] = {{RW_C24 + 1, 1, 0, 0}, {RW_C24 + 2, 1, 0, 1}, {RW_C24 + 3, 1, 0, 0},
                          {RW_C24 + 1, 3, 0, 1}, {RW_C24 + 2, 8, 0, 0}, {RW_C24 + 3, 2, 0, 1},
                          {RW_C24 + 1, 1, 1, 0}, {RW_C24 + 2, 1, 1, 1}, {RW_C24 + 3, 1, 1, 0}};
    const int n_cfg = (int)(sizeof cfg / sizeof cfg[0]);
    double worst = 0;
    int worst_cfg = 0;
    for (int pi = 0; pi < 2; pi++) /* 2:4, then 4:8 (nm_c48.h) */
        for (int si = 0; si < (int)(sizeof shapes / sizeof shapes[0]); si++) {
            prob p;
            REQUIRE(prob_init(&p, 0, 2 + 2 * pi, 4 + 4 * pi, shapes[si].rows, shapes[si].cols, 1,
                              1200 + 20 * pi + si) == 0);
            check_cfgs(&p, cfg, n_cfg, pi ? "c48" : "c24", 80, 0, &worst, &worst_cfg);
            prob_free(&p);
        }
    fprintf(stderr, "  c24 / c48 worst rel L2 %.3g (config %d)\n", worst, worst_cfg);
    /* fallbacks: another pattern, more vectors than they take (4:8: one), then x 4 bytes past a
     * 16-byte boundary */
    const int fb[][3] = {{8, 16, 1}, {2, 4, 5}, {4, 8, 2}};
    for (int i = 0; i < 3; i++) {
        prob p;
        REQUIRE(prob_init(&p, 0, fb[i][0], fb[i][1], 70, 1024, fb[i][2], 1300 + i) == 0);
        for (int k = 0; k < 3; k++) {
            sd_nm_spmv_args a = prob_args(&p, 0, 0, RW_C24 + 1 + k, 1);
            double e = run_check(&p, &a, 90 + i);
            CHECK_MSG(e >= 0 && e < 1e-3, "c24 fallback %d:%d B=%d rw %d: rel L2 %g", fb[i][0], fb[i][1],
                      fb[i][2], RW_C24 + 1 + k, e);
        }
        prob_free(&p);
    }
    prob p;
    REQUIRE(prob_init(&p, 0, 2, 4, 70, 1024, 1, 1310) == 0);
    uint16_t *shifted = NULL;
    REQUIRE(CU(cudaMalloc((void **)&shifted, (size_t)p.ldx * 2 + 16)));
    REQUIRE(CU(cudaMemcpy(shifted + 2, p.xh, (size_t)p.ldx * 2, cudaMemcpyHostToDevice)));
    sd_nm_spmv_args a = prob_args(&p, 0, 0, RW_C24 + 2, 1);
    a.x = shifted + 2;
    double e = run_check(&p, &a, 95);
    CHECK_MSG(e >= 0 && e < 1e-3, "c24 fallback, unaligned x: rel L2 %g", e);
    cudaFree(shifted);
    prob_free(&p);
    const int rws[] = {RW_C24 + 1, RW_C24 + 2, RW_C24 + 3};
    for (int pi = 0; pi < 2; pi++) /* corrupt masks */
        check_corrupt_masks(2 + 2 * pi, 4 + 4 * pi, 70, 1024, 1, rws, 3, 1320 + pi);
}

/* The compacting kernel on batches of 2 (configs 101 and 103; 102 takes one vector only, so it
 * falls back to the gather kernel, as every config does at B = 3): odd rows, several K-tiles (its x
 * tile halves at B = 2), split-K, fp32 / bf16 output, accumulate. */
static void test_gpu_c24_batch(void)
{
    if (!have_gpu())
        SKIP("no CUDA device (cudaGetDeviceCount failed or returned 0)");
    static const shp shapes[] = {{1, 32},     {7, 96},      {257, 1056}, {1000, 4096},
                                 {61, 14336}, {130, 24608}, {9, 57344}};
    const int cfg[][4] = {{RW_C24 + 1, 1, 0, 0}, {RW_C24 + 3, 1, 0, 0}, {RW_C24 + 1, 3, 0, 1},
                          {RW_C24 + 3, 2, 0, 0}, {RW_C24 + 1, 1, 1, 0}, {RW_C24 + 3, 1, 1, 1},
                          {RW_C24 + 2, 1, 0, 0}};
    const int n_cfg = (int)(sizeof cfg / sizeof cfg[0]);
    double worst = 0;
    int worst_cfg = 0;
    for (int B = 2; B <= 3; B++)
        for (int si = 0; si < (int)(sizeof shapes / sizeof shapes[0]); si++) {
            prob p;
            REQUIRE(prob_init(&p, 0, 2, 4, shapes[si].rows, shapes[si].cols, B, 1400 + 10 * B + si) == 0);
            check_cfgs(&p, cfg, n_cfg, "c24 batch", 120, 0, &worst, &worst_cfg);
            prob_free(&p);
        }
    fprintf(stderr, "  c24 batch worst rel L2 %.3g (config %d)\n", worst, worst_cfg);
}

/* Bad arguments are refused before any launch. */
static void test_gpu_bad_args(void)
{
    if (!have_gpu())
        SKIP("no CUDA device (cudaGetDeviceCount failed or returned 0)");
    prob p;
    REQUIRE(prob_init(&p, 0, 2, 4, 64, 256, 2, 77) == 0);
    sd_nm_spmv_args a = prob_args(&p, 1, 0, 2, 4); /* split-K with bf16 output */
    CHECK(sd_nm_spmv_launch(&a, 0) == SD_EINVAL);
    a = prob_args(&p, 0, 0, 3, 1); /* rows per warp 3 */
    CHECK(sd_nm_spmv_launch(&a, 0) == SD_EINVAL);
    a = prob_args(&p, 0, 0, RW_C24 + 4, 1); /* no compacting kernel of config 4 */
    CHECK(sd_nm_spmv_launch(&a, 0) == SD_EINVAL);
    a = prob_args(&p, 1, 0, 16, 2); /* split-K with bf16 output, tensor-core kernel */
    CHECK(sd_nm_spmv_launch(&a, 0) == SD_EINVAL);
    a = prob_args(&p, 0, 0, 0, 0);
    a.B = SD_NM_MAX_B_TILED + 1;
    CHECK(sd_nm_spmv_launch(&a, 0) == SD_EINVAL);
    a = prob_args(&p, 0, 0, 0, 0); /* tiles: the N:M patterns only */
    a.B = SD_NM_MAX_B_WIDE + 1, a.n = 0, a.m = 0;
    CHECK(sd_nm_spmv_launch(&a, 0) == SD_EINVAL);
    a = prob_args(&p, 0, 0, 0, 0);           /* more than SD_NM_MAX_B vectors: the N:M patterns only */
    a.B = SD_NM_MAX_B + 1, a.n = 0, a.m = 0; /* (the 2:4 mask read as an unstructured one) */
    CHECK(sd_nm_spmv_launch(&a, 0) == SD_EINVAL);
    a = prob_args(&p, 1, 0, 0, 0);
    a.B = SD_NM_MAX_B + 1;
    CHECK(sd_gemv_bf16_launch(&a, 0) == SD_EINVAL);
    a = prob_args(&p, 0, 0, 0, 0);
    a.cols = 240;
    CHECK(sd_nm_spmv_launch(&a, 0) == SD_EINVAL);
    a = prob_args(&p, 0, 0, 0, 0);
    a.n = 1;
    CHECK(sd_nm_spmv_launch(&a, 0) == SD_EINVAL);
    CHECK(cudaGetLastError() == cudaSuccess);
    prob_free(&p);
}

/* The autotuner picks a config per shape; launches through the ctx cache stay correct (here
 * without the register-expanding kernels: test_gpu_autotune_tcx has them). */
static void test_gpu_autotune(void)
{
    if (!have_gpu())
        SKIP("no CUDA device (cudaGetDeviceCount failed or returned 0)");
    sd_kernels_ctx *ctx = NULL;
    sd_diag d = {0};
    REQUIRE(sd_kernels_ctx_init(&ctx, &d) == 0);
    CHECK(sd_kernels_ctx_tcx(ctx, 4) == 1 && sd_kernels_ctx_tcx(ctx, 32) == 1); /* on by default */
    sd_kernels_ctx_set_tcx(ctx, SD_NM_TCX_NO_1632);
    CHECK(sd_kernels_ctx_tcx(ctx, 16) == 1 && sd_kernels_ctx_tcx(ctx, 32) == 0);
    sd_kernels_ctx_set_tcx(ctx, SD_NM_TCX_NONE);
    CHECK(sd_kernels_ctx_tcx(ctx, 4) == 0);
    for (int dense = 0; dense < 2; dense++) {
        prob p;
        REQUIRE(prob_init(&p, dense, 4, 8, 300, 2048, 4, 99 + dense) == 0);
        sd_nm_spmv_args a = prob_args(&p, 0, 0, 0, 0);
        a.ctx = ctx;
        CHECK_MSG(sd_nm_autotune(ctx, &a, 1, dense, 0, &d) == 0, "autotune: %s", d.msg);
        int rw = 0, split = 0;
        sd_nm_config(&a, dense, &rw, &split);
        CHECK(((rw >= 1 && rw <= 4) || rw == 16 ||
               (!dense && (rw == RW_ROWS || rw == RW_ROWS3 || rw == RW_SK || rw == RW_SK3))) &&
              split >= 1);
        double e = run_check(&p, &a, 5);
        CHECK_MSG(e >= 0 && e < 1e-3, "after autotune (rw=%d split=%d): rel L2 %g", rw, split, e);
        prob_free(&p);
    }
    sd_kernels_ctx_free(ctx);
}

/* The autotuner keeps its runner-up beside the best config (what the decode step's refine pass
 * tries): swapping puts another config in place, which launches correctly, and a second swap
 * restores the first; an entry imported from a tuning cache has none to swap. */
static void test_gpu_autotune_runner_up(void)
{
    if (!have_gpu())
        SKIP("no CUDA device (cudaGetDeviceCount failed or returned 0)");
    sd_kernels_ctx *ctx = NULL;
    sd_diag d = {0};
    REQUIRE(sd_kernels_ctx_init(&ctx, &d) == 0);
    prob p;
    REQUIRE(prob_init(&p, 0, 4, 8, 1000, 4096, 1, 990) == 0);
    sd_nm_spmv_args a = prob_args(&p, 0, 0, 0, 0);
    a.ctx = ctx;
    CHECK_MSG(sd_nm_autotune(ctx, &a, 1, 0, 0, &d) == 0, "autotune: %s", d.msg);
    sd_nm_tuned e[2];
    REQUIRE(sd_kernels_ctx_export(ctx, e, 2) == 1);
    CHECK(sd_kernels_ctx_has_runner_up(ctx, 0));
    CHECK(!sd_kernels_ctx_has_runner_up(ctx, 1) && sd_kernels_ctx_swap_runner_up(ctx, 1) == SD_ENOTFOUND);
    const int rw0 = e[0].rows_per_warp, split0 = e[0].split;
    REQUIRE(sd_kernels_ctx_swap_runner_up(ctx, 0) == 0);
    REQUIRE(sd_kernels_ctx_export(ctx, e, 2) == 1);
    CHECK_MSG(e[0].rows_per_warp != rw0 || e[0].split != split0, "runner-up equals the best (rw %d split %d)",
              rw0, split0);
    int rw = 0, split = 0;
    sd_nm_config(&a, 0, &rw, &split);
    CHECK(rw == e[0].rows_per_warp && split == e[0].split);
    double err = run_check(&p, &a, 77);
    CHECK_MSG(err >= 0 && err < 1e-3, "runner-up rw %d split %d: rel L2 %g", rw, split, err);
    REQUIRE(sd_kernels_ctx_swap_runner_up(ctx, 0) == 0);
    sd_nm_config(&a, 0, &rw, &split);
    CHECK(rw == rw0 && split == split0);
    sd_nm_tuned imp = e[0];
    imp.rows = 2000; /* another problem, as a tuning cache would bring it */
    REQUIRE(sd_kernels_ctx_import(ctx, &imp) == 0);
    CHECK(!sd_kernels_ctx_has_runner_up(ctx, 1) && sd_kernels_ctx_swap_runner_up(ctx, 1) == SD_ENOTFOUND);
    prob_free(&p);
    sd_kernels_ctx_free(ctx);
}

/* A deterministic context never splits K, tuned or not: on a shape of few rows and long rows, where
 * the default heuristic splits (checked first, so the test can fail), and after autotuning. */
static void test_gpu_deterministic_no_split(void)
{
    if (!have_gpu())
        SKIP("no CUDA device (cudaGetDeviceCount failed or returned 0)");
    sd_kernels_ctx *ctx = NULL;
    sd_diag d = {0};
    REQUIRE(sd_kernels_ctx_init(&ctx, &d) == 0);
    for (int dense = 0; dense < 2; dense++) {
        prob p;
        REQUIRE(prob_init(&p, dense, 2, 4, 64, 14336, 1, 900 + dense) == 0);
        sd_nm_spmv_args a = prob_args(&p, 0, 0, 0, 0);
        a.ctx = ctx;
        int rw = 0, split = 0;
        sd_kernels_ctx_set_deterministic(ctx, 0);
        sd_nm_config(&a, dense, &rw, &split);
        CHECK_MSG(split > 1, "dense %d: the heuristic should split this shape (split %d)", dense, split);
        sd_kernels_ctx_set_deterministic(ctx, 1);
        sd_nm_config(&a, dense, &rw, &split);
        CHECK_MSG(split == 1, "dense %d deterministic heuristic: split %d", dense, split);
        CHECK_MSG(sd_nm_autotune(ctx, &a, 1, dense, 0, &d) == 0, "autotune: %s", d.msg);
        sd_nm_config(&a, dense, &rw, &split);
        CHECK_MSG(split == 1, "dense %d deterministic autotune: rw %d split %d", dense, rw, split);
        double e = run_check(&p, &a, 70 + dense);
        CHECK_MSG(e >= 0 && e < 1e-3, "dense %d deterministic: rel L2 %g", dense, e);
        prob_free(&p);
    }
    sd_kernels_ctx_free(ctx);
}

/* With the register-expanding kernels among the candidates (the default), the tuned 2:4 launches
 * stay correct whichever kernel wins; above SD_NM_MAX_B the wide kernel and the GEMM-shaped sparse
 * tensor-core ones (29, 30) are the candidates and one of them must have been timed (the cache
 * holds it), and a dense problem of that many vectors, which no kernel takes, is an error, not an
 * untuned cache entry. */
static void test_gpu_autotune_tcx(void)
{
    if (!have_gpu())
        SKIP("no CUDA device (cudaGetDeviceCount failed or returned 0)");
    sd_kernels_ctx *ctx = NULL;
    sd_diag d = {0};
    REQUIRE(sd_kernels_ctx_init(&ctx, &d) == 0);
    const int Bs[] = {1, 8, 16, 40};
    for (int i = 0; i < 4; i++) {
        prob p;
        REQUIRE(prob_init(&p, 0, 2, 4, 1024, 4096, Bs[i], 700 + i) == 0);
        sd_nm_spmv_args a = prob_args(&p, 0, 0, 0, 0);
        a.ctx = ctx;
        CHECK_MSG(sd_nm_autotune(ctx, &a, 1, 0, 0, &d) == 0, "autotune: %s", d.msg);
        int rw = 0, split = 0;
        sd_nm_config(&a, 0, &rw, &split);
        double e = run_check(&p, &a, 60 + i);
        CHECK_MSG(e >= 0 && e < 1e-3, "B=%d after autotune (rw=%d split=%d): rel L2 %g", Bs[i], rw, split, e);
        fprintf(stderr, "  2:4 1024x4096 B=%d: autotune picked rw=%d split=%d\n", Bs[i], rw, split);
        if (Bs[i] > SD_NM_MAX_B) { /* the cached config itself, not the heuristic's fill-in */
            int crw = 0, csplit = 0;
            CHECK_MSG(sd__nm_cache_lookup(ctx, &a, 0, &crw, &csplit) == 0 &&
                          (sd__nm_rw_tcxw(crw) || sd__nm_rw_spg(crw)) && csplit >= 1,
                      "B=%d: cache holds rw=%d split=%d", Bs[i], crw, csplit);
        }
        prob_free(&p);
    }
    prob p;
    REQUIRE(prob_init(&p, 1, 0, 0, 256, 1024, 8, 710) == 0);
    sd_nm_spmv_args a = prob_args(&p, 0, 0, 0, 0);
    a.B = SD_NM_MAX_B + 1; /* more vectors than the dense GEMV takes (the buffers are not touched) */
    CHECK(sd_nm_autotune(ctx, &a, 1, 1, 0, &d) == SD_EINVAL);
    prob_free(&p);
    sd_kernels_ctx_free(ctx);
}
#else
static void test_gpu_unavailable(void)
{
    SKIP("built without CUDA (SD_HAVE_CUDA unset)");
}
#endif

int main(void)
{
#ifdef SD_HAVE_CUDA
    RUN(test_gpu_2_4);
    RUN(test_gpu_4_8);
    RUN(test_gpu_8_16);
    RUN(test_gpu_16_32);
    RUN(test_gpu_unstructured);
    RUN(test_gpu_dense_gemv);
    RUN(test_gpu_rows_2_4);
    RUN(test_gpu_rows_16_32);
    RUN(test_gpu_rows_4_8_8_16);
    RUN(test_gpu_rows_fallback);
    RUN(test_gpu_rows_corrupt_mask);
    RUN(test_gpu_gather_corrupt_mask);
    RUN(test_gpu_tcx_2_4);
    RUN(test_gpu_tcx_4_8);
    RUN(test_gpu_tcx_8_16);
    RUN(test_gpu_tcx_16_32);
    RUN(test_gpu_tcx_fallback);
    RUN(test_gpu_c24);
    RUN(test_gpu_c24_batch);
    RUN(test_gpu_autotune_runner_up);
    RUN(test_gpu_bad_args);
    RUN(test_gpu_autotune);
    RUN(test_gpu_autotune_tcx);
    RUN(test_gpu_deterministic_no_split);
#else
    RUN(test_gpu_unavailable);
#endif
    return sd_test_done();
}
