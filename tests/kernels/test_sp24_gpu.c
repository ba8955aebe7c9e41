/* GPU tests for kernels/nm_spmv_sp.cu, the 2:4 kernels on the sparse tensor cores (mma.sp), against
 * the CPU twin as test_spmv_gpu.c checks the others. Skips without a GPU; the CPU test
 * test_nm_sp24.c emulates their warps without one. */
#include "tests/harness.h"

#ifdef SD_HAVE_CUDA
#include "kernels/nm_spmv_impl.h" /* sd__nm_sp24_launch_meta: either metadata layout */
#include "tests/kernels/spmv_gpu_prob.h"

/* The 2:4 kernels on the sparse tensor cores (rows_per_warp 25: 16 rows a block, 27: 32;
 * kernels/nm_spmv_sp.cu): odd rows, partial blocks, long rows, every B up to 16 on one shape,
 * explicit and uneven split-K, fp32 / bf16 output, accumulate, the SwiGLU epilogue's refusal of
 * split-K; where they do not apply (4:8, cols % 64 != 0, B > 16) the fallback gives the same result.
 * The metadata operand's layout is checked against the hardware: both candidate layouts run, the one
 * the kernels launch must be right and the other wrong (so the test would notice a layout that only
 * works by accident). */
#define RW_SP24 25
#define RW_SP24_32 27
static void test_gpu_sp24(void)
{
    if (!have_gpu())
        SKIP("no CUDA device (cudaGetDeviceCount failed or returned 0)");
    static const shp shapes[] = {{1, 64}, {17, 128}, {37, 320}, {257, 1088}, {1000, 4096}, {61, 14336}};
    const int cfg[][4] = {{RW_SP24, 1, 0, 0},    {RW_SP24, 2, 0, 1},    {RW_SP24, 3, 0, 0},
                          {RW_SP24, 1, 1, 0},    {RW_SP24, 1, 1, 1},    {RW_SP24, 5, 0, 1},
                          {RW_SP24_32, 1, 0, 0}, {RW_SP24_32, 3, 0, 1}, {RW_SP24_32, 1, 1, 0},
                          {RW_SP24_32, 1, 1, 1}};
    const int n_cfg = (int)(sizeof cfg / sizeof cfg[0]);
    double worst = 0;
    int worst_cfg = 0;
    for (int si = 0; si < (int)(sizeof shapes / sizeof shapes[0]); si++)
        for (int B = 1; B <= SD_NM_MAX_B_WIDE; B++) {
            if ((si != 3 || B > SD_NM_MAX_B) && B != 1 && B != 2 && B != 5 && B != 8 && B != 9 && B != 16 &&
                B != 17)
                continue;
            prob p;
            REQUIRE(prob_init(&p, 0, 2, 4, shapes[si].rows, shapes[si].cols, B, 1300 + 100 * si + B) == 0);
            check_cfgs(&p, cfg, n_cfg, "sp24", 45, 0, &worst, &worst_cfg); /* B = 17: the fallback */
            prob_free(&p);
        }
    fprintf(stderr, "  sp24 worst rel L2 %.3g (config %d)\n", worst, worst_cfg);
    prob p;
    REQUIRE(prob_init(&p, 0, 2, 4, 257, 1088, 8, 1290) == 0);
    double e_meta[2];
    for (int meta = 0; meta < 2; meta++) {
        sd_nm_spmv_args a = prob_args(&p, 0, 0, RW_SP24, 1);
        REQUIRE(sd__nm_sp24_launch_meta(&a, 1, meta, 1, 0) == 0 && CU(cudaDeviceSynchronize()));
        a.rows_per_warp = 1; /* run_check launches again: the gather kernel, so read y first */
        float *y = malloc((size_t)(p.B * p.ldy) * 4);
        REQUIRE(y && CU(cudaMemcpy(y, p.d_y, (size_t)(p.B * p.ldy) * 4, cudaMemcpyDeviceToHost)));
        double num = 0, den = 0;
        for (int b = 0; b < p.B; b++)
            for (int64_t r = 0; r < p.rows; r++) {
                double want = p.ref[b * p.rows + r], got = y[b * p.ldy + r];
                num += (got - want) * (got - want), den += want * want;
            }
        e_meta[meta] = num != num ? 1e30 : sqrt(num / den);
        free(y);
    }
    fprintf(stderr, "  sp24 metadata layout 0: rel L2 %.3g, layout 1: %.3g\n", e_meta[0], e_meta[1]);
    CHECK_MSG(e_meta[1] < 1e-3 && e_meta[0] > 1e-2, "metadata layouts: 0 %g, 1 %g", e_meta[0], e_meta[1]);
    prob_free(&p);
    REQUIRE(prob_init(&p, 0, 2, 4, 256, 1024, 4, 1291) == 0); /* even rows: the SwiGLU's terms hold */
    sd_nm_spmv_args a = prob_args(&p, 1, 0, RW_SP24, 2);
    a.swiglu = 1;
    CHECK(sd_nm_spmv_launch(&a, 0) == SD_ENOTSUP);
    prob_free(&p);
    const int fb[][4] = {{4, 8, 70, 512}, {2, 4, 70, 544}};
    for (int i = 0; i < 2; i++) {
        REQUIRE(prob_init(&p, 0, fb[i][0], fb[i][1], fb[i][2], fb[i][3], 8, 1280 + i) == 0);
        sd_nm_spmv_args f = prob_args(&p, 0, 0, RW_SP24, 1);
        double e = run_check(&p, &f, 60 + i);
        CHECK_MSG(e >= 0 && e < 1e-3, "sp24 fallback %d:%d cols %d: rel L2 %g", fb[i][0], fb[i][1], fb[i][3],
                  e);
        prob_free(&p);
    }
}

/* The GEMM-shaped 2:4 kernels (rows_per_warp 29: 128 rows a block, 30: 256; kernels/nm_spmv_spg.cu)
 * for 1-64 vectors: partial blocks and n-tiles (B = 9, 17, 33, 57), the n-tile counts without an
 * instance of their own (5, 7: B = 40, 57), uneven split-K, fp32 / bf16 output, accumulate; and
 * 65-256 vectors in tiles of at most 64 (65: 40 + 25; 130: 48 + 48 + 34; 200; 256: 4 x 64). Every
 * problem here is one they take (cols % 128 == 0), so the kernels themselves run; the SwiGLU
 * epilogue is refused, and 4:8 or cols % 128 != 0 fall back to a kernel that gives the same
 * result. */
#define RW_SPG 29
#define RW_SPG2 30
static void test_gpu_spg(void)
{
    if (!have_gpu())
        SKIP("no CUDA device (cudaGetDeviceCount failed or returned 0)");
    static const shp shapes[] = {{1, 128}, {130, 384}, {257, 1152}, {1000, 4096}, {61, 14336}};
    static const int Bs[] = {1, 2, 8, 9, 16, 17, 24, 33, 40, 57, 64, 65, 130, 200, SD_NM_MAX_B_TILED};
    const int cfg[][4] = {{RW_SPG, 1, 0, 0},  {RW_SPG, 2, 0, 1},  {RW_SPG, 3, 0, 0},  {RW_SPG, 1, 1, 0},
                          {RW_SPG, 1, 1, 1},  {RW_SPG2, 1, 0, 0}, {RW_SPG2, 4, 0, 1}, {RW_SPG2, 1, 1, 1},
                          {RW_SPG2, 5, 0, 0}, {RW_SPG2, 1, 0, 1}};
    const int n_cfg = (int)(sizeof cfg / sizeof cfg[0]);
    double worst = 0;
    int worst_cfg = 0;
    for (int si = 0; si < (int)(sizeof shapes / sizeof shapes[0]); si++)
        for (int bi = 0; bi < (int)(sizeof Bs / sizeof Bs[0]); bi++) {
            const int B = Bs[bi];
            if (si >= 3 && B != 9 && B != 33 && B != 64 &&
                B != 130) /* the large shapes: fewer B (CPU reference) */
                continue;
            prob p;
            REQUIRE(prob_init(&p, 0, 2, 4, shapes[si].rows, shapes[si].cols, B, 1500 + 100 * si + B) == 0);
            sd_nm_spmv_args a = prob_args(&p, 0, 0, RW_SPG, 1);
            CHECK_MSG(sd__nm_spg_supported(&a), "%lldx%lld B=%d not taken by the kernel", (long long)p.rows,
                      (long long)p.cols, B);
            check_cfgs(&p, cfg, n_cfg, "spg", 47, 0, &worst, &worst_cfg);
            prob_free(&p);
        }
    fprintf(stderr, "  spg worst rel L2 %.3g (config %d)\n", worst, worst_cfg);
    prob p;
    REQUIRE(prob_init(&p, 0, 2, 4, 256, 1024, 12, 1591) == 0); /* even rows: the SwiGLU's terms hold */
    sd_nm_spmv_args a = prob_args(&p, 1, 0, RW_SPG, 1);
    a.swiglu = 1;
    CHECK(sd_nm_spmv_launch(&a, 0) == SD_ENOTSUP);
    prob_free(&p);
    const int fb[][5] = {{4, 8, 70, 512, 24}, {2, 4, 70, 320, 24}, {2, 4, 33, 192, 5}};
    for (int i = 0; i < 3; i++) {
        REQUIRE(prob_init(&p, 0, fb[i][0], fb[i][1], fb[i][2], fb[i][3], fb[i][4], 1580 + i) == 0);
        sd_nm_spmv_args f = prob_args(&p, 0, 0, RW_SPG2, 1);
        CHECK(!sd__nm_spg_supported(&f));
        double e = run_check(&p, &f, 70 + i);
        CHECK_MSG(e >= 0 && e < 1e-3, "spg fallback %d:%d cols %d: rel L2 %g", fb[i][0], fb[i][1], fb[i][3],
                  e);
        prob_free(&p);
    }
}

/* A corrupt 2:4 mask (all bits set, none set) gives the sparse tensor-core kernels wrong numbers, never a
 * fault (also at 40 vectors, for the GEMM-shaped ones). Run last: a fault would end the CUDA context for
 * every test after it. */
static void test_gpu_sp24_corrupt_mask(void)
{
    if (!have_gpu())
        SKIP("no CUDA device (cudaGetDeviceCount failed or returned 0)");
    const int rws[] = {RW_SP24, RW_SP24_32, RW_SPG, RW_SPG2};
    check_corrupt_masks(2, 4, 64, 1024, 8, rws, 4, 1399);
    check_corrupt_masks(2, 4, 300, 1024, 40, rws + 2, 2, 1398);
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
    RUN(test_gpu_sp24);
    RUN(test_gpu_spg);
    RUN(test_gpu_sp24_corrupt_mask); /* last: a fault would end the CUDA context */
#else
    RUN(test_gpu_unavailable);
#endif
    return sd_test_done();
}
