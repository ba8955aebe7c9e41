/* backend: the interface every compute backend (cpu, cuda) implements — a forward pass
 * over a batch of sequences that read and extend a paged KV cache the backend owns.
 *
 * Threading: a backend is used by one thread at a time (the engine thread). */
#ifndef SD_BACKEND_H
#define SD_BACKEND_H

#include <stdint.h>

#include "diag.h"
#include "sampler.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sd_model sd_model;

typedef struct sd_batch_seq {
    int32_t pos;                /* position of tokens[0]; the KV cache holds positions [0, pos) */
    int32_t n_tokens;           /* new tokens to run, >= 1 */
    const int32_t *tokens;      /* [n_tokens] */
    const int32_t *block_table; /* [ceil((pos + n_tokens) / block_size)] KV block ids */
    int32_t all_logits;         /* 1: a logits row for every new token; 0: for the last only */
} sd_batch_seq;

typedef struct sd_backend_opts {
    int n_threads;             /* CPU: worker threads (0 => number of cores) */
    int block_size;            /* KV tokens per block (default 16) */
    int32_t kv_blocks;         /* blocks in the pool (0 => from kv_memory_fraction / a default) */
    double kv_memory_fraction; /* GPU: fraction of free memory for the KV pool */
    int max_batch_tokens;      /* largest sum of n_tokens one forward call may carry */
    int device;                /* GPU ordinal */
    int deterministic;         /* GPU: no split-K with atomics, so the same batch gives the same logits
                                  bit for bit every run (the CPU backend always does) */
    const char *tune_cache;    /* GPU: the tuning-cache file (engine/tune_cache.h) to load at creation
                                  and rewrite after each first-use tuning; NULL or "": none. Under
                                  tensor parallelism each rank uses PATH.rankN */
} sd_backend_opts;

void sd_backend_opts_default(sd_backend_opts *o);

typedef struct sd_backend sd_backend;

/* ---- sampling on the backend (optional) ----
 * The host keeps each request's RNG and draws the uniform u exactly where sd_sample would
 * (engine/sample_req.h builds these requests); the backend does the deterministic rest on the
 * logits still in its memory: penalties, temperature, top-k/top-p/min-p, the inverse-CDF pick
 * with u, logprobs. Same logits => same token as sd_sample, up to near-ties of the
 * cumulative probabilities. */
#define SD_SAMPLE_MAX_TOP 20

/* One token whose logit the sampler edits before it picks: a token of the history (penalties)
 * or of the request's logit_bias, or both. */
typedef struct sd_sample_pen {
    int32_t token; /* distinct within a request, in [0, vocab) */
    int32_t n_gen; /* how often it was generated (0: only in the prompt; -1: not in the history) */
    float bias;    /* added first (logit_bias), 0 if none */
} sd_sample_pen;

typedef struct sd_sample_req {
    int32_t row;              /* logits row of the last forward (rows in sequence order) */
    sd_sampling s;            /* the request's parameters (seed unused) */
    int greedy;               /* argmax after penalties; u unused */
    int rep_on, pf_on;        /* repetition / presence+frequency penalties apply */
    const sd_sample_pen *pen; /* [n_pen]: every distinct history token when rep_on, else the generated
                                 ones, then the biased tokens not among them */
    int32_t n_pen;
    /* [(vocab + 63) / 64] bit i set: token i may be picked (JSON mode, engine/jsonc.h); the others
     * get -inf before the bias and penalties (logprobs stay those of the raw row). NULL: all.
     * At least one bit must be set. */
    const uint64_t *allow;
    double u;  /* uniform in [0, 1) from the request's sd_rng */
    int n_top; /* -1: no logprobs; else the chosen token's logprob and the top n_top (<= SD_SAMPLE_MAX_TOP) */
} sd_sample_req;

typedef struct sd_sample_out {
    int32_t token;
    float logprob;                      /* log-softmax of the raw (unpenalised) logits at token */
    int32_t top_ids[SD_SAMPLE_MAX_TOP]; /* [n_top], descending, ties by lower id; -1 past the non-NaN ones */
    float top_lps[SD_SAMPLE_MAX_TOP];
} sd_sample_out;

typedef struct sd_backend_vtbl {
    const char *name;
    /* logits: [rows, vocab] fp32, rows in sequence order (n_tokens rows for all_logits
     * sequences, else 1). Writes K/V for every new token into the blocks named. */
    int (*forward)(sd_backend *b, const sd_batch_seq *seqs, int n_seqs, float *logits, sd_diag *d);
    void (*free)(sd_backend *b);
    /* Optional (NULL: the caller samples on the host). A backend that has it accepts
     * logits == NULL in forward (the rows stay in its memory) and then samples reqs[i] from
     * row reqs[i].row of that forward into out[i]; rows must be distinct (they are edited in
     * place by penalties). */
    int (*sample)(sd_backend *b, const sd_sample_req *reqs, int n, sd_sample_out *out, sd_diag *d);
    /* 1: the first step of a batch shape does work of its own (the GPU backends tune kernels and
     * capture graphs), which engine/warmup.h pays before serving; 0: nothing to warm (cpu) */
    int warms_up;
} sd_backend_vtbl;

/* Common head of every backend (implementations embed it first). */
struct sd_backend {
    const sd_backend_vtbl *vt;
    int32_t vocab;
    int32_t block_size;
    int32_t kv_blocks; /* blocks in the pool */
    int32_t max_batch_tokens;
    /* Above the bitmask kernels' rows, the step between row counts whose GEMMs this backend plans
     * apart at first use (CUDA with cuSPARSELt: 64, engine/cuda_cslt.h); 0: none. The warm-up runs
     * a chunk of each (engine/warmup.h). */
    int32_t gemm_row_step;
    /* 1: a speculative-decoding step (engine/spec.h) runs fastest when every sequence carries as
     * many draft tokens (the CUDA backend replays a graph of that shape), so the scheduler fills
     * shorter drafts up; 0: each sequence carries only its own drafts (cpu) */
    int32_t uniform_spec;
};

static inline int sd_backend_forward(sd_backend *b, const sd_batch_seq *seqs, int n_seqs, float *logits,
                                     sd_diag *d)
{
    return b->vt->forward(b, seqs, n_seqs, logits, d);
}

static inline int sd_backend_sample(sd_backend *b, const sd_sample_req *reqs, int n, sd_sample_out *out,
                                    sd_diag *d)
{
    if (!b->vt->sample)
        return sd_diag_set(d, SD_ENOTSUP, "backend %s does not sample", b->vt->name);
    return b->vt->sample(b, reqs, n, out, d);
}

static inline void sd_backend_free(sd_backend *b)
{
    if (b)
        b->vt->free(b);
}

/* The CPU backend (fp32 compute from the checkpoint's weights, multithreaded). */
int sd_backend_cpu_init(sd_backend **ret, const sd_model *m, const sd_backend_opts *o, sd_diag *d);

#ifdef SD_HAVE_CUDA
/* The CUDA backend (engine/cuda_backend.cu): bf16 weights (bitmask linears as values + masks),
 * bf16 paged KV cache, CUDA graphs for decode steps. See engine/cuda_backend.h for more. */
int sd_backend_cuda_init(sd_backend **ret, const sd_model *m, const sd_backend_opts *o, sd_diag *d);
#endif

#ifdef __cplusplus
}
#endif
#endif
