/* spec: draft tokens for speculative decoding by prompt lookup (n-gram matching). The last
 * tokens of a sequence are looked up in its own history (prompt and generated text); what
 * followed their most recent earlier occurrence is proposed as the next tokens. The scheduler
 * (engine/sched.c) runs the drafts through the model in one forward pass and keeps the longest
 * prefix the model itself would have produced, so output never depends on the drafts.
 *
 * Code edits, quoting, extraction and repetitive structured text repeat their context; there a
 * step of 1 + k tokens yields up to k + 1 tokens for about the price of one decode step in a
 * memory-bound regime. Where nothing repeats, no draft is made and decoding is unchanged. */
#ifndef SD_SPEC_H
#define SD_SPEC_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sd_model sd_model;
typedef struct sd_backend sd_backend;

/* Speculation settings (engine opts, server config `spec_*`). */
typedef struct sd_spec_opts {
    int tokens;    /* draft tokens a step at most; 0: speculation off */
    int ngram_min; /* shortest suffix that may match (>= 1) */
    int ngram_max; /* longest suffix tried first (>= ngram_min) */
    int max_seqs;  /* draft only while at most this many sequences run (larger batches are
                      compute-bound enough that verification costs more than it saves) */
    /* A small model of the same vocabulary that proposes the drafts instead of the lookup
     * (engine/spec_draft.h), and its backend; both outlive the engine. NULL: the lookup. */
    const sd_model *draft_model;
    sd_backend *draft_backend;
} sd_spec_opts;

#define SD_SPEC_MAX_TOKENS 16
#define SD_SPEC_MAX_NGRAM 16
/* max_seqs * (1 + tokens) at most: the rows of one sampling call on the GPU backends */
#define SD_SPEC_MAX_ROWS 256

/* Clamps o into the ranges above (a max_seqs that would pass SD_SPEC_MAX_ROWS shrinks). */
void sd_spec_opts_clamp(sd_spec_opts *o);

/* The n-gram proposer: finds the longest suffix of hist[0, n) of ngram_max..ngram_min tokens
 * that occurred earlier (its most recent occurrence, among the longest) and writes the up to
 * `max_out` tokens that followed it into out. Returns the number written (0: no match, or
 * max_out <= 0). One backward pass over hist. */
int32_t sd_spec_ngram(const int32_t *hist, int32_t n, int ngram_min, int ngram_max, int32_t max_out,
                      int32_t *out);

#ifdef __cplusplus
}
#endif
#endif
