/* calib_gen: generation by the dense model for decode-aware calibration (batched decode on a
 * backend with a private block allocator) and batched replay of finished sequences. */
#include "prune/calib.h"

#include <stdlib.h>
#include <string.h>

#include "engine/model.h"
#include "prune/cancel.h"

void sd_calib_gen_opts_default(sd_calib_gen_opts *o)
{
    *o = (sd_calib_gen_opts){.max_new_tokens = 256, .budget = 0, .parallel = 16, .stop_at_eos = 1};
    sd_sampling_default(&o->sampling);
    o->sampling.temperature = 0;
}

typedef struct gen_slot {
    int active;
    int32_t *tokens; /* [cap] prompt + generated */
    int32_t n, prompt_len, cap;
    int32_t *blocks; /* [blocks_per_slot] */
    sd_rng rng;
} gen_slot;

typedef struct gen_ctx {
    sd_backend *b;
    const sd_calib_gen_opts *o;
    const int32_t *eos;
    int n_eos;
    gen_slot *slots;
    int32_t nslots, blocks_per_slot;
    float *logits; /* [nslots, vocab] */
    void *scratch; /* sampler scratch */
    sd_batch_seq *batch;
    int64_t generated;
} gen_ctx;

static int is_eos(const gen_ctx *g, int32_t t)
{
    for (int i = 0; i < g->n_eos; i++)
        if (g->eos[i] == t)
            return 1;
    return 0;
}

/* Samples the next token of slot s from its logits row and appends it. */
static void slot_sample(gen_ctx *g, gen_slot *s, float *row)
{
    int32_t t =
        sd_sample(row, g->b->vocab, &g->o->sampling, s->tokens, s->n, s->prompt_len, &s->rng, g->scratch);
    s->tokens[s->n++] = t;
    g->generated++;
}

static int slot_done(const gen_ctx *g, const gen_slot *s)
{
    if (s->n - s->prompt_len >= g->o->max_new_tokens || s->n >= s->cap)
        return 1;
    if (g->o->stop_at_eos && is_eos(g, s->tokens[s->n - 1]))
        return 1;
    return g->o->budget > 0 && g->generated >= g->o->budget;
}

/* Starts prompt p (cycle c) in slot s: prefill, then the first sampled token. */
static int slot_start(gen_ctx *g, gen_slot *s, const sd_calib_seq *p, int64_t idx, sd_diag *d)
{
    s->n = p->n < s->cap ? p->n : s->cap - 1;
    memcpy(s->tokens, p->tokens, (size_t)s->n * sizeof *s->tokens);
    s->prompt_len = s->n;
    sd_rng_seed(&s->rng, g->o->sampling.seed + (uint64_t)idx);
    sd_batch_seq q = {.pos = 0, .n_tokens = s->n, .tokens = s->tokens, .block_table = s->blocks};
    if (g->o->begin)
        g->o->begin(g->o->begin_ud, &s->prompt_len, 1);
    int rc = sd_backend_forward(g->b, &q, 1, g->logits, d);
    if (rc != 0)
        return rc;
    slot_sample(g, s, g->logits);
    s->active = 1;
    return 0;
}

/* One decode step of every active slot. */
static int decode_step(gen_ctx *g, sd_diag *d)
{
    int nb = 0;
    int32_t ids[256], prefill[256];
    for (int32_t i = 0; i < g->nslots; i++) {
        gen_slot *s = &g->slots[i];
        if (!s->active)
            continue;
        g->batch[nb] = (sd_batch_seq){
            .pos = s->n - 1, .n_tokens = 1, .tokens = s->tokens + s->n - 1, .block_table = s->blocks};
        prefill[nb] = s->prompt_len;
        ids[nb++] = i;
    }
    if (nb == 0)
        return 0;
    if (g->o->begin)
        g->o->begin(g->o->begin_ud, prefill, nb);
    int rc = sd_backend_forward(g->b, g->batch, nb, g->logits, d);
    if (rc != 0)
        return rc;
    for (int k = 0; k < nb; k++)
        slot_sample(g, &g->slots[ids[k]], g->logits + (size_t)k * g->b->vocab);
    return 0;
}

static int gen_alloc(gen_ctx *g, const sd_calib_set *prompts, sd_diag *d)
{
    int32_t maxp = 0;
    for (int32_t i = 0; i < prompts->n; i++)
        maxp = prompts->seqs[i].n > maxp ? prompts->seqs[i].n : maxp;
    int32_t cap = maxp + g->o->max_new_tokens;
    int32_t bs = g->b->block_size;
    g->blocks_per_slot = (cap + bs - 1) / bs;
    g->nslots = g->o->parallel > 0 ? g->o->parallel : 16;
    if (g->nslots > 256)
        g->nslots = 256;
    if (g->nslots > g->b->kv_blocks / g->blocks_per_slot)
        g->nslots = g->b->kv_blocks / g->blocks_per_slot;
    if (g->nslots < 1 || maxp > g->b->max_batch_tokens)
        return sd_diag_set(d, SD_EFULL, "generate: prompts of %d tokens + %d new do not fit the backend",
                           maxp, g->o->max_new_tokens);
    g->slots = calloc((size_t)g->nslots, sizeof *g->slots);
    g->logits = malloc((size_t)g->nslots * g->b->vocab * sizeof *g->logits);
    g->scratch = malloc(sd_sampler_scratch_bytes(g->b->vocab));
    g->batch = malloc((size_t)g->nslots * sizeof *g->batch);
    if (!g->slots || !g->logits || !g->scratch || !g->batch)
        return sd_diag_set(d, SD_ENOMEM, "generate: out of memory");
    for (int32_t i = 0; i < g->nslots; i++) {
        gen_slot *s = &g->slots[i];
        s->cap = cap;
        s->tokens = malloc((size_t)cap * sizeof *s->tokens);
        s->blocks = malloc((size_t)g->blocks_per_slot * sizeof *s->blocks);
        if (!s->tokens || !s->blocks)
            return sd_diag_set(d, SD_ENOMEM, "generate: out of memory");
        for (int32_t k = 0; k < g->blocks_per_slot; k++)
            s->blocks[k] = i * g->blocks_per_slot + k;
    }
    return 0;
}

static void gen_free(gen_ctx *g)
{
    if (g->slots)
        for (int32_t i = 0; i < g->nslots; i++) {
            free(g->slots[i].tokens);
            free(g->slots[i].blocks);
        }
    free(g->slots);
    free(g->logits);
    free(g->scratch);
    free(g->batch);
}

int sd_calib_generate(sd_backend *b, const sd_model *m, const sd_calib_set *prompts,
                      const sd_calib_gen_opts *o, sd_calib_tick_fn tick, void *ud, const volatile int *cancel,
                      sd_calib_set *out, sd_diag *d)
{
    gen_ctx g = {.b = b, .o = o};
    g.n_eos = sd_model_eos_ids(m, &g.eos);
    int rc = gen_alloc(&g, prompts, d);
    int sampling = o->sampling.temperature > 0;
    int64_t next = 0, target = o->budget;
    if (target <= 0)
        for (int32_t i = 0; i < prompts->n; i++)
            target += o->max_new_tokens;
    while (rc == 0) {
        if (sd_cancel_requested(cancel)) {
            rc = sd_diag_set(d, SD_ECANCEL, "generate: cancelled");
            break;
        }
        int more = o->budget > 0 ? g.generated < o->budget : 1;
        for (int32_t i = 0; rc == 0 && i < g.nslots && more; i++) {
            if (g.slots[i].active)
                continue;
            if (next >= prompts->n && !(sampling && o->budget > 0))
                break; /* greedy: a second pass would repeat the first */
            rc = slot_start(&g, &g.slots[i], &prompts->seqs[next % prompts->n], next, d);
            next++;
            more = o->budget > 0 ? g.generated < o->budget : 1;
        }
        if (rc == 0)
            rc = decode_step(&g, d);
        int any = 0;
        for (int32_t i = 0; rc == 0 && i < g.nslots; i++) {
            gen_slot *s = &g.slots[i];
            if (s->active && slot_done(&g, s)) {
                s->active = 0;
                rc = sd_calib_set_push(out, s->tokens, s->n, s->prompt_len, d);
            }
            any |= s->active;
        }
        if (tick)
            tick(ud, g.generated, target);
        if (!any && (next >= prompts->n && !(sampling && o->budget > 0)))
            break;
        if (!any && o->budget > 0 && g.generated >= o->budget)
            break;
    }
    gen_free(&g);
    return rc;
}

/* ---- replay ------------------------------------------------------------------------------- */

typedef struct replay_ctx {
    sd_backend *b;
    const sd_calib_set *s;
    const sd_calib_replay_cb *cb;
    int want_logits;
    float *logits;       /* [max_batch_tokens, vocab] when wanted */
    int32_t *blocks;     /* [kv_blocks] identity table */
    sd_batch_seq *batch; /* [max_batch_tokens] */
    int32_t *ids, *first, *nrows;
} replay_ctx;

static int run_batch(replay_ctx *r, int nb, sd_diag *d)
{
    if (r->cb && r->cb->begin)
        r->cb->begin(r->cb->ud, r->ids, nb);
    int rc = sd_backend_forward(r->b, r->batch, nb, r->logits, d);
    if (rc == 0 && r->want_logits && r->cb && r->cb->logits)
        rc = r->cb->logits(r->cb->ud, r->ids, r->first, r->nrows, nb, r->logits);
    return rc;
}

/* A sequence longer than one batch: chunks through the same block table. */
static int run_long(replay_ctx *r, int32_t i, sd_diag *d)
{
    const sd_calib_seq *q = &r->s->seqs[i];
    int32_t step = r->b->max_batch_tokens;
    for (int32_t p = 0; p < q->n; p += step) {
        int32_t k = q->n - p < step ? q->n - p : step;
        r->batch[0] = (sd_batch_seq){.pos = p,
                                     .n_tokens = k,
                                     .tokens = q->tokens + p,
                                     .block_table = r->blocks,
                                     .all_logits = r->want_logits};
        r->ids[0] = i;
        r->first[0] = p;
        r->nrows[0] = r->want_logits ? k : 1;
        int rc = run_batch(r, 1, d);
        if (rc != 0)
            return rc;
    }
    return 0;
}

int sd_calib_replay(sd_backend *b, const sd_calib_set *s, const sd_calib_replay_cb *cb, int want_logits,
                    sd_calib_tick_fn tick, void *tick_ud, const volatile int *cancel, sd_diag *d)
{
    int32_t T = b->max_batch_tokens, bs = b->block_size;
    replay_ctx r = {.b = b, .s = s, .cb = cb, .want_logits = want_logits};
    r.logits = malloc((size_t)T * b->vocab * sizeof *r.logits); /* a row per token at most */
    r.blocks = malloc((size_t)b->kv_blocks * sizeof *r.blocks);
    r.batch = malloc((size_t)T * sizeof *r.batch);
    r.ids = malloc((size_t)T * sizeof *r.ids);
    r.first = malloc((size_t)T * sizeof *r.first);
    r.nrows = malloc((size_t)T * sizeof *r.nrows);
    int rc = 0;
    if (!r.logits || !r.blocks || !r.batch || !r.ids || !r.first || !r.nrows) {
        rc = sd_diag_set(d, SD_ENOMEM, "replay: out of memory");
        goto out;
    }
    for (int32_t i = 0; i < b->kv_blocks; i++)
        r.blocks[i] = i;
    int64_t done = 0, total = 0;
    for (int32_t i = 0; i < s->n; i++)
        total += s->seqs[i].n;
    for (int32_t i = 0; i < s->n && rc == 0;) {
        if (sd_cancel_requested(cancel)) {
            rc = sd_diag_set(d, SD_ECANCEL, "replay: cancelled");
            break;
        }
        const sd_calib_seq *q = &s->seqs[i];
        if ((q->n + bs - 1) / bs > b->kv_blocks) {
            rc = sd_diag_set(d, SD_EFULL, "replay: sequence %d of %d tokens exceeds the KV pool", i, q->n);
            break;
        }
        if (q->n > T) {
            rc = run_long(&r, i, d);
            done += q->n;
            i++;
        } else {
            int nb = 0;
            int32_t tokens = 0, blocks = 0;
            while (i < s->n && nb < SD_CALIB_REPLAY_MAX_SEQS && tokens + s->seqs[i].n <= T &&
                   blocks + (s->seqs[i].n + bs - 1) / bs <= b->kv_blocks) {
                const sd_calib_seq *e = &s->seqs[i];
                r.batch[nb] = (sd_batch_seq){.pos = 0,
                                             .n_tokens = e->n,
                                             .tokens = e->tokens,
                                             .block_table = r.blocks + blocks,
                                             .all_logits = want_logits};
                r.ids[nb] = i;
                r.first[nb] = 0;
                r.nrows[nb] = want_logits ? e->n : 1;
                tokens += e->n;
                blocks += (e->n + bs - 1) / bs;
                nb++;
                i++;
            }
            rc = run_batch(&r, nb, d);
            done += tokens;
        }
        if (tick && rc == 0)
            tick(tick_ud, done, total);
    }
out:
    free(r.logits);
    free(r.blocks);
    free(r.batch);
    free(r.ids);
    free(r.first);
    free(r.nrows);
    return rc;
}
