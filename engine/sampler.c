/* sampler: penalties, temperature, top-k/top-p/min-p filtering and seeded sampling of one
 * token from a logits row; log-softmax helpers for logprobs.
 *
 * Order of operations: logit bias (OpenAI: added to the model's logits) → repetition penalty
 * (HF, over prompt + generated) → presence/frequency penalties (OpenAI, over generated) →
 * temperature (0 => greedy argmax) → top-k → top-p → min-p → draw. */
#include "engine/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Tokens more than this far below the best (scaled) logit carry a relative probability
 * below e^-40 each; they are dropped before sorting so that a 150K vocabulary costs a
 * sort of the few plausible tokens only. Their total mass is < vocab * 4e-18. */
#define SD_SAMPLE_LOGIT_WINDOW 40.0f

void sd_sampling_default(sd_sampling *s)
{
    memset(s, 0, sizeof *s);
    s->temperature = 1.0f;
    s->top_k = 0;
    s->top_p = 1.0f;
    s->min_p = 0.0f;
    s->repetition_penalty = 1.0f;
    s->seed = 0;
}

/* splitmix64's finaliser: a bijective 64-bit mix, so (key, counter) -> value is a
 * counter-based generator that a GPU thread can evaluate without shared state. */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void sd_rng_seed(sd_rng *r, uint64_t seed)
{
    r->key = mix64(seed + 0x9e3779b97f4a7c15ULL);
    r->counter = 0;
}

double sd_rng_uniform(sd_rng *r)
{
    uint64_t x = mix64(r->key ^ mix64(r->counter++ * 0x9e3779b97f4a7c15ULL + 1));
    return (double)(x >> 11) * (1.0 / 9007199254740992.0);
}

size_t sd_sampler_scratch_bytes(int32_t vocab)
{
    return (size_t)vocab * (2 * sizeof(float) + sizeof(int32_t));
}

int sd_sampling_is_greedy(const sd_sampling *s)
{
    return s->temperature <= 0 || s->top_k == 1;
}

/* HF RepetitionPenaltyLogitsProcessor: each distinct token of prompt + generated once. */
static void apply_repetition(float *logits, int32_t vocab, float pen, const int32_t *hist, int32_t n_hist,
                             int32_t *mark)
{
    memset(mark, 0, (size_t)vocab * sizeof *mark);
    for (int32_t i = 0; i < n_hist; i++) {
        int32_t t = hist[i];
        if (t < 0 || t >= vocab || mark[t])
            continue;
        mark[t] = 1;
        logits[t] = logits[t] > 0 ? logits[t] / pen : logits[t] * pen;
    }
}

/* OpenAI: logit -= presence * (count > 0) + frequency * count, counts over generated tokens. */
static void apply_presence_frequency(float *logits, int32_t vocab, float presence, float frequency,
                                     const int32_t *gen, int32_t n_gen, int32_t *count)
{
    memset(count, 0, (size_t)vocab * sizeof *count);
    for (int32_t i = 0; i < n_gen; i++)
        if (gen[i] >= 0 && gen[i] < vocab)
            count[gen[i]]++;
    for (int32_t i = 0; i < n_gen; i++) {
        int32_t t = gen[i];
        if (t < 0 || t >= vocab || count[t] == 0)
            continue;
        logits[t] -= presence + frequency * (float)count[t];
        count[t] = 0; /* applied once per distinct token */
    }
}

int32_t sd__sample_argmax(const float *x, int32_t n)
{
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[best] || (x[best] != x[best] && x[i] == x[i]))
            best = i;
    return best;
}

/* Sort key: logit descending, id ascending (the value travels with the id, so the
 * comparator needs no context pointer: qsort_r is not portable). */
typedef struct lid {
    float v;
    int32_t id;
} lid;

static int cmp_lid(const void *a, const void *b)
{
    const lid *x = a, *y = b;
    if (x->v != y->v)
        return x->v > y->v ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

int32_t sd_sample(float *logits, int32_t vocab, const sd_sampling *s, const int32_t *hist, int32_t n_hist,
                  int32_t n_prompt, sd_rng *rng, void *scratch)
{
    int32_t *ibuf = (int32_t *)scratch;
    for (int32_t i = 0; i < s->n_bias; i++)
        if (s->bias[i].token >= 0 && s->bias[i].token < vocab)
            logits[s->bias[i].token] += s->bias[i].bias;
    if (s->repetition_penalty > 0 && s->repetition_penalty != 1.0f)
        apply_repetition(logits, vocab, s->repetition_penalty, hist, n_hist, ibuf);
    if ((s->presence_penalty != 0 || s->frequency_penalty != 0) && n_hist > n_prompt)
        apply_presence_frequency(logits, vocab, s->presence_penalty, s->frequency_penalty, hist + n_prompt,
                                 n_hist - n_prompt, ibuf);
    int32_t best = sd__sample_argmax(logits, vocab);
    if (sd_sampling_is_greedy(s))
        return best;

    float inv_t = 1.0f / s->temperature;
    for (int32_t i = 0; i < vocab; i++)
        logits[i] *= inv_t;
    float floor = logits[best] - SD_SAMPLE_LOGIT_WINDOW;
    /* scratch as [vocab] lid (8 bytes each) + [vocab] float probabilities: 12 bytes/token */
    lid *c = (lid *)scratch;
    float *p = (float *)((char *)scratch + (size_t)vocab * sizeof(lid));
    int32_t n = 0;
    for (int32_t i = 0; i < vocab; i++)
        if (logits[i] >= floor)
            c[n++] = (lid){logits[i], i};
    qsort(c, (size_t)n, sizeof *c, cmp_lid);

    if (s->top_k > 0 && s->top_k < n)
        n = s->top_k;
    double sum = 0;
    for (int32_t i = 0; i < n; i++) {
        p[i] = expf(c[i].v - c[0].v);
        sum += p[i];
    }
    if (s->top_p < 1.0f) {
        /* the smallest prefix whose mass reaches top_p (at least one token) */
        double cum = 0, target = (double)s->top_p * sum;
        int32_t keep = n;
        for (int32_t i = 0; i < n; i++) {
            cum += p[i];
            if (cum >= target) {
                keep = i + 1;
                break;
            }
        }
        n = keep;
        sum = cum;
    }
    if (s->min_p > 0) {
        /* p_i >= min_p * p_max; p[0] is the max and equals 1 unnormalised */
        int32_t keep = 1;
        while (keep < n && p[keep] >= s->min_p * p[0])
            keep++;
        n = keep;
    }
    sum = 0;
    for (int32_t i = 0; i < n; i++)
        sum += p[i];
    double u = sd_rng_uniform(rng) * sum, cum = 0;
    for (int32_t i = 0; i < n; i++) {
        cum += p[i];
        if (u < cum)
            return c[i].id;
    }
    return c[n - 1].id; /* u landed on the rounding slack at the top */
}

static double log_sum_exp(const float *logits, int32_t vocab, float *ret_max)
{
    float m = logits[sd__sample_argmax(logits, vocab)];
    double s = 0;
    for (int32_t i = 0; i < vocab; i++)
        s += exp((double)logits[i] - m);
    *ret_max = m;
    return log(s);
}

float sd_logprob_of(const float *logits, int32_t vocab, int32_t token)
{
    if (token < 0 || token >= vocab)
        return -INFINITY;
    float m;
    double lse = log_sum_exp(logits, vocab, &m);
    return (float)((double)logits[token] - m - lse);
}

void sd_logprobs_top(const float *logits, int32_t vocab, int k, int32_t *ids, float *lps)
{
    if (k <= 0)
        return;
    if (k > vocab)
        k = vocab;
    /* insertion into a sorted top-k list: k is small (<= 20), one pass over the vocab */
    int n = 0;
    for (int32_t i = 0; i < vocab; i++) {
        float v = logits[i];
        if (v != v || (n == k && !(v > logits[ids[n - 1]])))
            continue;
        int j = n < k ? n++ : k - 1;
        while (j > 0 && v > logits[ids[j - 1]]) {
            ids[j] = ids[j - 1];
            j--;
        }
        ids[j] = i;
    }
    float m;
    double lse = log_sum_exp(logits, vocab, &m);
    for (int j = 0; j < n; j++)
        lps[j] = (float)((double)logits[ids[j]] - m - lse);
    for (int j = n; j < k; j++) { /* only when NaNs left fewer candidates than k */
        ids[j] = -1;
        lps[j] = -INFINITY;
    }
}
