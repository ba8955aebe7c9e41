/* toolcall_vocab: the tool-call validator over a real vocabulary, for the lazy and Llama tests
 * (test_toolcall_lazy, test_toolcall_llama): the validator as the mask's sd_jval, a tokenizer with
 * its mask and buffers, the mask's set for a state checked against one decided token by token, and
 * the mask's cold and cached times. */
#ifndef SD_TEST_TOOLCALL_VOCAB_H
#define SD_TEST_TOOLCALL_VOCAB_H

#include <stdlib.h>
#include <time.h>

#include "engine/jsonc.h"
#include "engine/tokenizer.h"
#include "tests/engine/toolcall_ref.h"

static inline int lz_step(const void *ctx, void *state, unsigned byte)
{
    return sd_tcall_step(ctx, state, byte);
}

static inline int lz_complete(const void *ctx, const void *state)
{
    return sd_tcall_complete(ctx, state);
}

static inline int lz_can_end(const void *ctx, const void *state)
{
    return sd_tcall_can_end(ctx, state);
}

static inline int lz_plain(const void *ctx, const void *state)
{
    return sd_tcall_in_plain_string(ctx, state);
}

static inline sd_jval tcall_jval(const sd_tcall *t, uint64_t id)
{
    return (sd_jval){t, id, sd_tcall_state_size(t), lz_step, lz_complete, lz_can_end, lz_plain};
}

static inline double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

struct qvocab {
    sd_tokenizer *tok;
    sd_jmask *jm;
    int32_t n, eos;
    uint64_t *bits; /* [(n + 63) / 64] */
    float *logits;  /* [n] */
};

/* The mask's set for state against one decided token by token (eos: exactly when the text may
 * end; others: not special, not empty, every byte taken). Returns how many are allowed, -1 when
 * the sets differ; *ret_free: the non-special tokens allowed. */
static inline int32_t mask_vs_brute(struct qvocab *qv, const sd_jval *v, const void *state, int32_t *ret_free)
{
    int32_t got = sd_jmask_allowed_v(qv->jm, v, state, &qv->eos, 1, qv->n, qv->bits), want = 0, bad = 0;
    *ret_free = 0;
    for (int32_t id = 0; id < qv->n; id++) {
        size_t len = 0;
        const char *b = sd_tok_token_bytes(qv->tok, id, &len);
        tstate tmp;
        memcpy(&tmp, state, v->size);
        int ok = id == qv->eos ? v->can_end(v->ctx, state)
                               : b && len > 0 && !sd_tok_is_special(qv->tok, id) &&
                                     sd_tcall_feed(v->ctx, &tmp, b, len) == 0;
        want += ok;
        *ret_free += ok && id != qv->eos;
        if (ok != (int)((qv->bits[id >> 6] >> (id & 63)) & 1) && bad++ < 3)
            CHECK_MSG(0, "token %d (%s): brute force %d", id, sd_tok_token_str(qv->tok, id), ok);
    }
    CHECK_MSG(got == want, "the mask allows %d, brute force %d", got, want);
    return bad || got != want ? -1 : got;
}

static inline int32_t token_of(const sd_tokenizer *tok, int32_t n, const char *s)
{
    for (int32_t id = 0; id < n; id++) {
        size_t len = 0;
        const char *b = sd_tok_token_bytes(tok, id, &len);
        if (b && len == strlen(s) && memcmp(b, s, len) == 0)
            return id;
    }
    return -1;
}

static inline int allowed(const struct qvocab *qv, int32_t id)
{
    return id >= 0 && (int)((qv->bits[id >> 6] >> (id & 63)) & 1);
}

/* Cold (the trie walked) and cached sd_jmask_apply_v of state, in ms. */
static inline void time_apply(struct qvocab *qv, const sd_jval *v, const void *state, double *cold, double *warm)
{
    double t0 = now_ms();
    sd_jmask_apply_v(qv->jm, v, state, &qv->eos, 1, qv->logits, qv->n);
    *cold = now_ms() - t0;
    t0 = now_ms();
    for (int rep = 0; rep < 100; rep++)
        sd_jmask_apply_v(qv->jm, v, state, &qv->eos, 1, qv->logits, qv->n);
    *warm = (now_ms() - t0) / 100;
}

/* Loads the tokenizer at path (the shared folder's: the caller skips when it is absent) with its
 * mask and buffers; 0 on success, else a failed check and -1 (qvocab_close cleans up either way). */
static inline int qvocab_open(struct qvocab *qv, const char *path)
{
    sd_diag d = {0};
    memset(qv, 0, sizeof *qv);
    int rc = sd_tok_load(&qv->tok, path, &d);
    if (rc == 0) {
        qv->n = sd_tok_vocab_size(qv->tok);
        qv->eos = sd_tok_eos_id(qv->tok);
        qv->bits = calloc(((size_t)qv->n + 63) / 64, sizeof *qv->bits);
        qv->logits = calloc((size_t)qv->n, sizeof *qv->logits);
        rc = sd_jmask_init(&qv->jm, qv->tok, &d);
    }
    CHECK_MSG(rc == 0, "%s: %s", path, sd_diag_str(&d, rc));
    return rc == 0 && qv->bits && qv->logits && qv->eos >= 0 ? 0 : -1;
}

static inline void qvocab_close(struct qvocab *qv)
{
    sd_jmask_free(qv->jm);
    sd_tok_free(qv->tok);
    free(qv->bits);
    free(qv->logits);
}

#endif
