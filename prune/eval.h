/* eval: quality of a (pruned) model — perplexity on a text file, and fidelity to a dense
 * reference on the reference's own decode distribution: KL(ref || model) per token along
 * continuations the reference generates greedily, and greedy-token (arg-max) agreement. */
#ifndef SD_EVAL_H
#define SD_EVAL_H

#include <stdint.h>

#include "engine/diag.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sd_eval_spec {
    const char *model_dir; /* the model under test */
    const char *ref_dir;   /* dense reference, or NULL (then no KL/agreement, no ref ppl) */
    const char *text;      /* perplexity text file, or NULL */
    int32_t seq_len;       /* perplexity window (default 512) */
    int64_t max_tokens;    /* perplexity: stop after this many tokens (0 = whole file) */
    const char *prompts;   /* prompts for the decode-distribution metrics, or NULL */
    int32_t gen_tokens;    /* continuation length per prompt (default 128) */
    int threads;           /* 0 = online cores */
    int ref_ppl;           /* also the reference's perplexity on the text */
} sd_eval_spec;

void sd_eval_spec_default(sd_eval_spec *s);

typedef struct sd_eval_result {
    double ppl, ref_ppl; /* exp(mean NLL) on the text; ref_ppl 0 unless ref_ppl is set */
    int64_t ppl_tokens;  /* predicted tokens */
    double kl;           /* mean KL(ref || model) in nats per generated token */
    double agree;        /* fraction of generated positions where the arg-maxes agree */
    int64_t kl_tokens;
} sd_eval_result;

typedef void (*sd_eval_progress_fn)(void *ud, const char *phase, int64_t done, int64_t total);

int sd_eval_run(const sd_eval_spec *spec, sd_eval_progress_fn progress, void *ud, const volatile int *cancel,
                sd_eval_result *res, sd_diag *d);

#ifdef __cplusplus
}
#endif
#endif
