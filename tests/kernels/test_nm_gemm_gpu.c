/* GPU tests for kernels/nm_gemm.cu, the N:M bitmask GEMM (tiles expanded in shared memory, dense
 * mma): every pattern, rows and vector counts that end inside a block, long rows, both vector
 * tiles, with and without accumulation, against the CPU twin's fp64 reference (rel L2 < 1e-3,
 * outputs poisoned, padding untouched: spmv_gpu_prob.h); what it does not take is refused. Skips
 * without a GPU. */
#include "tests/harness.h"

#ifdef SD_HAVE_CUDA
#pragma GCC diagnostic ignored "-Wunused-function" /* the shared problem's other checks */
#include "kernels/nm_gemm.h"
#include "tests/kernels/spmv_gpu_prob.h"

static int vec_tile; /* the tile the launches below take (64 or 128) */

static int launch_tile(const sd_nm_spmv_args *a, cudaStream_t s)
{
    return sd_nm_gemm_launch(a, vec_tile, s);
}

static void test_gemm_matches_cpu(void)
{
    if (!have_gpu())
        SKIP("no CUDA device (cudaGetDeviceCount failed or returned 0)");
    static const struct {
        int64_t rows, cols;
        int B;
    } cases[] = {{129, 64, 65},     {37, 320, 130},   {257, 1088, 257},
                 {1000, 4096, 128}, {130, 14336, 70}, {1, 256, 1}}; /* the last: as many stages as slots */
    const int pats[4][2] = {{2, 4}, {4, 8}, {8, 16}, {16, 32}};
    double worst = 0;
    for (int pi = 0; pi < 4; pi++)
        for (int ci = 0; ci < (int)(sizeof cases / sizeof *cases); ci++) {
            prob p;
            REQUIRE(prob_init(&p, 0, pats[pi][0], pats[pi][1], cases[ci].rows, cases[ci].cols, cases[ci].B,
                              7000 + 10 * pi + ci) == 0);
            for (int tile = 64; tile <= 128; tile += 64)
                for (int acc = 0; acc < 2; acc++) {
                    vec_tile = tile;
                    sd_nm_spmv_args a = prob_args(&p, 0, acc, 0, 0);
                    const double e = run_check_fn(&p, &a, 90 + acc, launch_tile);
                    CHECK_MSG(e >= 0 && e < 1e-3, "%d:%d %lldx%lld B=%d tile %d acc %d: rel L2 %g (%s)", p.n,
                              p.m, (long long)p.rows, (long long)p.cols, p.B, tile, acc, e,
                              cudaGetErrorString(rc_cu));
                    if (e > worst)
                        worst = e;
                }
            prob_free(&p);
        }
    fprintf(stderr, "  nm_gemm worst rel L2 %.3g\n", worst);
}

/* bf16 output, the SwiGLU epilogue, cols % 64 != 0, an unstructured mask, a bad tile, x rows
 * shorter than cols, x or the masks off the alignment their cp.async copies need: SD_EINVAL
 * before any launch. */
static void test_gemm_refuses(void)
{
    if (!have_gpu())
        SKIP("no CUDA device (cudaGetDeviceCount failed or returned 0)");
    prob p;
    REQUIRE(prob_init(&p, 0, 2, 4, 64, 96, 70, 7100) == 0);
    sd_nm_spmv_args a = prob_args(&p, 0, 0, 0, 0);
    CHECK(!sd_nm_gemm_supported(&a) && sd_nm_gemm_launch(&a, 0, 0) == SD_EINVAL); /* 96 columns */
    prob_free(&p);
    REQUIRE(prob_init(&p, 0, 2, 4, 64, 128, 70, 7101) == 0);
    a = prob_args(&p, 0, 0, 0, 0);
    CHECK(sd_nm_gemm_supported(&a));
    CHECK(sd_nm_gemm_launch(&a, 32, 0) == SD_EINVAL);
    a.y_bf16 = 1;
    CHECK(sd_nm_gemm_launch(&a, 0, 0) == SD_EINVAL);
    a.y_bf16 = 0, a.swiglu = 1;
    CHECK(sd_nm_gemm_launch(&a, 0, 0) == SD_EINVAL);
    a.swiglu = 0, a.n = 0, a.m = 0;
    CHECK(sd_nm_gemm_launch(&a, 0, 0) == SD_EINVAL);
    a = prob_args(&p, 0, 0, 0, 0);
    a.ldx = a.cols - 8;
    CHECK(sd_nm_gemm_launch(&a, 0, 0) == SD_EINVAL);
    a = prob_args(&p, 0, 0, 0, 0);
    a.x += 4; /* 8 bytes: x rows would not be 16-byte aligned */
    CHECK(sd_nm_gemm_launch(&a, 0, 0) == SD_EINVAL);
    a = prob_args(&p, 0, 0, 0, 0);
    a.mask += 1; /* 4 bytes: the 8-byte mask copies would not be aligned */
    CHECK(sd_nm_gemm_launch(&a, 0, 0) == SD_EINVAL);
    prob_free(&p);
}
#endif

int main(void)
{
#ifdef SD_HAVE_CUDA
    RUN(test_gemm_matches_cpu);
    RUN(test_gemm_refuses);
#else
    fprintf(stderr, "  SKIP nm_gemm GPU tests: built without CUDA\n");
    sd__t_skip++;
#endif
    return sd_test_done();
}
