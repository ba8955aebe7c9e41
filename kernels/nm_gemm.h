/* nm_gemm: y [B, rows] (+)= x [B, cols] W^T for an N:M bitmask W and many vectors (a prompt chunk,
 * a decode batch of 65 or more sequences), as a GEMM: each block expands its 128 rows' bitmask
 * 64 columns at a time into a dense bf16 tile in shared memory (kernels/nm_expand.h) and runs the
 * dense tensor-core mma against 64 or 128 vectors of x staged beside it.
 *
 * Why: above the wide kernels' 64 vectors the engine either runs them in tiles (each tile reads
 * and expands the weights again, ~11 instructions a value in registers) or expands the whole
 * linear into a dense scratch for cuBLAS (2 bytes a weight written and read again: expansion +
 * cuBLAS ran 0.32-0.80x dense on the 8B linears, kernels/NOTES.md v31). Here a weight is read once
 * per 64-128 vectors as 1.125 bytes and expanded once per block, ~6 instructions a value. 4:8-16:32
 * have no cuSPARSELt path, so their prompt chunks gain most (8:16 at 128 tokens: 0.43x dense).
 * Written without a GPU (kernels/NOTES.md v32): `sparsed bench gemm` times it beside the other
 * paths, tests/kernels/test_nm_gemm_gpu.c checks it; the engine does not call it yet. */
#ifndef SD_NM_GEMM_H
#define SD_NM_GEMM_H

#include <cuda_runtime_api.h>

#include "kernels/nm_spmv.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1 if sd_nm_gemm_launch takes a: an N:M pattern (2N == M, M | 32), cols % 64 == 0, fp32 output
 * without the SwiGLU epilogue, x with ldx >= cols and ldx % 8 == 0, x and values 16-byte aligned,
 * mask 8-byte aligned (what its cp.async copies need: nm_gemm_layout.h sd_gm_shape_ok). Anything
 * else (cols = 4128: mask rows of 516 bytes) is refused, and the engine takes another path. */
int sd_nm_gemm_supported(const sd_nm_spmv_args *a);

/* The GEMM on a (a->rows_per_warp and a->split ignored): vec_tile 64 or 128 vectors a block, 0 to
 * let B choose. PDL as the other kernels (a->ctx's switch). SD_EINVAL when not supported. */
int sd_nm_gemm_launch(const sd_nm_spmv_args *a, int vec_tile, cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
