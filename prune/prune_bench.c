/* prune_bench: the synthetic linear and Hessian, and the timed solver runs on CPU or GPU. */
#include "prune/prune_bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/cpu_pool.h"
#include "prune/prune_cuda.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static uint64_t next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static double normal(uint64_t *s)
{
    double u = ((double)(next(s) >> 11) + 0.5) / 9007199254740992.0;
    double v = ((double)(next(s) >> 11) + 0.5) / 9007199254740992.0;
    return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

/* H = S K S with K the Kac-Murdock-Szego matrix 0.9^|i-j| (positive definite), S = diag of
 * per-feature scales (log-normal, like activation norms with outliers), every 97th feature dead. */
static void synth(double *H, float *W, int64_t rows, int64_t cols, uint64_t seed)
{
    uint64_t s = seed ? seed : 1;
    double *sc = malloc((size_t)cols * sizeof *sc);
    for (int64_t j = 0; j < cols; j++)
        sc[j] = j % 97 == 13 ? 0 : exp(0.7 * normal(&s));
    double *rho = malloc((size_t)cols * sizeof *rho); /* 0.9^k */
    rho[0] = 1;
    for (int64_t k = 1; k < cols; k++)
        rho[k] = rho[k - 1] * 0.9;
    for (int64_t i = 0; i < cols; i++)
        for (int64_t j = 0; j < cols; j++)
            H[i * cols + j] = sc[i] * sc[j] * rho[i > j ? i - j : j - i];
    free(rho);
    for (int64_t i = 0; i < rows * cols; i++)
        W[i] = (float)(0.02 * normal(&s));
    free(sc);
}

static uint64_t fnv(const uint32_t *w, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        for (int b = 0; b < 4; b++)
            h = (h ^ ((w[i] >> (8 * b)) & 0xff)) * 1099511628211ull;
    return h;
}

static int run_cpu(float *W, int64_t rows, int64_t cols, double *H, const sd_sgpt_opts *o, int threads,
                   uint32_t *keep, sd_prune_bench *out, sd_diag *d)
{
    sd_cpu_pool *pool = NULL;
    double *U = malloc((size_t)(cols * cols) * sizeof *U);
    uint8_t *dead = malloc((size_t)cols);
    sd_sgpt_stats st = {0};
    int rc =
        U && dead ? sd_cpu_pool_init(&pool, threads, d) : sd_diag_set(d, SD_ENOMEM, "bench: out of memory");
    double t0 = now_s();
    if (rc == 0)
        rc = sd_sgpt_hinv(pool, H, cols, o, U, dead, &st, d);
    double t1 = now_s();
    if (rc == 0)
        rc = sd_sgpt_sweep(pool, W, rows, cols, U, dead, o, keep, &st, d);
    out->factor_s = t1 - t0;
    out->sweep_s = now_s() - t1;
    out->loss = st.loss;
    sd_cpu_pool_free(pool);
    free(U);
    free(dead);
    return rc;
}

static int run_gpu(float *W, int64_t rows, int64_t cols, const double *H, const sd_sgpt_opts *o,
                   uint32_t *keep, sd_prune_bench *out, sd_diag *d)
{
    sd_prune_gpu *g = NULL;
    sd_sgpt_stats st = {0};
    int rc = sd_prune_gpu_init(&g, 0, d);
    double t0 = now_s();
    if (rc == 0)
        rc = sd_prune_gpu_hinv(g, H, cols, o, NULL, NULL, &st, d);
    double t1 = now_s();
    if (rc == 0)
        rc = sd_prune_gpu_sweep(g, W, rows, cols, o, keep, &st, d);
    out->factor_s = t1 - t0;
    out->sweep_s = now_s() - t1;
    out->loss = st.loss;
    sd_prune_gpu_free(g);
    return rc;
}

int sd_prune_bench_solver(int64_t rows, int64_t cols, const sd_sgpt_opts *o, sd_prune_device device,
                          int threads, uint64_t seed, sd_prune_bench *out, sd_diag *d)
{
    int rc = sd_sgpt_check(cols, o, d);
    if (rc != 0)
        return rc;
    if (rows <= 0)
        return sd_diag_set(d, SD_EINVAL, "bench: %lld rows", (long long)rows);
    double *H = malloc((size_t)(cols * cols) * sizeof *H);
    float *W = malloc((size_t)(rows * cols) * sizeof *W);
    uint32_t *keep = malloc((size_t)(rows * (cols / 32)) * sizeof *keep);
    memset(out, 0, sizeof *out);
    if (!H || !W || !keep)
        rc = sd_diag_set(d, SD_ENOMEM, "bench: out of memory for a [%lld, %lld] linear", (long long)rows,
                         (long long)cols);
    if (rc == 0) {
        synth(H, W, rows, cols, seed);
        rc = device == SD_PRUNE_DEV_CUDA ? run_gpu(W, rows, cols, H, o, keep, out, d)
                                         : run_cpu(W, rows, cols, H, o, threads, keep, out, d);
    }
    if (rc == 0)
        out->mask_hash = fnv(keep, (size_t)(rows * (cols / 32)));
    free(H);
    free(W);
    free(keep);
    return rc;
}
