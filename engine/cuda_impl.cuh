/* cuda_impl: the CUDA backend's private types (device weights, activation buffers, graph
 * buckets) and the error-check macros shared by its .cu files. Not a public header. */
#ifndef SD_CUDA_IMPL_CUH
#define SD_CUDA_IMPL_CUH

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "engine/backend.h"
#include "engine/diag.h"
#include "engine/model_config.h"
#include "engine/tune_cache.h"

/* Returns SD_ECUDA with the call, place and CUDA message when `call` fails. */
#define SD_CU(d, call)                                                                                       \
    do {                                                                                                     \
        cudaError_t e_ = (call);                                                                             \
        if (e_ != cudaSuccess)                                                                               \
            return sd_diag_set((d), SD_ECUDA, "%s:%d: %s: %s", __FILE__, __LINE__, #call,                    \
                               cudaGetErrorString(e_));                                                      \
    } while (0)

/* After a kernel launch: a bad configuration shows up as the last error. */
#define SD_CU_LAUNCH(d) SD_CU(d, cudaGetLastError())

#define SD_CUBLAS(d, call)                                                                                   \
    do {                                                                                                     \
        cublasStatus_t s_ = (call);                                                                          \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                                     \
            return sd_diag_set((d), SD_ECUDA, "%s:%d: %s: cuBLAS status %d", __FILE__, __LINE__, #call,      \
                               (int)s_);                                                                     \
    } while (0)

/* Warp-wide sum / max; every lane gets the result. */
static __device__ __forceinline__ float sd_warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

static __device__ __forceinline__ float sd_warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* One linear layer on the device, y = x W^T (+ bias). Dense: bf16 w. Bitmask (50% N:M with
 * 16 kept weights per mask word): values + mask, never a dense copy. */
typedef struct sd_cu_linear {
    int bitmask; /* 0 dense, 1 bitmask */
    int64_t rows, cols;
    int nm_n, nm_m;        /* bitmask pattern */
    __nv_bfloat16 *w;      /* dense: [rows, cols] */
    __nv_bfloat16 *values; /* bitmask: [rows, cols/2] */
    uint32_t *mask;        /* bitmask: [rows, cols/32] */
    float *bias;           /* [rows] or NULL */
    int owns;              /* 0 when w aliases another tensor (tied lm_head) */
} sd_cu_linear;

typedef struct sd_cu_layer {
    float *attn_norm, *mlp_norm; /* [hidden] */
    float *q_norm, *k_norm;      /* [head_dim] or NULL */
    sd_cu_linear qkv;            /* [(n_heads + 2*n_kv_heads)*head_dim, hidden]: q, k, v rows */
    sd_cu_linear o;              /* [hidden, n_heads*head_dim] */
    sd_cu_linear gate_up;        /* [2*intermediate, hidden]: gate rows then up rows */
    sd_cu_linear down;           /* [hidden, intermediate] */
} sd_cu_layer;

typedef struct sd_cu_weights {
    __nv_bfloat16 *embed; /* [vocab, hidden] */
    float *final_norm;    /* [hidden] */
    sd_cu_linear lm_head; /* [vocab, hidden] */
    sd_cu_layer *layers;  /* [n_layers], host array of device pointers */
    int n_layers;
    size_t bytes; /* device bytes held by the weights */
} sd_cu_weights;

/* ---- weights (cuda_weights.cu) ---- */
typedef struct sd_model sd_model;
int sd__cu_weights_upload(sd_cu_weights *w, const sd_model *m, sd_diag *d);
/* Random weights at cfg's shapes; pattern_n/m = 0 for dense. Deterministic in seed. */
int sd__cu_weights_synthetic(sd_cu_weights *w, const sd_model_config *cfg, int pattern_n, int pattern_m,
                             uint64_t seed, cudaStream_t st, sd_diag *d);
void sd__cu_weights_free(sd_cu_weights *w);
/* Tensor parallel (engine/shard.h): this rank's slices, fused as above; the embedding and
 * lm_head by vocabulary, vocab_pad rows each (tied: lm_head is the embedding slice). */
typedef struct sd_shard_plan sd_shard_plan;
int sd__cu_weights_upload_shard(sd_cu_weights *w, const sd_model *m, const sd_shard_plan *p, sd_diag *d);

/* ---- kernels (cuda_ops.cu); every launcher checks the launch and returns 0 / SD_ECUDA ---- */
typedef struct sd_cu_attn_args {
    const float *q;                         /* [T, n_heads*head_dim], RoPE applied */
    const __nv_bfloat16 *k_cache, *v_cache; /* this layer: [n_blocks, n_kv, block_size, head_dim] */
    const int32_t *tok_pos;                 /* [T] position of each query token */
    const int32_t *tok_seq;                 /* [T] sequence index of each token */
    const int32_t *block_tables;            /* [n_seqs, max_bt] */
    int max_bt, block_size;
    int T, n_heads, n_kv, head_dim;
    int n_splits;       /* splits of each query's key range */
    float *part_acc;    /* [T, n_heads, n_splits, head_dim] */
    float *part_ml;     /* [T, n_heads, n_splits, 2] */
    __nv_bfloat16 *out; /* [T, n_heads*head_dim] */
    int *counters;      /* [T, n_heads] zeroed once; splits arrived per (token, head group), reset
                           to 0 by the last one (cuda_attn_decode.cu) */
    int min_chunk;      /* keys per split at least this (short contexts use fewer splits); 0: none */
    int window;         /* sliding window: query at p attends keys (p - window, p]; 0: [0, p] */
    int cluster;        /* how the splits merge (SD_ATTN_CLUSTER_*): through part_acc / part_ml
                           and the counters, or in a thread-block cluster's shared memory (NEVER
                           where the device cannot launch clusters) */
    int sms;            /* the device's SMs: the grid limit of SD_ATTN_CLUSTER_PAYS */
    int early;          /* fused kernel at one head per block: each warp loads its first K/V tile
                           into registers before the PDL wait, not only into L2 (sd_cu_attn_early) */
} sd_cu_attn_args;

/* The args the attention tests' C entries launch with, from their structs (sd_cu_attn_test,
 * sd_cu_fused_test: the same field names; bf16 as uint16_t bits there): the caller sets the merge
 * mode and what else it tests (sms 0, early off here). */
template <class TEST> static inline sd_cu_attn_args sd__cu_attn_test_args(const TEST *t)
{
    sd_cu_attn_args a = {};
    a.q = t->q;
    a.k_cache = (const __nv_bfloat16 *)t->k_cache;
    a.v_cache = (const __nv_bfloat16 *)t->v_cache;
    a.tok_pos = t->tok_pos;
    a.tok_seq = t->tok_seq;
    a.block_tables = t->block_tables;
    a.max_bt = t->max_bt;
    a.block_size = t->block_size;
    a.T = t->T;
    a.n_heads = t->n_heads;
    a.n_kv = t->n_kv;
    a.head_dim = t->head_dim;
    a.n_splits = t->n_splits;
    a.part_acc = t->part_acc;
    a.part_ml = t->part_ml;
    a.out = (__nv_bfloat16 *)t->out;
    a.counters = t->counters;
    a.min_chunk = t->min_chunk;
    a.window = t->window;
    return a;
}

/* The decode-step ops take `pdl`: launch with programmatic serialization (kernels/pdl.cuh). */
int sd__cu_embed(const __nv_bfloat16 *embed, const int32_t *tokens, float *x, int T, int hidden, int pdl,
                 cudaStream_t st, sd_diag *d);
/* x += y (y may be NULL); out = bf16(rmsnorm(x) * w). x: [T, hidden] fp32. */
int sd__cu_add_rmsnorm(float *x, const float *y, const float *w, __nv_bfloat16 *out, int T, int hidden,
                       float eps, int pdl, cudaStream_t st, sd_diag *d);

typedef struct sd_cu_qkv_args {
    const float *qkv;             /* [T, (n_heads + 2*n_kv)*head_dim] */
    const float *bias;            /* [(n_heads + 2*n_kv)*head_dim] or NULL */
    const float *q_norm, *k_norm; /* [head_dim] or NULL */
    const float *inv_freq;        /* [head_dim/2] */
    const int32_t *tok_pos, *tok_seq, *block_tables;
    int max_bt, block_size;
    int T, n_heads, n_kv, head_dim;
    float eps;
    float *q_out;                     /* [T, n_heads*head_dim] */
    __nv_bfloat16 *k_cache, *v_cache; /* this layer */
} sd_cu_qkv_args;

int sd__cu_qkv_post(const sd_cu_qkv_args *a, int pdl, cudaStream_t st, sd_diag *d);
/* Decode attention (cuda_attn_decode.cu): one kernel, splits merged by the last block. */
int sd__cu_attention(const sd_cu_attn_args *a, int pdl, cudaStream_t st, sd_diag *d);
/* sd__cu_qkv_post and sd__cu_attention in one kernel, for steps where every token is its
 * sequence's only one (decodes, graph padding rows): q from p->qkv (p->q_out and a->q unused),
 * each token's own K/V rows computed in the kernel and written to p->k_cache / p->v_cache (the
 * cache a reads, in the backend). Same output and cache bits as the two kernels. */
int sd__cu_attn_fused(const sd_cu_qkv_args *p, const sd_cu_attn_args *a, int pdl, cudaStream_t st,
                      sd_diag *d);

/* ---- tiled causal attention (cuda_attn_prefill.cu) ---- */
/* 1 when sd__cu_attn_prefill handles this head_dim (64, 128). */
int sd__cu_attn_prefill_supported(int head_dim);
/* All a->T tokens belong to sequence a->tok_seq[0] (positions ascending); a->n_splits and the
 * partial buffers are not used. Output as sd__cu_attention's. */
int sd__cu_attn_prefill(const sd_cu_attn_args *a, int pdl, cudaStream_t st, sd_diag *d);
/* A step whose tokens are n_runs consecutive runs (host run_len, in token order), one sequence
 * each: runs of at least min_run tokens take sd__cu_attn_prefill, the rest (and rows past the
 * runs: graph padding) sd__cu_attention. min_run <= 0: sd__cu_attention for the whole step
 * (min_run comes from sd_cu_attn_prefill_min_run, engine/cuda_attn_prefill.h). */
int sd__cu_attn_step(const sd_cu_attn_args *a, const int *run_len, int n_runs, int min_run, int pdl,
                     cudaStream_t st, sd_diag *d);
/* gu: [T, 2*inter] (gate then up) -> out bf16 [T, inter] = silu(gate) * up */
int sd__cu_swiglu(const float *gu, __nv_bfloat16 *out, int T, int inter, int pdl, cudaStream_t st,
                  sd_diag *d);
/* out[i, :] = in[rows[i], :] for i < R; in, out: bf16 rows of `cols`. */
int sd__cu_gather_rows(const __nv_bfloat16 *in, const int32_t *rows, __nv_bfloat16 *out, int R, int cols,
                       int pdl, cudaStream_t st, sd_diag *d);
/* Bitmask (16 kept per word) -> dense bf16 [rows, cols]; warp: the kernel whose warps write their
 * 32 words' columns in whole-sector stores (SD_EXPAND_WARP; the same bits either way). */
int sd__cu_expand_bitmask(const __nv_bfloat16 *values, const uint32_t *mask, __nv_bfloat16 *out, int64_t rows,
                          int64_t cols, int warp, cudaStream_t st, sd_diag *d);
/* Fills n bf16 with uniform(-scale, scale) from a hash of (seed, index). */
int sd__cu_fill_uniform_bf16(__nv_bfloat16 *p, size_t n, float scale, uint64_t seed, cudaStream_t st,
                             sd_diag *d);
int sd__cu_fill_f32(float *p, size_t n, float v, cudaStream_t st, sd_diag *d);
/* Random valid N:M masks (exactly n of every m consecutive columns kept), [rows, cols/32]. */
int sd__cu_fill_nm_mask(uint32_t *mask, size_t n_words, int n, int m, uint64_t seed, cudaStream_t st,
                        sd_diag *d);

/* ---- linears (cuda_linear.cu) ---- */
#define SD_CU_MAX_TUNED 256
/* A problem's first-use decision: rows, cols, B (sd_nm_tune_bucket of the rows), dense, m, acc,
 * use_blas (cuBLAS measured faster than the SpMV/GEMV), and the two times (engine/tune_cache.h). */
typedef sd_tune_path sd_cu_tuned;

typedef struct sd_cu_mm {
    cublasHandle_t blas;
    void *blas_ws; /* cuBLAS workspace, set explicitly so graph capture is legal */
    size_t blas_ws_bytes;
    __nv_bfloat16 *scratch; /* dense expansion of one bitmask linear: [max rows*cols] */
    size_t scratch_elems;
    float *tune_y;           /* first-use timing writes here, not to the caller's output: [16, max rows], or
                                [max_wide, max 2:4 .. 16:32 rows] where that is larger */
    int max_wide;            /* the most rows the wide kernels take: SD_NM_MAX_B_WIDE, or up to
                                SD_NM_MAX_B_TILED in tiles (SD_NM_TILES) */
    void *spmv;              /* sd_kernels_ctx: the SpMV/GEMV autotune cache */
    int tune_log;            /* SD_TUNE_LOG=1: one stderr line per first-use decision */
    int swiglu;              /* sd__cu_linear_swiglu fuses: 0 never, 1 where it pays (the default), 2 wherever
                                the kernel takes it (SD_SWIGLU_FUSE) */
    int64_t swiglu_launches; /* fused gate_up launches enqueued (for tests) */
    void (*on_tune)(void *ud); /* after each first-use tuning (engine/cuda_tune_cache.cu saves) */
    void *on_tune_ud;
    sd_cu_tuned tuned[SD_CU_MAX_TUNED]; /* problems already autotuned */
    int n_tuned;
    int n_tuned_loaded; /* of those, taken from a tuning cache (engine/cuda_tune_cache.cu) */
    cudaEvent_t ev[2];  /* timing the two paths */
    /* tensor parallel: the rank (engine/tp_impl.cuh) whose deadline bounds the wait before
     * first-use timing (the stream may hold collectives); NULL on a single GPU */
    struct sd_tp_rank *tp;
    /* the 2:4 linears' copies in cuSPARSELt's layout (engine/cuda_cslt.h; sd__cu_mm_cslt), which
     * take their GEMMs of more than SD_NM_MAX_B_WIDE rows; NULL without them */
    struct sd_cslt *cslt;
    int row_cap;           /* rows the backend's linear inputs hold: sd_cslt_pad_rows(T) for any T it sends */
    int cslt_timed;        /* 1: cuSPARSELt takes 65..max_wide rows where first use timed it fastest; 0:
                              wherever it can (SD_CUSPARSELT_TIMED) */
    int64_t cslt_captured; /* cuSPARSELt GEMMs captured into graphs (for tests) */
    int cslt_graph_off;    /* graphs run without cuSPARSELt: SD_CUSPARSELT_GRAPHS unset, or a capture
                              with it failed (cuda_step.cu) */
    int cslt_graph_fail;   /* SD_CUSPARSELT_GRAPHS=2 (tests): the first capture of a GEMM fails */
    int expand_warp;       /* sd__cu_expand_bitmask's warp kernel (SD_EXPAND_WARP=1) */
    int nm_gemm;           /* kernels/nm_gemm.h above SD_NM_MAX_B_WIDE rows: SD_NM_GEMM=1 untimed, =2 timed
                              (cuda_linear.cu) */
} sd_cu_mm;

/* Sizes the scratch for the largest bitmask linear in w and creates cuBLAS on stream st. max_wide:
 * the most rows a 2:4 .. 16:32 linear may send to the wide kernels (SD_NM_MAX_B_WIDE ..
 * SD_NM_MAX_B_TILED; above SD_NM_MAX_B_WIDE in tiles), more go to cuBLAS. */
int sd__cu_mm_init(sd_cu_mm *mm, const sd_cu_weights *w, int max_wide, cudaStream_t st, sd_diag *d);
void sd__cu_mm_free(sd_cu_mm *mm);
/* Loads cuSPARSELt and compresses every 2:4 linear of w (expanded into mm->scratch first) into
 * mm->cslt. mode 1: the library's default configs, 2: searched (sd_cslt_open's search); both fail,
 * naming the bytes, when the copies would not fit in the free device memory, or naming the library
 * when it does not load. SD_CU_CSLT_AUTO: searched where the library loads and the copies take at
 * most half the free memory, else mm->cslt stays NULL and one stderr line says why. A model
 * without a 2:4 linear leaves mm->cslt NULL. */
#define SD_CU_CSLT_AUTO 3
int sd__cu_mm_cslt(sd_cu_mm *mm, const sd_cu_weights *w, int mode, cudaStream_t st, sd_diag *d);
/* out [T, rows] fp32 = in [T, cols] bf16 x W^T for dense bf16 W [rows, cols], through cuBLAS (with
 * acc, +=): the GEMM every path above the kernels' rows ends in but cuSPARSELt's. */
int sd__cu_gemm_bf16(cublasHandle_t blas, const __nv_bfloat16 *w, int64_t rows, int64_t cols,
                     const __nv_bfloat16 *in, float *out, int T, int acc, sd_diag *d);
/* out [T, l->rows] fp32 = in [T, l->cols] bf16 x W^T (bias not applied); with `acc`,
 * out += in x W^T (the residual add of the o and down projections: no zeroing before split-K). */
int sd__cu_linear(sd_cu_mm *mm, const sd_cu_linear *l, const __nv_bfloat16 *in, float *out, int T, int acc,
                  cudaStream_t st, sd_diag *d);
/* The entry of mm->tuned for p's problem (rows, cols, B, dense, m, acc), or NULL. */
const sd_cu_tuned *sd__cu_find_tuned(const sd_cu_mm *mm, const sd_cu_tuned *p);
/* The gate_up linear (W = [gate; up]) with the SwiGLU in its kernel's epilogue: out [T, l->rows/2]
 * bf16 = silu(in x gate^T) * (in x up^T), the bits sd__cu_linear then sd__cu_swiglu give. Only
 * where the problem's tuned path is a kernel that takes it (no split-K, no cuBLAS) and, with
 * mm->swiglu 1, one whose fused launch measured faster (sd_nm_swiglu_pays; 2: sd_nm_swiglu_ok);
 * otherwise *done = 0, nothing is launched, and the caller runs those two. */
int sd__cu_linear_swiglu(sd_cu_mm *mm, const sd_cu_linear *l, const __nv_bfloat16 *in, __nv_bfloat16 *out,
                         int T, cudaStream_t st, int *done, sd_diag *d);

#endif
