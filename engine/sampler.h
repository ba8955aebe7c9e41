/* sampler: turns a logits row into a token — greedy, temperature, top-k, top-p, min-p,
 * logit bias and repetition/presence/frequency penalties — reproducibly from a per-request
 * seed. */
#ifndef SD_SAMPLER_H
#define SD_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* OpenAI's logit_bias: `bias` is added to the logit of `token` before anything else. */
typedef struct sd_logit_bias {
    int32_t token;
    float bias;
} sd_logit_bias;

/* Most logit_bias entries one request may carry (OpenAI allows 300; vLLM any number). */
#define SD_MAX_LOGIT_BIAS 1024

typedef struct sd_sampling {
    float temperature;        /* 0 => greedy (argmax, lowest id on ties) */
    int32_t top_k;            /* 0 or <0 => off */
    float top_p;              /* 1 => off */
    float min_p;              /* 0 => off */
    float presence_penalty;   /* OpenAI semantics, 0 => off */
    float frequency_penalty;  /* OpenAI semantics, 0 => off */
    float repetition_penalty; /* HF/CTRL semantics over prompt+generated, 1 => off */
    uint64_t seed;            /* the RNG stream; same seed + same logits => same tokens */
    /* [n_bias] distinct tokens, borrowed: whoever holds this struct keeps the array alive
     * (the scheduler copies it into each request). Tokens outside the vocabulary are ignored. */
    const sd_logit_bias *bias;
    int32_t n_bias;
} sd_sampling;

/* Defaults: temperature 1, top_k off, top_p 1, min_p 0, penalties and bias off, seed 0. */
void sd_sampling_default(sd_sampling *s);

/* Per-sequence RNG state (counter-based, so it can live on the GPU later). */
typedef struct sd_rng {
    uint64_t key;
    uint64_t counter;
} sd_rng;

void sd_rng_seed(sd_rng *r, uint64_t seed);
/* Uniform in [0, 1). */
double sd_rng_uniform(sd_rng *r);

/* 1 when sd_sample takes the argmax (temperature <= 0 or top_k == 1): it then draws no
 * uniform from the RNG; otherwise it draws exactly one per token. */
int sd_sampling_is_greedy(const sd_sampling *s);

/* The greedy pick: the largest of x[0..n), lowest id on ties; NaN never wins (an all-NaN row
 * gives 0). Internal: sd_sample's rule, shared with the CPU twin of the GPU sampler. */
int32_t sd__sample_argmax(const float *x, int32_t n);

/* Samples one token from logits[vocab] (modified in place by penalties/temperature).
 * `hist` holds the prompt and generated tokens so far (for penalties): n_prompt first.
 * `scratch` must hold 2*vocab floats + vocab int32 (see sd_sampler_scratch_bytes). */
int32_t sd_sample(float *logits, int32_t vocab, const sd_sampling *s, const int32_t *hist, int32_t n_hist,
                  int32_t n_prompt, sd_rng *rng, void *scratch);
size_t sd_sampler_scratch_bytes(int32_t vocab);

/* log-softmax of the raw logits at `token`, and the top `k` (ids, logprobs) in descending
 * order (ties: lower id first). k may be 0. */
float sd_logprob_of(const float *logits, int32_t vocab, int32_t token);
void sd_logprobs_top(const float *logits, int32_t vocab, int k, int32_t *ids, float *lps);

#ifdef __cplusplus
}
#endif
#endif
