/* prune_cuda: the CUDA path of SparseGPT — the damped inverse-Cholesky factor with cuSOLVER
 * (potrf + trtri on the reversed Hessian), the column-blocked prune-and-update sweep (one warp
 * per row inside a block, the lazy update of later columns as one cuBLAS DGEMM per block), and
 * Hessian accumulators that fold captured rows with cuBLAS DSYRK in fp64.
 *
 * The CPU solver (prune/sgpt.c) is the reference: the same clean-up, the same damping and
 * retries, the same mask rules and tie-breaking, every step in fp64 with the products rounded
 * like the CPU's (no fused multiply-adds in the sweep), so masks are equal and weights differ
 * only by the DGEMM's summation order. Builds without CUDA get stubs that return SD_ENOTSUP
 * (prune/prune_cuda_stub.c); a CUDA build on a machine without a GPU gets SD_ENODEV.
 *
 * One context per thread: it owns a stream, the cuBLAS/cuSOLVER handles, and the factor U of
 * the last sd_prune_gpu_hinv, which the sweeps that follow use (q/k/v share one factor). */
#ifndef SD_PRUNE_CUDA_H
#define SD_PRUNE_CUDA_H

#include <stdint.h>

#include "engine/diag.h"
#include "prune/sgpt.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sd_prune_gpu sd_prune_gpu;

/* A context on CUDA device `device`. SD_ENOTSUP without CUDA in the build, SD_ENODEV when no
 * device is present, SD_ECUDA on other CUDA failures; d names the cause. */
int sd_prune_gpu_init(sd_prune_gpu **ret, int device, sd_diag *d);
void sd_prune_gpu_free(sd_prune_gpu *g);

/* As sd_sgpt_hinv: H (fp64 [n, n], host, left unchanged here) is cleaned on the GPU (symmetrised,
 * NaN/Inf -> 0, dead columns H_jj = 0 -> 1, reported in dead[n] if non-NULL), damped and
 * factorised with the same retries. The factor stays on the device for sd_prune_gpu_sweep; U
 * (fp64 [n, n] upper, host) receives a copy if non-NULL. */
int sd_prune_gpu_hinv(sd_prune_gpu *g, const double *H, int64_t n, const sd_sgpt_opts *o, double *U,
                      uint8_t *dead, sd_sgpt_stats *st, sd_diag *d);

/* As sd_sgpt_sweep with the factor of the last sd_prune_gpu_hinv (cols must be its n; its dead
 * columns are zeroed in W). W: fp32 [rows, cols] host, replaced by the pruned weights; keep:
 * u32 [rows, cols/32]. Fills st->loss. SD_ENOTSUP for block sizes above 1024. */
int sd_prune_gpu_sweep(sd_prune_gpu *g, float *W, int64_t rows, int64_t cols, const sd_sgpt_opts *o,
                       uint32_t *keep, sd_sgpt_stats *st, sd_diag *d);

/* sd_prune_gpu_hinv then sd_prune_gpu_sweep (as sd_sgpt_prune, but H is left unchanged). */
int sd_prune_gpu_prune(sd_prune_gpu *g, float *W, int64_t rows, int64_t cols, const double *H,
                       const sd_sgpt_opts *o, uint32_t *keep, sd_sgpt_stats *st, sd_diag *d);

/* ---- Hessian accumulators (used by prune/hess.c for sd_hess_init_gpu) ---------------------- */

typedef struct sd_prune_gpu_acc sd_prune_gpu_acc;

/* A zeroed fp64 [cols, cols] accumulator in device memory (SD_ENOMEM names the size). */
int sd_prune_gpu_acc_init(sd_prune_gpu *g, sd_prune_gpu_acc **ret, int64_t cols, sd_diag *d);
void sd_prune_gpu_acc_free(sd_prune_gpu_acc *a);

/* acc += X^T X (upper triangle) for the k rows of X, given transposed: xt fp32 [cols, ld] host,
 * row j holding column j of the k rows (the layout hess.c stages). */
int sd_prune_gpu_acc_add(sd_prune_gpu_acc *a, const float *xt, int64_t ld, int64_t k, sd_diag *d);

/* acc += X^T X for n rows already in device memory on g's device (the CUDA backend's capture
 * hook, engine/cuda_capture.h): x bf16 [n, ld], the first cols of each row used. Rows are staged
 * on the device in fp64 and folded with DSYRK 256 at a time (no host round trip); the call
 * returns once x has been read. */
int sd_prune_gpu_acc_add_dev(sd_prune_gpu_acc *a, const void *x, int64_t ld, int64_t n, sd_diag *d);

/* out (fp64 [cols, cols] host, full symmetric) = scale * acc (rows still staged are folded first). */
int sd_prune_gpu_acc_get(sd_prune_gpu_acc *a, double scale, double *out, sd_diag *d);

#ifdef __cplusplus
}
#endif
#endif
