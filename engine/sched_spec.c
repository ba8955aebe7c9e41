/* sched_spec: speculative decoding's side of the scheduler (engine/spec.h, spec_draft.h) — which
 * decodes carry drafts and how many, filling them (the prompt lookup at planning time, the draft
 * model once the step is planned, fillers to one length on a graph-replaying backend), each row's
 * sampling request (history, RNG draw and mask as a step without drafts would have them), and the
 * verdict: the tokens kept, the KV cache cut back to them. */
#include "sched_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int imin(int a, int b)
{
    return a < b ? a : b;
}

/* The draft model of speculative decoding, when the options name one (engine/spec_draft.h). */
int sd_sched__draft_init(sd_sched *s, const sd_engine_opts *o, sd_diag *d)
{
    if (!s->spec.tokens || !o->spec.draft_model || !o->spec.draft_backend)
        return 0;
    const int n = imin(s->spec.max_seqs, s->max_seqs);
    int rc = sd_spec_draft_init(&s->draft, o->spec.draft_model, o->spec.draft_backend, s->vocab, n, d);
    if (rc == 0 && !(s->dreq = calloc((size_t)n, sizeof *s->dreq)))
        rc = sd_diag_set(d, SD_ENOMEM, "engine: out of memory");
    return rc;
}

/* r's drafts [made, k) become fillers (the one before repeated, else the last token: a filler is
 * kept only where the model would have produced it anyway, so any is safe), and drafts [0, k) go
 * after r's last token, where the forward pass reads them. */
static void set_drafts(sd_sched_req *r, int32_t made, int32_t k)
{
    for (int32_t j = made; j < k; j++)
        r->draft[j] = j ? r->draft[j - 1] : r->tokens[r->n_tokens - 1];
    memcpy(r->tokens + r->n_tokens, r->draft, sizeof *r->draft * (size_t)k);
}

/* Whether decode sequence r can carry k drafts this step: max_tokens leaves room after the token
 * the step surely yields; not cancelled; not thinking before a constraint (the thinking budget
 * counts tokens one at a time). */
static int can_draft(const sd_sched_req *r, int32_t k)
{
    return !(r->json && r->think) && !r->cancelled && r->max_tokens - (r->n_tokens - r->n_prompt) - 1 >= k;
}

/* How many of r's drafts its validator takes one after another (a constrained request): the rows
 * after the first it rejects could not be masked, and their drafts could not be kept anyway. */
static int32_t json_drafts(const sd_sched *s, const sd_sched_req *r, int32_t k)
{
    uint64_t st[SD_JVAL_MAX_STATE / 8]; /* aligned as states must be */
    memcpy(st, r->jst, r->jv.size);
    for (int32_t i = 0; i < k; i++)
        if (sd_sched__json_feed(s, r, st, r->draft[i]) < 0)
            return i;
    return k;
}

/* Drafts (engine/spec.h) for decode sequence r, at most `room` tokens, into r->draft and after its
 * last token. None while more sequences run than spec.max_seqs, nor where can_draft says no; a
 * constrained request's stop before the first its validator rejects. r->tokens has room:
 * n_tokens + drafts < n_prompt + max_tokens. */
int32_t sd_sched__plan_draft(sd_sched *s, sd_sched_req *r, int32_t room)
{
    r->n_draft = r->draft_ok = 0;
    int32_t k = imin(imin(s->spec.tokens, room), r->max_tokens - (r->n_tokens - r->n_prompt) - 1);
    if (!s->spec.tokens || s->n_running > s->spec.max_seqs || k <= 0 || !can_draft(r, k))
        return 0;
    if (s->draft) { /* the draft model fills them once the step is planned (model_drafts) */
        r->n_draft = r->draft_ok = k;
        return k;
    }
    k = sd_spec_ngram(r->tokens, r->n_tokens, s->spec.ngram_min, s->spec.ngram_max, k, r->draft);
    if (r->json)
        k = json_drafts(s, r, k);
    set_drafts(r, k, k);
    r->n_draft = r->draft_ok = k;
    return k;
}

/* Gives r's drafts up for this step: one token, as a plain decode, and the blocks beyond it back. */
static void drop_drafts(sd_sched *s, sd_sched_req *r, sd_batch_seq *q)
{
    r->n_draft = r->draft_ok = 0;
    q->n_tokens = 1;
    q->all_logits = 0;
    sd_kv_seq_truncate(s->kv, &r->kv, r->n_computed + 1);
}

/* On a backend that replays fixed-shape steps (sd_backend.uniform_spec: CUDA graphs), a step of
 * decodes with drafts runs as one graph only if every sequence carries the same number of tokens:
 * drafts are filled up to spec.tokens with fillers (set_drafts; a constrained request's rows stop
 * at the first its validator rejects). Where
 * some sequence cannot take them (max_tokens, the free blocks, the step's budget), every draft is
 * given up instead: a plain decode graph beats a step run without one. A prefill chunk in the step
 * means no graph either way: drafts stay. */
static void pad_drafts(sd_sched *s, int n)
{
    const int32_t K = s->spec.tokens;
    int any = 0;
    int32_t blocks = 0;
    for (int k = 0; k < n; k++) {
        const sd_sched_req *r = s->planned[k];
        if (r->n_tokens - r->n_computed != 1)
            return; /* a prefill chunk */
        any |= r->n_draft > 0;
    }
    if (!s->b->uniform_spec || !any)
        return;
    int fits = (int64_t)n * (1 + K) <= s->budget;
    for (int k = 0; k < n && fits; k++) {
        const sd_sched_req *r = s->planned[k];
        fits = can_draft(r, K);
        blocks += sd_kv_seq_needed(s->kv, &r->kv, r->n_computed + 1 + K - r->kv.n_tokens);
    }
    fits = fits && blocks <= sd_sched__kv_free(s);
    for (int k = 0; k < n; k++) {
        sd_sched_req *r = s->planned[k];
        sd_batch_seq *q = &s->batch[k];
        if (!fits || sd_sched__blocks_cover(s, r, r->n_computed + 1 + K) < 0) {
            drop_drafts(s, r, q);
            continue;
        }
        set_drafts(r, r->n_draft, K);
        r->n_draft = r->draft_ok = K;
        q->n_tokens = 1 + K;
        q->block_table = r->kv.blocks; /* the table may have moved */
        q->all_logits = 1;
    }
}

/* The draft model's proposals for every entry planned with drafts, in one batched call: into
 * r->draft and after r's last token. Where it made fewer (its cache full), the rest are fillers; a
 * constrained request's rows stop before the first its validator rejects. A failing draft backend leaves
 * fillers and turns the draft model off (the lookup drafts from then on); the served model's step goes on. */
static void model_drafts(sd_sched *s, int n)
{
    int m = 0;
    for (int k = 0; k < n; k++) {
        sd_sched_req *r = s->planned[k];
        if (r->n_draft)
            s->dreq[m++] = (sd_draft_req){r->tokens, r->n_tokens, &r->dseq, r->n_draft, r->draft};
    }
    if (m == 0)
        return;
    sd_diag d = {0};
    int rc = sd_spec_draft_propose(s->draft, s->dreq, m, &d);
    for (int i = 0, k = 0; k < n; k++) {
        sd_sched_req *r = s->planned[k];
        if (!r->n_draft)
            continue;
        set_drafts(r, s->dreq[i++].k, r->n_draft);
        r->draft_ok = r->json ? json_drafts(s, r, r->n_draft) : r->n_draft;
    }
    if (rc < 0) {
        fprintf(stderr,
                "sparsed: the draft model failed (%s); drafts come from the prompt lookup from now on\n",
                sd_diag_str(&d, rc));
        for (int i = 0; i < s->n_running; i++)
            sd_spec_draft_release(s->draft, &s->running[i]->dseq);
        sd_spec_draft_free(s->draft);
        s->draft = NULL;
    }
}

/* The sampling requests of drafting batch entry k whose rows start at `row`: row i's history holds
 * the drafts before it, its uniform is drawn after row i - 1's and a constrained request's mask
 * is its validator's after those drafts, so every row samples what a step without drafts would at
 * that point. r's RNG after each draw goes to s->srng (process_spec keeps the state after the last
 * row it uses); r->rng itself is left as it was. A constrained request's rows stop where its
 * validator rejects a draft (r->draft_ok); none when nothing may come next (json_end). */
int sd_sched__spec_requests(sd_sched *s, int k, sd_sched_req *r, int32_t row, int *m, sd_diag *d)
{
    const sd_rng before = r->rng;
    const int first = *m;
    uint64_t st[SD_JVAL_MAX_STATE / 8]; /* a constrained request's state after the drafts so far */
    if (r->json)
        memcpy(st, r->jst, r->jv.size);
    for (int32_t i = 0; i <= r->draft_ok; i++) {
        int rc = sd_sample_prep_add(&s->prep, &s->sreq[*m], row + i, &r->sampling, r->tokens, r->n_tokens + i,
                                    r->n_prompt, &r->rng, r->logprobs);
        if (rc < 0)
            return sd_diag_set(d, rc, "engine: sampling request for row %d", (int)(row + i));
        s->srng[*m] = r->rng;
        if (r->json && (rc = sd_sched__json_allow_row(s, r, i ? st : NULL, &s->sreq[*m], *m, d)) != 0) {
            if (rc < 0)
                return rc;
            r->draft_ok = i ? i - 1 : 0; /* nothing may follow the drafts before row i */
            break;
        }
        (*m)++;
        if (r->json && i < r->draft_ok && sd_sched__json_feed(s, r, st, r->draft[i]) < 0)
            r->draft_ok = i; /* row i is the last the validator can mask */
    }
    s->sslot[k] = *m > first ? first : -1;
    r->rng = before;
    return 0;
}

/* A decode with drafts, after its forward: row i predicts the token after draft i - 1 (row 0:
 * after the last real token). Tokens are taken in order while the model's pick is the draft;
 * the first that differs, or the one after the last draft, ends the step. The cache keeps the
 * positions whose tokens stayed; the others' blocks go back. rows: the host's rows, or NULL
 * (sampled on the backend: s->sout from `slot`). */
void sd_sched__process_spec(sd_sched *s, sd_sched_req *r, float *rows, int slot)
{
    const int32_t nc0 = r->n_computed, nt0 = r->n_tokens, nd = r->n_draft, ok = r->draft_ok;
    int rc = 0;
    for (int32_t i = 0;; i++) {
        r->n_computed = nc0 + 1 + i; /* the last token and the drafts before row i are in */
        const sd_sample_out *o = NULL;
        if (slot >= 0) {
            o = &s->sout[slot + i];
            r->rng = s->srng[slot + i];
        }
        float *row = rows ? rows + (size_t)i * (size_t)s->vocab : NULL;
        if (r->cancelled)
            rc = SD_FINISH_ABORT;
        else if (row || o || r->json_end) /* json_end: the request ends at its advance */
            rc = sd_sched__advance(s, r, row, o);
        else
            rc = SD_EINVAL; /* no row was sampled */
        if (rc != 0 || i == ok || r->tokens[r->n_tokens - 1] != r->draft[i])
            break;
    }
    r->n_draft = r->draft_ok = 0;
    if (s->draft) /* the draft model read the drafts but the last: it keeps those that stayed */
        sd_spec_draft_keep(s->draft, &r->dseq, r->n_tokens - 1);
    atomic_fetch_add(&s->st_spec_draft, (unsigned long long)nd);
    if (r->n_tokens > nt0 + 1)
        atomic_fetch_add(&s->st_spec_accepted, (unsigned long long)(r->n_tokens - nt0 - 1));
    if (rc == 0)
        rc = sd_kv_seq_truncate(s->kv, &r->kv, r->n_computed);
    if (rc != 0)
        sd_sched__finish_running(s, r, rc, rc < 0 ? "generating the next token failed" : NULL);
}

void sd_sched__fill_drafts(sd_sched *s, int n)
{
    pad_drafts(s, n);
    if (s->draft)
        model_drafts(s, n);
}
