/* test_sampler: greedy, seeded reproducibility, top-k/top-p/min-p cut-offs, penalties, logit
 * bias and the empirical distribution of temperature sampling against a softmax computed here. */
#include "engine/sampler.h"

#include <stdint.h>

#include "tests/harness.h"

#define V 8

static unsigned char scratch[1 << 16];

static int32_t sample(const float *logits, const sd_sampling *s, const int32_t *hist, int n_hist,
                      int n_prompt, sd_rng *rng)
{
    float l[V];
    memcpy(l, logits, sizeof l);
    return sd_sample(l, V, s, hist, n_hist, n_prompt, rng, scratch);
}

/* Reference distribution: softmax(logits / T), then the top-k / top-p / min-p filters written
 * the plain way (sort by probability, accumulate), renormalised. */
static void ref_probs(const float *logits, float T, int top_k, double top_p, double min_p, double *p)
{
    double mx = -1e30, sum = 0;
    for (int i = 0; i < V; i++)
        mx = logits[i] / T > mx ? logits[i] / T : mx;
    for (int i = 0; i < V; i++)
        sum += p[i] = exp(logits[i] / T - mx);
    for (int i = 0; i < V; i++)
        p[i] /= sum;
    int order[V];
    for (int i = 0; i < V; i++)
        order[i] = i;
    for (int i = 0; i < V; i++) /* selection sort, descending, stable */
        for (int j = i + 1; j < V; j++)
            if (p[order[j]] > p[order[i]]) {
                int t = order[i];
                order[i] = order[j];
                order[j] = t;
            }
    int keep = V;
    if (top_k > 0 && top_k < keep)
        keep = top_k;
    double ksum = 0;
    for (int i = 0; i < keep; i++)
        ksum += p[order[i]];
    double cum = 0;
    for (int i = 0; i < keep; i++) {
        cum += p[order[i]] / ksum;
        if (cum >= top_p - 1e-12) {
            keep = i + 1;
            break;
        }
    }
    int k2 = 1;
    while (k2 < keep && p[order[k2]] >= min_p * p[order[0]])
        k2++;
    keep = k2;
    double tot = 0;
    for (int i = 0; i < keep; i++)
        tot += p[order[i]];
    double q[V] = {0};
    for (int i = 0; i < keep; i++)
        q[order[i]] = p[order[i]] / tot;
    memcpy(p, q, sizeof q);
}

/* Draws n samples and checks the counts against p: tokens with p = 0 never appear, and
 * Pearson's chi-square over the others stays under df + 6 sqrt(2 df) (about 6 sigma). */
static void check_distribution(const float *logits, const sd_sampling *s, const double *p, int n)
{
    sd_rng rng;
    sd_rng_seed(&rng, s->seed);
    int count[V] = {0};
    for (int i = 0; i < n; i++) {
        int32_t t = sample(logits, s, NULL, 0, 0, &rng);
        REQUIRE(t >= 0 && t < V);
        count[t]++;
    }
    double chi = 0;
    int df = -1;
    for (int i = 0; i < V; i++) {
        if (p[i] == 0) {
            CHECK_MSG(count[i] == 0, "token %d has probability 0 but was drawn %d times", i, count[i]);
            continue;
        }
        double e = p[i] * n;
        chi += (count[i] - e) * (count[i] - e) / e;
        df++;
    }
    if (df > 0)
        CHECK_MSG(chi < df + 6 * sqrt(2.0 * df), "chi-square %.1f with %d degrees of freedom", chi, df);
    else
        CHECK(df == 0);
}

static const float L0[V] = {1.0f, 2.5f, -0.5f, 2.0f, 0.3f, 2.5f, -3.0f, 1.7f};

static void test_greedy_lowest_id_on_ties(void)
{
    sd_sampling s;
    sd_sampling_default(&s);
    s.temperature = 0;
    sd_rng rng;
    sd_rng_seed(&rng, 1);
    int best = 0;
    for (int i = 1; i < V; i++)
        if (L0[i] > L0[best])
            best = i;
    CHECK(best == 1); /* ids 1 and 5 tie; the lower wins */
    CHECK(sample(L0, &s, NULL, 0, 0, &rng) == best);
    s.top_k = 1;
    s.temperature = 1.0f;
    for (int i = 0; i < 100; i++)
        CHECK(sample(L0, &s, NULL, 0, 0, &rng) == best);
}

static void test_seeded_reproducible(void)
{
    sd_sampling s;
    sd_sampling_default(&s);
    sd_rng a, b, c;
    sd_rng_seed(&a, 42);
    sd_rng_seed(&b, 42);
    sd_rng_seed(&c, 43);
    int differ = 0;
    for (int i = 0; i < 200; i++) {
        int32_t x = sample(L0, &s, NULL, 0, 0, &a), y = sample(L0, &s, NULL, 0, 0, &b);
        CHECK(x == y);
        differ += x != sample(L0, &s, NULL, 0, 0, &c);
    }
    CHECK_MSG(differ > 20, "seeds 42 and 43 agree on %d of 200 draws", 200 - differ);
    sd_rng_seed(&a, 7);
    for (int i = 0; i < 10000; i++) {
        double u = sd_rng_uniform(&a);
        REQUIRE(u >= 0 && u < 1);
    }
}

static void test_temperature_matches_softmax(void)
{
    float ts[] = {1.0f, 0.5f, 2.0f};
    for (int i = 0; i < 3; i++) {
        sd_sampling s;
        sd_sampling_default(&s);
        s.temperature = ts[i];
        s.seed = 100 + i;
        double p[V];
        ref_probs(L0, ts[i], 0, 1.0, 0.0, p);
        check_distribution(L0, &s, p, 200000);
    }
}

static void test_top_k(void)
{
    sd_sampling s;
    sd_sampling_default(&s);
    s.top_k = 3;
    s.seed = 5;
    double p[V];
    ref_probs(L0, 1.0f, 3, 1.0, 0.0, p);
    int kept = 0;
    for (int i = 0; i < V; i++)
        kept += p[i] > 0;
    CHECK(kept == 3);
    check_distribution(L0, &s, p, 100000);
}

static void test_top_p_cutoff(void)
{
    /* probabilities 0.5, 0.3, 0.15, 0.05 (+ ~0 for the rest): top_p 0.75 keeps {0.5, 0.3}, 0.85 adds 0.15 */
    float l[V];
    double pr[4] = {0.5, 0.3, 0.15, 0.05};
    for (int i = 0; i < V; i++)
        l[i] = i < 4 ? (float)log(pr[i]) : -60.0f;
    double tps[] = {0.75, 0.85, 0.4};
    int want_kept[] = {2, 3, 1};
    for (int k = 0; k < 3; k++) {
        sd_sampling s;
        sd_sampling_default(&s);
        s.top_p = (float)tps[k];
        s.seed = 9 + k;
        double p[V];
        ref_probs(l, 1.0f, 0, tps[k], 0.0, p);
        int kept = 0;
        for (int i = 0; i < V; i++)
            kept += p[i] > 0;
        CHECK_MSG(kept == want_kept[k], "reference keeps %d for top_p %.2f", kept, tps[k]);
        check_distribution(l, &s, p, 100000);
    }
}

static void test_min_p(void)
{
    sd_sampling s;
    sd_sampling_default(&s);
    s.min_p = 0.3f;
    s.seed = 77;
    double p[V];
    ref_probs(L0, 1.0f, 0, 1.0, 0.3, p);
    double pf[V];
    ref_probs(L0, 1.0f, 0, 1.0, 0.0, pf);
    for (int i = 0; i < V; i++) /* kept exactly when p >= 0.3 p_max */
        CHECK((p[i] > 0) == (pf[i] >= 0.3 * pf[1]));
    check_distribution(L0, &s, p, 100000);
}

static void test_penalties(void)
{
    /* prompt {2, 4}, generated {1, 1, 6}: counts 1:2, 6:1 */
    int32_t hist[] = {2, 4, 1, 1, 6};
    sd_sampling s;
    sd_sampling_default(&s);
    s.temperature = 0;
    s.presence_penalty = 0.5f;
    s.frequency_penalty = 0.25f;
    float l[V];
    memcpy(l, L0, sizeof l);
    sd_rng rng;
    sd_rng_seed(&rng, 0);
    int32_t t = sd_sample(l, V, &s, hist, 5, 2, &rng, scratch);
    for (int i = 0; i < V; i++) {
        int cnt = (i == 1) * 2 + (i == 6);
        float want = L0[i] - (cnt ? 0.5f + 0.25f * cnt : 0.0f);
        CHECK_MSG(fabsf(l[i] - want) < 1e-6f, "token %d: %g, want %g", i, l[i], want);
    }
    CHECK(t == 5); /* 1 was penalised below its tie partner 5 */

    sd_sampling_default(&s);
    s.temperature = 0;
    s.repetition_penalty = 2.0f;
    memcpy(l, L0, sizeof l);
    sd_sample(l, V, &s, hist, 5, 2, &rng, scratch);
    for (int i = 0; i < V; i++) {
        int seen = i == 2 || i == 4 || i == 1 || i == 6;
        float want = !seen ? L0[i] : L0[i] > 0 ? L0[i] / 2 : L0[i] * 2;
        CHECK_MSG(fabsf(l[i] - want) < 1e-6f, "token %d: %g, want %g", i, l[i], want);
    }
}

/* logit_bias is added first: -100 bans the argmax, +100 forces a token, out-of-vocabulary ids
 * are ignored, and the repetition penalty acts on the biased logit; sampled draws follow the
 * biased softmax. */
static void test_logit_bias(void)
{
    sd_sampling s;
    sd_sampling_default(&s);
    s.temperature = 0;
    sd_rng rng;
    sd_rng_seed(&rng, 0);
    const sd_logit_bias ban[] = {{1, -100.0f}, {5, -100.0f}, {V + 3, 100.0f}};
    s.bias = ban, s.n_bias = 3;
    CHECK(sample(L0, &s, NULL, 0, 0, &rng) == 3); /* 1 and 5 (2.5) banned: 3 (2.0) next */
    const sd_logit_bias force[] = {{6, 100.0f}};
    s.bias = force, s.n_bias = 1;
    CHECK(sample(L0, &s, NULL, 0, 0, &rng) == 6);

    int32_t hist[] = {6};
    s.repetition_penalty = 2.0f;
    float l[V];
    memcpy(l, L0, sizeof l);
    sd_sample(l, V, &s, hist, 1, 1, &rng, scratch);
    CHECK_MSG(fabsf(l[6] - (L0[6] + 100.0f) / 2) < 1e-4f, "token 6: %g", l[6]);

    sd_sampling_default(&s);
    s.temperature = 1.0f;
    const sd_logit_bias shift[] = {{0, 1.5f}, {2, 3.0f}};
    s.bias = shift, s.n_bias = 2;
    float biased[V];
    memcpy(biased, L0, sizeof biased);
    biased[0] += 1.5f, biased[2] += 3.0f;
    double p[V];
    ref_probs(biased, 1.0f, 0, 1.0, 0.0, p);
    check_distribution(L0, &s, p, 100000);
}

static void test_logprobs(void)
{
    double mx = -1e30, sum = 0;
    for (int i = 0; i < V; i++)
        mx = L0[i] > mx ? L0[i] : mx;
    for (int i = 0; i < V; i++)
        sum += exp(L0[i] - mx);
    for (int i = 0; i < V; i++)
        CHECK(fabs(sd_logprob_of(L0, V, i) - (L0[i] - mx - log(sum))) < 1e-5);
    int32_t ids[4];
    float lps[4];
    sd_logprobs_top(L0, V, 4, ids, lps);
    CHECK(ids[0] == 1 && ids[1] == 5 && ids[2] == 3 && ids[3] == 7); /* descending, ties by id */
    for (int j = 0; j < 4; j++)
        CHECK(fabsf(lps[j] - sd_logprob_of(L0, V, ids[j])) < 1e-6f);
    CHECK(isinf(sd_logprob_of(L0, V, V)));
}

int main(void)
{
    CHECK(sd_sampler_scratch_bytes(V) <= sizeof scratch);
    RUN(test_greedy_lowest_id_on_ties);
    RUN(test_seeded_reproducible);
    RUN(test_temperature_matches_softmax);
    RUN(test_top_k);
    RUN(test_top_p_cutoff);
    RUN(test_min_p);
    RUN(test_penalties);
    RUN(test_logit_bias);
    RUN(test_logprobs);
    return sd_test_done();
}
