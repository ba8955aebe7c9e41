/* Tests for kernels/nm_spmv_cpu.c: bitmask SpMV (fp32, fp64) and dense GEMV vs a naive fp64
 * product on the expanded dense weights, for every pattern, unstructured, odd shapes and B. */
#include "kernels/nm_spmv_cpu.h"

#include "kernels/nm_format.h"
#include "tests/harness.h"
#include "tests/kernels/nm_test_util.h"

static const int k_pat[][2] = {{2, 4}, {4, 8}, {8, 16}, {16, 32}, {0, 0}};

/* Naive fp64 reference: yref[b*rows + r] = sum_c dense[r,c] * x[b*ldx + c]. */
static void ref_dense_f64(const uint16_t *dense, int64_t rows, int64_t cols, const float *x, int64_t ldx,
                          int B, double *yref)
{
    for (int b = 0; b < B; b++)
        for (int64_t r = 0; r < rows; r++) {
            double acc = 0;
            for (int64_t c = 0; c < cols; c++)
                acc += (double)sd_bf16_to_f32(dense[r * cols + c]) * x[b * ldx + c];
            yref[b * rows + r] = acc;
        }
}

static double rel_l2_f32(const float *y, int64_t ldy, const double *yref, int64_t rows, int B)
{
    double num = 0, den = 0;
    for (int b = 0; b < B; b++)
        for (int64_t r = 0; r < rows; r++) {
            double e = (double)y[b * ldy + r] - yref[b * rows + r];
            num += e * e;
            den += yref[b * rows + r] * yref[b * rows + r];
        }
    return num != num ? 1e30 : sqrt(num / (den > 0 ? den : 1));
}

typedef struct shape {
    int64_t rows, cols;
    int B;
} shape;

static const shape k_shapes[] = {{1, 32, 1},    {7, 64, 3},   {33, 96, 5}, {64, 512, 16},
                                 {13, 1024, 2}, {5, 1568, 2}, {3, 64, 70}, {9, 2080, 1},
                                 {4, 3104, 3},  {11, 256, 9}, {6, 128, 17}};

/* Runs one pattern over every shape; checks fp32 (<1e-5 rel L2), fp64 (<1e-12), padding untouched. */
static void check_pattern(int n, int m, uint64_t seed)
{
    for (size_t si = 0; si < sizeof k_shapes / sizeof k_shapes[0]; si++) {
        shape sh = k_shapes[si];
        int64_t rows = sh.rows, cols = sh.cols, ldx = cols + 5, ldy = rows + 3;
        uint64_t s = seed + si;
        uint16_t *dense = malloc((size_t)(rows * cols) * 2), *vals = malloc((size_t)(rows * cols / 2) * 2);
        uint16_t *back = malloc((size_t)(rows * cols) * 2);
        uint32_t *mask = malloc((size_t)(rows * cols / 32) * 4);
        float *x = malloc((size_t)(ldx * sh.B) * 4), *y = malloc((size_t)(ldy * sh.B) * 4);
        double *y64 = malloc((size_t)(ldy * sh.B) * 8), *yref = malloc((size_t)(rows * sh.B) * 8);
        REQUIRE(dense && vals && back && mask && x && y && y64 && yref);
        nmt_fill_bf16(dense, rows * cols, &s);
        nmt_fill_f32(x, ldx * sh.B, &s);
        REQUIRE(nmt_random_mask(mask, rows, cols, n, m, &s) == 0);
        REQUIRE(sd_nm_pack(dense, mask, rows, cols, vals, mask, NULL) == 0);
        REQUIRE(sd_nm_expand(vals, mask, rows, cols, back) == 0);
        ref_dense_f64(back, rows, cols, x, ldx, sh.B, yref);
        for (int64_t i = 0; i < ldy * sh.B; i++)
            y[i] = NAN, y64[i] = NAN;

        sd_nm_spmv_cpu(vals, mask, rows, cols, x, ldx, sh.B, y, ldy);
        double e32 = rel_l2_f32(y, ldy, yref, rows, sh.B);
        CHECK_MSG(e32 < 1e-5, "%d:%d %lldx%lld B=%d: fp32 rel L2 %g", n, m, (long long)rows, (long long)cols,
                  sh.B, e32);
        /* each vector alone (a group of one) gives the bits it got in the batch, and the path
         * without AVX2 gives the same bits for the batch */
        int differ = 0;
        float *y1 = malloc((size_t)rows * 4), *yp = malloc((size_t)(ldy * sh.B) * 4);
        REQUIRE(y1 && yp);
        for (int b = 0; b < sh.B; b++) {
            sd_nm_spmv_cpu(vals, mask, rows, cols, x + b * ldx, ldx, 1, y1, rows);
            differ += memcmp(y1, y + b * ldy, (size_t)rows * 4) != 0;
        }
        CHECK_MSG(differ == 0, "%d:%d %lldx%lld B=%d: %d vectors differ alone", n, m, (long long)rows,
                  (long long)cols, sh.B, differ);
        sd_nm_spmv_cpu_portable(vals, mask, rows, cols, x, ldx, sh.B, yp, ldy);
        differ = 0;
        for (int b = 0; b < sh.B; b++)
            differ += memcmp(yp + b * ldy, y + b * ldy, (size_t)rows * 4) != 0;
        CHECK_MSG(differ == 0, "%d:%d %lldx%lld B=%d: %d vectors differ without AVX2", n, m, (long long)rows,
                  (long long)cols, sh.B, differ);
        free(y1);
        free(yp);
        sd_nm_spmv_cpu_f64(vals, mask, rows, cols, x, ldx, sh.B, y64, ldy);
        double num = 0, den = 0;
        for (int b = 0; b < sh.B; b++)
            for (int64_t r = 0; r < rows; r++) {
                double e = y64[b * ldy + r] - yref[b * rows + r];
                num += e * e;
                den += yref[b * rows + r] * yref[b * rows + r];
            }
        CHECK_MSG(num == num && sqrt(num / den) < 1e-12, "%d:%d fp64 rel L2 %g", n, m, sqrt(num / den));
        int touched = 0;
        for (int b = 0; b < sh.B; b++)
            for (int64_t r = rows; r < ldy; r++)
                touched += !isnan(y[b * ldy + r]) + !isnan(y64[b * ldy + r]);
        CHECK_MSG(touched == 0, "%d:%d: %d padding entries of y written", n, m, touched);

        /* the dense twin on the expanded weights */
        for (int64_t i = 0; i < ldy * sh.B; i++)
            y[i] = NAN;
        sd_gemv_bf16_cpu(back, rows, cols, x, ldx, sh.B, y, ldy);
        double eg = rel_l2_f32(y, ldy, yref, rows, sh.B);
        CHECK_MSG(eg < 1e-5, "gemv %lldx%lld B=%d: rel L2 %g", (long long)rows, (long long)cols, sh.B, eg);
        sd_gemv_bf16_cpu_f64(back, rows, cols, x, ldx, sh.B, y64, ldy);
        num = 0;
        for (int b = 0; b < sh.B; b++)
            for (int64_t r = 0; r < rows; r++) {
                double e = y64[b * ldy + r] - yref[b * rows + r];
                num += e * e;
            }
        CHECK_MSG(num == num && sqrt(num / den) < 1e-12, "gemv fp64 rel L2 %g", sqrt(num / den));
        free(dense), free(vals), free(back), free(mask), free(x), free(y), free(y64), free(yref);
    }
}

static void test_spmv_2_4(void)
{
    check_pattern(2, 4, 100);
}
static void test_spmv_4_8(void)
{
    check_pattern(4, 8, 200);
}
static void test_spmv_8_16(void)
{
    check_pattern(8, 16, 300);
}
static void test_spmv_16_32(void)
{
    check_pattern(16, 32, 400);
}
static void test_spmv_unstructured(void)
{
    check_pattern(0, 0, 500);
}

int main(void)
{
    (void)k_pat;
    RUN(test_spmv_2_4);
    RUN(test_spmv_4_8);
    RUN(test_spmv_8_16);
    RUN(test_spmv_16_32);
    RUN(test_spmv_unstructured);
    return sd_test_done();
}
