/* cuda_gemm_bench: a prompt chunk's GEMM of one linear, every path side by side (cuda_gemm_bench.h). */
#include "engine/cuda_gemm_bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/bench_common.h"
#include "engine/cuda_cslt.h"
#include "engine/cuda_impl.cuh"
#include "kernels/nm_format.h"
#include "kernels/nm_gemm.h"

/* What one run holds: the operands, cuBLAS, the timing events, the L2 flush buffer. */
typedef struct gb {
    int64_t rows, cols;
    int T, reps;
    cudaStream_t st;
    cublasHandle_t blas;
    void *blas_ws;
    cudaEvent_t ev[2];
    __nv_bfloat16 *w, *scratch, *values, *x;
    uint32_t *mask;
    float *y;
    void *flush;
    sd_cslt *cslt;
} gb;

#define GB_FLUSH_BYTES ((size_t)128 << 20) /* twice the H200's L2 */
#define GB_WS_BYTES ((size_t)32 << 20)     /* as the backend's cuBLAS workspace */

typedef enum {
    GB_DENSE,
    GB_EXPAND,
    GB_EXPAND_WARP,
    GB_EXPAND_BLAS,
    GB_CSLT,
    GB_NM_GEMM64,
    GB_NM_GEMM128
} gb_path;

/* The backend's own GEMM call (cuda_linear.cu). */
static int gemm(gb *g, const __nv_bfloat16 *w, sd_diag *d)
{
    return sd__cu_gemm_bf16(g->blas, w, g->rows, g->cols, g->x, g->y, g->T, 0, d);
}

static int run_path(gb *g, gb_path p, sd_diag *d)
{
    if (p == GB_DENSE)
        return gemm(g, g->w, d);
    if (p == GB_CSLT)
        return sd_cslt_matmul(g->cslt, g->values, g->x, g->y, g->T, 0, g->st, d);
    if (p == GB_NM_GEMM64 || p == GB_NM_GEMM128) {
        sd_nm_spmv_args a = {};
        a.n = 2, a.m = 4, a.rows = g->rows, a.cols = g->cols, a.B = g->T;
        a.values = (const uint16_t *)g->values, a.mask = g->mask, a.x = (const uint16_t *)g->x,
        a.ldx = g->cols;
        a.y = g->y, a.ldy = g->rows;
        const int rc = sd_nm_gemm_launch(&a, p == GB_NM_GEMM64 ? 64 : 128, g->st);
        return rc ? sd_diag_set(d, rc, "bench gemm: the N:M GEMM: %s", sd_strerror(rc)) : 0;
    }
    SD_TRY(sd__cu_expand_bitmask(g->values, g->mask, g->scratch, g->rows, g->cols, p == GB_EXPAND_WARP, g->st,
                                 d));
    return p == GB_EXPAND_BLAS ? gemm(g, g->scratch, d) : 0;
}

/* Median microseconds of g->reps runs of path p after two warm-ups, L2 flushed before each. */
static int time_path(gb *g, gb_path p, double *ret_us, sd_diag *d)
{
    double *t = (double *)malloc((size_t)g->reps * sizeof *t);
    if (!t)
        return sd_diag_set(d, SD_ENOMEM, "bench gemm");
    int rc = 0;
    for (int r = 0; r < g->reps + 2 && !rc; r++) {
        cudaError_t e = cudaMemsetAsync(g->flush, r & 0xff, GB_FLUSH_BYTES, g->st);
        if (e == cudaSuccess)
            e = cudaEventRecord(g->ev[0], g->st);
        rc = e == cudaSuccess ? run_path(g, p, d) : sd_diag_set(d, SD_ECUDA, "%s", cudaGetErrorString(e));
        if (!rc)
            e = cudaEventRecord(g->ev[1], g->st);
        if (!rc && e == cudaSuccess)
            e = cudaEventSynchronize(g->ev[1]);
        float ms = 0;
        if (!rc && e == cudaSuccess)
            e = cudaEventElapsedTime(&ms, g->ev[0], g->ev[1]);
        if (!rc && e != cudaSuccess)
            rc = sd_diag_set(d, SD_ECUDA, "bench gemm: %s", cudaGetErrorString(e));
        if (r >= 2)
            t[r - 2] = ms * 1e3;
    }
    if (!rc)
        *ret_us = sd_bench_median(t, g->reps, NULL, NULL);
    free(t);
    return rc;
}

static int gb_init(gb *g, int device, int64_t rows, int64_t cols, int T, int reps, sd_diag *d)
{
    memset(g, 0, sizeof *g);
    g->rows = rows, g->cols = cols, g->T = T, g->reps = reps;
    const size_t n = (size_t)rows * (size_t)cols, xr = (size_t)sd_cslt_pad_rows(T);
    SD_CU(d, cudaSetDevice(device));
    SD_CU(d, cudaStreamCreateWithFlags(&g->st, cudaStreamNonBlocking));
    SD_CU(d, cudaEventCreate(&g->ev[0]));
    SD_CU(d, cudaEventCreate(&g->ev[1]));
    SD_CUBLAS(d, cublasCreate(&g->blas));
    SD_CU(d, cudaMalloc(&g->blas_ws, GB_WS_BYTES));
    SD_CUBLAS(d, cublasSetStream(g->blas, g->st));
    SD_CUBLAS(d, cublasSetWorkspace(g->blas, g->blas_ws, GB_WS_BYTES));
    SD_CU(d, cudaMalloc((void **)&g->w, n * 2));
    SD_CU(d, cudaMalloc((void **)&g->scratch, n * 2));
    SD_CU(d, cudaMalloc((void **)&g->values, n));
    SD_CU(d, cudaMalloc((void **)&g->mask, n / 8));
    SD_CU(d, cudaMalloc((void **)&g->x, xr * (size_t)cols * 2));
    SD_CU(d, cudaMalloc((void **)&g->y, (size_t)T * (size_t)rows * 4));
    SD_CU(d, cudaMalloc(&g->flush, GB_FLUSH_BYTES));
    /* random data throughout: a GEMM on zeros runs cooler, so faster, than on weights */
    SD_TRY(sd__cu_fill_uniform_bf16(g->w, n, 0.02f, 1, g->st, d));
    SD_TRY(sd__cu_fill_uniform_bf16(g->values, n / 2, 0.02f, 2, g->st, d));
    SD_TRY(sd__cu_fill_nm_mask(g->mask, n / 32, 2, 4, 3, g->st, d));
    SD_TRY(sd__cu_fill_uniform_bf16(g->x, xr * (size_t)cols, 1.f, 4, g->st, d));
    SD_CU(d, cudaStreamSynchronize(g->st));
    return 0;
}

static void gb_free(gb *g)
{
    sd_cslt_free(g->cslt);
    if (g->blas)
        cublasDestroy(g->blas);
    void *bufs[] = {g->blas_ws, g->w, g->scratch, g->values, g->mask, g->x, g->y, g->flush};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        cudaFree(bufs[i]);
    for (int i = 0; i < 2; i++)
        if (g->ev[i])
            cudaEventDestroy(g->ev[i]);
    if (g->st)
        cudaStreamDestroy(g->st);
}

/* Both expansion kernels into the scratch, each copied back: *same = 1 if their bits agree. The
 * scratch is poisoned before each, differently for each kernel (bf16 0xffff, a NaN, and 0xfefe,
 * -1.7e38; the weights are zeros and uniform(-0.02, 0.02)): it still holds the other kernel's
 * expansion, so a column one of them left unwritten would otherwise read back as the same bits. */
static int same_expansions(gb *g, int *same, sd_diag *d)
{
    const size_t bytes = (size_t)g->rows * (size_t)g->cols * 2;
    void *h[2] = {malloc(bytes), malloc(bytes)};
    int rc = h[0] && h[1] ? 0 : sd_diag_set(d, SD_ENOMEM, "bench gemm: %zu bytes", bytes);
    for (int k = 0; k < 2 && !rc; k++) {
        cudaError_t e = cudaMemsetAsync(g->scratch, k ? 0xfe : 0xff, bytes, g->st);
        if (e == cudaSuccess)
            rc = sd__cu_expand_bitmask(g->values, g->mask, g->scratch, g->rows, g->cols, k, g->st, d);
        if (!rc && e == cudaSuccess)
            e = cudaMemcpyAsync(h[k], g->scratch, bytes, cudaMemcpyDeviceToHost, g->st);
        if (e == cudaSuccess)
            e = cudaStreamSynchronize(g->st);
        if (!rc && e != cudaSuccess)
            rc = sd_diag_set(d, SD_ECUDA, "bench gemm: %s", cudaGetErrorString(e));
    }
    if (!rc)
        *same = !memcmp(h[0], h[1], bytes);
    free(h[0]);
    free(h[1]);
    return rc;
}

/* cuSPARSELt with (search) or without the library's config search, its copy made from the
 * expanded bitmask; a failure is reported in t->cslt_err, not returned. */
static void time_cslt(gb *g, int search, double *us, sd_gemm_times *t)
{
    sd_diag d = {};
    sd_cslt_free(g->cslt);
    g->cslt = NULL;
    int rc = sd_cslt_open(&g->cslt, search, &d);
    if (!rc)
        rc = sd__cu_expand_bitmask(g->values, g->mask, g->scratch, g->rows, g->cols, 0, g->st, &d);
    if (!rc)
        rc = sd_cslt_add(g->cslt, g->values, g->scratch, g->rows, g->cols, g->st, &d);
    if (!rc)
        rc = time_path(g, GB_CSLT, us, &d);
    if (rc)
        snprintf(t->cslt_err, sizeof t->cslt_err, "%s", sd_diag_str(&d, rc));
}

int sd_cuda_gemm_bench(int device, int64_t rows, int64_t cols, int T, int reps, sd_gemm_times *t, sd_diag *d)
{
    memset(t, 0, sizeof *t);
    if (rows <= 0 || cols <= 0 || rows % 64 || cols % 64 || T < 1 || reps < 1)
        return sd_diag_set(d, SD_EINVAL, "bench gemm: [%lld, %lld] x %d rows, %d reps", (long long)rows,
                           (long long)cols, T, reps);
    gb g;
    int rc = gb_init(&g, device, rows, cols, T, reps, d);
    if (!rc)
        rc = time_path(&g, GB_DENSE, &t->dense_us, d);
    if (!rc)
        rc = time_path(&g, GB_EXPAND, &t->expand_us, d);
    if (!rc)
        rc = time_path(&g, GB_EXPAND_WARP, &t->expand_warp_us, d);
    if (!rc)
        rc = same_expansions(&g, &t->expand_same, d);
    if (!rc)
        rc = time_path(&g, GB_EXPAND_BLAS, &t->expand_blas_us, d);
    for (int k = 0; k < 2 && !rc; k++)
        rc = time_path(&g, k ? GB_NM_GEMM128 : GB_NM_GEMM64, &t->nm_gemm_us[k], d);
    if (!rc) {
        time_cslt(&g, 0, &t->cslt_us, t);
        if (!t->cslt_err[0])
            time_cslt(&g, 1, &t->cslt_search_us, t);
    }
    gb_free(&g);
    return rc;
}

/* Device buffers of sd_cuda_expand_check. */
typedef struct xc {
    __nv_bfloat16 *values, *out;
    uint32_t *mask;
    uint16_t *h_values, *h_out, *h_ref;
    uint32_t *h_mask;
} xc;

static void xc_free(xc *x)
{
    cudaFree(x->values);
    cudaFree(x->out);
    cudaFree(x->mask);
    free(x->h_values);
    free(x->h_out);
    free(x->h_ref);
    free(x->h_mask);
}

/* Kernel `warp`'s expansion of x's weights copied back and compared with the CPU's: *diff. */
static int xc_run(xc *x, int64_t rows, int64_t cols, int warp, size_t *diff, sd_diag *d)
{
    const size_t n = (size_t)rows * (size_t)cols;
    SD_CU(d, cudaMemset(x->out, 0xff, n * 2)); /* poisoned: every column must be written */
    SD_TRY(sd__cu_expand_bitmask(x->values, x->mask, x->out, rows, cols, warp, 0, d));
    SD_CU(d, cudaMemcpy(x->h_out, x->out, n * 2, cudaMemcpyDeviceToHost));
    *diff = 0;
    for (size_t i = 0; i < n; i++)
        *diff += x->h_out[i] != x->h_ref[i];
    return 0;
}

/* x's buffers for random n:m weights [rows, cols], and the CPU's expansion of them in h_ref. */
static int xc_init(xc *x, int device, int64_t rows, int64_t cols, int n, int m, uint64_t seed, sd_diag *d)
{
    const size_t nw = (size_t)rows * (size_t)cols;
    SD_CU(d, cudaSetDevice(device));
    SD_CU(d, cudaMalloc((void **)&x->values, nw));
    SD_CU(d, cudaMalloc((void **)&x->out, nw * 2));
    SD_CU(d, cudaMalloc((void **)&x->mask, nw / 8));
    x->h_values = (uint16_t *)malloc(nw);
    x->h_out = (uint16_t *)malloc(nw * 2);
    x->h_ref = (uint16_t *)malloc(nw * 2);
    x->h_mask = (uint32_t *)malloc(nw / 8);
    if (!x->h_values || !x->h_out || !x->h_ref || !x->h_mask)
        return sd_diag_set(d, SD_ENOMEM, "expand check: %zu weights", nw);
    SD_TRY(sd__cu_fill_uniform_bf16(x->values, nw / 2, 1.f, seed, 0, d));
    SD_TRY(sd__cu_fill_nm_mask(x->mask, nw / 32, n, m, seed + 1, 0, d));
    SD_CU(d, cudaMemcpy(x->h_values, x->values, nw, cudaMemcpyDeviceToHost));
    SD_CU(d, cudaMemcpy(x->h_mask, x->mask, nw / 8, cudaMemcpyDeviceToHost));
    if (sd_nm_expand(x->h_values, x->h_mask, rows, cols, x->h_ref))
        return sd_diag_set(d, SD_EFORMAT, "expand check: the CPU refused the %d:%d mask", n, m);
    return 0;
}

int sd_cuda_expand_check(int device, int64_t rows, int64_t cols, int n, int m, uint64_t seed, size_t diff[2],
                         sd_diag *d)
{
    if (rows <= 0 || cols <= 0 || cols % 32)
        return sd_diag_set(d, SD_EINVAL, "expand check: [%lld, %lld]", (long long)rows, (long long)cols);
    xc x = {};
    int rc = xc_init(&x, device, rows, cols, n, m, seed, d);
    for (int k = 0; k < 2 && !rc; k++)
        rc = xc_run(&x, rows, cols, k, &diff[k], d);
    xc_free(&x);
    return rc;
}
