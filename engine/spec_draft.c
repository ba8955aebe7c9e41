/* spec_draft: a small model proposing speculative decoding's drafts (see spec_draft.h). */
#include "spec_draft.h"

#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "model_config.h"

/* Unread runs this short go a token a round on a graph-replaying backend (catch_up). */
#define SD_DRAFT_SHORT_RUN 4

struct sd_spec_draft {
    const sd_model *m;
    sd_backend *b;
    sd_kv *kv; /* the draft cache's block ids (the memory is the draft backend's) */
    int max_seqs;
    int32_t vocab, budget, max_pos;
    sd_batch_seq *batch; /* [max_seqs] */
    int *idx;            /* [max_seqs] the request of each batch entry */
    int32_t *tok;        /* [max_seqs] one-token steps' inputs */
    int32_t *picked;     /* [max_seqs] each row's greedy token */
    float *logits;       /* [max_seqs, vocab]: backends that do not sample keep rows on the host */
    sd_sample_req *sreq; /* [max_seqs] */
    sd_sample_out *sout; /* [max_seqs] */
};

int sd_spec_draft_init(sd_spec_draft **ret, const sd_model *m, sd_backend *b, int32_t vocab, int max_seqs,
                       sd_diag *d)
{
    if (b->vocab != vocab)
        return sd_diag_set(d, SD_EINVAL,
                           "spec_draft_model: its vocabulary has %d tokens, the served model's %d",
                           (int)b->vocab, (int)vocab);
    if (max_seqs < 1 || b->max_batch_tokens < max_seqs)
        return sd_diag_set(d, SD_EINVAL,
                           "spec_draft_model: %d sequences a step, %d tokens (max_batch_tokens)", max_seqs,
                           (int)b->max_batch_tokens);
    sd_spec_draft *dr = calloc(1, sizeof *dr);
    if (!dr)
        return sd_diag_set(d, SD_ENOMEM, "spec_draft_model: out of memory");
    dr->m = m;
    dr->b = b;
    dr->max_seqs = max_seqs;
    dr->vocab = vocab;
    dr->budget = b->max_batch_tokens;
    const int64_t pool = (int64_t)b->kv_blocks * b->block_size, pos = sd_model_cfg(m)->max_pos;
    dr->max_pos = (int32_t)(pos > 0 && pos < pool ? pos : pool);
    int rc = sd_kv_init(&dr->kv, b->kv_blocks, b->block_size, d);
    const size_t n = (size_t)max_seqs;
    dr->batch = calloc(n, sizeof *dr->batch);
    dr->idx = calloc(n, sizeof *dr->idx);
    dr->tok = calloc(n, sizeof *dr->tok);
    dr->picked = calloc(n, sizeof *dr->picked);
    dr->sreq = calloc(n, sizeof *dr->sreq);
    dr->sout = calloc(n, sizeof *dr->sout);
    if (!b->vt->sample)
        dr->logits = malloc(sizeof *dr->logits * n * (size_t)vocab);
    if (rc == 0 && (!dr->batch || !dr->idx || !dr->tok || !dr->picked || !dr->sreq || !dr->sout ||
                    (!b->vt->sample && !dr->logits)))
        rc = sd_diag_set(d, SD_ENOMEM, "spec_draft_model: out of memory");
    if (rc < 0) {
        sd_spec_draft_free(dr);
        return rc;
    }
    *ret = dr;
    return 0;
}

void sd_spec_draft_free(sd_spec_draft *dr)
{
    if (!dr)
        return;
    sd_kv_free(dr->kv);
    free(dr->batch);
    free(dr->idx);
    free(dr->tok);
    free(dr->picked);
    free(dr->logits);
    free(dr->sreq);
    free(dr->sout);
    free(dr);
}

void sd_spec_draft_release(sd_spec_draft *dr, sd_draft_seq *st)
{
    sd_kv_seq_release(dr->kv, &st->kv);
    st->n_done = 0;
}

void sd_spec_draft_keep(sd_spec_draft *dr, sd_draft_seq *st, int32_t n_valid)
{
    if (n_valid < st->n_done)
        st->n_done = n_valid < 0 ? 0 : n_valid;
    if (st->kv.n_tokens > st->n_done)
        sd_kv_seq_truncate(dr->kv, &st->kv, st->n_done);
}

int32_t sd_spec_draft_blocks_used(const sd_spec_draft *dr)
{
    return sd_kv_used(dr->kv);
}

/* Runs the nb entries of dr->batch (a logits row each) and puts each row's greedy token in
 * dr->picked: the draft backend's sampler where it has one (the rows stay there), else the host
 * sampler's argmax. */
static int forward_pick(sd_spec_draft *dr, int nb, sd_diag *d)
{
    int rc = sd_backend_forward(dr->b, dr->batch, nb, dr->logits, d);
    if (rc < 0 || !dr->b->vt->sample) {
        for (int i = 0; rc == 0 && i < nb; i++)
            dr->picked[i] = sd__sample_argmax(dr->logits + (size_t)i * (size_t)dr->vocab, dr->vocab);
        return rc;
    }
    for (int i = 0; i < nb; i++) {
        sd_sample_req *q = &dr->sreq[i];
        memset(q, 0, sizeof *q);
        q->row = i;
        sd_sampling_default(&q->s);
        q->greedy = 1;
        q->n_top = -1;
    }
    rc = sd_backend_sample(dr->b, dr->sreq, nb, dr->sout, d);
    for (int i = 0; rc == 0 && i < nb; i++)
        dr->picked[i] = dr->sout[i].token;
    return rc;
}

/* Blocks for the positions a proposal of r->k tokens writes: the unread tokens, then the drafts
 * but the last. 0, or -1 (the sequence gets no drafts and its state goes). */
static int make_room(sd_spec_draft *dr, sd_draft_req *r)
{
    const int32_t need = r->n_tokens + r->k - 1;
    sd_draft_seq *st = r->st;
    if (st->n_done >= r->n_tokens) /* never: keep leaves the last token unread */
        sd_spec_draft_keep(dr, st, r->n_tokens - 1);
    if (r->k < 1 || need > dr->max_pos || sd_kv_seq_append(dr->kv, &st->kv, need - st->kv.n_tokens) < 0) {
        sd_spec_draft_release(dr, st);
        r->k = 0;
        return -1;
    }
    return 0;
}

/* Reads every sequence's unread tokens, in rounds of at most the draft backend's step budget;
 * the row of a sequence's last token gives its first draft. After a step that kept every draft two
 * tokens are unread, one otherwise; on a backend that replays decode steps as graphs
 * (uniform_spec) such short runs go a token a round, so that every round is a one-token step of a
 * graph rather than a mixed step run eagerly. */
static int catch_up(sd_spec_draft *dr, sd_draft_req *reqs, int n, sd_diag *d)
{
    for (;;) {
        int nb = 0, used = 0;
        for (int i = 0; i < n && used < dr->budget; i++) {
            sd_draft_req *r = &reqs[i];
            const int32_t left = r->n_tokens - r->st->n_done;
            if (r->k < 1 || left <= 0)
                continue;
            int32_t chunk = left < dr->budget - used ? left : dr->budget - used;
            if (dr->b->uniform_spec && left <= SD_DRAFT_SHORT_RUN)
                chunk = 1;
            dr->batch[nb] =
                (sd_batch_seq){r->st->n_done, chunk, r->tokens + r->st->n_done, r->st->kv.blocks, 0};
            dr->idx[nb++] = i;
            used += chunk;
        }
        if (nb == 0)
            return 0;
        int rc = forward_pick(dr, nb, d);
        if (rc < 0)
            return rc;
        for (int j = 0; j < nb; j++) {
            sd_draft_req *r = &reqs[dr->idx[j]];
            r->st->n_done += dr->batch[j].n_tokens;
            if (r->st->n_done == r->n_tokens)
                r->out[0] = dr->picked[j];
        }
    }
}

int sd_spec_draft_propose(sd_spec_draft *dr, sd_draft_req *reqs, int n, sd_diag *d)
{
    if (n < 0 || n > dr->max_seqs)
        return sd_diag_set(d, SD_EINVAL, "spec_draft_model: %d sequences (at most %d)", n, dr->max_seqs);
    for (int i = 0; i < n; i++)
        make_room(dr, &reqs[i]);
    int rc = catch_up(dr, reqs, n, d);
    /* then one token a step: draft j - 1 in, draft j out */
    for (int j = 1; rc == 0; j++) {
        int nb = 0;
        for (int i = 0; i < n; i++) {
            sd_draft_req *r = &reqs[i];
            if (r->k <= j)
                continue;
            dr->tok[nb] = r->out[j - 1];
            dr->batch[nb] = (sd_batch_seq){r->n_tokens + j - 1, 1, &dr->tok[nb], r->st->kv.blocks, 0};
            dr->idx[nb++] = i;
        }
        if (nb == 0)
            break;
        rc = forward_pick(dr, nb, d);
        for (int b = 0; rc == 0 && b < nb; b++) {
            sd_draft_req *r = &reqs[dr->idx[b]];
            r->out[j] = dr->picked[b];
            r->st->n_done = r->n_tokens + j;
        }
    }
    if (rc < 0)
        for (int i = 0; i < n; i++) {
            sd_spec_draft_release(dr, reqs[i].st);
            reqs[i].k = 0;
        }
    return rc;
}
