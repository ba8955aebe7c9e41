/* Tests of the RMSNorm computed while staging x (sd_nm_spmv_args.norm_x): the word-per-lane gather
 * SpMV and dense GEMV at one vector read the fp32 residual row and the norm's weight instead of x.
 *
 * On a GPU: a dense identity GEMV with the norm returns the normed row itself (every output one
 * product by 1.0 plus zeros, so exact): its values are bf16 and within bf16 rounding of the fp64
 * RMSNorm, over row lengths that take one to four rounds of the norm kernel's order (256 .. 8192).
 * Then, for dense and every N:M pattern, 1, 2 and 4 rows per warp: the fused launch against the
 * plain launch on that normed row, bit for bit without split-K (same sums in the same order),
 * within 1e-5 with it (atomics add in arrival order); with the SwiGLU epilogue too, bit for bit.
 * Without a GPU (those skip): the refusals (more than one vector, the other kernels, rows over 8192
 * or misaligned, unstructured masks) and what sd_nm_norm_ok says, which need no device. */
#include "tests/harness.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef SD_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "kernels/nm_format.h"
#include "kernels/nm_spmv.h"
#include "kernels/nm_spmv_impl.h"
#include "tests/kernels/nm_test_util.h"

#define CU(call) ((call) == cudaSuccess)

/* Arguments of a problem that never reaches a device: pointers only checked for alignment. */
static sd_nm_spmv_args fake_args(int dense, int n, int m, int64_t rows, int64_t cols, int B, int rw,
                                 int split)
{
    static float nx[16] __attribute__((aligned(16))), nw[16] __attribute__((aligned(16)));
    static uint16_t buf[16] __attribute__((aligned(16)));
    static uint32_t mask[4];
    sd_nm_spmv_args a = {0};
    a.n = dense ? 0 : n, a.m = dense ? 0 : m, a.rows = rows, a.cols = cols, a.B = B;
    a.values = buf, a.mask = mask, a.x = buf, a.ldx = cols, a.y = nx, a.ldy = rows;
    a.rows_per_warp = rw, a.split = split;
    a.norm_x = nx, a.norm_w = nw, a.norm_eps = 1e-5f;
    return a;
}

static int launch(const sd_nm_spmv_args *a, int dense)
{
    return dense ? sd_gemv_bf16_launch(a, 0) : sd_nm_spmv_launch(a, 0);
}

static void test_refusals(void)
{
    /* refused before anything touches the device */
    for (int dense = 0; dense <= 1; dense++) {
        sd_nm_spmv_args a = fake_args(dense, 2, 4, 64, 256, 2, 1, 1);
        CHECK_MSG(launch(&a, dense) == SD_ENOTSUP, "dense %d: two vectors with the norm", dense);
        a = fake_args(dense, 2, 4, 64, 256, 1, SD_NM_RW_TC, 1);
        CHECK_MSG(launch(&a, dense) == SD_ENOTSUP, "dense %d: the tensor-core kernel with the norm", dense);
        a = fake_args(dense, 2, 4, 64, 8192 + 32, 1, 1, 1);
        CHECK_MSG(launch(&a, dense) == SD_ENOTSUP, "dense %d: a row of 8224 with the norm", dense);
        a = fake_args(dense, 2, 4, 64, 256, 1, 1, 1);
        a.norm_x = (const float *)((const char *)a.norm_x + 4);
        CHECK_MSG(launch(&a, dense) == SD_ENOTSUP, "dense %d: a misaligned residual row", dense);
        a = fake_args(dense, 2, 4, 64, 256, 1, 1, 1);
        a.norm_w = NULL;
        CHECK_MSG(launch(&a, dense) == SD_ENOTSUP, "dense %d: no norm weight", dense);
        a = fake_args(dense, 2, 4, 64, 256, 1, 2, 1);
        CHECK_MSG(sd_nm_norm_ok(&a, dense), "dense %d: rw 2 takes the norm", dense);
        a.rows_per_warp = SD_NM_RW_TC;
        CHECK_MSG(!sd_nm_norm_ok(&a, dense), "dense %d: rw 16 takes the norm", dense);
        a.rows_per_warp = 4, a.B = 2;
        CHECK_MSG(!sd_nm_norm_ok(&a, dense), "dense %d: two vectors take the norm", dense);
    }
    sd_nm_spmv_args a = fake_args(0, 2, 4, 64, 256, 1, SD_NM_RW_C24 + 1, 1);
    CHECK_MSG(launch(&a, 0) == SD_ENOTSUP, "the compacting kernel with the norm");
    CHECK(!sd_nm_norm_ok(&a, 0));
    a = fake_args(0, 0, 0, 64, 256, 1, 1, 1);
    CHECK_MSG(launch(&a, 0) == SD_ENOTSUP, "unstructured with the norm");
    CHECK(!sd_nm_norm_ok(&a, 0));
    /* the default heuristic for a single 2:4 vector is the compacting kernel; 8:16's is the gather */
    a = fake_args(0, 2, 4, 64, 256, 1, 0, 0);
    CHECK(!sd_nm_norm_ok(&a, 0));
    a = fake_args(0, 8, 16, 64, 256, 1, 0, 0);
    CHECK(sd_nm_norm_ok(&a, 0));
    /* split-K with a bf16 output is refused by the launch, so the norm is not offered there */
    a = fake_args(1, 0, 0, 64, 256, 1, 2, 2);
    a.y_bf16 = 1;
    CHECK(!sd_nm_norm_ok(&a, 1));
}

static int have_gpu(void)
{
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

/* A residual row of `cols` (some large values, as a real residual stream has) and its weight. */
static void fill_row(float *x, float *w, int64_t cols, uint64_t *s)
{
    for (int64_t i = 0; i < cols; i++) {
        x[i] = (nmt_uniform(s) - 0.5f) * (i % 97 == 0 ? 40.f : 3.f);
        w[i] = 0.5f + nmt_uniform(s);
    }
}

/* The normed row as the GPU computes it, through a dense identity GEMV with the norm: y = x_n. */
static int normed_row(const float *d_nx, const float *d_nw, int64_t cols, float eps, float *out)
{
    uint16_t *ident = calloc((size_t)(cols * cols), 2);
    void *d_w = NULL, *d_y = NULL, *d_x = NULL;
    int ok = ident != NULL;
    for (int64_t i = 0; ok && i < cols; i++)
        ident[i * cols + i] = 0x3f80; /* bf16 1.0 */
    ok = ok && CU(cudaMalloc(&d_w, (size_t)(cols * cols) * 2)) && CU(cudaMalloc(&d_y, (size_t)cols * 4)) &&
         CU(cudaMalloc(&d_x, (size_t)cols * 2)) &&
         CU(cudaMemcpy(d_w, ident, (size_t)(cols * cols) * 2, cudaMemcpyHostToDevice));
    if (ok) {
        sd_nm_spmv_args a = {0};
        a.rows = cols, a.cols = cols, a.B = 1, a.values = d_w, a.x = d_x, a.ldx = cols, a.y = d_y,
        a.ldy = cols;
        a.rows_per_warp = 1, a.split = 1;
        a.norm_x = d_nx, a.norm_w = d_nw, a.norm_eps = eps;
        ok = sd_gemv_bf16_launch(&a, 0) == 0 && CU(cudaDeviceSynchronize()) &&
             CU(cudaMemcpy(out, d_y, (size_t)cols * 4, cudaMemcpyDeviceToHost));
    }
    free(ident);
    cudaFree(d_w), cudaFree(d_y), cudaFree(d_x);
    return ok ? 0 : -1;
}

static void test_normed_row(void)
{
    if (!have_gpu())
        SKIP("no CUDA device");
    const int64_t lens[] = {256, 2080, 4096, 8192}; /* 1, 2 (one partial), 2 and 4 rounds of 256 */
    const float eps = 1e-5f;
    uint64_t s = 7;
    for (int k = 0; k < 4; k++) {
        const int64_t cols = lens[k];
        float *x = malloc((size_t)cols * 4), *w = malloc((size_t)cols * 4), *y = malloc((size_t)cols * 4);
        void *d_nx = NULL, *d_nw = NULL;
        REQUIRE(x && w && y);
        fill_row(x, w, cols, &s);
        REQUIRE(CU(cudaMalloc(&d_nx, (size_t)cols * 4)) && CU(cudaMalloc(&d_nw, (size_t)cols * 4)) &&
                CU(cudaMemcpy(d_nx, x, (size_t)cols * 4, cudaMemcpyHostToDevice)) &&
                CU(cudaMemcpy(d_nw, w, (size_t)cols * 4, cudaMemcpyHostToDevice)));
        REQUIRE(normed_row(d_nx, d_nw, cols, eps, y) == 0);
        double ss = 0;
        for (int64_t i = 0; i < cols; i++)
            ss += (double)x[i] * x[i];
        const double r = 1.0 / sqrt(ss / cols + eps);
        int bad = 0, not_bf16 = 0;
        for (int64_t i = 0; i < cols; i++) {
            uint32_t u;
            memcpy(&u, &y[i], 4);
            not_bf16 += (u & 0xffffu) != 0;
            const double want = x[i] * r * w[i];
            bad += !(fabs(y[i] - want) <= 1.0 / 128 * fabs(want) + 1e-30);
        }
        CHECK_MSG(not_bf16 == 0, "row of %lld: %d outputs are not bf16 values", (long long)cols, not_bf16);
        CHECK_MSG(bad == 0, "row of %lld: %d outputs off the fp64 RMSNorm by more than a bf16 step",
                  (long long)cols, bad);
        free(x), free(w), free(y);
        cudaFree(d_nx), cudaFree(d_nw);
    }
}

/* One problem: W (dense or n:m) [rows, cols], the residual row and weight, the normed row as bf16. */
typedef struct nprob {
    int dense;
    int64_t rows, cols;
    void *d_w, *d_mask, *d_x, *d_nx, *d_nw, *d_y;
} nprob;

static void nprob_free(nprob *p)
{
    cudaFree(p->d_w), cudaFree(p->d_mask), cudaFree(p->d_x), cudaFree(p->d_nx), cudaFree(p->d_nw);
    cudaFree(p->d_y);
}

static int nprob_init(nprob *p, int dense, int n, int m, int64_t rows, int64_t cols, uint64_t seed)
{
    memset(p, 0, sizeof *p);
    p->dense = dense, p->rows = rows, p->cols = cols;
    uint64_t s = seed;
    uint16_t *w = malloc((size_t)(rows * cols) * 2), *vals = malloc((size_t)(rows * cols / 2) * 2);
    uint32_t *mask = malloc((size_t)(rows * cols / 32) * 4);
    float *x = malloc((size_t)cols * 4), *nw = malloc((size_t)cols * 4), *xn = malloc((size_t)cols * 4);
    uint16_t *xb = malloc((size_t)cols * 2);
    int ok = w && vals && mask && x && nw && xn && xb;
    if (ok) {
        nmt_fill_bf16(w, rows * cols, &s);
        fill_row(x, nw, cols, &s);
        if (!dense)
            ok = !nmt_random_mask(mask, rows, cols, n, m, &s) &&
                 !sd_nm_pack(w, mask, rows, cols, vals, mask, NULL);
    }
    const size_t wbytes = dense ? (size_t)(rows * cols) * 2 : (size_t)(rows * cols / 2) * 2;
    ok = ok && CU(cudaMalloc(&p->d_w, wbytes)) &&
         CU(cudaMalloc(&p->d_mask, (size_t)(rows * cols / 32) * 4)) &&
         CU(cudaMalloc(&p->d_x, (size_t)cols * 2)) && CU(cudaMalloc(&p->d_nx, (size_t)cols * 4)) &&
         CU(cudaMalloc(&p->d_nw, (size_t)cols * 4)) && CU(cudaMalloc(&p->d_y, (size_t)rows * 4)) &&
         CU(cudaMemcpy(p->d_w, dense ? w : vals, wbytes, cudaMemcpyHostToDevice)) &&
         CU(cudaMemcpy(p->d_mask, mask, (size_t)(rows * cols / 32) * 4, cudaMemcpyHostToDevice)) &&
         CU(cudaMemcpy(p->d_nx, x, (size_t)cols * 4, cudaMemcpyHostToDevice)) &&
         CU(cudaMemcpy(p->d_nw, nw, (size_t)cols * 4, cudaMemcpyHostToDevice));
    ok = ok && normed_row(p->d_nx, p->d_nw, cols, 1e-5f, xn) == 0;
    for (int64_t i = 0; ok && i < cols; i++)
        xb[i] = sd_f32_to_bf16(xn[i]); /* exact: xn holds bf16 values */
    ok = ok && CU(cudaMemcpy(p->d_x, xb, (size_t)cols * 2, cudaMemcpyHostToDevice));
    free(w), free(vals), free(mask), free(x), free(nw), free(xn), free(xb);
    return ok ? 0 : -1;
}

/* y of one launch (fp32 [rows], or bf16 [rows / 2] with the SwiGLU epilogue) as raw bytes. */
static int run_one(const nprob *p, int n, int m, int rw, int split, int norm, int swiglu, void *out)
{
    sd_nm_spmv_args a = {0};
    a.n = p->dense ? 0 : n, a.m = p->dense ? 0 : m, a.rows = p->rows, a.cols = p->cols, a.B = 1;
    a.values = p->d_w, a.mask = p->d_mask, a.x = p->d_x, a.ldx = p->cols, a.y = p->d_y;
    a.ldy = swiglu ? p->rows / 2 : p->rows, a.y_bf16 = swiglu, a.swiglu = swiglu;
    a.rows_per_warp = rw, a.split = split;
    if (norm)
        a.norm_x = p->d_nx, a.norm_w = p->d_nw, a.norm_eps = 1e-5f;
    const size_t bytes = swiglu ? (size_t)p->rows : (size_t)p->rows * 4;
    if (!CU(cudaMemset(p->d_y, 0xff, bytes)))
        return -1;
    const int rc = launch(&a, p->dense);
    if (rc)
        return rc;
    return CU(cudaDeviceSynchronize()) && CU(cudaMemcpy(out, p->d_y, bytes, cudaMemcpyDeviceToHost)) ? 0 : -1;
}

static double rel_l2(const float *a, const float *b, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++)
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), den += (double)b[i] * b[i];
    return num != num ? 1e30 : sqrt(num / (den > 0 ? den : 1));
}

static void test_fused_matches_plain(void)
{
    if (!have_gpu())
        SKIP("no CUDA device");
    const int pats[5][2] = {{0, 0}, {2, 4}, {4, 8}, {8, 16}, {16, 32}};
    const int64_t shapes[3][2] = {{998, 4096}, {262, 2080}, {130, 8192}};
    const int rws[3] = {1, 2, 4};
    for (int pi = 0; pi < 5; pi++)
        for (int si = 0; si < 3; si++) {
            const int dense = pi == 0, n = pats[pi][0], m = pats[pi][1];
            const int64_t rows = shapes[si][0], cols = shapes[si][1];
            nprob p;
            REQUIRE(nprob_init(&p, dense, n, m, rows, cols, 100 + 10 * pi + si) == 0);
            float *plain = malloc((size_t)rows * 4), *fused = malloc((size_t)rows * 4);
            REQUIRE(plain && fused);
            for (int k = 0; k < 3; k++)
                for (int split = 1; split <= 3; split++) {
                    int rc = run_one(&p, n, m, rws[k], split, 0, 0, plain);
                    rc = rc ? rc : run_one(&p, n, m, rws[k], split, 1, 0, fused);
                    CHECK_MSG(rc == 0, "%d:%d %lldx%lld rw %d split %d: %d", n, m, (long long)rows,
                              (long long)cols, rws[k], split, rc);
                    if (rc)
                        continue;
                    if (split == 1)
                        CHECK_MSG(!memcmp(plain, fused, (size_t)rows * 4),
                                  "%d:%d %lldx%lld rw %d: fused output differs from the plain launch's", n, m,
                                  (long long)rows, (long long)cols, rws[k]);
                    else
                        CHECK_MSG(rel_l2(fused, plain, rows) < 1e-5,
                                  "%d:%d %lldx%lld rw %d split %d: rel L2 %g", n, m, (long long)rows,
                                  (long long)cols, rws[k], split, rel_l2(fused, plain, rows));
                    if (split > 1)
                        continue;
                    /* the SwiGLU epilogue too: W = [gate; up], rows even */
                    uint16_t *hp = (uint16_t *)plain, *hf = (uint16_t *)fused;
                    rc = run_one(&p, n, m, rws[k], 1, 0, 1, hp);
                    rc = rc ? rc : run_one(&p, n, m, rws[k], 1, 1, 1, hf);
                    CHECK_MSG(rc == 0 && !memcmp(hp, hf, (size_t)rows),
                              "%d:%d %lldx%lld rw %d: SwiGLU rc %d, %s", n, m, (long long)rows,
                              (long long)cols, rws[k], rc, rc ? "" : "outputs differ");
                }
            free(plain), free(fused);
            nprob_free(&p);
        }
}
#else
static void test_refusals(void)
{
    SKIP("built without CUDA (SD_HAVE_CUDA unset)");
}
static void test_normed_row(void)
{
    SKIP("built without CUDA (SD_HAVE_CUDA unset)");
}
static void test_fused_matches_plain(void)
{
    SKIP("built without CUDA (SD_HAVE_CUDA unset)");
}
#endif

int main(void)
{
    RUN(test_refusals);
    RUN(test_normed_row);
    RUN(test_fused_matches_plain);
    return sd_test_done();
}
