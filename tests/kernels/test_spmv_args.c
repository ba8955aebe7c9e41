/* test_spmv_args: the SpMV launchers refuse what no kernel takes before they touch the device, so
 * these run where there is no GPU (CI): more vectors than SD_NM_MAX_B_TILED, tiles (above
 * SD_NM_MAX_B_WIDE) for unstructured masks or the dense GEMV, the SwiGLU epilogue or split-K with
 * bf16 output there, and the single-launch kernels asked for more than one tile holds. The pointers
 * are aligned placeholders that are never dereferenced: a refusal that failed would try a launch,
 * which returns SD_ECUDA without a device. With a GPU the test skips: test_spmv_gpu checks the
 * same refusals on real buffers (a launch there would read the placeholders). */
#include "tests/harness.h"

#ifdef SD_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "kernels/nm_spmv.h"
#include "kernels/nm_spmv_impl.h" /* sd__nm_spg_launch, sd__nm_tcx_launch */

static int have_gpu(void)
{
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

/* A 2:4 problem of 256 x 1024 and B vectors on placeholder pointers. */
static sd_nm_spmv_args args(int B)
{
    sd_nm_spmv_args a = {0};
    a.n = 2, a.m = 4, a.rows = 256, a.cols = 1024, a.B = B;
    a.values = (const uint16_t *)(uintptr_t)0x100000;
    a.mask = (const uint32_t *)(uintptr_t)0x200000;
    a.x = (const uint16_t *)(uintptr_t)0x300000;
    a.ldx = 1024;
    a.y = (void *)(uintptr_t)0x400000;
    a.ldy = 256;
    return a;
}

static void test_refusals_before_the_device(void)
{
    if (have_gpu())
        SKIP("a GPU is present: test_spmv_gpu checks these refusals on real buffers");
    sd_nm_spmv_args a = args(SD_NM_MAX_B_TILED + 1);
    CHECK(sd_nm_spmv_launch(&a, 0) == SD_EINVAL);
    a = args(0);
    CHECK(sd_nm_spmv_launch(&a, 0) == SD_EINVAL);
    a = args(SD_NM_MAX_B_WIDE + 1); /* tiles: N:M patterns only */
    a.n = 0, a.m = 0;
    CHECK(sd_nm_spmv_launch(&a, 0) == SD_EINVAL);
    a = args(SD_NM_MAX_B_WIDE + 1); /* nor the dense GEMV (SD_NM_MAX_B at most) */
    CHECK(sd_gemv_bf16_launch(&a, 0) == SD_EINVAL);
    a = args(SD_NM_MAX_B_TILED); /* the SwiGLU epilogue keeps to SD_NM_MAX_B */
    a.swiglu = 1, a.y_bf16 = 1, a.ldy = 128;
    CHECK(sd_nm_spmv_launch(&a, 0) == SD_ENOTSUP);
    a = args(130); /* split-K adds atomically: fp32 output only, tiles or not */
    a.y_bf16 = 1, a.rows_per_warp = SD_NM_RW_SPG, a.split = 2;
    CHECK(sd_nm_spmv_launch(&a, 0) == SD_EINVAL);
    a = args(SD_NM_MAX_B_WIDE + 1); /* a single launch holds one tile at most */
    CHECK(sd__nm_spg_launch(&a, 1, 1, 0) == SD_EINVAL);
    CHECK(sd__nm_tcx_launch(&a, 1, 1, 0) == SD_EINVAL);
    a = args(17);
    CHECK(sd__nm_tcx_launch(&a, 0, 1, 0) == SD_EINVAL); /* the 16-row kernel: SD_NM_MAX_B */
}

int main(void)
{
    RUN(test_refusals_before_the_device);
    return sd_test_done();
}
#else
int main(void)
{
    sd__t_skip++;
    fprintf(stderr, "  SKIP test_spmv_args: built without CUDA\n");
    return sd_test_done();
}
#endif
