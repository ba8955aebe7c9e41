/* spmv_gpu_prob: the problem a GPU SpMV test runs (random weights, masks and x on the host and the
 * device, the fp64 reference of the CPU twin) and how it checks a launch (outputs poisoned, rel L2
 * < 1e-3), shared by test_spmv_gpu.c and test_sp24_gpu.c. Include inside #ifdef SD_HAVE_CUDA. */
#ifndef SD_SPMV_GPU_PROB_H
#define SD_SPMV_GPU_PROB_H

#include <cuda_runtime_api.h>

#include "kernels/nm_format.h"
#include "kernels/nm_spmv.h"
#include "kernels/nm_spmv_cpu.h"
#include "tests/harness.h"
#include "tests/kernels/nm_test_util.h"

#define CU(call) (rc_cu = (call)) == cudaSuccess
static cudaError_t rc_cu;

static int have_gpu(void)
{
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

/* One problem on the host and the device. */
typedef struct prob {
    int dense, n, m, B;
    int64_t rows, cols, ldx, ldy;
    uint16_t *w, *vals, *xh; /* w: dense bf16 [rows, cols] (expanded); vals [rows, cols/2]; xh [B, ldx] */
    uint32_t *mask;
    float *xf;
    double *ref; /* [B, rows] */
    void *d_w, *d_mask, *d_x, *d_y;
} prob;

static void prob_free(prob *p)
{
    free(p->w), free(p->vals), free(p->xh), free(p->mask), free(p->xf), free(p->ref);
    cudaFree(p->d_w), cudaFree(p->d_mask), cudaFree(p->d_x), cudaFree(p->d_y);
    memset(p, 0, sizeof *p);
}

/* Fresh random weights, mask, x; uploads; computes the fp64 reference with the CPU twin. */
static int prob_init(prob *p, int dense, int n, int m, int64_t rows, int64_t cols, int B, uint64_t seed)
{
    memset(p, 0, sizeof *p);
    p->dense = dense, p->n = n, p->m = m, p->B = B, p->rows = rows, p->cols = cols;
    p->ldx = cols + 8, p->ldy = rows + 3;
    uint64_t s = seed;
    p->w = malloc((size_t)(rows * cols) * 2), p->vals = malloc((size_t)(rows * cols / 2) * 2);
    p->mask = malloc((size_t)(rows * cols / 32 + 1) * 4), p->xh = malloc((size_t)(B * p->ldx) * 2);
    p->xf = malloc((size_t)(B * p->ldx) * 4), p->ref = malloc((size_t)(B * rows) * 8);
    if (!p->w || !p->vals || !p->mask || !p->xh || !p->xf || !p->ref)
        return -1;
    nmt_fill_bf16(p->w, rows * cols, &s);
    nmt_fill_bf16(p->xh, B * p->ldx, &s);
    for (int64_t i = 0; i < B * p->ldx; i++)
        p->xf[i] = sd_bf16_to_f32(p->xh[i]);
    if (!dense) {
        if (nmt_random_mask(p->mask, rows, cols, n, m, &s) ||
            sd_nm_pack(p->w, p->mask, rows, cols, p->vals, p->mask, NULL))
            return -1;
        sd_nm_spmv_cpu_f64(p->vals, p->mask, rows, cols, p->xf, p->ldx, B, p->ref, rows);
    } else {
        sd_gemv_bf16_cpu_f64(p->w, rows, cols, p->xf, p->ldx, B, p->ref, rows);
    }
    size_t wbytes = dense ? (size_t)(rows * cols) * 2 : (size_t)(rows * cols / 2) * 2;
    if (!(CU(cudaMalloc(&p->d_w, wbytes)) && CU(cudaMalloc(&p->d_mask, (size_t)(rows * cols / 32) * 4 + 4)) &&
          CU(cudaMalloc(&p->d_x, (size_t)(B * p->ldx) * 2)) &&
          CU(cudaMalloc(&p->d_y, (size_t)(B * p->ldy) * 4)) &&
          CU(cudaMemcpy(p->d_w, dense ? p->w : p->vals, wbytes, cudaMemcpyHostToDevice)) &&
          CU(cudaMemcpy(p->d_mask, p->mask, (size_t)(rows * cols / 32) * 4, cudaMemcpyHostToDevice)) &&
          CU(cudaMemcpy(p->d_x, p->xh, (size_t)(B * p->ldx) * 2, cudaMemcpyHostToDevice))))
        return -1;
    return 0;
}

static sd_nm_spmv_args prob_args(const prob *p, int y_bf16, int accumulate, int rw, int split)
{
    sd_nm_spmv_args a = {0};
    a.n = p->n, a.m = p->m, a.rows = p->rows, a.cols = p->cols, a.B = p->B;
    a.values = p->d_w, a.mask = p->d_mask, a.x = p->d_x, a.ldx = p->ldx;
    a.y = p->d_y, a.ldy = p->ldy, a.y_bf16 = y_bf16, a.accumulate = accumulate;
    a.rows_per_warp = rw, a.split = split;
    return a;
}

/* A launcher with sd_nm_spmv_launch's signature (run_check_fn; NULL: the SpMV / GEMV). */
typedef int (*prob_launch_fn)(const sd_nm_spmv_args *a, cudaStream_t s);

/* Runs one launch and compares. fp32: y poisoned with NaN (or random y0 when accumulating);
 * bf16: compared with the reference rounded to bf16. Returns the rel L2 error (1e30 on NaN or a
 * written padding entry), or -1 on a CUDA / launch error. SD_TEST_DIAG set: also prints the first
 * outputs off by more than 1% (and check_cfgs every config's error): where a kernel goes wrong. */
static double run_check_fn(const prob *p, const sd_nm_spmv_args *a, uint64_t seed, prob_launch_fn fn)
{
    int64_t ny = p->B * p->ldy;
    size_t esz = a->y_bf16 ? 2 : 4;
    float *y0 = malloc((size_t)ny * 4), *yf = malloc((size_t)ny * 4);
    uint16_t *y0h = malloc((size_t)ny * 2), *yh = malloc((size_t)ny * 2);
    double err = -1;
    uint64_t s = seed;
    for (int64_t i = 0; i < ny; i++) {
        int pad = i % p->ldy >= p->rows;
        float v = (a->accumulate && !pad) ? nmt_uniform(&s) : NAN;
        y0h[i] = sd_f32_to_bf16(v);
        y0[i] = a->y_bf16 ? sd_bf16_to_f32(y0h[i]) : v;
    }
    if (!CU(cudaMemcpy(p->d_y, a->y_bf16 ? (void *)y0h : (void *)y0, (size_t)ny * esz,
                       cudaMemcpyHostToDevice)))
        goto out;
    int rc = fn ? fn(a, 0) : p->dense ? sd_gemv_bf16_launch(a, 0) : sd_nm_spmv_launch(a, 0);
    if (rc || !CU(cudaDeviceSynchronize()) ||
        !CU(cudaMemcpy(a->y_bf16 ? (void *)yh : (void *)yf, p->d_y, (size_t)ny * esz,
                       cudaMemcpyDeviceToHost)))
        goto out;
    double num = 0, den = 0;
    int shown = 0, diag = getenv("SD_TEST_DIAG") != NULL;
    for (int b = 0; b < p->B; b++)
        for (int64_t r = 0; r < p->ldy; r++) {
            int64_t i = b * p->ldy + r;
            double got = a->y_bf16 ? sd_bf16_to_f32(yh[i]) : yf[i];
            if (r >= p->rows) { /* padding must stay untouched */
                if (!isnan(got))
                    num = NAN;
                continue;
            }
            double want = p->ref[b * p->rows + r] + (a->accumulate ? y0[i] : 0.0);
            if (a->y_bf16)
                want = sd_bf16_to_f32(sd_f32_to_bf16((float)want));
            if (diag && shown < 12 && !(fabs(got - want) <= 1e-2 * (fabs(want) + 1e-2)) && ++shown)
                fprintf(stderr, "    rw %d: vector %d row %lld: got %g want %g\n", a->rows_per_warp, b,
                        (long long)r, got, want);
            num += (got - want) * (got - want);
            den += want * want;
        }
    err = num != num ? 1e30 : sqrt(num / (den > 0 ? den : 1));
out:
    free(y0), free(yf), free(y0h), free(yh);
    return err;
}

static double run_check(const prob *p, const sd_nm_spmv_args *a, uint64_t seed)
{
    return run_check_fn(p, a, seed, NULL);
}

typedef struct shp {
    int64_t rows, cols;
} shp;

/* Runs one problem under each (rows_per_warp, split, y_bf16, accumulate) config (skipping those
 * with rows_per_warp `skip_rw` when B > SD_NM_MAX_B); checks rel L2 < 1e-3; keeps the worst
 * error and its config index. */
static void check_cfgs(const prob *p, const int (*cfg)[4], int n_cfg, const char *what, uint64_t seed,
                       int skip_rw, double *worst, int *worst_cfg)
{
    for (int c = 0; c < n_cfg; c++) {
        if (p->B > SD_NM_MAX_B && cfg[c][0] == skip_rw)
            continue;
        sd_nm_spmv_args a = prob_args(p, cfg[c][2], cfg[c][3], cfg[c][0], cfg[c][1]);
        double e = run_check(p, &a, seed + c);
        if (getenv("SD_TEST_DIAG"))
            fprintf(stderr, "    cfg %d rw %d split %d bf16 %d acc %d B %d: rel L2 %g\n", c, cfg[c][0],
                    cfg[c][1], cfg[c][2], cfg[c][3], p->B, e);
        CHECK_MSG(e >= 0 && e < 1e-3, "%s %d:%d %lldx%lld B=%d rw=%d split=%d bf16=%d acc=%d: rel L2 %g (%s)",
                  what, p->n, p->m, (long long)p->rows, (long long)p->cols, p->B, cfg[c][0], cfg[c][1],
                  cfg[c][2], cfg[c][3], e, cudaGetErrorString(rc_cu));
        if (e > *worst)
            *worst = e, *worst_cfg = c;
    }
}

/* Corrupt masks (all bits set, none set) on a rows x cols problem of pattern n:m and B vectors:
 * every config rws[0..n_rw) (split 1) gives wrong numbers, never a fault or a launch error. */
static void check_corrupt_masks(int n, int m, int64_t rows, int64_t cols, int B, const int *rws, int n_rw,
                                uint64_t seed)
{
    prob p;
    REQUIRE(prob_init(&p, 0, n, m, rows, cols, B, seed) == 0);
    for (int fill = 0; fill < 2; fill++) {
        REQUIRE(CU(cudaMemset(p.d_mask, fill ? 0xff : 0, (size_t)(rows * cols / 32) * 4)));
        for (int k = 0; k < n_rw; k++) {
            sd_nm_spmv_args a = prob_args(&p, 0, 0, rws[k], 1);
            CHECK(sd_nm_spmv_launch(&a, 0) == 0);
            CHECK_MSG(CU(cudaDeviceSynchronize()), "%d:%d mask fill %d rw %d: %s", n, m, fill, rws[k],
                      cudaGetErrorString(rc_cu));
        }
    }
    prob_free(&p);
}

#endif
