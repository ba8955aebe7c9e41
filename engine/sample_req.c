/* sample_req: builds backend sampling requests (penalty lists, the host-drawn uniform) and
 * runs the CUDA sampler's radix-select method on the CPU (sd_sample_twin). */
#include "engine/sample_req.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sample_radix.h"

int sd_sample_prep_init(sd_sample_prep *p, int32_t vocab, sd_diag *d)
{
    memset(p, 0, sizeof *p);
    p->vocab = vocab;
    p->mark = calloc((size_t)(vocab > 0 ? vocab : 1), sizeof *p->mark);
    if (!p->mark)
        return sd_diag_set(d, SD_ENOMEM, "sampling: out of memory for a %d-token mark table", (int)vocab);
    return 0;
}

void sd_sample_prep_free(sd_sample_prep *p)
{
    if (!p)
        return;
    free(p->mark);
    free(p->pen);
    memset(p, 0, sizeof *p);
}

int sd_sample_prep_begin(sd_sample_prep *p, size_t n_total, sd_diag *d)
{
    p->n = 0;
    p->reserved = 0;
    if (n_total <= p->cap) {
        p->reserved = n_total;
        return 0;
    }
    sd_sample_pen *q = realloc(p->pen, sizeof *q * n_total);
    if (!q)
        return sd_diag_set(d, SD_ENOMEM, "sampling: out of memory for %zu penalty entries", n_total);
    p->pen = q;
    p->cap = p->reserved = n_total;
    return 0;
}

/* One entry per distinct token of hist[start, n_hist), counting the generated occurrences,
 * then the biased tokens: added to their history entry, else an entry of their own (n_gen -1).
 * The mark table is left all zero again. */
static int32_t collect_pen(sd_sample_prep *p, sd_sample_pen *out, const int32_t *hist, int32_t start,
                           int32_t n_hist, int32_t n_prompt, const sd_sampling *s)
{
    int32_t n = 0;
    for (int32_t i = start; i < n_hist; i++) {
        int32_t t = hist[i];
        if (t < 0 || t >= p->vocab)
            continue;
        if (!p->mark[t]) {
            out[n] = (sd_sample_pen){t, 0, 0.0f};
            p->mark[t] = ++n;
        }
        if (i >= n_prompt)
            out[p->mark[t] - 1].n_gen++;
    }
    for (int32_t i = 0; i < s->n_bias; i++) {
        int32_t t = s->bias[i].token;
        if (t < 0 || t >= p->vocab)
            continue; /* as sd_sample ignores it */
        if (!p->mark[t]) {
            out[n] = (sd_sample_pen){t, -1, 0.0f};
            p->mark[t] = ++n;
        }
        out[p->mark[t] - 1].bias += s->bias[i].bias;
    }
    for (int32_t j = 0; j < n; j++)
        p->mark[out[j].token] = 0;
    return n;
}

int sd_sample_prep_add(sd_sample_prep *p, sd_sample_req *q, int32_t row, const sd_sampling *s,
                       const int32_t *hist, int32_t n_hist, int32_t n_prompt, sd_rng *rng, int n_top)
{
    memset(q, 0, sizeof *q);
    q->row = row;
    q->s = *s;
    q->n_top = n_top;
    /* the conditions under which sd_sample applies each penalty */
    q->rep_on = s->repetition_penalty > 0 && s->repetition_penalty != 1.0f;
    q->pf_on = (s->presence_penalty != 0 || s->frequency_penalty != 0) && n_hist > n_prompt;
    q->greedy = sd_sampling_is_greedy(s);
    q->u = q->greedy ? 0 : sd_rng_uniform(rng);
    q->pen = p->pen ? p->pen + p->n : NULL;
    /* history tokens only where a penalty needs them: all of them for the repetition penalty,
     * the generated ones for presence / frequency */
    int32_t start = q->rep_on ? 0 : q->pf_on ? n_prompt : n_hist;
    size_t need = (size_t)(n_hist - start) + (size_t)(s->n_bias > 0 ? s->n_bias : 0);
    if (need == 0)
        return 0;
    if (p->n + need > p->reserved)
        return SD_ERANGE; /* sd_sample_prep_begin was told too little */
    q->n_pen = collect_pen(p, p->pen + p->n, hist, start, n_hist, n_prompt, s);
    p->n += (size_t)q->n_pen;
    return 0;
}

/* ---- the twin ---- */

typedef struct sr_hist {
    uint32_t cnt[SD_SR_BUCKETS];
    unsigned long long w[SD_SR_BUCKETS];
    int32_t first[SD_SR_BUCKETS];
} sr_hist;

/* The element of `set` at which the running sum (of p with `mass`, else of 1) in key order
 * crosses the target: frac * total when frac >= 0, else abs_target. -1 when nothing does. */
static int32_t descend(const float *row, int32_t vocab, const sd_sr_set *set, int mass, int ge, double frac,
                       uint64_t abs_target)
{
    sr_hist h;
    int fixed = 0, kb = set->keybits;
    uint64_t pre = 0, target = abs_target;
    for (;;) {
        memset(&h, 0, sizeof h);
        for (int32_t i = 0; i < vocab; i++) {
            float x, p = 0;
            uint64_t key;
            if (!sd_sr_member(set, row[i], i, mass, &x, &key, &p))
                continue;
            if (fixed && (key >> (kb - fixed)) != pre)
                continue;
            int dg = (int)((key >> (kb - fixed - SD_SR_DIGIT)) & (SD_SR_BUCKETS - 1));
            if (!h.cnt[dg])
                h.first[dg] = i;
            h.cnt[dg]++;
            h.w[dg] += mass ? sd_sr_weight(p, set->sbits) : 1;
        }
        if (!fixed) {
            uint64_t total = 0;
            for (int b = 0; b < SD_SR_BUCKETS; b++)
                total += h.w[b];
            if (frac >= 0)
                target = sd_sr_target(frac, total, ge);
            if (!sd_sr_crosses(total, target, ge))
                return -1;
        }
        uint64_t before = 0;
        int b = sd_sr_pick_bucket(h.cnt, h.w, target, ge, &before);
        if (b < 0)
            return -1;
        target -= before;
        if (h.cnt[b] == 1 || fixed + SD_SR_DIGIT >= kb)
            return h.first[b];
        fixed += SD_SR_DIGIT;
        pre = (pre << SD_SR_DIGIT) | (uint64_t)b;
    }
}

static void set_init(sd_sr_set *s, int32_t vocab, float scale, float floor, float top)
{
    memset(s, 0, sizeof *s);
    s->scale = scale;
    s->floor = floor;
    s->top = top;
    s->limit = UINT64_MAX;
    s->idbits = sd_sr_idbits(vocab);
    s->keybits = sd_sr_keybits(s->idbits);
    s->sbits = sd_sr_sbits(s->idbits);
}

/* The top n_top raw logits (NaN skipped) by a count descent, then sorted by key. */
static void twin_top(const float *row, int32_t vocab, int n_top, float m, double lse, sd_sample_out *out)
{
    sd_sr_set set;
    set_init(&set, vocab, 1.0f, -INFINITY, 0);
    int32_t e = descend(row, vocab, &set, 0, 1, -1, (uint64_t)n_top);
    if (e >= 0)
        set.limit = sd_sr_key(row[e], e, set.idbits);
    uint64_t keys[SD_SAMPLE_MAX_TOP];
    int n = 0;
    for (int32_t i = 0; i < vocab && n < n_top; i++) {
        float x, p;
        uint64_t key;
        if (!sd_sr_member(&set, row[i], i, 0, &x, &key, &p))
            continue;
        int j = n++;
        for (; j > 0 && keys[j - 1] > key; j--) {
            keys[j] = keys[j - 1];
            out->top_ids[j] = out->top_ids[j - 1];
        }
        keys[j] = key;
        out->top_ids[j] = i;
    }
    for (int j = 0; j < n_top; j++) {
        out->top_lps[j] = j < n ? (float)((double)row[out->top_ids[j]] - m - lse) : -INFINITY;
        if (j >= n)
            out->top_ids[j] = -1;
    }
}

/* Applies the bias and penalties in place as sd_sample does, keeping each edited token's raw value. */
static void twin_penalties(float *row, const sd_sample_req *q, float *raw)
{
    for (int32_t j = 0; j < q->n_pen; j++) {
        int32_t t = q->pen[j].token;
        float v = raw[j] = row[t];
        v += q->pen[j].bias;
        if (q->rep_on && q->pen[j].n_gen >= 0)
            v = v > 0 ? v / q->s.repetition_penalty : v * q->s.repetition_penalty;
        if (q->pf_on && q->pen[j].n_gen > 0)
            v -= q->s.presence_penalty + q->s.frequency_penalty * (float)q->pen[j].n_gen;
        row[t] = v;
    }
}

/* Temperature, top-k, top-p, min-p and the draw on the penalised row. */
static int32_t twin_pick(const float *row, int32_t vocab, const sd_sample_req *q, int32_t best)
{
    float inv_t = 1.0f / q->s.temperature, top = row[best] * inv_t;
    sd_sr_set set;
    set_init(&set, vocab, inv_t, top - SD_SR_WINDOW, top);
    int32_t e;
    if (q->s.top_k > 0 && (e = descend(row, vocab, &set, 0, 1, -1, (uint64_t)q->s.top_k)) >= 0)
        set.limit = sd_sr_key(row[e] * inv_t, e, set.idbits);
    if (q->s.top_p < 1.0f && (e = descend(row, vocab, &set, 1, 1, q->s.top_p, 0)) >= 0)
        set.limit = sd_sr_key(row[e] * inv_t, e, set.idbits);
    if (q->s.min_p > 1.0f && (e = descend(row, vocab, &set, 0, 1, -1, 1)) >= 0) {
        set.limit = sd_sr_key(row[e] * inv_t, e, set.idbits); /* only the first survives */
    } else if (q->s.min_p > 0) {
        set.minp_on = 1;
        set.min_p = q->s.min_p;
    }
    e = descend(row, vocab, &set, 1, 0, q->u, 0);
    return e >= 0 ? e : best;
}

int sd_sample_twin(float *row, int32_t vocab, const sd_sample_req *q, sd_sample_out *out)
{
    memset(out, 0, sizeof *out);
    float m = 0;
    double lse = 0;
    if (q->n_top >= 0) {
        m = row[sd__sample_argmax(row, vocab)];
        double s = 0;
        for (int32_t i = 0; i < vocab; i++)
            s += exp((double)row[i] - m);
        lse = log(s);
        if (q->n_top > 0)
            twin_top(row, vocab, q->n_top < SD_SAMPLE_MAX_TOP ? q->n_top : SD_SAMPLE_MAX_TOP, m, lse, out);
    }
    float *raw = malloc(sizeof *raw * (size_t)(q->n_pen > 0 ? q->n_pen : 1));
    if (!raw)
        return SD_ENOMEM;
    if (q->allow)
        for (int32_t i = 0; i < vocab; i++)
            if (!(q->allow[i >> 6] >> (i & 63) & 1))
                row[i] = -INFINITY;
    twin_penalties(row, q, raw);
    int32_t best = sd__sample_argmax(row, vocab);
    out->token = q->greedy ? best : twin_pick(row, vocab, q, best);
    if (q->n_top >= 0) {
        float v = row[out->token];
        for (int32_t j = 0; j < q->n_pen; j++)
            if (q->pen[j].token == out->token)
                v = raw[j];
        out->logprob = (float)((double)v - m - lse);
    }
    free(raw);
    return 0;
}
