/* spec_draft: speculative decoding's second draft source — a small model of the same vocabulary
 * (Llama-3.2-1B for a Llama-3.1-8B, the bundled tiny model for models/small) that proposes the
 * next tokens greedily. The scheduler runs its drafts through the served model exactly as the
 * prompt-lookup ones (engine/spec.h): a draft is kept only where the served model's own pick is
 * that token, so the output is unchanged; the draft model only decides how many steps it takes.
 *
 * The draft model keeps a KV cache of its own (its backend's pool, block tables here), per
 * sequence, covering the tokens it has read. Each proposal first reads what it has not yet
 * (the prompt the first time, then the tokens the last step kept: one or two), then takes k - 1
 * one-token steps, batched over the sequences. After the served model's verdict the cache is cut
 * back to the tokens that stayed.
 *
 * Threading: the engine thread only (it owns the draft backend as it owns the served one). */
#ifndef SD_SPEC_DRAFT_H
#define SD_SPEC_DRAFT_H

#include <stdint.h>

#include "backend.h"
#include "diag.h"
#include "kv.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sd_model sd_model;
typedef struct sd_spec_draft sd_spec_draft;

/* A sequence's draft-model state (held by the scheduler's request; zeroed = nothing read). */
typedef struct sd_draft_seq {
    sd_kv_seq kv;   /* the draft cache's block table: covers [0, n_done) between proposals */
    int32_t n_done; /* tokens whose K/V the draft model holds */
} sd_draft_seq;

/* The draft model m on backend b (both outlive it), for up to max_seqs sequences a proposal.
 * SD_EINVAL when its vocabulary is not `vocab` (the served model's). */
int sd_spec_draft_init(sd_spec_draft **ret, const sd_model *m, sd_backend *b, int32_t vocab, int max_seqs,
                       sd_diag *d);
void sd_spec_draft_free(sd_spec_draft *dr); /* NULL: no-op; every sequence released first */

/* One sequence of a proposal: its tokens so far, its state, and room for k drafts. */
typedef struct sd_draft_req {
    const int32_t *tokens; /* [n_tokens]: the prompt and the tokens generated */
    int32_t n_tokens;
    sd_draft_seq *st;
    int32_t k;    /* in: drafts wanted (>= 1); out: drafts made (0 when the draft cache is full or
                     the positions pass the draft model's) */
    int32_t *out; /* [k] */
} sd_draft_req;

/* Proposes reqs[i].k greedy tokens for each of n <= max_seqs sequences. Returns 0 or the draft
 * backend's error (the states are then released). */
int sd_spec_draft_propose(sd_spec_draft *dr, sd_draft_req *reqs, int n, sd_diag *d);

/* After the served model's verdict: the draft cache keeps positions [0, n_valid) (the tokens that
 * stayed), the rest of its blocks go back. */
void sd_spec_draft_keep(sd_spec_draft *dr, sd_draft_seq *st, int32_t n_valid);
/* Gives every block of the sequence back (finished, preempted). */
void sd_spec_draft_release(sd_spec_draft *dr, sd_draft_seq *st);

/* Blocks of the draft cache held by sequences (tests: 0 once every request is done). */
int32_t sd_spec_draft_blocks_used(const sd_spec_draft *dr);

#ifdef __cplusplus
}
#endif
#endif
