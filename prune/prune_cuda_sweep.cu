/* prune_cuda_sweep: SparseGPT's column-blocked prune-and-update sweep on the GPU — inside a block
 * one warp per row (lane l holds columns b0 + l + 32k), the lazy update of the columns after the
 * block as one cuBLAS DGEMM. Mirrors sweep_row in sgpt.c step for step. */
#include "prune/prune_cuda_impl.cuh"

#include <stdlib.h>

#define FULL 0xffffffffu

/* w^2 / u^2 with the CPU's roundings (no fused multiply-add). */
__device__ __forceinline__ double score(double w, double u)
{
    return __ddiv_rn(__dmul_rn(w, w), __dmul_rn(u, u));
}

/* (score, column) order of sgpt.c's cmp_scored: is (a, ca) before (b, cb)? */
__device__ __forceinline__ bool before(double a, int ca, double b, int cb)
{
    return a < b || (a == b && ca < cb);
}

/* Unstructured: every row prunes the lowest half of the block's nslots*32 columns, scored at
 * the block's start. Sets bit k of the return for this lane's pruned slots. */
template <int J>
__device__ uint32_t block_half_mask(const double (&w)[J], const double *U, int64_t cols, int64_t b0,
                                    int nslots, int lane)
{
    double sc[J];
    int rank[J];
#pragma unroll
    for (int k = 0; k < J; k++) {
        int64_t j = b0 + 32 * k + lane;
        sc[k] = k < nslots ? score(w[k], U[j * cols + j]) : 0;
        rank[k] = 0;
    }
#pragma unroll
    for (int k2 = 0; k2 < J; k2++) {
        if (k2 >= nslots)
            break;
        for (int l2 = 0; l2 < 32; l2++) {
            double o = __shfl_sync(FULL, sc[k2], l2);
#pragma unroll
            for (int k = 0; k < J; k++)
                rank[k] += before(o, 32 * k2 + l2, sc[k], 32 * k + lane);
        }
    }
    uint32_t pm = 0;
#pragma unroll
    for (int k = 0; k < J; k++)
        if (k < nslots && rank[k] < nslots * 16)
            pm |= 1u << k;
    return pm;
}

/* One block of columns [b0, b0 + 32*nslots) for every row; W fp64 [rows, cols], U fp64 [cols,
 * cols], err fp64 [rows, bs] (the block's (w - q) / U_ii, for the lazy update), keep u32 [rows,
 * cols/32], loss fp64 [rows] (running sum in the CPU's order). */
template <int J>
__global__ void k_sweep_block(double *W, int64_t rows, int64_t cols, const double *U, int64_t b0, int nslots,
                              int bs, int n, int m, double *err, uint32_t *keep, double *loss)
{
    int lane = threadIdx.x & 31;
    int64_t r = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (r >= rows)
        return; /* whole warps leave together */
    double *wr = W + r * cols + b0;
    double w[J], e_own[J];
#pragma unroll
    for (int k = 0; k < J; k++) {
        w[k] = k < nslots ? wr[32 * k + lane] : 0;
        e_own[k] = 0;
    }
    uint32_t pm = m == 0 ? block_half_mask<J>(w, U, cols, b0, nslots, lane) : 0;
    double lr = loss[r];
#pragma unroll
    for (int s = 0; s < J; s++) {
        if (s >= nslots)
            break;
        for (int l = 0; l < 32; l++) {
            int t = 32 * s + l;
            const double *ui = U + (b0 + t) * cols + b0; /* row i = b0 + t of U, from column b0 */
            if (m && t % m == 0) {
                /* N:M: the group's lanes l..l+m-1 of slot s; prune its m - n lowest scores */
                double sc = score(w[s], U[(b0 + 32 * s + lane) * cols + b0 + 32 * s + lane]);
                int rank = 0;
                for (int q = 0; q < m; q++) {
                    double o = __shfl_sync(FULL, sc, l + q);
                    rank += before(o, l + q, sc, lane);
                }
                if (lane >= l && lane < l + m && rank < m - n)
                    pm |= 1u << s;
            }
            double wi = __shfl_sync(FULL, w[s], l);
            int pi = __shfl_sync(FULL, (int)(pm >> s) & 1, l);
            double q = pi ? 0.0 : wi;
            double e = __ddiv_rn(__dsub_rn(wi, q), ui[t]);
            lr = __dadd_rn(lr, __dmul_rn(__dmul_rn(e, e), 0.5));
#pragma unroll
            for (int k = 0; k < J; k++) {
                int c = 32 * k + lane;
                if (k >= s && k < nslots && c > t)
                    w[k] = __dsub_rn(w[k], __dmul_rn(e, ui[c]));
            }
            if (lane == l) {
                w[s] = q;
                e_own[s] = e;
            }
        }
    }
    uint32_t *kr = keep + r * (cols / 32) + b0 / 32;
#pragma unroll
    for (int k = 0; k < J; k++) {
        if (k >= nslots)
            break;
        wr[32 * k + lane] = w[k];
        err[r * bs + 32 * k + lane] = e_own[k];
        uint32_t word = __ballot_sync(FULL, !((pm >> k) & 1u));
        if (lane == 0)
            kr[k] = word;
    }
    if (lane == 0)
        loss[r] = lr;
}

/* W64 = W (fp32 -> fp64) with dead columns zeroed; loss = 0. */
__global__ void k_load(const float *W, int64_t rows, int64_t cols, const uint8_t *dead, double *W64,
                       double *loss)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < rows * cols;
         i += (int64_t)gridDim.x * blockDim.x) {
        W64[i] = dead[i % cols] ? 0.0 : (double)W[i];
        if (i < rows)
            loss[i] = 0;
    }
}

__global__ void k_store(const double *W64, int64_t n, float *W)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        W[i] = __double2float_rn(W64[i]);
}

static int launch_block(int jmax, dim3 grid, cudaStream_t st, double *W, int64_t rows, int64_t cols,
                        const double *U, int64_t b0, int nslots, int bs, int n, int m, double *err,
                        uint32_t *keep, double *loss)
{
    switch (jmax) {
    case 4:
        k_sweep_block<4><<<grid, 256, 0, st>>>(W, rows, cols, U, b0, nslots, bs, n, m, err, keep, loss);
        return 0;
    case 8:
        k_sweep_block<8><<<grid, 256, 0, st>>>(W, rows, cols, U, b0, nslots, bs, n, m, err, keep, loss);
        return 0;
    case 16:
        k_sweep_block<16><<<grid, 256, 0, st>>>(W, rows, cols, U, b0, nslots, bs, n, m, err, keep, loss);
        return 0;
    case 32:
        k_sweep_block<32><<<grid, 256, 0, st>>>(W, rows, cols, U, b0, nslots, bs, n, m, err, keep, loss);
        return 0;
    }
    return -1;
}

typedef struct sweep_bufs {
    float *w32;
    double *w64, *err, *loss;
    uint32_t *keep;
} sweep_bufs;

static void sweep_bufs_free(sweep_bufs *b)
{
    cudaFree(b->w32);
    cudaFree(b->w64);
    cudaFree(b->err);
    cudaFree(b->loss);
    cudaFree(b->keep);
}

/* The blocks: the warp kernel, then w[:, b1:] -= err . U[b0:b1, b1:] as one DGEMM (column-major
 * view: W^T[b1:, :] -= U^T[b1:, b0:b1] . err^T). */
static int sweep_blocks(sd_prune_gpu *g, sweep_bufs *b, int64_t rows, int64_t cols, const sd_sgpt_opts *o,
                        sd_diag *d)
{
    int bs = o->block_size, jmax = bs <= 128 ? 4 : bs <= 256 ? 8 : bs <= 512 ? 16 : 32;
    dim3 grid((unsigned)((rows + 7) / 8));
    const double minus1 = -1, one = 1;
    for (int64_t b0 = 0; b0 < cols; b0 += bs) {
        int64_t b1 = b0 + bs < cols ? b0 + bs : cols;
        int nslots = (int)((b1 - b0) / 32);
        launch_block(jmax, grid, g->st, b->w64, rows, cols, g->U, b0, nslots, bs, o->n, o->m, b->err, b->keep,
                     b->loss);
        SD_PG_CU(d, cudaGetLastError());
        if (b1 < cols)
            SD_PG_BLAS(d, cublasDgemm(g->blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)(cols - b1), (int)rows,
                                      (int)(b1 - b0), &minus1, g->U + b0 * cols + b1, (int)cols, b->err, bs,
                                      &one, b->w64 + b1, (int)cols));
    }
    return 0;
}

int sd_prune_gpu_sweep(sd_prune_gpu *g, float *W, int64_t rows, int64_t cols, const sd_sgpt_opts *o,
                       uint32_t *keep, sd_sgpt_stats *st, sd_diag *d)
{
    int rc = sd_sgpt_check(cols, o, d);
    if (rc != 0)
        return rc;
    if (g->n != cols)
        return sd_diag_set(d, SD_EINVAL, "prune gpu: sweep of %lld columns, but the last factor has %lld",
                           (long long)cols, (long long)g->n);
    if (o->block_size > 1024)
        return sd_diag_set(d, SD_ENOTSUP, "sparsegpt (gpu): block size %d above 1024", o->block_size);
    if (rows <= 0)
        return 0;
    SD_PG_CU(d, cudaSetDevice(g->device));
    sweep_bufs b = {};
    size_t nw = (size_t)(rows * cols);
    double *loss = (double *)malloc((size_t)rows * sizeof *loss);
    if (!loss)
        return sd_diag_set(d, SD_ENOMEM, "prune gpu: out of memory");
    if (cudaMalloc(&b.w32, nw * sizeof(float)) != cudaSuccess ||
        cudaMalloc(&b.w64, nw * sizeof(double)) != cudaSuccess ||
        cudaMalloc(&b.err, (size_t)rows * o->block_size * sizeof(double)) != cudaSuccess ||
        cudaMalloc(&b.loss, (size_t)rows * sizeof(double)) != cudaSuccess ||
        cudaMalloc(&b.keep, (size_t)rows * (cols / 32) * sizeof(uint32_t)) != cudaSuccess) {
        cudaGetLastError();
        rc = sd_diag_set(d, SD_ENOMEM, "prune gpu: no device memory for a [%lld, %lld] linear",
                         (long long)rows, (long long)cols);
    }
    if (rc == 0 &&
        cudaMemcpyAsync(b.w32, W, nw * sizeof(float), cudaMemcpyHostToDevice, g->st) != cudaSuccess)
        rc = sd_diag_set(d, SD_ECUDA, "prune gpu: upload of W: %s", cudaGetErrorString(cudaGetLastError()));
    if (rc == 0) {
        k_load<<<sd__pg_grid((int64_t)nw), 256, 0, g->st>>>(b.w32, rows, cols, g->dead, b.w64, b.loss);
        rc = sweep_blocks(g, &b, rows, cols, o, d);
    }
    if (rc == 0) {
        k_store<<<sd__pg_grid((int64_t)nw), 256, 0, g->st>>>(b.w64, (int64_t)nw, b.w32);
        if (cudaMemcpyAsync(W, b.w32, nw * sizeof(float), cudaMemcpyDeviceToHost, g->st) != cudaSuccess ||
            cudaMemcpyAsync(keep, b.keep, (size_t)rows * (cols / 32) * sizeof(uint32_t),
                            cudaMemcpyDeviceToHost, g->st) != cudaSuccess ||
            cudaMemcpyAsync(loss, b.loss, (size_t)rows * sizeof(double), cudaMemcpyDeviceToHost, g->st) !=
                cudaSuccess ||
            cudaStreamSynchronize(g->st) != cudaSuccess)
            rc = sd_diag_set(d, SD_ECUDA, "prune gpu: sweep: %s", cudaGetErrorString(cudaGetLastError()));
    }
    if (rc == 0 && st) {
        double sum = 0; /* row order, as the CPU sums */
        for (int64_t r = 0; r < rows; r++)
            sum += loss[r];
        st->loss = sum;
    }
    free(loss);
    sweep_bufs_free(&b);
    return rc;
}

int sd_prune_gpu_prune(sd_prune_gpu *g, float *W, int64_t rows, int64_t cols, const double *H,
                       const sd_sgpt_opts *o, uint32_t *keep, sd_sgpt_stats *st, sd_diag *d)
{
    sd_sgpt_stats local = {};
    if (!st)
        st = &local;
    *st = sd_sgpt_stats{};
    int rc = sd_sgpt_check(cols, o, d);
    if (rc == 0)
        rc = sd_prune_gpu_hinv(g, H, cols, o, NULL, NULL, st, d);
    if (rc == 0)
        rc = sd_prune_gpu_sweep(g, W, rows, cols, o, keep, st, d);
    return rc;
}
