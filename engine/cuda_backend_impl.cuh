/* cuda_backend_impl: the CUDA backend's private state, shared by its setup half
 * (engine/cuda_backend.cu: create, load, free, hooks) and its step half (engine/cuda_step.cu:
 * the layers, graphs, forward and sample). Not a public header. */
#ifndef SD_CUDA_BACKEND_IMPL_CUH
#define SD_CUDA_BACKEND_IMPL_CUH

#include "engine/backend.h"
#include "engine/cuda_backend.h"
#include "engine/cuda_capture.h"
#include "engine/cuda_impl.cuh"
#include "engine/cuda_sample.cuh"
#include "engine/spec.h"
#include "engine/tp_impl.cuh"

#define SD_CU_MAX_SEQS SD_CUDA_MAX_SEQS /* sequences in one forward call (cuda_backend.h) */
#define SD_CU_N_BUCKETS 9               /* graph buckets 1, 2, 4 ... 256 */
/* Tokens each sequence of a graphed step carries: 1 (decode), or 1 + drafts (a speculative
 * decoding step whose sequences all carry as many, engine/spec.h). Graph slot of bucket k and
 * t tokens a sequence: (t - 1) * SD_CU_N_BUCKETS + k. */
#define SD_CU_MAX_STEP_T (1 + SD_SPEC_MAX_TOKENS)
#define SD_CU_N_GRAPHS (SD_CU_N_BUCKETS * SD_CU_MAX_STEP_T)

/* Parts of every layer that SD_BENCH_SKIP drops (measurement only). */
enum {
    SD_SKIP_LINEARS = 1,
    SD_SKIP_NORM = 2,
    SD_SKIP_QKVPOST = 4,
    SD_SKIP_ATTN = 8,
    SD_SKIP_SWIGLU = 16,
    SD_SKIP_SMALL = SD_SKIP_NORM | SD_SKIP_QKVPOST | SD_SKIP_ATTN | SD_SKIP_SWIGLU
};

typedef struct sd_cuda_backend {
    sd_backend base;
    sd_model_config cfg;
    int device, sms;
    cudaStream_t st;
    sd_cu_weights w;
    sd_cu_mm mm;
    char *tune_path;          /* the tuning-cache file, or NULL (engine/cuda_tune_cache.cu) */
    sd_tune_cache tune_other; /* its key (this device's), and its entries for other linears */
    float *inv_freq;          /* [head_dim/2] */
    /* KV pool: [n_layers][kv_blocks + 1][n_kv][block_size][head_dim]; the extra last block
     * takes the writes of graph padding rows */
    __nv_bfloat16 *k_cache, *v_cache;
    size_t layer_kv_elems;
    int max_bt;                /* block-table width: blocks of the longest sequence */
    int tmax;                  /* tokens per forward */
    int max_seqs;              /* sequences per forward */
    float *x;                  /* [tmax, hidden] residual stream */
    __nv_bfloat16 *act;        /* [tmax, max(hidden, n_heads*head_dim, intermediate)] linear inputs */
    __nv_bfloat16 *hbuf;       /* [min(tmax, SD_NM_MAX_B), intermediate]: the fused gate_up's SwiGLU */
    float *mmo;                /* [tmax, max(qkv rows, 2*intermediate, hidden)] linear outputs */
    float *q;                  /* [tmax, n_heads*head_dim] */
    float *part_acc, *part_ml; /* attention partials, [parts_rows, n_heads, head_dim] / [.., 2] */
    int *attn_cnt;             /* [tmax, n_heads] splits arrived, zeroed once (cuda_attn_decode.cu) */
    int attn_chunk;            /* decode attention: keys per split at least this (SD_ATTN_CHUNK) */
    size_t parts_rows;         /* capacity in (token x split) rows */
    __nv_bfloat16 *lm_in;      /* [tmax, hidden] rows that get logits */
    float *logits;             /* [tmax, vocab] */
    int32_t *d_meta, *h_meta;  /* tokens | pos | tok_seq | rows | block tables; h_meta pinned */
    size_t meta_cap;
    int use_graphs;
    int pdl;     /* programmatic dependent launch of the step's kernels (kernels/pdl.cuh); SD_PDL=0: off */
    int skip;    /* SD_BENCH_SKIP (measurement only, wrong logits): SD_SKIP_* bits */
    int res_acc; /* o/down projections add into x (cuda_backend.cu: SD_RESID_ACC) */
    int attn_min_run; /* tiled attention for runs this long; 0: off (engine/cuda_attn_prefill.h) */
    int attn_fused;   /* q/k/v post-processing inside the decode attention when every run is one
                         token; SD_ATTN_FUSED=0: off (engine/cuda_attn_fused.h) */
    int attn_cluster; /* how decode attention's splits merge: SD_ATTN_CLUSTER_* from
                         SD_ATTN_CLUSTER (engine/cuda_attn_fused.h) */
    int attn_early;   /* sd_cu_attn_args.early: 1 unless SD_ATTN_EARLY=0 (engine/cuda_attn_fused.h) */
    int refine;       /* unless SD_TUNE_REFINE=0 or deterministic: each bucket's first graph tries
                         the linears' runner-up configs (cuda_step.cu refine_graph); 2: (tests) it
                         fails after the first */
    int refine_tried, refine_kept;          /* runner-ups the refine pass tried and kept (for tests) */
    int refine_failed;                      /* 1 once the pass failed and was turned off (refine_turn_off) */
    cudaGraphExec_t graphs[SD_CU_N_GRAPHS]; /* by slot (SD_CU_MAX_STEP_T) */
    int64_t replays;
    int time_launches;    /* sd_backend_cuda_time_launches: time cudaGraphLaunch (benchmarks only) */
    double launch_us;     /* with time_launches: host time spent in cudaGraphLaunch over replays */
    double solo_ms;       /* with time_launches: GPU time of those replays, events around each */
    cudaEvent_t tl_ev[2]; /* with time_launches: the events; tl_pending: the last not yet read */
    int tl_pending;
    sd_cu_sampler smp;          /* sampling on the GPU (engine/cuda_sample.cu) */
    int last_rows, last_padded; /* logits rows of the last forward (real, and with graph padding) */
    sd_tp_rank tp;              /* tensor-parallel membership; tp.comm NULL on a single GPU */
    float *gathered;            /* TP: [ranks, rows, vocab_pad] every rank's logits (all-gather) */
    sd_cuda_capture_fn cap_fn;  /* calibration hook (engine/cuda_capture.h) or NULL */
    void *cap_ud;
    int32_t cap_stop; /* with cap_fn: the last layer run, or -1 for all */
} sd_cuda_backend;

/* engine/cuda_step.cu: the backend's forward and sample operations (its vtable's). */
int sd__cu_backend_forward(sd_backend *base, const sd_batch_seq *seqs, int n_seqs, float *logits, sd_diag *d);
int sd__cu_backend_sample(sd_backend *base, const sd_sample_req *reqs, int n, sd_sample_out *out, sd_diag *d);
/* engine/cuda_tune_cache.cu: with a path, loads the tuning cache into b->mm (a cache made on
 * another GPU, driver or kernels revision, or a bad file, is reported on stderr and not used: the
 * backend tunes afresh and rewrites it) and saves it after every first-use tuning from then on. */
int sd__cu_tune_cache_open(sd_cuda_backend *b, const char *path, sd_diag *d);
void sd__cu_tune_cache_close(sd_cuda_backend *b);
/* How many problems the backend tuned itself (not taken from a tuning cache), for tests. */
int sd__cu_tuned_here(const sd_cuda_backend *b);

#endif
