/* sched: continuous batching — the waiting queue, the running set, KV block accounting,
 * the plan of one step (decodes first, then prefill chunks, then admissions), preemption by
 * recompute and the forward pass that executes the plan. */
#include "sched.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched_impl.h"

_Static_assert(SD_MAX_TOP_LOGPROBS <= SD_SAMPLE_MAX_TOP, "a backend sampler returns up to SD_SAMPLE_MAX_TOP");

static int imin(int a, int b)
{
    return a < b ? a : b;
}

static void sync_counts(sd_sched *s)
{
    atomic_store(&s->st_running, s->n_running);
    atomic_store(&s->st_waiting, s->n_waiting);
    atomic_store(&s->st_blocks_used, sd_kv_used(s->kv) - sd_kv_idle_cached(s->kv));
    atomic_store(&s->st_blocks_cached, sd_kv_idle_cached(s->kv));
    if (s->draft)
        atomic_store(&s->st_draft_blocks, sd_spec_draft_blocks_used(s->draft));
    if (s->prefix) {
        sd_prefix_stats ps;
        sd_prefix_stats_get(s->prefix, &ps);
        atomic_store(&s->st_prefix_query, (unsigned long long)s->prefix_query);
        atomic_store(&s->st_prefix_hit, (unsigned long long)s->prefix_hit);
        atomic_store(&s->st_prefix_evicted, (unsigned long long)ps.evicted_blocks);
        atomic_store(&s->st_prefix_cold_rule, ps.cold_rule);
    }
}

static void collect_eos(sd_sched *s)
{
    const int32_t *ids = NULL;
    int n = sd_model_eos_ids(s->m, &ids);
    for (int i = 0; i < n && i < SD_MAX_EOS + 1; i++)
        s->eos[s->n_eos++] = ids[i];
}

static int check_backend(const sd_backend *b, sd_diag *d)
{
    if (b->vocab <= 0 || b->block_size <= 0 || b->kv_blocks <= 0)
        return sd_diag_set(d, SD_EINVAL, "engine: backend %s reports vocab %d, block_size %d, kv_blocks %d",
                           b->vt->name, (int)b->vocab, (int)b->block_size, (int)b->kv_blocks);
    return 0;
}

/* Fixes the limits: backend caps the tokens per step, every running sequence holds at least
 * one block, and no request may need more blocks than the whole pool. */
static void set_limits(sd_sched *s, const sd_engine_opts *o)
{
    const sd_model_config *cfg = sd_model_cfg(s->m);
    s->budget = o->max_batch_tokens > 0 ? o->max_batch_tokens : 512;
    if (s->b->max_batch_tokens > 0)
        s->budget = imin(s->budget, s->b->max_batch_tokens);
    s->max_seqs = o->max_seqs > 0 ? o->max_seqs : 1;
    s->max_seqs = imin(imin(s->max_seqs, s->budget), s->b->kv_blocks);
    int64_t len = o->max_model_len > 0 ? o->max_model_len : cfg->max_pos;
    if (cfg->max_pos > 0 && len > cfg->max_pos)
        len = cfg->max_pos;
    if (len > (int64_t)s->b->kv_blocks * s->block_size)
        len = (int64_t)s->b->kv_blocks * s->block_size;
    s->max_model_len = (int32_t)len;
    s->spec = o->spec;
    sd_spec_opts_clamp(&s->spec);
    s->cap_srows = s->max_seqs + imin(s->spec.max_seqs, s->max_seqs) * s->spec.tokens;
}

/* SD_CPU_SAMPLING set to anything but "" or "0" keeps sampling on the host (comparisons, bisecting). */
static int cpu_sampling_forced(void)
{
    const char *e = getenv("SD_CPU_SAMPLING");
    return e && *e && strcmp(e, "0") != 0;
}

static int backend_sampling_init(sd_sched *s, sd_diag *d)
{
    s->backend_sampling = s->b->vt->sample && !cpu_sampling_forced();
    if (!s->backend_sampling)
        return 0;
    int rc = sd_sample_prep_init(&s->prep, s->vocab, d);
    if (rc < 0)
        return rc;
    s->sreq = calloc((size_t)s->cap_srows, sizeof *s->sreq);
    s->sout = calloc((size_t)s->cap_srows, sizeof *s->sout);
    s->srng = calloc((size_t)s->cap_srows, sizeof *s->srng);
    s->sslot = calloc((size_t)s->max_seqs, sizeof *s->sslot);
    if (!s->sreq || !s->sout || !s->srng || !s->sslot)
        return sd_diag_set(d, SD_ENOMEM, "engine: out of memory");
    return 0;
}

int sd_sched_init(sd_sched **ret, const sd_model *m, sd_backend *b, const sd_engine_opts *o, sd_diag *d)
{
    int rc = check_backend(b, d);
    if (rc < 0)
        return rc;
    sd_sched *s = calloc(1, sizeof *s);
    if (!s)
        return sd_diag_set(d, SD_ENOMEM, "engine: out of memory");
    s->m = m;
    s->b = b;
    s->tok = sd_model_tokenizer(m);
    s->vocab = b->vocab;
    s->block_size = b->block_size;
    set_limits(s, o);
    collect_eos(s);
    rc = sd_kv_init(&s->kv, b->kv_blocks, b->block_size, d);
    if (rc == 0)
        rc = sd_jvc_init(&s->jvc, 16, d);
    if (rc == 0 && o->prefix_caching)
        rc = sd_prefix_init(&s->prefix, s->kv, SD_PREFIX_ADAPTIVE, d);
    if (rc < 0) {
        sd_sched_free(s);
        return rc;
    }
    s->running = calloc((size_t)s->max_seqs, sizeof *s->running);
    s->batch = calloc((size_t)s->max_seqs, sizeof *s->batch);
    s->planned = calloc((size_t)s->max_seqs, sizeof *s->planned);
    s->raw = malloc(sizeof *s->raw * (size_t)s->vocab);
    s->sampler_scratch = malloc(sd_sampler_scratch_bytes(s->vocab));
    if (!s->running || !s->batch || !s->planned || !s->raw || !s->sampler_scratch) {
        sd_sched_free(s);
        return sd_diag_set(d, SD_ENOMEM, "engine: out of memory");
    }
    rc = backend_sampling_init(s, d);
    if (rc == 0)
        rc = sd_sched__draft_init(s, o, d);
    if (rc < 0) {
        sd_sched_free(s);
        return rc;
    }
    sync_counts(s);
    *ret = s;
    return 0;
}

void sd_sched_free(sd_sched *s)
{
    if (!s)
        return;
    sd_jmask_free(s->jm);
    sd_jvc_free(s->jvc);
    free(s->allow);
    for (int i = 0; i < s->n_running; i++) {
        sd_kv_seq_release(s->kv, &s->running[i]->kv);
        if (s->draft)
            sd_spec_draft_release(s->draft, &s->running[i]->dseq);
        sd_sched_req_free(s->running[i]);
    }
    while (s->waiting) {
        sd_sched_req *r = s->waiting;
        s->waiting = r->next;
        sd_sched_req_free(r);
    }
    sd_prefix_free(s->prefix);
    sd_kv_free(s->kv);
    sd_spec_draft_free(s->draft);
    free(s->dreq);
    free(s->running);
    free(s->batch);
    free(s->planned);
    free(s->logits);
    free(s->raw);
    free(s->sampler_scratch);
    free(s->text);
    sd_sample_prep_free(&s->prep);
    free(s->sreq);
    free(s->sout);
    free(s->srng);
    free(s->sslot);
    free(s);
}

int32_t sd_sched_max_model_len(const sd_sched *s)
{
    return s->max_model_len;
}

/* ---- queues ---- */

/* Preempted requests go to the head (ahead of everything, oldest first); new ones after
 * every request of the same or a better priority. */
static void waiting_insert(sd_sched *s, sd_sched_req *r)
{
    sd_sched_req **pp = &s->waiting;
    if (!r->preempted)
        while (*pp && ((*pp)->preempted || (*pp)->priority <= r->priority))
            pp = &(*pp)->next;
    r->next = *pp;
    *pp = r;
    s->n_waiting++;
}

void sd_sched_add(sd_sched *s, sd_sched_req *r)
{
    waiting_insert(s, r);
    sync_counts(s);
}

void sd_sched_cancel(sd_sched *s, uint64_t id)
{
    for (int i = 0; i < s->n_running; i++)
        if (s->running[i]->id == id)
            s->running[i]->cancelled = 1;
    for (sd_sched_req *r = s->waiting; r; r = r->next)
        if (r->id == id)
            r->cancelled = 1;
}

int sd_sched_has_work(const sd_sched *s)
{
    return s->n_running > 0 || s->n_waiting > 0;
}

/* ---- KV blocks ---- */

static void blocks_release(sd_sched *s, sd_sched_req *r)
{
    sd_kv_seq_release(s->kv, &r->kv);
    if (s->draft)
        sd_spec_draft_release(s->draft, &r->dseq);
}

/* Blocks a sequence can take: the free ones and the cached ones no sequence uses. */
int32_t sd_sched__kv_free(const sd_sched *s)
{
    return sd_kv_available(s->kv) + sd_kv_idle_cached(s->kv);
}

/* Tokens the sequence can still add with the blocks it holds plus every free one. */
static int32_t seq_room(const sd_sched *s, const sd_sched_req *r)
{
    return (r->kv.n_blocks + sd_sched__kv_free(s)) * s->block_size - r->n_computed;
}

/* Grows the block table to cover positions [0, n_tokens), evicting idle cached blocks first
 * when the free ones fall short (the caller checked seq_room, so only SD_ENOMEM for the table
 * itself can fail). */
int sd_sched__blocks_cover(sd_sched *s, sd_sched_req *r, int32_t n_tokens)
{
    if (n_tokens <= r->kv.n_tokens)
        return 0;
    int32_t need = sd_kv_seq_needed(s->kv, &r->kv, n_tokens - r->kv.n_tokens);
    if (s->prefix && need > sd_kv_available(s->kv))
        sd_prefix_evict(s->prefix, need);
    return sd_kv_seq_append(s->kv, &r->kv, n_tokens - r->kv.n_tokens);
}

/* Caches the full blocks of the sequence's computed tokens. */
static void prefix_keep(sd_sched *s, const sd_sched_req *r)
{
    if (s->prefix)
        sd_prefix_insert(s->prefix, r->tokens, r->n_computed, r->kv.blocks);
}

/* An arriving sequence takes the cached blocks its tokens start with; at least one token is
 * left to compute (its row gives the next token), and prompts whose logprobs are asked for
 * compute every row. Returns the tokens looked up (0: no lookup). */
static int32_t prefix_reuse(sd_sched *s, sd_sched_req *r)
{
    if (!s->prefix || r->n_computed || r->kv.n_blocks || (r->prompt_logprobs && !r->prompt_done))
        return 0;
    int32_t max = (r->n_tokens - 1) / s->block_size;
    if (max <= 0 || sd_kv_seq_reserve(&r->kv, max) != 0)
        return 0;
    int32_t k = sd_prefix_match(s->prefix, r->tokens, r->n_tokens, max, r->kv.blocks);
    r->kv.n_blocks = k;
    r->kv.n_tokens = r->n_computed = k * s->block_size;
    if (!r->prompt_done)
        r->n_cached = imin(r->n_computed, r->n_prompt);
    return r->n_tokens;
}

static void running_remove(sd_sched *s, sd_sched_req *r)
{
    for (int i = 0; i < s->n_running; i++) {
        if (s->running[i] == r) {
            memmove(s->running + i, s->running + i + 1, sizeof *s->running * (size_t)(s->n_running - i - 1));
            s->n_running--;
            return;
        }
    }
}

/* Ends a running request: blocks back first (so stats seen from the final event's callback
 * are already right), then the final event, then the request is freed. */
void sd_sched__finish_running(sd_sched *s, sd_sched_req *r, int fin_or_err, const char *msg)
{
    if (fin_or_err > 0) /* after an error the cache may hold anything */
        prefix_keep(s, r);
    blocks_release(s, r);
    running_remove(s, r);
    sync_counts(s);
    if (fin_or_err > 0)
        sd_sched__emit_done(r, (sd_finish)fin_or_err);
    else
        sd_sched__emit_error(r, fin_or_err, msg);
    sd_sched_req_free(r);
}

/* Preemption by recompute: the newest running sequence loses its blocks and goes back to the
 * head of the queue; its generated tokens stay in its token list, so its next prefill
 * recomputes them and the continuation is the same for greedy decoding. */
static void preempt_newest(sd_sched *s)
{
    sd_sched_req *r = s->running[--s->n_running];
    blocks_release(s, r);
    r->n_computed = 0;
    r->preempted = 1;
    waiting_insert(s, r);
    atomic_fetch_add(&s->st_preemptions, 1ULL);
}

static void reap_cancelled(sd_sched *s)
{
    for (int i = 0; i < s->n_running;) {
        sd_sched_req *r = s->running[i];
        if (r->cancelled)
            sd_sched__finish_running(s, r, SD_FINISH_ABORT, NULL);
        else
            i++;
    }
    for (sd_sched_req **pp = &s->waiting; *pp;) {
        sd_sched_req *r = *pp;
        if (!r->cancelled) {
            pp = &r->next;
            continue;
        }
        *pp = r->next;
        s->n_waiting--;
        sync_counts(s);
        sd_sched__emit_done(r, SD_FINISH_ABORT);
        sd_sched_req_free(r);
    }
}

/* ---- one step ---- */

/* Puts n tokens of r into batch entry k. SD_ENOMEM (block table) leaves the entry unused. */
static int plan_add(sd_sched *s, int k, sd_sched_req *r, int32_t n)
{
    int rc = sd_sched__blocks_cover(s, r, r->n_computed + n);
    if (rc < 0)
        return rc;
    sd_batch_seq *q = &s->batch[k];
    q->pos = r->n_computed;
    q->n_tokens = n;
    q->tokens = r->tokens + r->n_computed;
    q->block_table = r->kv.blocks;
    /* prompt logprobs need every position's row, until the first full prefill is done; so do
     * drafts (each row checks one) */
    q->all_logits = (r->prompt_logprobs && !r->prompt_done) || r->n_draft > 0;
    s->planned[k] = r;
    return 0;
}

/* Running sequences, oldest first: a decode takes one token; a prefill takes a chunk of what
 * the step has left after all decodes. When blocks run out the newest sequence is preempted
 * (possibly the one being planned); a prefill first shrinks its chunk to what fits. */
static int plan_running(sd_sched *s, int *prefill_budget)
{
    int n = 0, n_dec = 0;
    for (int i = 0; i < s->n_running; i++)
        n_dec += s->running[i]->n_tokens - s->running[i]->n_computed == 1;
    int pf = s->budget - n_dec;
    for (int i = 0; i < s->n_running; i++) {
        sd_sched_req *r = s->running[i];
        int32_t rem = r->n_tokens - r->n_computed;
        int32_t want = rem == 1 ? 1 : imin(rem, pf);
        r->n_draft = r->draft_ok = 0;
        if (want <= 0)
            continue;
        while (i < s->n_running && seq_room(s, r) < want) {
            if (rem > 1 && seq_room(s, r) > 0)
                want = seq_room(s, r);
            else
                preempt_newest(s);
        }
        if (i >= s->n_running)
            break; /* r itself was the newest and is back in the queue */
        /* a decode's drafts take what the step and the blocks leave, never a preemption */
        if (rem == 1) {
            int32_t k = sd_sched__plan_draft(s, r, imin(seq_room(s, r) - 1, pf));
            want += k;
            pf -= k;
        }
        if (plan_add(s, n, r, want) < 0) {
            sd_sched__finish_running(s, r, SD_ENOMEM, "engine: out of memory for a block table");
            i--;
            continue;
        }
        n++;
        if (rem > 1)
            pf -= want;
    }
    *prefill_budget = pf;
    return n;
}

/* Admits waiting requests in queue order while sequences, tokens and blocks allow. A head
 * that does not fit stops admission, so priorities and FIFO order hold. */
static int plan_admit(sd_sched *s, int n, int pf)
{
    while (s->waiting && s->n_running < s->max_seqs && pf > 0) {
        sd_sched_req *r = s->waiting;
        r->n_draft = r->draft_ok = 0;
        const int32_t looked = prefix_reuse(s, r);
        int32_t want = imin(r->n_tokens - r->n_computed, pf);
        if (sd_kv_seq_needed(s->kv, &r->kv, r->n_computed + want - r->kv.n_tokens) > sd_sched__kv_free(s)) {
            blocks_release(s, r); /* waiting requests hold no blocks */
            r->n_computed = r->n_cached = 0;
            break;
        }
        /* the metrics count the lookup that admitted it (a head that waits is looked up again at
         * every step, and counted once) */
        s->prefix_query += (uint64_t)looked;
        s->prefix_hit += looked ? (uint64_t)r->kv.n_blocks * (uint64_t)s->block_size : 0;
        s->waiting = r->next;
        r->next = NULL;
        s->n_waiting--;
        s->running[s->n_running++] = r;
        if (plan_add(s, n, r, want) < 0) {
            sd_sched__finish_running(s, r, SD_ENOMEM, "engine: out of memory for a block table");
            continue;
        }
        n++;
        pf -= want;
    }
    return n;
}

static int logits_reserve(sd_sched *s, int32_t rows)
{
    if (rows <= s->cap_rows)
        return 0;
    float *p = realloc(s->logits, sizeof *p * (size_t)rows * (size_t)s->vocab);
    if (!p)
        return SD_ENOMEM;
    s->logits = p;
    s->cap_rows = rows;
    return 0;
}

/* The batch failed as a whole: each of its requests gets the error and leaves. */
static void fail_planned(sd_sched *s, int n, int code, const char *msg)
{
    for (int k = 0; k < n; k++)
        sd_sched__finish_running(s, s->planned[k], code, msg);
}

/* Whether this step samples on the backend: it can, and no sequence needs its logits rows
 * on the host (prompt logprobs; drafts' rows are sampled where they are). */
static int sample_on_backend(const sd_sched *s, int n)
{
    if (!s->backend_sampling)
        return 0;
    for (int k = 0; k < n; k++)
        if (s->batch[k].all_logits && !s->planned[k]->n_draft)
            return 0;
    return 1;
}

/* Builds a request for every row that gives a token this step and has the backend sample them;
 * s->sslot maps batch entries to their (first) request in s->sout. */
static int backend_sample(sd_sched *s, int n, sd_diag *d)
{
    size_t hist = 0;
    for (int k = 0; k < n; k++) {
        const sd_sched_req *r = s->planned[k];
        hist += (size_t)(1 + r->n_draft) *
                ((size_t)r->n_tokens + (size_t)r->n_draft + (size_t)r->sampling.n_bias);
    }
    int rc = sd_sample_prep_begin(&s->prep, hist, d);
    int m = 0;
    int32_t row = 0;
    for (int k = 0; k < n && rc == 0; k++) {
        sd_sched_req *r = s->planned[k];
        const int32_t rows = s->batch[k].all_logits ? s->batch[k].n_tokens : 1;
        row += rows;
        s->sslot[k] = -1;
        if (r->n_computed + s->batch[k].n_tokens < r->n_tokens + r->n_draft || r->cancelled ||
            !sd_sched__wants_token(r))
            continue;
        if (r->n_draft) {
            rc = sd_sched__spec_requests(s, k, r, row - rows, &m, d);
            continue;
        }
        rc = sd_sample_prep_add(&s->prep, &s->sreq[m], row - 1, &r->sampling, r->tokens, r->n_tokens,
                                r->n_prompt, &r->rng, r->logprobs);
        if (rc < 0)
            return sd_diag_set(d, rc, "engine: sampling request for sequence %d", k);
        if (r->json && (rc = sd_sched__json_allow_row(s, r, NULL, &s->sreq[m], m, d)) != 0) {
            rc = rc > 0 ? 0 : rc; /* > 0: nothing can follow; the request ends at its advance */
            continue;
        }
        s->sslot[k] = m++;
    }
    return rc < 0 || m == 0 ? rc : sd_backend_sample(s->b, s->sreq, m, s->sout, d);
}

/* After the forward (and the backend's sampling when `sampled`): prompt logprobs, the
 * chunks' progress, and the next token of every sequence whose cache is complete. */
static void process(sd_sched *s, int n, int sampled)
{
    size_t off = 0; /* row of the current sequence in s->logits */
    for (int k = 0; k < n; k++) {
        sd_sched_req *r = s->planned[k];
        const sd_batch_seq *q = &s->batch[k];
        int32_t rows = q->all_logits ? q->n_tokens : 1;
        float *last = sampled ? NULL : s->logits + (off + (size_t)rows - 1) * (size_t)s->vocab;
        if (r->n_draft) {
            sd_sched__process_spec(s, r, sampled ? NULL : s->logits + off * (size_t)s->vocab,
                                   sampled ? s->sslot[k] : -1);
            off += (size_t)rows;
            continue;
        }
        if (q->all_logits)
            sd_sched__prompt_rows(s, r, q->pos, q->n_tokens, s->logits + off * (size_t)s->vocab);
        off += (size_t)rows;
        r->n_computed += q->n_tokens;
        if (q->pos < r->n_prompt && r->n_computed >= r->n_prompt)
            prefix_keep(s, r); /* the prompt is in: later arrivals may share it at once */
        if (r->n_computed < r->n_tokens)
            continue; /* a prefill chunk that is not the last */
        const sd_sample_out *o = sampled && s->sslot[k] >= 0 ? &s->sout[s->sslot[k]] : NULL;
        int rc = r->cancelled ? SD_FINISH_ABORT : sd_sched__advance(s, r, last, o);
        if (rc != 0)
            sd_sched__finish_running(s, r, rc, rc < 0 ? "generating the next token failed" : NULL);
    }
}

int sd_sched_step(sd_sched *s, sd_diag *d)
{
    reap_cancelled(s);
    int pf = 0;
    int n = plan_running(s, &pf);
    n = plan_admit(s, n, pf);
    if (s->spec.tokens)
        sd_sched__fill_drafts(s, n);
    sync_counts(s);
    if (n == 0)
        return 0;
    int32_t rows = 0;
    for (int k = 0; k < n; k++)
        rows += s->batch[k].all_logits ? s->batch[k].n_tokens : 1;
    sd_diag local = {0};
    int sampled = sample_on_backend(s, n);
    int rc = sampled ? 0 : logits_reserve(s, rows);
    if (rc < 0)
        sd_diag_set(&local, rc, "engine: out of memory for %d logits rows", (int)rows);
    else
        rc = sd_backend_forward(s->b, s->batch, n, sampled ? NULL : s->logits, &local);
    if (rc == 0 && sampled)
        rc = backend_sample(s, n, &local);
    atomic_fetch_add(&s->st_steps, 1ULL);
    if (rc < 0) {
        if (d)
            *d = local;
        fail_planned(s, n, rc, sd_diag_str(&local, rc));
        return rc;
    }
    process(s, n, sampled);
    return 0;
}

void sd_sched_fail_all(sd_sched *s, int code, const char *msg)
{
    while (s->n_running > 0)
        sd_sched__finish_running(s, s->running[s->n_running - 1], code, msg);
    while (s->waiting) {
        sd_sched_req *r = s->waiting;
        s->waiting = r->next;
        s->n_waiting--;
        sync_counts(s);
        sd_sched__emit_error(r, code, msg);
        sd_sched_req_free(r);
    }
}

void sd_sched_stats(const sd_sched *s, sd_engine_stats *st)
{
    memset(st, 0, sizeof *st);
    st->running = atomic_load(&s->st_running);
    st->waiting = atomic_load(&s->st_waiting);
    st->kv_blocks_total = sd_kv_total(s->kv);
    st->kv_blocks_used = atomic_load(&s->st_blocks_used);
    st->kv_blocks_cached = atomic_load(&s->st_blocks_cached);
    st->prefix_query_tokens = atomic_load(&s->st_prefix_query);
    st->prefix_hit_tokens = atomic_load(&s->st_prefix_hit);
    st->prefix_evicted_blocks = atomic_load(&s->st_prefix_evicted);
    st->prefix_cold_rule = atomic_load(&s->st_prefix_cold_rule);
    st->prompt_tokens = atomic_load(&s->st_prompt_tokens);
    st->generation_tokens = atomic_load(&s->st_gen_tokens);
    st->steps = atomic_load(&s->st_steps);
    st->preemptions = atomic_load(&s->st_preemptions);
    st->spec_draft_tokens = atomic_load(&s->st_spec_draft);
    st->spec_accepted_tokens = atomic_load(&s->st_spec_accepted);
    st->spec_draft_blocks_used = atomic_load(&s->st_draft_blocks);
}
