/* prune_cuda: the GPU pruning context, SparseGPT's damped inverse-Cholesky factor with cuSOLVER,
 * and fp64 Hessian accumulators folded with cuBLAS DSYRK. */
#include "prune/prune_cuda_impl.cuh"

#include <cuda_bf16.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

int sd_prune_gpu_init(sd_prune_gpu **ret, int device, sd_diag *d)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        cudaGetLastError();
        return sd_diag_set(d, SD_ENODEV, "prune: --device cuda: no CUDA device found (%s)",
                           e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    }
    if (device < 0 || device >= count)
        return sd_diag_set(d, SD_ENODEV, "prune: CUDA device %d does not exist (%d present)", device, count);
    sd_prune_gpu *g = (sd_prune_gpu *)calloc(1, sizeof *g);
    if (!g)
        return sd_diag_set(d, SD_ENOMEM, "prune gpu: out of memory");
    g->device = device;
    int rc = 0;
    if (cudaSetDevice(device) != cudaSuccess ||
        cudaStreamCreateWithFlags(&g->st, cudaStreamNonBlocking) != cudaSuccess)
        rc = sd_diag_set(d, SD_ECUDA, "prune gpu: cannot start device %d: %s", device,
                         cudaGetErrorString(cudaGetLastError()));
    else if (cublasCreate(&g->blas) != CUBLAS_STATUS_SUCCESS ||
             cublasSetStream(g->blas, g->st) != CUBLAS_STATUS_SUCCESS)
        rc = sd_diag_set(d, SD_ECUDA, "prune gpu: cuBLAS initialisation failed");
    else if (cusolverDnCreate(&g->sol) != CUSOLVER_STATUS_SUCCESS ||
             cusolverDnSetStream(g->sol, g->st) != CUSOLVER_STATUS_SUCCESS)
        rc = sd_diag_set(d, SD_ECUDA, "prune gpu: cuSOLVER initialisation failed");
    if (rc != 0) {
        sd_prune_gpu_free(g);
        return rc;
    }
    *ret = g;
    return 0;
}

void sd_prune_gpu_free(sd_prune_gpu *g)
{
    if (!g)
        return;
    cudaSetDevice(g->device);
    if (g->sol)
        cusolverDnDestroy(g->sol);
    if (g->blas)
        cublasDestroy(g->blas);
    cudaFree(g->U);
    cudaFree(g->dead);
    if (g->st)
        cudaStreamDestroy(g->st);
    free(g);
}

/* ---- Hessian clean-up (as sgpt.c's hess_clean) ----------------------------------------------- */

/* H = (H + H^T) / 2 with NaN/Inf entries as 0, counted in *bad like the CPU (a bad diagonal once,
 * an off-diagonal pair per bad entry). One thread per (i, j) with i <= j. */
__global__ void k_clean(double *H, int64_t n, int *bad)
{
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n * n;
         k += (int64_t)gridDim.x * blockDim.x) {
        int64_t i = k / n, j = k % n;
        if (i > j)
            continue;
        double a = H[i * n + j], b = H[j * n + i];
        int cnt = 0;
        if (!isfinite(a)) {
            a = 0;
            cnt++;
        }
        if (!isfinite(b)) {
            b = 0;
            cnt += i != j;
        }
        if (cnt)
            atomicAdd(bad, cnt);
        double s = __dmul_rn(0.5, __dadd_rn(a, b));
        H[i * n + j] = s;
        H[j * n + i] = s;
    }
}

/* Dead columns (H_jj == 0) get H_jj = 1 and dead[j] = 1. */
__global__ void k_dead(double *H, int64_t n, uint8_t *dead)
{
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < n;
         j += (int64_t)gridDim.x * blockDim.x) {
        int is_dead = H[j * n + j] == 0;
        if (is_dead)
            H[j * n + j] = 1;
        dead[j] = (uint8_t)is_dead;
    }
}

/* B = P (H + lambda I) P, P the order-reversing permutation: a plain reversal of the memory. */
__global__ void k_reverse_damp(const double *H, double *B, int64_t n, double lambda)
{
    int64_t nn = n * n;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < nn;
         k += (int64_t)gridDim.x * blockDim.x) {
        double v = H[nn - 1 - k];
        if (k / n == k % n)
            v = __dadd_rn(v, lambda);
        B[k] = v;
    }
}

/* U (row-major, upper) from Y = Ub^{-1} (column-major upper, Ub^T Ub = B): with R = P Ub^T P,
 * A = R R^T and U = R^{-1} = P Ub^{-T} P, which is the reversed memory of Y. Lower part zero. */
__global__ void k_factor_out(const double *Y, double *U, int64_t n)
{
    int64_t nn = n * n;
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < nn;
         k += (int64_t)gridDim.x * blockDim.x)
        U[k] = k / n <= k % n ? Y[nn - 1 - k] : 0.0;
}

static int factor_reserve(sd_prune_gpu *g, int64_t n, sd_diag *d)
{
    if (g->cap >= n * n)
        return 0;
    cudaFree(g->U);
    cudaFree(g->dead);
    g->U = NULL;
    g->dead = NULL;
    g->cap = 0;
    g->n = 0;
    if (cudaMalloc(&g->U, (size_t)(n * n) * sizeof(double)) != cudaSuccess ||
        cudaMalloc(&g->dead, (size_t)n) != cudaSuccess) {
        cudaGetLastError();
        return sd_diag_set(d, SD_ENOMEM, "prune gpu: no device memory for a %lldx%lld factor", (long long)n,
                           (long long)n);
    }
    g->cap = n * n;
    return 0;
}

/* Cleans dH in place on the device; fills dead (host), the mean of the cleaned diagonal (summed
 * on the host in column order, as the CPU does, so lambda is the same) and the stats. */
static int hess_clean(sd_prune_gpu *g, double *dH, int64_t n, uint8_t *dead, double *mean, sd_sgpt_stats *st,
                      sd_diag *d)
{
    int *dbad = NULL, bad = 0;
    double *diag = (double *)malloc((size_t)n * sizeof *diag);
    uint8_t *hd = (uint8_t *)malloc((size_t)n);
    int rc = 0;
    if (!diag || !hd)
        rc = sd_diag_set(d, SD_ENOMEM, "prune gpu: out of memory");
    else if (cudaMalloc(&dbad, sizeof(int)) != cudaSuccess ||
             cudaMemsetAsync(dbad, 0, sizeof(int), g->st) != cudaSuccess)
        rc = sd_diag_set(d, SD_ECUDA, "prune gpu: %s", cudaGetErrorString(cudaGetLastError()));
    if (rc == 0) {
        k_clean<<<sd__pg_grid(n * n), 256, 0, g->st>>>(dH, n, dbad);
        k_dead<<<sd__pg_grid(n), 256, 0, g->st>>>(dH, n, g->dead);
        if (cudaMemcpy2DAsync(diag, sizeof(double), dH, (size_t)(n + 1) * sizeof(double), sizeof(double),
                              (size_t)n, cudaMemcpyDeviceToHost, g->st) != cudaSuccess ||
            cudaMemcpyAsync(hd, g->dead, (size_t)n, cudaMemcpyDeviceToHost, g->st) != cudaSuccess ||
            cudaMemcpyAsync(&bad, dbad, sizeof bad, cudaMemcpyDeviceToHost, g->st) != cudaSuccess ||
            cudaStreamSynchronize(g->st) != cudaSuccess)
            rc = sd_diag_set(d, SD_ECUDA, "prune gpu: Hessian clean-up: %s",
                             cudaGetErrorString(cudaGetLastError()));
    }
    if (rc == 0) {
        double sum = 0;
        for (int64_t j = 0; j < n; j++) {
            st->dead_cols += hd[j];
            sum += diag[j];
        }
        st->sanitized += bad;
        *mean = sum / (double)n;
        if (dead)
            memcpy(dead, hd, (size_t)n);
    }
    cudaFree(dbad);
    free(diag);
    free(hd);
    return rc;
}

/* One attempt: B = P (H + lambda I) P, potrf (upper), trtri; returns 1 when not positive definite. */
static int factor_try(sd_prune_gpu *g, const double *dH, double *dB, int64_t n, double lambda, int *dinfo,
                      void *work, int lwork, void *twork, size_t tbytes, void *htwork, size_t htbytes,
                      sd_diag *d)
{
    int info = 0;
    k_reverse_damp<<<sd__pg_grid(n * n), 256, 0, g->st>>>(dH, dB, n, lambda);
    SD_PG_CU(d, cudaGetLastError());
    SD_PG_SOLVER(d, cusolverDnDpotrf(g->sol, CUBLAS_FILL_MODE_UPPER, (int)n, dB, (int)n, (double *)work,
                                     lwork, dinfo));
    SD_PG_CU(d, cudaMemcpyAsync(&info, dinfo, sizeof info, cudaMemcpyDeviceToHost, g->st));
    SD_PG_CU(d, cudaStreamSynchronize(g->st));
    if (info != 0)
        return 1;
    SD_PG_SOLVER(d, cusolverDnXtrtri(g->sol, CUBLAS_FILL_MODE_UPPER, CUBLAS_DIAG_NON_UNIT, n, CUDA_R_64F, dB,
                                     n, twork, tbytes, htwork, htbytes, dinfo));
    SD_PG_CU(d, cudaMemcpyAsync(&info, dinfo, sizeof info, cudaMemcpyDeviceToHost, g->st));
    SD_PG_CU(d, cudaStreamSynchronize(g->st));
    if (info != 0) /* a zero pivot: cannot happen after a successful potrf, but retry like one */
        return 1;
    k_factor_out<<<sd__pg_grid(n * n), 256, 0, g->st>>>(dB, g->U, n);
    SD_PG_CU(d, cudaGetLastError());
    return 0;
}

typedef struct hinv_bufs {
    double *dH, *dB;
    int *dinfo;
    void *work, *twork, *htwork;
    int lwork;
    size_t tbytes, htbytes;
} hinv_bufs;

static void hinv_bufs_free(hinv_bufs *b)
{
    cudaFree(b->dH);
    cudaFree(b->dB);
    cudaFree(b->dinfo);
    cudaFree(b->work);
    cudaFree(b->twork);
    free(b->htwork);
}

static int hinv_bufs_init(sd_prune_gpu *g, hinv_bufs *b, int64_t n, sd_diag *d)
{
    size_t bytes = (size_t)(n * n) * sizeof(double);
    if (cudaMalloc(&b->dH, bytes) != cudaSuccess || cudaMalloc(&b->dB, bytes) != cudaSuccess ||
        cudaMalloc(&b->dinfo, sizeof(int)) != cudaSuccess) {
        cudaGetLastError();
        return sd_diag_set(d, SD_ENOMEM, "prune gpu: no device memory for two %lldx%lld fp64 matrices",
                           (long long)n, (long long)n);
    }
    SD_PG_SOLVER(
        d, cusolverDnDpotrf_bufferSize(g->sol, CUBLAS_FILL_MODE_UPPER, (int)n, b->dB, (int)n, &b->lwork));
    SD_PG_SOLVER(d, cusolverDnXtrtri_bufferSize(g->sol, CUBLAS_FILL_MODE_UPPER, CUBLAS_DIAG_NON_UNIT, n,
                                                CUDA_R_64F, b->dB, n, &b->tbytes, &b->htbytes));
    SD_PG_CU(d, cudaMalloc(&b->work, (size_t)(b->lwork > 0 ? b->lwork : 1) * sizeof(double)));
    SD_PG_CU(d, cudaMalloc(&b->twork, b->tbytes > 0 ? b->tbytes : 1));
    b->htwork = malloc(b->htbytes > 0 ? b->htbytes : 1);
    if (!b->htwork)
        return sd_diag_set(d, SD_ENOMEM, "prune gpu: out of memory");
    return 0;
}

int sd_prune_gpu_hinv(sd_prune_gpu *g, const double *H, int64_t n, const sd_sgpt_opts *o, double *U,
                      uint8_t *dead, sd_sgpt_stats *st, sd_diag *d)
{
    sd_sgpt_stats local = {};
    if (!st)
        st = &local;
    if (n <= 0 || n > 46340) /* potrf takes int sizes; n * n must fit */
        return sd_diag_set(d, SD_EINVAL, "prune gpu: Hessian size %lld out of range", (long long)n);
    SD_PG_CU(d, cudaSetDevice(g->device));
    hinv_bufs b = {};
    double mean = 0, lambda = 0;
    int rc = factor_reserve(g, n, d);
    g->n = 0;
    if (rc == 0)
        rc = hinv_bufs_init(g, &b, n, d);
    if (rc == 0 && cudaMemcpyAsync(b.dH, H, (size_t)(n * n) * sizeof(double), cudaMemcpyHostToDevice,
                                   g->st) != cudaSuccess)
        rc = sd_diag_set(d, SD_ECUDA, "prune gpu: upload of H: %s", cudaGetErrorString(cudaGetLastError()));
    if (rc == 0)
        rc = hess_clean(g, b.dH, n, dead, &mean, st, d);
    int ok = 0;
    lambda = o->damping * mean;
    for (int attempt = 0; rc == 0 && !ok && attempt <= o->max_retries; attempt++) {
        if (attempt > 0) {
            lambda *= 10;
            if (lambda == 0)
                lambda = 1e-8 * (mean > 0 ? mean : 1);
        }
        int r = factor_try(g, b.dH, b.dB, n, lambda, b.dinfo, b.work, b.lwork, b.twork, b.tbytes, b.htwork,
                           b.htbytes, d);
        if (r < 0)
            rc = r;
        else if (r == 0) {
            ok = 1;
            st->retries = attempt;
            st->damp_used = lambda;
        }
    }
    if (rc == 0 && !ok)
        rc = sd_diag_set(d, SD_ERANGE,
                         "sparsegpt (gpu): Hessian [%lld] not positive definite even with damping %g",
                         (long long)n, lambda);
    if (rc == 0 && U &&
        (cudaMemcpyAsync(U, g->U, (size_t)(n * n) * sizeof(double), cudaMemcpyDeviceToHost, g->st) !=
             cudaSuccess ||
         cudaStreamSynchronize(g->st) != cudaSuccess))
        rc = sd_diag_set(d, SD_ECUDA, "prune gpu: download of U: %s", cudaGetErrorString(cudaGetLastError()));
    if (rc == 0)
        g->n = n;
    hinv_bufs_free(&b);
    return rc;
}

/* ---- Hessian accumulators -------------------------------------------------------------------- */

struct sd_prune_gpu_acc {
    sd_prune_gpu *g;
    int64_t cols;
    double *acc; /* [cols, cols] column-major, upper triangle summed */
    float *xt;   /* [cols, cap] staged rows as uploaded */
    double *x;   /* [k, cols] column-major fp64 copy for DSYRK */
    int64_t cap; /* rows per add the staging buffers hold */
    double *xs;  /* device-side staging (sd_prune_gpu_acc_add_dev): [ACC_DEV_CHUNK, cols]
                    column-major, rows 0..staged-1 filled */
    int64_t staged;
};

/* Rows staged on the device per DSYRK: a rank-k update reads and writes the whole [cols, cols]
 * accumulator, so folding decode steps of a few rows one by one would be memory-bound. */
#define ACC_DEV_CHUNK 256

int sd_prune_gpu_acc_init(sd_prune_gpu *g, sd_prune_gpu_acc **ret, int64_t cols, sd_diag *d)
{
    SD_PG_CU(d, cudaSetDevice(g->device));
    sd_prune_gpu_acc *a = (sd_prune_gpu_acc *)calloc(1, sizeof *a);
    if (!a)
        return sd_diag_set(d, SD_ENOMEM, "prune gpu: out of memory");
    a->g = g;
    a->cols = cols;
    if (cudaMalloc(&a->acc, (size_t)(cols * cols) * sizeof(double)) != cudaSuccess ||
        cudaMemsetAsync(a->acc, 0, (size_t)(cols * cols) * sizeof(double), g->st) != cudaSuccess) {
        cudaGetLastError();
        sd_prune_gpu_acc_free(a);
        return sd_diag_set(d, SD_ENOMEM,
                           "prune gpu: no device memory for a %lldx%lld fp64 Hessian (%.2f GiB)",
                           (long long)cols, (long long)cols, (double)(cols * cols) * 8 / (1 << 30));
    }
    *ret = a;
    return 0;
}

void sd_prune_gpu_acc_free(sd_prune_gpu_acc *a)
{
    if (!a)
        return;
    cudaFree(a->acc);
    cudaFree(a->xt);
    cudaFree(a->x);
    cudaFree(a->xs);
    free(a);
}

/* x (column-major [k, cols], fp64) from xt ([cols, ld] fp32: row j = column j of the rows). */
__global__ void k_stage(const float *xt, int64_t ld, int64_t k, int64_t cols, double *x)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < k * cols;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t j = i / k, t = i % k;
        x[i] = (double)xt[j * ld + t];
    }
}

int sd_prune_gpu_acc_add(sd_prune_gpu_acc *a, const float *xt, int64_t ld, int64_t k, sd_diag *d)
{
    if (k <= 0)
        return 0;
    sd_prune_gpu *g = a->g;
    int64_t c = a->cols;
    SD_PG_CU(d, cudaSetDevice(g->device));
    if (ld > a->cap) {
        cudaFree(a->xt);
        cudaFree(a->x);
        a->xt = NULL;
        a->x = NULL;
        a->cap = 0;
        SD_PG_CU(d, cudaMalloc(&a->xt, (size_t)(c * ld) * sizeof(float)));
        SD_PG_CU(d, cudaMalloc(&a->x, (size_t)(c * ld) * sizeof(double)));
        a->cap = ld;
    }
    SD_PG_CU(d, cudaMemcpyAsync(a->xt, xt, (size_t)(c * ld) * sizeof(float), cudaMemcpyHostToDevice, g->st));
    k_stage<<<sd__pg_grid(k * c), 256, 0, g->st>>>(a->xt, ld, k, c, a->x);
    SD_PG_CU(d, cudaGetLastError());
    const double one = 1;
    SD_PG_BLAS(d, cublasDsyrk(g->blas, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_T, (int)c, (int)k, &one, a->x,
                              (int)k, &one, a->acc, (int)c));
    /* the caller reuses xt at once: the upload must be done */
    SD_PG_CU(d, cudaStreamSynchronize(g->st));
    return 0;
}

/* xs[t0 + t, j] (column-major, leading dimension ACC_DEV_CHUNK) = x[t, j] for t < n, j < cols;
 * x: bf16 rows of ld elements (device). */
__global__ void k_stage_bf16(const __nv_bfloat16 *x, int64_t ld, int64_t n, int64_t cols, double *xs,
                             int64_t t0)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n * cols;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t t = i / cols, j = i % cols;
        xs[j * ACC_DEV_CHUNK + t0 + t] = (double)__bfloat162float(x[t * ld + j]);
    }
}

/* acc += the staged device rows (upper triangle). */
static int acc_fold_dev(sd_prune_gpu_acc *a, sd_diag *d)
{
    if (a->staged == 0)
        return 0;
    const double one = 1;
    SD_PG_BLAS(d, cublasDsyrk(a->g->blas, CUBLAS_FILL_MODE_UPPER, CUBLAS_OP_T, (int)a->cols, (int)a->staged,
                              &one, a->xs, ACC_DEV_CHUNK, &one, a->acc, (int)a->cols));
    a->staged = 0;
    return 0;
}

int sd_prune_gpu_acc_add_dev(sd_prune_gpu_acc *a, const void *x, int64_t ld, int64_t n, sd_diag *d)
{
    if (n <= 0)
        return 0;
    sd_prune_gpu *g = a->g;
    int64_t c = a->cols;
    if (ld < c)
        return sd_diag_set(d, SD_EINVAL, "prune gpu: rows of %lld elements for a %lld-column Hessian",
                           (long long)ld, (long long)c);
    SD_PG_CU(d, cudaSetDevice(g->device));
    if (!a->xs)
        SD_PG_CU(d, cudaMalloc(&a->xs, (size_t)(c * ACC_DEV_CHUNK) * sizeof(double)));
    const __nv_bfloat16 *src = (const __nv_bfloat16 *)x;
    for (int64_t t = 0; t < n;) {
        int64_t k = n - t < ACC_DEV_CHUNK - a->staged ? n - t : ACC_DEV_CHUNK - a->staged;
        k_stage_bf16<<<sd__pg_grid(k * c), 256, 0, g->st>>>(src + t * ld, ld, k, c, a->xs, a->staged);
        SD_PG_CU(d, cudaGetLastError());
        a->staged += k;
        t += k;
        if (a->staged == ACC_DEV_CHUNK) {
            int rc = acc_fold_dev(a, d);
            if (rc != 0)
                return rc;
        }
    }
    /* the caller's buffer is overwritten once we return: its rows must have been read */
    SD_PG_CU(d, cudaStreamSynchronize(g->st));
    return 0;
}

/* out[i, j] = scale * acc(min(i, j), max(i, j)) (acc column-major upper). */
__global__ void k_acc_out(const double *acc, int64_t n, double scale, double *out)
{
    for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n * n;
         k += (int64_t)gridDim.x * blockDim.x) {
        int64_t i = k / n, j = k % n;
        int64_t lo = i < j ? i : j, hi = i < j ? j : i;
        out[k] = acc[hi * n + lo] * scale;
    }
}

int sd_prune_gpu_acc_get(sd_prune_gpu_acc *a, double scale, double *out, sd_diag *d)
{
    sd_prune_gpu *g = a->g;
    int64_t n = a->cols;
    double *tmp = NULL;
    SD_PG_CU(d, cudaSetDevice(g->device));
    int rc = acc_fold_dev(a, d); /* rows still staged on the device */
    if (rc != 0)
        return rc;
    SD_PG_CU(d, cudaMalloc(&tmp, (size_t)(n * n) * sizeof(double)));
    k_acc_out<<<sd__pg_grid(n * n), 256, 0, g->st>>>(a->acc, n, scale, tmp);
    cudaError_t e =
        cudaMemcpyAsync(out, tmp, (size_t)(n * n) * sizeof(double), cudaMemcpyDeviceToHost, g->st);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(g->st);
    cudaFree(tmp);
    if (e != cudaSuccess)
        return sd_diag_set(d, SD_ECUDA, "prune gpu: Hessian download: %s", cudaGetErrorString(e));
    return 0;
}
