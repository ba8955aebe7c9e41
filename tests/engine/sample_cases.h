/* sample_cases: random sampling cases (logits rows of several vocab sizes and shapes, every
 * sampler option alone and combined, histories for the penalties, many seeds) and the check
 * of a backend-style sampler (sd_sample_req -> sd_sample_out) against sd_sample,
 * sd_logprob_of and sd_logprobs_top on the same logits. Shared by test_sample_req (the CPU
 * twin, in CI) and test_cuda_sample (the CUDA kernel). */
#ifndef SD_TEST_SAMPLE_CASES_H
#define SD_TEST_SAMPLE_CASES_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"
#include "engine/sample_req.h"
#include "engine/sampler.h"
#include "tests/harness.h"

/* Relative distance of u * sum (or top_p * sum, or p from min_p) to a boundary under which
 * the CPU's float-in-double sums and the fixed-point sums may disagree. */
#define SC_NEAR 1e-6

typedef struct sc_rng {
    uint64_t s;
} sc_rng;

static uint64_t sc_next(sc_rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double sc_unif(sc_rng *r)
{
    return (double)(sc_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

static float sc_normal(sc_rng *r)
{
    double u = sc_unif(r) + 1e-12, v = sc_unif(r);
    return (float)(sqrt(-2 * log(u)) * cos(6.283185307179586 * v));
}

/* One case: a logits row, a history and the sampling parameters. */
typedef struct sc_case {
    int32_t vocab;
    float *logits; /* [vocab] */
    int32_t hist[96];
    int32_t n_hist, n_prompt;
    sd_sampling s; /* .bias points at `bias` */
    sd_logit_bias bias[8];
    uint64_t *allow; /* [(vocab + 63) / 64] a JSON-mode style mask (sd_sample_req.allow), or NULL;
                        sc_make replaces it (zero-initialise a case before its first sc_make), sc_free
                        frees it */
    int n_top;
    const char *kind;
} sc_case;

/* Row shapes: 0 spread normal, 1 coarse values with many exact ties, 2 peaked (a few
 * dominant tokens), 3 flat (every token in play), 4 spread with some -inf and NaN. */
static void sc_fill_row(sc_rng *r, float *x, int32_t v, int shape)
{
    for (int32_t i = 0; i < v; i++) {
        float n = sc_normal(r);
        switch (shape) {
        case 0:
            x[i] = 3.0f * n;
            break;
        case 1:
            x[i] = roundf(2.0f * n) * 0.5f;
            break;
        case 2:
            x[i] = 2.0f * n + (sc_next(r) % 5000 == 0 ? 18.0f : 0.0f);
            break;
        case 3:
            x[i] = 0.05f * n;
            break;
        default: {
            uint64_t k = sc_next(r) % 97;
            x[i] = k == 0 ? -INFINITY : k == 1 ? NAN : 3.0f * n;
        }
        }
    }
    if (shape == 2 && v > 3)
        x[sc_next(r) % (uint64_t)v] = 20.0f;
}

/* Options by case number: greedy, temperature, top-k, top-p, min-p, penalties (sampled and
 * greedy), then everything combined at random; sc_make adds a logit_bias to a third. */
static void sc_params(sc_rng *r, int c, sd_sampling *s, const char **kind)
{
    static const float temps[] = {0.3f, 0.7f, 1.0f, 1.5f};
    static const int32_t ks[] = {1, 2, 5, 40, 1000};
    static const float ps[] = {0.05f, 0.5f, 0.9f, 0.99f};
    static const float mps[] = {0.01f, 0.1f, 0.5f};
    sd_sampling_default(s);
    s->seed = sc_next(r);
    s->temperature = temps[sc_next(r) % 4];
    int pen = 0;
    switch (c % 8) {
    case 0:
        s->temperature = 0;
        *kind = "greedy";
        break;
    case 1:
        *kind = "temperature";
        break;
    case 2:
        s->top_k = ks[sc_next(r) % 5];
        *kind = "top_k";
        break;
    case 3:
        s->top_p = ps[sc_next(r) % 4];
        *kind = "top_p";
        break;
    case 4:
        s->min_p = mps[sc_next(r) % 3];
        *kind = "min_p";
        break;
    case 5:
        pen = 1;
        *kind = "penalties";
        break;
    case 6:
        pen = 1;
        s->temperature = 0;
        *kind = "greedy+penalties";
        break;
    default:
        s->top_k = sc_next(r) % 2 ? ks[sc_next(r) % 5] : 0;
        s->top_p = sc_next(r) % 2 ? ps[sc_next(r) % 4] : 1.0f;
        s->min_p = sc_next(r) % 2 ? mps[sc_next(r) % 3] : 0;
        pen = (int)(sc_next(r) % 2);
        *kind = "combined";
    }
    if (pen) {
        static const float reps[] = {1.0f, 1.3f, 0.8f};
        static const float pres[] = {0.0f, 0.5f, -0.3f};
        static const float freqs[] = {0.0f, 0.3f, 1.1f};
        s->repetition_penalty = reps[sc_next(r) % 3];
        s->presence_penalty = pres[sc_next(r) % 3];
        s->frequency_penalty = freqs[sc_next(r) % 3];
    }
}

/* A logit_bias of one to eight distinct tokens: the row's best (often banned), history tokens
 * (their entry carries penalties and the bias) and random ones, with biases from -100 to 100. */
static void sc_bias(sc_rng *r, sc_case *k, int32_t best)
{
    static const float biases[] = {-100.0f, -5.0f, -1.0f, 0.5f, 3.0f, 100.0f};
    int want = 1 + (int)(sc_next(r) % 8), n = 0;
    for (int tries = 0; n < want && tries < 32; tries++) {
        uint64_t w = sc_next(r) % 3;
        int32_t t = w == 0                ? best
                    : w == 1 && k->n_hist ? k->hist[sc_next(r) % (uint64_t)k->n_hist]
                                          : (int32_t)(sc_next(r) % (uint64_t)k->vocab);
        int dup = 0;
        for (int j = 0; j < n; j++)
            dup |= k->bias[j].token == t;
        if (!dup)
            k->bias[n++] = (sd_logit_bias){t, biases[sc_next(r) % 6]};
    }
    k->s.bias = k->bias;
    k->s.n_bias = n;
}

static void sc_free(sc_case *k)
{
    free(k->allow);
    k->allow = NULL;
}

/* An allow mask with at least one bit: a few tokens, about half, or nearly all, and the row's
 * best among them or not. */
static void sc_allow(sc_rng *r, sc_case *k, int32_t best)
{
    size_t words = ((size_t)k->vocab + 63) / 64;
    REQUIRE((k->allow = calloc(words, sizeof *k->allow)) != NULL);
    static const uint64_t keep_in_64[] = {1, 32, 63};
    uint64_t keep = keep_in_64[sc_next(r) % 3];
    for (int32_t i = 0; i < k->vocab; i++)
        if (sc_next(r) % 64 < keep)
            k->allow[i >> 6] |= (uint64_t)1 << (i & 63);
    int32_t t = sc_next(r) % 2 ? best : (int32_t)(sc_next(r) % (uint64_t)k->vocab);
    k->allow[t >> 6] |= (uint64_t)1 << (t & 63);
}

/* Case c of a vocabulary: the history reuses a few tokens (repeats count for frequency) and
 * the row's largest logits (so that penalties change the outcome). */
static inline void sc_make(sc_rng *r, sc_case *k, int32_t vocab, int c, float *buf)
{
    static const int tops[] = {-1, 0, 1, 5, 20};
    k->vocab = vocab;
    k->logits = buf;
    sc_fill_row(r, buf, vocab, (int)(sc_next(r) % 5));
    sc_params(r, c, &k->s, &k->kind);
    k->n_top = tops[sc_next(r) % 5];
    k->n_hist = (int32_t)(sc_next(r) % 96);
    k->n_prompt = k->n_hist ? (int32_t)(sc_next(r) % (uint64_t)k->n_hist) : 0;
    int32_t best = 0;
    for (int32_t i = 1; i < vocab; i++)
        if (buf[i] > buf[best])
            best = i;
    for (int32_t i = 0; i < k->n_hist; i++) {
        uint64_t w = sc_next(r) % 4;
        k->hist[i] = w == 0   ? best
                     : w == 1 ? (int32_t)(sc_next(r) % 8 % (uint64_t)vocab)
                              : (int32_t)(sc_next(r) % (uint64_t)vocab);
    }
    if (sc_next(r) % 3 == 0)
        sc_bias(r, k, best);
    sc_free(k);
    if (sc_next(r) % 4 == 0)
        sc_allow(r, k, best);
}

typedef struct sc_lid {
    float v;
    int32_t id;
} sc_lid;

static int sc_cmp(const void *a, const void *b)
{
    const sc_lid *x = a, *y = b;
    if (x->v != y->v)
        return x->v > y->v ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* Whether a cut-off or the draw of sd_sample on `scaled` (the row as sd_sample left it:
 * penalised and divided by the temperature) lies within SC_NEAR of a boundary, where a
 * different summation order may pick the neighbour. Follows sd_sample's steps. */
static int sc_near_boundary(const float *scaled, int32_t vocab, const sd_sampling *s, double u)
{
    int32_t best = 0;
    for (int32_t i = 1; i < vocab; i++)
        if (scaled[i] > scaled[best] || (scaled[best] != scaled[best] && scaled[i] == scaled[i]))
            best = i;
    float floor = scaled[best] - 40.0f;
    sc_lid *c = malloc(sizeof *c * (size_t)vocab);
    double *p = malloc(sizeof *p * (size_t)vocab);
    int32_t n = 0, near = 0;
    for (int32_t i = 0; i < vocab; i++)
        if (scaled[i] >= floor)
            c[n++] = (sc_lid){scaled[i], i};
    qsort(c, (size_t)n, sizeof *c, sc_cmp);
    if (s->top_k > 0 && s->top_k < n)
        n = s->top_k;
    double sum = 0, cum = 0;
    for (int32_t i = 0; i < n; i++)
        sum += p[i] = expf(c[i].v - c[0].v);
    if (s->top_p < 1.0f) {
        double target = (double)s->top_p * sum;
        for (int32_t i = 0; i < n; i++) {
            cum += p[i];
            near |= fabs(cum - target) <= SC_NEAR * sum;
            if (cum >= target) {
                n = i + 1;
                break;
            }
        }
    }
    if (s->min_p > 0) {
        int32_t keep = 1;
        for (int32_t i = 1; i < n; i++)
            near |= fabs(p[i] - s->min_p) <= SC_NEAR;
        while (keep < n && p[keep] >= s->min_p * p[0])
            keep++;
        n = keep;
    }
    sum = cum = 0;
    for (int32_t i = 0; i < n; i++)
        sum += p[i];
    for (int32_t i = 0; i < n; i++) {
        cum += p[i];
        near |= fabs(cum - u * sum) <= SC_NEAR * sum;
    }
    free(c);
    free(p);
    return near;
}

/* |a - b|, 0 when both are the same infinity or both NaN (a row with NaN has NaN logprobs). */
static double sc_diff(float a, float b)
{
    if ((a != a && b != b) || (isinf(a) && a == b))
        return 0;
    return fabs((double)a - (double)b);
}

/* Totals over a run of cases. */
typedef struct sc_stats {
    int cases, near, mismatched;
    double worst_lp;
} sc_stats;

/* Checks one sampler answer against sd_sample & co on the case's logits; `q` is what
 * sd_sample_prep_add built for it (its u). Near-boundary disagreements are counted, not
 * failed; any other disagreement fails. */
static inline void sc_check(const sc_case *k, const sd_sample_req *q, const sd_sample_out *o, sc_stats *st)
{
    int32_t v = k->vocab;
    float *row = malloc(sizeof *row * (size_t)v);
    void *scratch = malloc(sd_sampler_scratch_bytes(v));
    memcpy(row, k->logits, sizeof *row * (size_t)v);
    CHECK(q->allow == k->allow);
    for (int32_t i = 0; k->allow && i < v; i++) /* what the scheduler's host path does (sd_jmask_apply) */
        if (!(k->allow[i >> 6] >> (i & 63) & 1))
            row[i] = -INFINITY;
    sd_rng rng;
    sd_rng_seed(&rng, k->s.seed);
    int32_t want = sd_sample(row, v, &k->s, k->hist, k->n_hist, k->n_prompt, &rng, scratch);
    st->cases++;
    if (o->token != want) {
        int near = !q->greedy && sc_near_boundary(row, v, &k->s, q->u);
        if (near)
            st->near++;
        else
            st->mismatched++;
        CHECK_MSG(near,
                  "vocab %d, %s (T %g k %d p %g min_p %g rep %g pres %g freq %g, %d bias, %d pen): token %d, "
                  "sd_sample %d",
                  (int)v, k->kind, k->s.temperature, (int)k->s.top_k, k->s.top_p, k->s.min_p,
                  k->s.repetition_penalty, k->s.presence_penalty, k->s.frequency_penalty, (int)k->s.n_bias,
                  (int)q->n_pen, (int)o->token, (int)want);
    }
    if (k->n_top >= 0 && o->token >= 0 && o->token < v) {
        float lp = sd_logprob_of(k->logits, v, o->token);
        double e = sc_diff(lp, o->logprob);
        st->worst_lp = e > st->worst_lp ? e : st->worst_lp;
        CHECK_MSG(e <= 1e-4, "vocab %d: logprob %g, sd_logprob_of %g", (int)v, o->logprob, lp);
        int32_t ids[SD_SAMPLE_MAX_TOP];
        float lps[SD_SAMPLE_MAX_TOP];
        int n = k->n_top < v ? k->n_top : v;
        sd_logprobs_top(k->logits, v, n, ids, lps);
        for (int j = 0; j < n; j++) {
            CHECK_MSG(o->top_ids[j] == ids[j], "vocab %d: top %d is %d, sd_logprobs_top %d", (int)v, j,
                      (int)o->top_ids[j], (int)ids[j]);
            double le = sc_diff(lps[j], o->top_lps[j]);
            CHECK_MSG(le <= 1e-4, "vocab %d: top %d logprob %g vs %g", (int)v, j, o->top_lps[j], lps[j]);
        }
    }
    free(row);
    free(scratch);
}

#endif
