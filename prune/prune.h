/* prune: the pruning job — calibration (decode-aware, teacher-forced text, or given token
 * sequences), Hessian capture by replay through the dense model on the CPU backend, the
 * solver per linear (SparseGPT, Wanda, magnitude) in one-shot or sequential mode, and the
 * bitmask checkpoint written atomically. The CLI (`sparsed prune`) and the admin job runner
 * both call sd_prune_run.
 *
 * Threading: sd_prune_run blocks its caller; the progress callback runs on that thread. The
 * cancel flag may be set from any thread; it is checked between forward batches, layers and
 * linears, and a cancelled run returns SD_ECANCEL and leaves no output directory.
 *
 * GPU: with device = SD_PRUNE_DEV_CUDA, SparseGPT's Hessians are folded on the GPU (cuBLAS DSYRK)
 * and its factorisations (cuSOLVER) and sweeps run there (prune/prune_cuda.h); generation and
 * capture stay on the CPU backend, Wanda and magnitude on the CPU. */
#ifndef SD_PRUNE_H
#define SD_PRUNE_H

#include <stdint.h>

#include "engine/diag.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sd_prune_solver {
    SD_SOLVER_SPARSEGPT = 0,
    SD_SOLVER_WANDA,
    SD_SOLVER_MAGNITUDE
} sd_prune_solver;
typedef enum sd_calib_source { SD_CALIB_DECODE = 0, SD_CALIB_TEXT, SD_CALIB_TOKENS } sd_calib_source;
typedef enum sd_prune_mode { SD_PRUNE_ONESHOT = 0, SD_PRUNE_SEQUENTIAL } sd_prune_mode;
/* Where SparseGPT's Hessian folds, factorisations and sweeps run. */
typedef enum sd_prune_device { SD_PRUNE_DEV_CPU = 0, SD_PRUNE_DEV_CUDA } sd_prune_device;

/* Which linears of each decoder layer are pruned (lm_head and embeddings always stay dense). */
enum {
    SD_PRUNE_Q = 1 << 0,
    SD_PRUNE_K = 1 << 1,
    SD_PRUNE_V = 1 << 2,
    SD_PRUNE_O = 1 << 3,
    SD_PRUNE_GATE = 1 << 4,
    SD_PRUNE_UP = 1 << 5,
    SD_PRUNE_DOWN = 1 << 6,
    SD_PRUNE_ALL = 0x7f
};

typedef struct sd_prune_spec {
    const char *model_dir; /* dense checkpoint */
    const char *out_dir;   /* must not exist */
    const char *pattern;   /* "2:4", "4:8", "8:16", "16:32", "unstructured" */
    sd_prune_solver solver;
    sd_calib_source source;
    const char *input;      /* decode: prompts (JSONL {"prompt"} / {"messages"}, or text lines);
                               text: a text file; tokens: JSONL {"tokens", "prefill_len"} */
    int64_t tokens_budget;  /* calibration rows: decode-step tokens (decode), all tokens (text) */
    int32_t seq_len;        /* text: tokens per sequence (default 512) */
    int32_t max_new_tokens; /* decode: per prompt (default 256) */
    float temperature;      /* decode: 0 = greedy (default) */
    int32_t top_k;          /* decode: 0 = off */
    float top_p;            /* decode: 1 = off */
    uint64_t seed;
    sd_prune_mode mode;
    double damping;          /* SparseGPT, default 0.01 */
    int block_size;          /* SparseGPT, default 128 */
    int threads;             /* 0 = online cores */
    unsigned modules;        /* SD_PRUNE_* bits, default SD_PRUNE_ALL */
    const char *save_tokens; /* if set, the calibration sequences are written there as JSONL */
    sd_prune_device device;  /* default CPU; CUDA fails with SD_ENOTSUP / SD_ENODEV without one */
    int cuda_device;         /* CUDA device index (default 0) */
} sd_prune_spec;

void sd_prune_spec_default(sd_prune_spec *s);

typedef enum sd_prune_phase {
    SD_PH_LOAD = 0,
    SD_PH_GENERATE,
    SD_PH_CAPTURE,
    SD_PH_SOLVE,
    SD_PH_WRITE,
    SD_PH_DONE
} sd_prune_phase;

typedef struct sd_prune_progress {
    sd_prune_phase phase;
    const char *phase_name;        /* "load", "generate", "capture", "solve", "write", "done" */
    int32_t layer, n_layers;       /* layer being captured/solved (0-based), or -1 */
    int64_t tokens, tokens_target; /* calibration tokens so far / wanted */
    double fraction;               /* of the whole job, 0..1 */
    double elapsed_s;
    const char *detail; /* e.g. the linear just pruned and its error, or NULL */
} sd_prune_progress;

typedef void (*sd_prune_progress_fn)(void *ud, const sd_prune_progress *p);

/* Summary of a finished run. */
typedef struct sd_prune_result {
    int64_t calib_tokens; /* rows that entered every Hessian */
    int32_t calib_seqs;
    double seconds;
    double total_loss; /* SparseGPT OBS error summed over linears (0 for others) */
    int32_t linears;   /* pruned */
} sd_prune_result;

/* Runs the whole job. Returns 0 with out_dir complete, or a negative code (SD_ECANCEL when
 * *cancel became non-zero) with no out_dir and a message in d. progress and cancel may be NULL. */
int sd_prune_run(const sd_prune_spec *spec, sd_prune_progress_fn progress, void *ud,
                 const volatile int *cancel, sd_prune_result *result, sd_diag *d);

/* "sparsegpt" / "wanda" / "magnitude" and back; -1 if unknown. */
int sd_prune_solver_parse(const char *s);
const char *sd_prune_solver_name(sd_prune_solver s);
int sd_calib_source_parse(const char *s);
const char *sd_calib_source_name(sd_calib_source s);

#ifdef __cplusplus
}
#endif
#endif
