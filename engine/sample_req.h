/* sample_req: the host side of sampling on a backend — building sd_sample_req from a
 * request's parameters, history and RNG (penalty list, the uniform u drawn where sd_sample
 * draws it) — and sd_sample_twin, a CPU twin of the CUDA sampler (same radix-select method,
 * engine/sample_radix.h) that tests and host-only builds use. */
#ifndef SD_SAMPLE_REQ_H
#define SD_SAMPLE_REQ_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "diag.h"
#include "sampler.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Scratch for building one step's requests: the penalty entries of all of them. */
typedef struct sd_sample_prep {
    int32_t vocab;
    int32_t *mark;      /* [vocab] 0, or 1 + index of the token's entry in the current request */
    sd_sample_pen *pen; /* [cap] entries of the step, request after request */
    size_t n, cap;
    size_t reserved; /* what sd_sample_prep_begin was told (<= cap) */
} sd_sample_prep;

int sd_sample_prep_init(sd_sample_prep *p, int32_t vocab, sd_diag *d);
void sd_sample_prep_free(sd_sample_prep *p); /* zeroed or NULL-initialised: no-op */
/* Starts a step that will add requests whose histories and logit_bias lists hold at most
 * n_total entries in all (entries never move while the step's requests are in use). */
int sd_sample_prep_begin(sd_sample_prep *p, size_t n_total, sd_diag *d);
/* Fills q for logits row `row`: penalties from hist (n_prompt prompt tokens first) and s's
 * logit bias (ids outside the vocabulary ignored, as sd_sample does) and u drawn from rng
 * exactly when sd_sample would draw it. n_top: -1 for no logprobs. SD_ERANGE (q without its
 * penalties) when the entries exceed what sd_sample_prep_begin reserved. */
int sd_sample_prep_add(sd_sample_prep *p, sd_sample_req *q, int32_t row, const sd_sampling *s,
                       const int32_t *hist, int32_t n_hist, int32_t n_prompt, sd_rng *rng, int n_top);

/* The CUDA sampler's method on the CPU: samples q from row[vocab] (penalties applied in
 * place) into *out. Same token as sd_sample on the same logits up to near-ties of the
 * cumulative mass; logprobs as sd_logprob_of / sd_logprobs_top. SD_ENOMEM or 0. */
int sd_sample_twin(float *row, int32_t vocab, const sd_sample_req *q, sd_sample_out *out);

#ifdef __cplusplus
}
#endif
#endif
