/* nm_spmv_impl: internals shared by nm_spmv.cu (kernels, launchers) and nm_autotune.cu (the
 * context and its autotune cache). Not for use outside kernels/. */
#ifndef SD_NM_SPMV_IMPL_H
#define SD_NM_SPMV_IMPL_H

#include "kernels/nm_spmv.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SD_NM_CACHE_MAX SD_NM_CACHE_CAP

typedef struct sd_nm_key {
    int dense, n, m, B, y_bf16, accumulate; /* accumulate: no split-K memset, PDL allowed */
    int64_t rows, cols;
} sd_nm_key;

typedef struct sd_nm_entry {
    sd_nm_key key;
    int rows_per_warp, split;
    int rw2, split2; /* the autotuner's runner-up (rw2 0: none, as for entries loaded from a cache) */
} sd_nm_entry;

struct sd_kernels_ctx {
    int device;
    int n_sm;
    int pdl;                              /* launch with programmatic serialization (pdl.cuh) */
    int tcx;                              /* SD_NM_TCX_*: which patterns the expanding kernels take */
    int c24;                              /* the autotuner also times SD_NM_RW_C24 + 1, 2, 3 */
    int sp24;                             /* the autotuner also times SD_NM_RW_SP24, _32, SPG, SPG2 */
    int sk;                               /* when the autotuner times SD_NM_RW_ROWS_SK: SD_NM_SK_* */
    int deterministic;                    /* no split-K (atomics) from the autotuner or heuristic */
    int n_entries, next_slot;             /* next_slot: round-robin replacement when full */
    sd_nm_entry entries[SD_NM_CACHE_MAX]; /* the autotune cache */
};

/* rows_per_warp 1, 2, 4: the word-per-lane kernels (nm_spmv.cu: the gather SpMV, the dense GEMV),
 * that many rows a warp. */
static inline int sd__nm_rw_word(int rw)
{
    return rw == 1 || rw == 2 || rw == 4;
}

/* The cached config for a's problem; 0 if found, SD_ENOTFOUND otherwise (ctx may be NULL). */
int sd__nm_cache_lookup(const sd_kernels_ctx *ctx, const sd_nm_spmv_args *a, int dense, int *rw, int *split);
/* The tensor-core batched kernels (nm_spmv_tc.cu), chosen by rows_per_warp == SD_NM_RW_TC: whether
 * they take this problem (N:M, x 16-byte aligned rows; dense: cols % 64 == 0), and the launcher. */
#define SD_NM_RW_TC 16
int sd__nm_tc_supported(const sd_nm_spmv_args *a, int dense);
int sd__nm_tc_launch(const sd_nm_spmv_args *a, int dense, int split, cudaStream_t s);
/* The 2:4 / 4:8 / 8:16 / 16:32 tensor-core kernel that expands the A fragments in registers (nm_tcx.h),
 * chosen by rows_per_warp == SD_NM_RW_TCX: those patterns only, cols % 64 == 0, x 16-byte aligned rows. A
 * candidate of the autotuner unless the context turns it off (sd_kernels_ctx_set_tcx). */
#define SD_NM_RW_TCX 24
/* Its wide twin for batches up to SD_NM_MAX_B_WIDE (more in tiles, sd__nm_launch_cfg): 128 rows a
 * block, a warp per 16 rows, each warp over the block's whole K share, weights and x staged in shared
 * memory (x read once per 128 rows). The kernel every problem of B > SD_NM_MAX_B falls back to; a
 * candidate of the autotuner for smaller B too unless the ctx turns it off. */
#define SD_NM_RW_TCXW 128
/* The same with 32 rows a warp, 256 a block (one block an SM): x read from L2 once per 256 rows, and
 * each warp's x fragments serve two row tiles. */
#define SD_NM_RW_TCXW2 256
static inline int sd__nm_rw_tcxw(int rw)
{
    return rw == SD_NM_RW_TCXW || rw == SD_NM_RW_TCXW2;
}
int sd__nm_tcx_supported(const sd_nm_spmv_args *a);
/* wide: 0 the 16-row kernel, 1 the wide one (128 rows), 2 the wide one with 256 rows. */
int sd__nm_tcx_launch(const sd_nm_spmv_args *a, int wide, int split, cudaStream_t s);
/* 2:4 on the sparse tensor cores (mma.sp; nm_spmv_sp.cu), chosen by rows_per_warp ==
 * SD_NM_RW_SP24 (16 rows a block) or SD_NM_RW_SP24_32 (32: x read once per 32 rows; 16 with the
 * SwiGLU epilogue): B <= SD_NM_MAX_B, cols % 64 == 0, x 16-byte aligned rows, mask 8-byte aligned.
 * Candidates of the autotuner for 2-8 vectors unless the context turns them off
 * (sd_kernels_ctx_set_sp24). _launch takes mt = 1 or 2 (16 or 32 rows); _meta also either layout
 * of the metadata operand (0 or 1, nm_sp24.h; 0 only in 16-row blocks): for the test that checks
 * which one the hardware implements. */
#define SD_NM_RW_SP24 25
#define SD_NM_RW_SP24_32 27
/* Whether rw names one of them. */
static inline int sd__nm_rw_sp24(int rw)
{
    return rw == SD_NM_RW_SP24 || rw == SD_NM_RW_SP24_32;
}
int sd__nm_sp24_supported(const sd_nm_spmv_args *a);
int sd__nm_sp24_launch(const sd_nm_spmv_args *a, int mt, int split, cudaStream_t s);
int sd__nm_sp24_launch_meta(const sd_nm_spmv_args *a, int split, int meta, int mt, cudaStream_t s);
/* Their GEMM-shaped twin for many vectors (nm_spmv_spg.cu), chosen by rows_per_warp ==
 * SD_NM_RW_SPG (128 rows a block) or SD_NM_RW_SPG2 (256): 8 warps over the block's rows, weights and
 * x staged in shared memory once per block (x read from L2 once per 128-256 rows). B <=
 * SD_NM_MAX_B_TILED (_launch: SD_NM_MAX_B_WIDE, more in tiles), cols % 128 == 0, x rows, values and
 * mask 16-byte aligned; no SwiGLU epilogue.
 * Candidates of the autotuner from 2 vectors up unless the context turns the sparse tensor-core
 * kernels off. _launch takes mw = 1 or 2 (16 or 32 rows a warp). */
#define SD_NM_RW_SPG 29
#define SD_NM_RW_SPG2 30
static inline int sd__nm_rw_spg(int rw)
{
    return rw == SD_NM_RW_SPG || rw == SD_NM_RW_SPG2;
}
int sd__nm_spg_supported(const sd_nm_spmv_args *a);
int sd__nm_spg_launch(const sd_nm_spmv_args *a, int mw, int split, cudaStream_t s);

/* The row-per-lane N:M kernels for B <= 4 (nm_spmv_rows.cu), chosen by rows_per_warp ==
 * SD_NM_RW_ROWS (2-stage copy pipeline) or SD_NM_RW_ROWS3 (3 stages), or their stream-K twins
 * SD_NM_RW_ROWS_SK / SD_NM_RW_ROWS_SK3 (persistent grid, split ignored, fp32 output only): whether
 * they take this problem (N:M, B <= 4, cols % 128 == 0, mask 16-byte aligned; bf16 output only
 * when x fits without split-K), and the launcher (split is raised to the smallest that fits
 * shared memory). */
#define SD_NM_RW_ROWS 32
#define SD_NM_RW_ROWS3 48
#define SD_NM_RW_ROWS_SK 64
#define SD_NM_RW_ROWS_SK3 96
/* Whether rw names a stream-K row-per-lane kernel, or any row-per-lane one. */
static inline int sd__nm_rw_stream_k(int rw)
{
    return rw == SD_NM_RW_ROWS_SK || rw == SD_NM_RW_ROWS_SK3;
}
static inline int sd__nm_rw_rows(int rw)
{
    return rw == SD_NM_RW_ROWS || rw == SD_NM_RW_ROWS3 || sd__nm_rw_stream_k(rw);
}
int sd__nm_rows_supported(const sd_nm_spmv_args *a, int rw);
int sd__nm_rows_launch(const sd_nm_spmv_args *a, int rw, int split, cudaStream_t s);

/* The 2:4 and 4:8 kernels that compact x beside the values (nm_spmv_c24.cu; nm_c24.h, nm_c48.h),
 * chosen by rows_per_warp == SD_NM_RW_C24 + c: c = 1 one row per warp, 2 two rows, 3 one row with
 * registers capped (4 blocks per SM at batch 1, 3 at batch 2). They take 2:4 with B <=
 * SD_NM_C24_MAX_B (c = 2: B == 1 only) and 4:8 with B == 1, x 16-byte aligned (and ldx % 8 == 0); elsewhere
 * the code is a hint for the gather kernel with as many rows per warp. */
#define SD_NM_RW_C24 100
#define SD_NM_C24_MAX_B 2
int sd__nm_c24_supported(const sd_nm_spmv_args *a, int cfg);

/* Launches with an explicit config (rows_per_warp, split taken from a as given, both > 0). */
int sd__nm_launch_cfg(const sd_nm_spmv_args *a, int dense, int rw, int split, cudaStream_t s);

#ifdef __cplusplus
}
#endif
#endif
