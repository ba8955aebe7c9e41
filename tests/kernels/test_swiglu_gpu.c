/* GPU tests of the SwiGLU epilogue (sd_nm_spmv_args.swiglu): W = [gate; up] and the kernel writes
 * bf16 silu(gate x) times (up x). For every kernel that takes it (the word-per-lane gather /
 * compacting / GEMV kernels at 1-2 vectors, the row-per-lane kernels up to 4, the 16-row
 * tensor-core kernels up to 16), dense and
 * N:M, odd pair counts: the fused output against the same config's fp32 output put through SwiGLU
 * on the host (within one bf16 step: host and device expf may differ in the last bit), against the
 * fp64 reference (rel L2 < 1e-2), padding columns of y untouched; sd_nm_swiglu_ok agrees with what
 * the launch does. Without a GPU (the matching skips): the configs that cannot keep a row's sum in
 * one block (split-K, stream-K, the wide kernel, more vectors than the word-per-lane kernels take)
 * refuse with SD_ENOTSUP, bad terms with SD_EINVAL, and what the engine fuses. */
#include "tests/harness.h"

#ifdef SD_HAVE_CUDA
#include <math.h>

#include <cuda_runtime_api.h>

#include "kernels/nm_format.h"
#include "kernels/nm_spmv.h"
#include "kernels/nm_spmv_cpu.h"
#include "tests/kernels/nm_test_util.h"

#define CU(call) ((call) == cudaSuccess)

static int have_gpu(void)
{
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

/* A [2*half, cols] problem: host copies, the fp64 reference of its rows, device buffers. */
typedef struct sw_prob {
    int dense, n, m, B;
    int64_t half, cols, ldh; /* ldh: the fused output's row stride (> half: padding checked) */
    uint16_t *w, *vals;
    uint32_t *mask;
    float *xf;
    double *ref; /* [B, 2*half] */
    void *d_w, *d_mask, *d_x, *d_y, *d_h;
} sw_prob;

static void sw_free(sw_prob *p)
{
    free(p->w), free(p->vals), free(p->mask), free(p->xf), free(p->ref);
    cudaFree(p->d_w), cudaFree(p->d_mask), cudaFree(p->d_x), cudaFree(p->d_y), cudaFree(p->d_h);
    memset(p, 0, sizeof *p);
}

static int sw_init(sw_prob *p, int dense, int n, int m, int64_t half, int64_t cols, int B, uint64_t seed)
{
    memset(p, 0, sizeof *p);
    const int64_t rows = 2 * half;
    p->dense = dense, p->n = n, p->m = m, p->B = B, p->half = half, p->cols = cols, p->ldh = half + 5;
    uint64_t s = seed;
    uint16_t *xh = malloc((size_t)(B * cols) * 2);
    p->w = malloc((size_t)(rows * cols) * 2), p->vals = malloc((size_t)(rows * cols / 2) * 2);
    p->mask = malloc((size_t)(rows * cols / 32) * 4), p->xf = malloc((size_t)(B * cols) * 4);
    p->ref = malloc((size_t)(B * rows) * 8);
    int rc = -1;
    if (!xh || !p->w || !p->vals || !p->mask || !p->xf || !p->ref)
        goto out;
    nmt_fill_bf16(p->w, rows * cols, &s);
    nmt_fill_bf16(xh, B * cols, &s);
    for (int64_t i = 0; i < B * cols; i++)
        p->xf[i] = sd_bf16_to_f32(xh[i]);
    if (dense)
        sd_gemv_bf16_cpu_f64(p->w, rows, cols, p->xf, cols, B, p->ref, rows);
    else if (nmt_random_mask(p->mask, rows, cols, n, m, &s) ||
             sd_nm_pack(p->w, p->mask, rows, cols, p->vals, p->mask, NULL))
        goto out;
    else
        sd_nm_spmv_cpu_f64(p->vals, p->mask, rows, cols, p->xf, cols, B, p->ref, rows);
    size_t wbytes = (size_t)(rows * cols) * (dense ? 2 : 1);
    if (CU(cudaMalloc(&p->d_w, wbytes)) && CU(cudaMalloc(&p->d_mask, (size_t)(rows * cols / 32) * 4)) &&
        CU(cudaMalloc(&p->d_x, (size_t)(B * cols) * 2)) && CU(cudaMalloc(&p->d_y, (size_t)(B * rows) * 4)) &&
        CU(cudaMalloc(&p->d_h, (size_t)(B * p->ldh) * 2)) &&
        CU(cudaMemcpy(p->d_w, dense ? p->w : p->vals, wbytes, cudaMemcpyHostToDevice)) &&
        CU(cudaMemcpy(p->d_mask, p->mask, (size_t)(rows * cols / 32) * 4, cudaMemcpyHostToDevice)) &&
        CU(cudaMemcpy(p->d_x, xh, (size_t)(B * cols) * 2, cudaMemcpyHostToDevice)))
        rc = 0;
out:
    free(xh);
    return rc;
}

/* The problem's args with config (rw, split): fp32 y [B, rows], or (swiglu) bf16 h [B, ldh]. */
static sd_nm_spmv_args sw_args(const sw_prob *p, int rw, int split, int swiglu)
{
    sd_nm_spmv_args a = {0};
    a.n = p->n, a.m = p->m, a.rows = 2 * p->half, a.cols = p->cols, a.B = p->B;
    a.values = p->d_w, a.mask = p->d_mask, a.x = p->d_x, a.ldx = p->cols;
    a.y = swiglu ? p->d_h : p->d_y, a.ldy = swiglu ? p->ldh : 2 * p->half;
    a.y_bf16 = swiglu, a.swiglu = swiglu;
    a.rows_per_warp = rw, a.split = split;
    return a;
}

static int sw_launch(const sw_prob *p, const sd_nm_spmv_args *a)
{
    return p->dense ? sd_gemv_bf16_launch(a, 0) : sd_nm_spmv_launch(a, 0);
}

static float silu_mul(float g, float u)
{
    return g / (1.f + expf(-g)) * u;
}

/* One config: the fused output against the same config's fp32 rows put through SwiGLU here, and
 * against the fp64 reference. 0 when it holds, else a message in `why`. */
static int sw_check(const sw_prob *p, int rw, char *why, size_t n_why)
{
    const int64_t rows = 2 * p->half, nh = p->B * p->ldh;
    float *y = malloc((size_t)(p->B * rows) * 4);
    uint16_t *h = malloc((size_t)nh * 2);
    int rc = -1;
    if (!y || !h) {
        snprintf(why, n_why, "out of memory");
        goto out;
    }
    sd_nm_spmv_args plain = sw_args(p, rw, 1, 0), fused = sw_args(p, rw, 1, 1);
    for (int64_t i = 0; i < nh; i++)
        h[i] = 0x7fc1; /* a NaN: what the kernel must overwrite, or (padding) leave alone */
    int lr = 0;
    if (!CU(cudaMemcpy(p->d_h, h, (size_t)nh * 2, cudaMemcpyHostToDevice)) || (lr = sw_launch(p, &plain)) ||
        (lr = sw_launch(p, &fused)) || !CU(cudaDeviceSynchronize()) ||
        !CU(cudaMemcpy(y, p->d_y, (size_t)(p->B * rows) * 4, cudaMemcpyDeviceToHost)) ||
        !CU(cudaMemcpy(h, p->d_h, (size_t)nh * 2, cudaMemcpyDeviceToHost))) {
        snprintf(why, n_why, "launch %d / CUDA %s", lr, cudaGetErrorString(cudaGetLastError()));
        goto out;
    }
    double num = 0, den = 0;
    for (int b = 0; b < p->B; b++)
        for (int64_t i = 0; i < p->ldh; i++) {
            const uint16_t got = h[b * p->ldh + i];
            if (i >= p->half) {
                if (got != 0x7fc1) {
                    snprintf(why, n_why, "vector %d: padding column %lld written", b, (long long)i);
                    goto out;
                }
                continue;
            }
            const uint16_t want = sd_f32_to_bf16(silu_mul(y[b * rows + i], y[b * rows + p->half + i]));
            if (abs((int)got - (int)want) > 1) { /* same sign here: the bf16 bits are monotonic */
                snprintf(why, n_why, "vector %d pair %lld: 0x%04x, the fp32 path gives 0x%04x", b,
                         (long long)i, got, want);
                goto out;
            }
            const double g = p->ref[b * rows + i], u = p->ref[b * rows + p->half + i];
            const double r = g / (1.0 + exp(-g)) * u, d = sd_bf16_to_f32(got) - r;
            num += d * d, den += r * r;
        }
    if (sqrt(num / (den > 0 ? den : 1)) >= 1e-2) {
        snprintf(why, n_why, "rel L2 %g against the fp64 reference", sqrt(num / (den > 0 ? den : 1)));
        goto out;
    }
    rc = 0;
out:
    free(y), free(h);
    return rc;
}

/* Each (pattern, shape, B) under the configs that take the epilogue there. */
static void test_gpu_swiglu_matches(void)
{
    if (!have_gpu())
        SKIP("no CUDA device (cudaGetDeviceCount failed or returned 0)");
    const struct {
        int dense, n, m;
        int64_t half, cols;
    } probs[] = {{1, 0, 0, 37, 1024}, {1, 0, 0, 1000, 4096}, {0, 2, 4, 37, 1024},  {0, 2, 4, 1000, 4096},
                 {0, 4, 8, 61, 2048}, {0, 8, 16, 130, 1024}, {0, 16, 32, 53, 3072}};
    const int Bs[] = {1, 2, 5, 16};
    /* rows_per_warp: gather / GEMV 1, 2, 4; 2:4 compacting 101-103; tensor cores 16, 24, 25 and 27
     * (2:4 sparse; hints for 24 elsewhere); row per lane 32 and 48 (two and three copy stages) */
    const int rws[] = {1, 2, 4, 101, 102, 103, 16, 24, 25, 27, 32, 48};
    int checked = 0;
    for (size_t pi = 0; pi < sizeof probs / sizeof probs[0]; pi++)
        for (size_t bi = 0; bi < sizeof Bs / sizeof Bs[0]; bi++) {
            sw_prob p;
            REQUIRE(sw_init(&p, probs[pi].dense, probs[pi].n, probs[pi].m, probs[pi].half, probs[pi].cols,
                            Bs[bi], 900 + 10 * pi + bi) == 0);
            for (size_t ri = 0; ri < sizeof rws / sizeof rws[0]; ri++) {
                const int rw = rws[ri];
                sd_nm_spmv_args a = sw_args(&p, rw, 1, 1);
                const int ok = sd_nm_swiglu_ok(&a, p.dense);
                /* the word-per-lane kernels (also where another config falls back to them)
                 * take 1-2 vectors; the row-per-lane ones (N:M) up to 4; the 16-row tensor-core
                 * kernels up to 16 */
                const int tc =
                    (rw == 16 || rw == 24 || rw == 25 || rw == 27) && !(probs[pi].n == 0 && !p.dense);
                const int rows = (rw == 32 || rw == 48) && !p.dense && p.B <= 4;
                CHECK_MSG(ok == (tc || rows || p.B <= 2), "%s %d:%d B=%d rw=%d: swiglu_ok %d",
                          p.dense ? "dense" : "nm", p.n, p.m, p.B, rw, ok);
                if (!ok) {
                    CHECK_MSG(sw_launch(&p, &a) == SD_ENOTSUP, "B=%d rw=%d: refused launch", p.B, rw);
                    continue;
                }
                char why[160] = "";
                CHECK_MSG(sw_check(&p, rw, why, sizeof why) == 0, "%s %d:%d %lldx%lld B=%d rw=%d: %s",
                          p.dense ? "dense" : "nm", p.n, p.m, (long long)(2 * p.half), (long long)p.cols, p.B,
                          rw, why);
                checked++;
            }
            sw_free(&p);
        }
    fprintf(stderr, "  %d (problem, config) pairs checked\n", checked);
    CHECK(checked >= 80);
}

/* Args of a [2*half, cols] 2:4 (or dense) problem with the SwiGLU epilogue and config (rw, split),
 * on placeholder device addresses: the refusals below return before any memory is touched, so
 * they need no GPU (CI checks them). */
static sd_nm_spmv_args fake_args(int dense, int64_t half, int64_t cols, int B, int rw, int split)
{
    static uint32_t dummy[64] __attribute__((aligned(16)));
    sd_nm_spmv_args a = {0};
    a.n = dense ? 0 : 2, a.m = dense ? 0 : 4, a.rows = 2 * half, a.cols = cols, a.B = B;
    a.values = (const uint16_t *)dummy, a.mask = dummy, a.x = (const uint16_t *)dummy, a.ldx = cols;
    a.y = dummy, a.ldy = half, a.y_bf16 = 1, a.swiglu = 1;
    a.rows_per_warp = rw, a.split = split;
    return a;
}

/* What cannot keep a row's sum in one block refuses with SD_ENOTSUP, and sd_nm_swiglu_ok says 0;
 * bad terms are SD_EINVAL; sd_nm_swiglu_pays (what the engine fuses) only where the fused launch
 * measured faster: the dense tensor-core GEMV, the 2:4 compacting, the row-per-lane and the
 * register-expanding kernels, the gather kernels at batch 1 (not at 2), not the shared-tile kernel. */
static void test_swiglu_refusals(void)
{
    const int notsup[][3] = {{1, 2, 2},  {16, 3, 2},  {24, 2, 2},  {25, 2, 8}, {32, 2, 2},  {48, 2, 1},
                             {64, 1, 2}, {128, 1, 2}, {103, 4, 1}, {1, 1, 3},  {101, 1, 3}, {48, 1, 5}};
    for (size_t i = 0; i < sizeof notsup / sizeof notsup[0]; i++) {
        sd_nm_spmv_args a = fake_args(0, 64, 2048, notsup[i][2], notsup[i][0], notsup[i][1]);
        CHECK_MSG(!sd_nm_swiglu_ok(&a, 0) && !sd_nm_swiglu_pays(&a, 0), "rw=%d split=%d B=%d: taken",
                  notsup[i][0], notsup[i][1], notsup[i][2]);
        CHECK_MSG(sd_nm_spmv_launch(&a, 0) == SD_ENOTSUP, "rw=%d split=%d B=%d: not refused", notsup[i][0],
                  notsup[i][1], notsup[i][2]);
    }
    sd_nm_spmv_args a = fake_args(0, 64, 2048, 2, 1, 1);
    a.y_bf16 = 0;
    CHECK(sd_nm_spmv_launch(&a, 0) == SD_EINVAL && !sd_nm_swiglu_ok(&a, 0));
    a = fake_args(0, 64, 2048, 2, 1, 1);
    a.accumulate = 1;
    CHECK(sd_nm_spmv_launch(&a, 0) == SD_EINVAL && !sd_nm_swiglu_ok(&a, 0));
    a = fake_args(0, 64, 2048, 2, 1, 1);
    a.ldy = 63;
    CHECK(sd_nm_spmv_launch(&a, 0) == SD_EINVAL && !sd_nm_swiglu_ok(&a, 0));
    a = fake_args(0, 64, 2048, 2, 1, 1);
    a.rows = 127; /* a valid matrix, but no gate/up pairs */
    CHECK(sd_nm_spmv_launch(&a, 0) == SD_EINVAL && !sd_nm_swiglu_ok(&a, 0));
    /* taken, and whether it pays: {dense, rw, B, ok, pays} */
    const int cases[][5] = {{1, 16, 1, 1, 1}, {1, 16, 16, 1, 1}, {1, 24, 4, 1, 1},  {1, 2, 1, 1, 0},
                            {0, 24, 8, 1, 1}, {0, 103, 1, 1, 1}, {0, 101, 2, 1, 1}, {0, 16, 8, 1, 0},
                            {0, 1, 1, 1, 1},  {0, 4, 1, 1, 1},   {0, 4, 2, 1, 0},   {0, 101, 3, 0, 0},
                            {0, 32, 1, 1, 1}, {0, 48, 4, 1, 1},  {0, 32, 5, 0, 0},  {0, 25, 8, 1, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        a = fake_args(cases[i][0], 64, 2048, cases[i][2], cases[i][1], 1);
        CHECK_MSG(sd_nm_swiglu_ok(&a, cases[i][0]) == cases[i][3] &&
                      sd_nm_swiglu_pays(&a, cases[i][0]) == cases[i][4],
                  "%s rw=%d B=%d: ok %d pays %d", cases[i][0] ? "dense" : "2:4", cases[i][1], cases[i][2],
                  sd_nm_swiglu_ok(&a, cases[i][0]), sd_nm_swiglu_pays(&a, cases[i][0]));
    }
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
    RUN(test_gpu_swiglu_matches);
    RUN(test_swiglu_refusals);
#else
    RUN(test_gpu_unavailable);
#endif
    return sd_test_done();
}
