/* nm_spmv: CUDA launchers for the bitmask N:M SpMV (batched, B = 1..16), its unstructured-50%
 * path, the dense bf16 GEMV twin, and the per-shape autotune cache (sd_kernels_ctx).
 *
 * All pointers in sd_nm_spmv_args are device pointers. Launchers enqueue on the given stream,
 * never synchronise, and return 0, SD_EINVAL (bad arguments) or SD_ECUDA (launch failure).
 * Usable from C; needs the CUDA runtime headers (SD_HAVE_CUDA builds only). */
#ifndef SD_NM_SPMV_H
#define SD_NM_SPMV_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "engine/diag.h"
#include "kernels/nm_tuned.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SD_NM_MAX_B 16
/* 2:4, 4:8, 8:16 and 16:32 weights take up to this many vectors in one launch (the wide
 * tensor-core kernels, rows_per_warp 128, 256, 29, 30); unstructured and the dense GEMV up to
 * SD_NM_MAX_B. */
#define SD_NM_MAX_B_WIDE 64
/* Those patterns take up to this many vectors in tiles of at most SD_NM_MAX_B_WIDE: each tile one
 * launch of the wide kernels with the same config, so the weights are read once a tile (prefill
 * chunks and large batches, where the alternative is a dense expansion of the weights for cuBLAS). */
#define SD_NM_MAX_B_TILED 256

/* The batch size a tuned config is kept under: B itself up to SD_NM_MAX_B, then the next multiple
 * of 8 up to SD_NM_MAX_B_WIDE, then of 64: the row counts 17..256 (prefill chunks, batch sizes)
 * are tuned 9 times, not 240. */
static inline int sd_nm_tune_bucket(int B)
{
    return B <= SD_NM_MAX_B ? B : B <= SD_NM_MAX_B_WIDE ? (B + 7) / 8 * 8 : (B + 63) / 64 * 64;
}

/* The tiles of B > SD_NM_MAX_B_WIDE vectors: tile i covers vectors [i step, min((i + 1) step, B)),
 * step = sd_nm_tile_step(B): as few tiles as SD_NM_MAX_B_WIDE allows, as even as whole 8-vector
 * groups allow (the kernels work in groups of 8; 130 vectors: 48 + 48 + 34, not 64 + 64 + 2).
 * Every tile starts at a multiple of 8, so x rows keep their 16-byte alignment. */
static inline int sd_nm_tile_step(int B)
{
    const int tiles = (B + SD_NM_MAX_B_WIDE - 1) / SD_NM_MAX_B_WIDE, per = (B + tiles - 1) / tiles;
    return (per + 7) / 8 * 8;
}

/* Per-device tuning state: the autotune cache and device facts. One per device and thread
 * that launches; not thread-safe. */
typedef struct sd_kernels_ctx sd_kernels_ctx;

/* Creates a context for the current device. SD_ENOMEM / SD_ECUDA. */
int sd_kernels_ctx_init(sd_kernels_ctx **ret, sd_diag *d);
void sd_kernels_ctx_free(sd_kernels_ctx *ctx);
/* Programmatic dependent launch of the gather SpMV / GEMV kernels (kernels/pdl.cuh): on by
 * default (and when ctx is NULL); off only to measure what it brings. */
void sd_kernels_ctx_set_pdl(sd_kernels_ctx *ctx, int on);
/* Whether the autotuner also times the 2:4 / 4:8 / 8:16 / 16:32 kernels that expand bitmask weights
 * into tensor-core fragments in registers (kernels/nm_tcx.h), and whether callers should send 17..64
 * vectors of those patterns to the wide one (sd_kernels_ctx_tcx): all patterns by default (and when
 * ctx is NULL); none, or all but 16:32, only to measure what they bring. An explicit rows_per_warp
 * of 24 or 128 launches them either way. */
enum { SD_NM_TCX_NONE = 0, SD_NM_TCX_ALL = 1, SD_NM_TCX_NO_1632 = 2 };
void sd_kernels_ctx_set_tcx(sd_kernels_ctx *ctx, int mode);
/* Which batch-1 kernels that compact x beside the values (kernels/nm_spmv_c24.cu) the autotuner
 * also times: none, the 2:4 one, or the 2:4 and 4:8 ones (the default, and when ctx is NULL); the
 * default heuristic picks the 2:4 one unless mode is none. Other modes only measure what they
 * bring. An explicit rows_per_warp of 101, 102 or 103 launches them either way. */
enum { SD_NM_C24_NONE = 0, SD_NM_C24_24 = 1, SD_NM_C24_ALL = 2 };
void sd_kernels_ctx_set_c24(sd_kernels_ctx *ctx, int mode);
/* Whether the autotuner also times the 2:4 kernels on the sparse tensor cores (mma.sp): the 16/32-row
 * ones (kernels/nm_spmv_sp.cu) for 2-8 vectors, the GEMM-shaped ones (nm_spmv_spg.cu) for 2-64: on
 * by default; off only to measure what they bring. An explicit rows_per_warp of 25, 27, 29 or 30
 * launches them either way. */
void sd_kernels_ctx_set_sp24(sd_kernels_ctx *ctx, int on);
/* Where the autotuner times the stream-K row-per-lane kernel (rows_per_warp 64: a persistent
 * grid over equal shares, y zeroed first): never, where the register-expanding tensor-core kernel
 * does not take the problem (the default: there single launches ranked stream-K first and the
 * decode step ran it slower, kernels/NOTES.md v18), or always. An explicit rows_per_warp of 64
 * launches it either way. */
enum { SD_NM_SK_NEVER = 0, SD_NM_SK_TCX = 1, SD_NM_SK_ALWAYS = 2 };
void sd_kernels_ctx_set_sk(sd_kernels_ctx *ctx, int mode);
/* Deterministic launches: neither the autotuner nor the default heuristic splits K (split-K adds
 * its partial sums with atomics, in arrival order, so results vary in the last bits). An explicit
 * split in the args still splits. Off by default. */
void sd_kernels_ctx_set_deterministic(sd_kernels_ctx *ctx, int on);
/* Whether the register-expanding kernels are on for pattern group m (sd_kernels_ctx_set_tcx). */
int sd_kernels_ctx_tcx(const sd_kernels_ctx *ctx, int m);
/* Whether the register-expanding kernels have an expansion for pattern n:m (2:4, 4:8, 8:16, 16:32):
 * the patterns that may take more than SD_NM_MAX_B vectors. */
int sd_nm_tcx_pattern(int n, int m);

typedef struct sd_nm_spmv_args {
    const sd_kernels_ctx *ctx; /* may be NULL: then the default heuristic picks the config */
    int n, m;                  /* N:M pattern, or 0,0 = unstructured (ignored by the dense GEMV) */
    int64_t rows, cols;        /* W is [rows, cols]; cols % 32 == 0 (dense: cols % 8 == 0) */
    int B;                     /* number of vectors, 1..SD_NM_MAX_B (2:4 to 16:32: ..SD_NM_MAX_B_TILED) */
    const uint16_t
        *values;          /* bf16 [rows, cols/2] (dense GEMV: the weights, bf16 [rows, cols]); 16-B aligned */
    const uint32_t *mask; /* u32 [rows, cols/32] (unused by the dense GEMV) */
    const uint16_t *x;    /* bf16 [B, ldx]; ldx even, 4-B aligned */
    int64_t ldx;
    void *y; /* [B, ldy] fp32, or bf16 when y_bf16 */
    int64_t ldy;
    int y_bf16;        /* output dtype: 0 fp32, 1 bf16 */
    int accumulate;    /* 1: y += W x (residual add); 0: y = W x */
    int rows_per_warp; /* kernel choice: 1, 2 or 4 (gather), 16 (tensor cores), 24 (2:4 to 16:32
                          on tensor cores, fragments expanded in registers), 128 / 256 (its wide twins, B <=
                          64, 128 / 256 rows a block), 25 (2:4 on the sparse tensor cores, mma.sp; 27: 32 rows
                          a block; 29 / 30: 128 / 256 rows a block, B <= 64),
                          32/48/64/96 (row per lane, B <= 4), 101/102/103 (2:4, B <= 2, and 4:8, B = 1: x
                          compacted beside the values; 1 / 2 rows per warp / 1 with registers capped); 0: from
                          the ctx cache / heuristic. A kernel that does not take the problem falls back to one
                          that does. */
    int split;         /* split-K factor (fp32 output only, atomics); 0: from the cache / heuristic */
    int swiglu;        /* 1: W is [gate; up] (rows/2 each) and y = bf16 silu(gate x) * (up x), [B, ldy >=
                          rows/2]: the SwiGLU of the MLP in the kernel's epilogue, bit for bit what
                          fp32 outputs then the engine's SwiGLU kernel give. Needs y_bf16, no
                          accumulate, even rows, and a config that keeps a row's sum in one block
                          (sd_nm_swiglu_ok); otherwise the launch returns SD_ENOTSUP. */
} sd_nm_spmv_args;

/* y = W x (or y += W x) with W in bitmask form. N:M masks must be valid (16 bits per word, as
 * sd_nm_validate checks at load); a corrupt mask gives wrong numbers, never a fault. */
int sd_nm_spmv_launch(const sd_nm_spmv_args *a, cudaStream_t s);

/* The dense twin: a->values is W bf16 [rows, cols]; a->mask, n, m ignored. */
int sd_gemv_bf16_launch(const sd_nm_spmv_args *a, cudaStream_t s);

/* Times the candidate configs (rows per warp x split) for this (kind, pattern, shape, B bucket,
 * output dtype) and caches the fastest in ctx; later launches with rows_per_warp = split = 0 use it.
 * a[0..n_args) are the same problem on different buffers (rotated while timing so that the
 * working set can exceed L2). Overwrites the y buffers. Synchronises the stream. */
int sd_nm_autotune(sd_kernels_ctx *ctx, const sd_nm_spmv_args *a, int n_args, int dense, cudaStream_t s,
                   sd_diag *d);

/* The autotune cache as plain entries (kernels/nm_tuned.h), to keep it across processes: export
 * copies up to max entries into out and returns how many the cache holds; import adds or replaces
 * one, after checking it names a config the launchers know (SD_EINVAL otherwise; in a
 * deterministic context, also for split-K). */
#define SD_NM_CACHE_CAP 512 /* entries the autotune cache holds (then the oldest go) */
int sd_kernels_ctx_export(const sd_kernels_ctx *ctx, sd_nm_tuned *out, int max);
/* Entry i of the cache (export's order) and the autotuner's runner-up for its problem, the config
 * its single launches ranked second: whether it has one (entries imported from a tuning cache have
 * none), and swapping the two (SD_ENOTFOUND without one; a second swap restores the first). What
 * the decode step's refine pass tries against the step's own time (engine/cuda_step.cu). */
int sd_kernels_ctx_has_runner_up(const sd_kernels_ctx *ctx, int i);
int sd_kernels_ctx_swap_runner_up(sd_kernels_ctx *ctx, int i);
int sd_kernels_ctx_import(sd_kernels_ctx *ctx, const sd_nm_tuned *e);

/* The config a launch would use (after the cache / heuristic): for reports. */
void sd_nm_config(const sd_nm_spmv_args *a, int dense, int *ret_rows_per_warp, int *ret_split);

/* 1 when a launch of a with swiglu = 1 would take the SwiGLU epilogue: the config it resolves to
 * (sd_nm_config) is a word-per-lane (B <= 2), row-per-lane (B <= 4, not stream-K) or 16-row
 * tensor-core kernel without split-K, and the shape and output meet the swiglu field's terms. */
int sd_nm_swiglu_ok(const sd_nm_spmv_args *a, int dense);
/* sd_nm_swiglu_ok, and the config is one whose fused launch measured faster than the plain launch
 * plus the engine's SwiGLU kernel (the tensor-core GEMV, the register-expanding, row-per-lane and
 * 2:4 compacting kernels; not the gather and shared-tile kernels): what the engine fuses. */
int sd_nm_swiglu_pays(const sd_nm_spmv_args *a, int dense);

#ifdef __cplusplus
}
#endif
#endif
