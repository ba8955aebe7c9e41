/* test_cslt: the cuSPARSELt module (engine/cuda_cslt.h). Without a GPU: the row padding, and the
 * library's loading through dlopen (every entry point resolved, the version checked against the
 * build's header; CI has the library with PyTorch's CUDA wheels), and a clear error for a path
 * that is no library. With a GPU: y (+)= x W^T against an fp64 reference for row counts around the
 * padding, with and without accumulation, a weight that is not 2:4 refused, and a CUDA graph of a
 * matmul (refused before its plan exists, replayed correctly after the buffers grew and an eager use
 * of its plan on other operands). */
#include "tests/harness.h"

#include <math.h>
#include <stdint.h>

#ifndef SD_HAVE_CUDA
int main(void)
{
    fprintf(stderr, "  SKIP cuSPARSELt tests: built without CUDA\n");
    sd__t_skip++;
    return sd_test_done();
}
#else
#include <cuda_runtime.h>

#include "engine/cuda_cslt.h"
#include "engine/dtype.h"

/* cudaGetDeviceCount directly (not the backend's helper), so that this binary links the module
 * alone: the GPU runs carry their test binaries within a size limit. */
static int have_gpu(void)
{
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

static void test_pad_rows(void)
{
    CHECK(sd_cslt_pad_rows(1) == 64 && sd_cslt_pad_rows(64) == 64 && sd_cslt_pad_rows(65) == 128);
    CHECK(sd_cslt_pad_rows(300) == 320 && sd_cslt_pad_rows(2048) == 2048);
}

/* The build's library loads (or, built without the header, every entry point says so). */
static void test_probe(void)
{
    char v[512];
    sd_diag d = {0};
    int rc = sd_cslt_probe(v, sizeof v, &d);
    if (!sd_cslt_built()) {
        CHECK_MSG(rc == SD_ENOTSUP && strstr(sd_diag_str(&d, rc), "cusparseLt.h"), "%s", sd_diag_str(&d, rc));
        SKIP("built without cusparseLt.h: %s", sd_diag_str(&d, rc));
    }
    if (rc == SD_ENOTFOUND)
        SKIP("the build found cusparseLt.h but no library loads here: %s", sd_diag_str(&d, rc));
    CHECK_MSG(rc == 0, "%s", sd_diag_str(&d, rc));
    CHECK_MSG(rc || (v[0] >= '0' && v[0] <= '9' && strchr(v, '(')), "version '%s'", v);
    fprintf(stderr, "  cuSPARSELt %s\n", v);
}

/* SD_CUSPARSELT_LIB names the one file to load: a missing one is SD_ENOTFOUND naming it. */
static void test_bad_library(void)
{
    if (!sd_cslt_built())
        SKIP("built without cusparseLt.h");
    char v[64];
    sd_diag d = {0};
    setenv("SD_CUSPARSELT_LIB", "/nonexistent/libcusparseLt.so.0", 1);
    int rc = sd_cslt_probe(v, sizeof v, &d);
    sd_cslt *c = NULL;
    sd_diag d2 = {0};
    int rc2 = sd_cslt_open(&c, 0, &d2);
    unsetenv("SD_CUSPARSELT_LIB");
    CHECK_MSG(rc == SD_ENOTFOUND && strstr(sd_diag_str(&d, rc), "/nonexistent/libcusparseLt.so.0"), "%s",
              sd_diag_str(&d, rc));
    CHECK_MSG(rc2 == SD_ENOTFOUND && c == NULL, "%s", sd_diag_str(&d2, rc2));
}

static uint32_t rng(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

static float urand(uint32_t *s)
{
    return (float)(rng(s) & 0xffff) / 32768.f - 1.f;
}

/* A random [rows, cols] bf16 weight with exactly 2 non-zeros in every group of 4 columns; with
 * `broken`, row 1's first group gets 3. */
static void make_weight(uint16_t *w, int rows, int cols, uint32_t seed, int broken)
{
    uint32_t s = seed;
    for (int r = 0; r < rows; r++)
        for (int g = 0; g < cols; g += 4) {
            int a = (int)(rng(&s) % 4), b = (a + 1 + (int)(rng(&s) % 3)) % 4;
            for (int k = 0; k < 4; k++)
                w[(size_t)r * cols + g + k] = k == a || k == b ? sd_f32_to_bf16(urand(&s)) : 0;
        }
    if (broken)
        for (int k = 0; k < 3; k++)
            w[(size_t)cols + k] = sd_f32_to_bf16(0.5f);
}

typedef struct dev_bufs {
    uint16_t *w, *x;
    float *y;
} dev_bufs;

static int dev_alloc(dev_bufs *b, size_t w, size_t x, size_t y)
{
    memset(b, 0, sizeof *b);
    return cudaMalloc((void **)&b->w, w * 2) != cudaSuccess ||
           cudaMalloc((void **)&b->x, x * 2) != cudaSuccess ||
           cudaMalloc((void **)&b->y, y * 4) != cudaSuccess;
}

static void dev_free(dev_bufs *b)
{
    cudaFree(b->w);
    cudaFree(b->x);
    cudaFree(b->y);
}

/* rel L2 of y [T, rows] against y0 (+ if acc) x W^T in fp64. */
static double ref_err(const float *y, const float *y0, const uint16_t *x, const uint16_t *w, int T, int rows,
                      int cols, int acc)
{
    double num = 0, den = 0;
    for (int t = 0; t < T; t++)
        for (int r = 0; r < rows; r++) {
            double ref = acc ? y0[(size_t)t * rows + r] : 0;
            for (int k = 0; k < cols; k++)
                ref +=
                    (double)sd_bf16_to_f32(x[(size_t)t * cols + k]) * sd_bf16_to_f32(w[(size_t)r * cols + k]);
            const double e = y[(size_t)t * rows + r] - ref;
            num += e * e;
            den += ref * ref;
        }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* Rows [r0, r1) of the device x: NaN (the padding sd_cslt_matmul reads past T may hold anything,
 * and must not reach the rows it returns), or host x's again. */
static int x_rows(const dev_bufs *b, const uint16_t *x, int cols, int r0, int r1, int nan)
{
    const size_t n = (size_t)(r1 - r0) * cols;
    uint16_t *h = nan ? malloc(n * 2 + 2) : NULL;
    if (nan && !h)
        return -1;
    for (size_t i = 0; nan && i < n; i++)
        h[i] = 0x7fc0;
    const int rc = cudaMemcpy(b->x + (size_t)r0 * cols, nan ? h : x + (size_t)r0 * cols, n * 2,
                              cudaMemcpyHostToDevice) != cudaSuccess;
    free(h);
    return rc;
}

/* y (+)= x W^T for T rows, y poisoned (or holding y0 to add to) first, x's padding rows NaN. */
static void one_matmul(sd_cslt *c, const dev_bufs *b, const uint16_t *x, const uint16_t *w, int T, int rows,
                       int cols, int acc, uint32_t seed)
{
    const size_t ny = (size_t)T * rows;
    float *y0 = malloc(ny * 4), *y = malloc(ny * 4);
    REQUIRE(y0 && y);
    uint32_t s = seed;
    for (size_t i = 0; i < ny; i++)
        y0[i] = acc ? urand(&s) : NAN;
    sd_diag d = {0};
    int rc = cudaMemcpy(b->y, y0, ny * 4, cudaMemcpyHostToDevice) != cudaSuccess ||
             x_rows(b, x, cols, T, sd_cslt_pad_rows(T), 1);
    if (!rc)
        rc = sd_cslt_matmul(c, b->w, b->x, b->y, T, acc, NULL, &d);
    if (x_rows(b, x, cols, T, sd_cslt_pad_rows(T), 0))
        rc = rc ? rc : -1;
    CHECK_MSG(rc == 0, "T=%d acc=%d: %s", T, acc, sd_diag_str(&d, rc));
    if (!rc)
        rc = cudaMemcpy(y, b->y, ny * 4, cudaMemcpyDeviceToHost) != cudaSuccess;
    if (!rc) {
        /* the product is rounded to bf16 (cuda_cslt.h): ~2^-9 relative a value */
        const double e = ref_err(y, y0, x, w, T, rows, cols, acc);
        fprintf(stderr, "  T=%d acc=%d: rel L2 %.2e\n", T, acc, e);
        CHECK_MSG(e < 5e-3, "T=%d acc=%d: rel L2 %.3g", T, acc, e);
    }
    free(y0);
    free(y);
}

/* search: the plans pick their algorithm config by cusparseLtMatmulSearch (SD_CUSPARSELT=2). */
static void matmul_gpu(int search)
{
    if (!have_gpu())
        SKIP("no CUDA device");
    if (!sd_cslt_built())
        SKIP("built without cusparseLt.h");
    enum { ROWS = 192, COLS = 320, TMAX = 300 };
    const int xrows = sd_cslt_pad_rows(TMAX);
    uint16_t *w = malloc((size_t)ROWS * COLS * 2), *x = malloc((size_t)xrows * COLS * 2);
    dev_bufs b;
    REQUIRE(w && x && dev_alloc(&b, (size_t)ROWS * COLS, (size_t)xrows * COLS, (size_t)TMAX * ROWS) == 0);
    make_weight(w, ROWS, COLS, 7u, 0);
    uint32_t s = 11u;
    for (size_t i = 0; i < (size_t)xrows * COLS; i++)
        x[i] = sd_f32_to_bf16(urand(&s));
    sd_cslt *c = NULL;
    sd_diag d = {0};
    int rc = sd_cslt_open(&c, search, &d);
    CHECK_MSG(rc == 0, "%s", sd_diag_str(&d, rc));
    CHECK_MSG(rc || strchr(sd_cslt_version(c), '('), "version '%s'", rc ? "" : sd_cslt_version(c));
    if (!rc)
        rc = cudaMemcpy(b.w, w, (size_t)ROWS * COLS * 2, cudaMemcpyHostToDevice) != cudaSuccess ||
             cudaMemcpy(b.x, x, (size_t)xrows * COLS * 2, cudaMemcpyHostToDevice) != cudaSuccess;
    if (!rc) {
        rc = sd_cslt_add(c, b.w, b.w, ROWS, COLS, NULL, &d);
        CHECK_MSG(rc == 0, "%s", sd_diag_str(&d, rc));
    }
    int n = 0;
    CHECK_MSG(rc || (sd_cslt_has(c, b.w) && sd_cslt_bytes(c, &n) > 0 && n == 1), "one copy filed");
    const int Ts[] = {1, 63, 64, 100, TMAX};
    for (int i = 0; !rc && i < 5; i++)
        for (int acc = 0; acc < 2; acc++)
            one_matmul(c, &b, x, w, Ts[i], ROWS, COLS, acc, 100u + (uint32_t)i);
    sd_cslt_free(c);
    dev_free(&b);
    free(w);
    free(x);
}

static void test_matmul_gpu(void)
{
    matmul_gpu(0);
}

static void test_matmul_search_gpu(void)
{
    matmul_gpu(1);
}

/* A graph of y = x W^T (64 rows): refused inside a capture before an eager use has made its plan
 * (sd_cslt_ready), captured after one; a later eager use of 300 rows grows the module's product
 * buffer, an eager use of the captured plan on other x and y then writes through the new one, and
 * the graph, replayed after both, still writes the right y from its own x (the buffer it holds was
 * retired, not freed; nothing the library keeps per plan redirects it). A freed buffer could still
 * read right: compute-sanitizer (memcheck) is what proves the retirement. */
static void test_graph_gpu(void)
{
    if (!have_gpu())
        SKIP("no CUDA device");
    if (!sd_cslt_built())
        SKIP("built without cusparseLt.h");
    enum { ROWS = 192, COLS = 320, T = 64, TBIG = 300 };
    const int xrows = sd_cslt_pad_rows(TBIG);
    uint16_t *w = malloc((size_t)ROWS * COLS * 2), *x = malloc((size_t)xrows * COLS * 2);
    float *y = malloc((size_t)T * ROWS * 4);
    dev_bufs b;
    REQUIRE(w && x && y &&
            dev_alloc(&b, (size_t)ROWS * COLS, (size_t)xrows * COLS, (size_t)TBIG * ROWS) == 0);
    make_weight(w, ROWS, COLS, 17u, 0);
    uint32_t s = 19u;
    for (size_t i = 0; i < (size_t)xrows * COLS; i++)
        x[i] = sd_f32_to_bf16(urand(&s));
    cudaStream_t st = NULL;
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    sd_cslt *c = NULL;
    sd_diag d = {0};
    int rc = cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) != cudaSuccess;
    if (!rc)
        rc = sd_cslt_open(&c, 1, &d);
    if (!rc)
        rc = cudaMemcpy(b.w, w, (size_t)ROWS * COLS * 2, cudaMemcpyHostToDevice) != cudaSuccess ||
             cudaMemcpy(b.x, x, (size_t)xrows * COLS * 2, cudaMemcpyHostToDevice) != cudaSuccess;
    if (!rc)
        rc = sd_cslt_add(c, b.w, b.w, ROWS, COLS, st, &d);
    REQUIRE(rc == 0);
    CHECK(!sd_cslt_ready(c, b.w, T));
    /* no plan yet: refused inside the capture */
    REQUIRE(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
    const int refused = sd_cslt_matmul(c, b.w, b.x, b.y, T, 0, st, &d);
    REQUIRE(cudaStreamEndCapture(st, &g) == cudaSuccess);
    cudaGraphDestroy(g);
    g = NULL;
    CHECK_MSG(refused == SD_EINVAL && strstr(sd_diag_str(&d, refused), "capture"), "%d: %s", refused,
              sd_diag_str(&d, refused));
    /* an eager use makes (and searches) the plan of 64 rows, not of 128 */
    rc = sd_cslt_matmul(c, b.w, b.x, b.y, T, 0, st, &d);
    CHECK_MSG(rc == 0, "%s", sd_diag_str(&d, rc));
    CHECK(sd_cslt_ready(c, b.w, T) && sd_cslt_ready(c, b.w, 1) && !sd_cslt_ready(c, b.w, T + 1));
    if (!rc) {
        REQUIRE(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
        rc = sd_cslt_matmul(c, b.w, b.x, b.y, T, 0, st, &d);
        const cudaError_t e = cudaStreamEndCapture(st, &g);
        CHECK_MSG(rc == 0 && e == cudaSuccess, "capture: %s / %s", sd_diag_str(&d, rc),
                  cudaGetErrorString(e));
        if (!rc && e == cudaSuccess)
            rc = cudaGraphInstantiate(&ge, g, 0) != cudaSuccess;
    }
    if (!rc) /* 300 rows: a new plan, a larger product buffer (and maybe workspace) */
        rc = sd_cslt_matmul(c, b.w, b.x, b.y, TBIG, 0, st, &d);
    /* the captured plan again, eagerly, on other operands (x rows T..2T into y rows T..2T) and the
     * new product buffer: whatever the library keeps per plan must not redirect the graph's GEMM */
    const uint16_t *x2 = x + (size_t)T * COLS;
    if (!rc)
        rc = sd_cslt_matmul(c, b.w, b.x + (size_t)T * COLS, b.y + (size_t)T * ROWS, T, 0, st, &d);
    CHECK_MSG(rc == 0, "%s", sd_diag_str(&d, rc));
    float *y2 = malloc((size_t)T * ROWS * 4);
    REQUIRE(y2);
    if (!rc) {
        for (size_t i = 0; i < (size_t)T * ROWS; i++)
            y[i] = NAN;
        rc = cudaStreamSynchronize(st) != cudaSuccess ||
             cudaMemcpy(b.y, y, (size_t)T * ROWS * 4, cudaMemcpyHostToDevice) != cudaSuccess ||
             cudaGraphLaunch(ge, st) != cudaSuccess || cudaStreamSynchronize(st) != cudaSuccess ||
             cudaMemcpy(y, b.y, (size_t)T * ROWS * 4, cudaMemcpyDeviceToHost) != cudaSuccess ||
             cudaMemcpy(y2, b.y + (size_t)T * ROWS, (size_t)T * ROWS * 4, cudaMemcpyDeviceToHost) !=
                 cudaSuccess;
        CHECK_MSG(rc == 0, "replay: %s", cudaGetErrorString(cudaGetLastError()));
    }
    if (!rc) {
        const double e = ref_err(y, NULL, x, w, T, ROWS, COLS, 0),
                     e2 = ref_err(y2, NULL, x2, w, T, ROWS, COLS, 0);
        fprintf(stderr,
                "  graph of %d rows replayed after a %d-row use: rel L2 %.2e (the eager use between: %.2e)\n",
                T, TBIG, e, e2);
        CHECK_MSG(e < 5e-3, "graph replay: rel L2 %.3g", e);
        CHECK_MSG(e2 < 5e-3, "eager use of the captured plan: rel L2 %.3g", e2);
    }
    free(y2);
    if (ge)
        cudaGraphExecDestroy(ge);
    if (g)
        cudaGraphDestroy(g);
    sd_cslt_free(c);
    if (st)
        cudaStreamDestroy(st);
    dev_free(&b);
    free(w);
    free(x);
    free(y);
}

/* A weight with 3 non-zeros in a group of 4 is refused by the structure check, and nothing is filed. */
static void test_not_2of4_gpu(void)
{
    if (!have_gpu())
        SKIP("no CUDA device");
    if (!sd_cslt_built())
        SKIP("built without cusparseLt.h");
    enum { ROWS = 64, COLS = 128 };
    uint16_t *w = malloc((size_t)ROWS * COLS * 2);
    dev_bufs b;
    REQUIRE(w && dev_alloc(&b, (size_t)ROWS * COLS, 64, 64) == 0);
    make_weight(w, ROWS, COLS, 3u, 1);
    sd_cslt *c = NULL;
    sd_diag d = {0};
    int rc = sd_cslt_open(&c, 0, &d);
    CHECK_MSG(rc == 0, "%s", sd_diag_str(&d, rc));
    if (!rc && cudaMemcpy(b.w, w, (size_t)ROWS * COLS * 2, cudaMemcpyHostToDevice) == cudaSuccess) {
        rc = sd_cslt_add(c, b.w, b.w, ROWS, COLS, NULL, &d);
        CHECK_MSG(rc == SD_EINVAL && strstr(sd_diag_str(&d, rc), "not 2:4"), "%d: %s", rc,
                  sd_diag_str(&d, rc));
        CHECK(!sd_cslt_has(c, b.w));
        rc = sd_cslt_add(c, b.w, b.w, ROWS, 100, NULL, &d); /* columns not a multiple of 64 */
        CHECK_MSG(rc == SD_EINVAL, "%d: %s", rc, sd_diag_str(&d, rc));
    }
    sd_cslt_free(c);
    dev_free(&b);
    free(w);
}

int main(void)
{
    RUN(test_pad_rows);
    RUN(test_probe);
    RUN(test_bad_library);
    RUN(test_matmul_gpu);
    RUN(test_matmul_search_gpu);
    RUN(test_not_2of4_gpu);
    RUN(test_graph_gpu);
    return sd_test_done();
}
#endif
