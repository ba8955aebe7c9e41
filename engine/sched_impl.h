/* sched_impl: the scheduler's private structures, shared by sched.c (queues, KV blocks,
 * batching) and sched_req.c (requests: validation, sampling, text, events). */
#ifndef SD_SCHED_IMPL_H
#define SD_SCHED_IMPL_H

#include <stdatomic.h>

#include "jschema.h"
#include "jsonc.h"
#include "jv_cache.h"
#include "kv.h"
#include "model.h"
#include "model_config.h"
#include "prefix.h"
#include "sample_req.h"
#include "sched.h"
#include "spec.h"
#include "spec_draft.h"
#include "stopstr.h"
#include "tokenizer.h"
#include "toolcall.h"

struct sd_sched_req {
    uint64_t id;
    sd_event_cb cb;
    void *ud;
    sd_sched_req *next;   /* waiting-queue link */
    uint64_t priority;    /* lower first */
    sd_sampling sampling; /* .bias points at `bias` */
    sd_logit_bias *bias;  /* [sampling.n_bias], owned */
    int32_t max_tokens;
    int ignore_eos;
    int logprobs;        /* -1 none, else top k */
    int prompt_logprobs; /* 1: emit SD_EV_PROMPT */
    int n_top;           /* top alternatives per prompt position: max(logprobs, 0) */

    int32_t *tokens; /* [cap_tokens]: the prompt, then the generated tokens */
    int32_t n_tokens, n_prompt, cap_tokens;
    int32_t n_computed; /* tokens whose K/V are in the cache: positions [0, n_computed) */
    int32_t n_cached;   /* prompt tokens the prefix cache supplied at the first admission */
    sd_kv_seq kv;       /* the block table: covers exactly positions [0, n_computed) between steps */

    sd_rng rng;
    int json;          /* json_object / json_schema / tool_spec: the output is constrained (sched_json.c) */
    int json_end;      /* no token can continue the JSON: the next advance ends the request */
    sd_jval jv;        /* the validator: JSON mode's, the schema's or the tool list's, or jthink's */
    sd_jval jv_in;     /* with think: the validator jthink wraps (its context) */
    void *jst;         /* its state (owned) */
    sd_jvc_entry *jvc; /* json_schema / tool_spec: the compiled validator (a reference) */
    int think;         /* jv is jthink's: the thinking comes first */
    int32_t think_budget, think_tokens; /* with think: the tokens the block may take (-1: any), and took */
    int has_stream;
    sd_tok_stream stream;
    sd_stopstr stop;

    float *plp;       /* [n_prompt-1] logprob of prompt token i+1 given tokens <= i */
    int32_t *ptop_id; /* [n_prompt-1][n_top] */
    float *ptop_lp;   /* [n_prompt-1][n_top] */

    int32_t draft[SD_SPEC_MAX_TOKENS]; /* this step's draft tokens (engine/spec.h), also copied past
                                          tokens[n_tokens - 1] for the forward pass */
    int32_t n_draft;                   /* 0: no draft this step */
    sd_draft_seq dseq;                 /* the draft model's cache of this sequence (spec_draft.h) */
    int32_t draft_ok; /* drafts whose following row may be sampled (<= n_draft): a constrained
                         request's rows stop after the first draft its validator rejects */

    int cancelled;   /* sd_sched_cancel seen; reaped at the next step */
    int preempted;   /* was preempted: goes ahead of new arrivals in the queue */
    int prompt_done; /* the first full prefill finished (prompt counted, PROMPT sent) */
};

struct sd_sched {
    const sd_model *m;
    sd_backend *b;
    const sd_tokenizer *tok; /* NULL: no text, no stop strings */
    int32_t vocab, block_size, max_model_len;
    int max_seqs, budget; /* sequences and tokens per step */
    sd_spec_opts spec;    /* speculative decoding (tokens 0: off), clamped */
    int cap_srows;        /* rows one step may sample: max_seqs, or more with drafts */
    sd_spec_draft *draft; /* the draft model proposing the drafts, or NULL: the prompt lookup */
    sd_draft_req *dreq;   /* [max_seqs] a proposal's sequences */
    int32_t eos[SD_MAX_EOS + 1];
    int n_eos;

    sd_kv *kv;                         /* the KV block pool (ids index the backend's cache) */
    sd_prefix *prefix;                 /* automatic prefix caching, or NULL (engine opts prefix_caching) */
    uint64_t prefix_query, prefix_hit; /* tokens of admitted requests looked up / found cached */

    sd_sched_req *waiting;  /* head of the queue: preempted first, then priority, FIFO */
    sd_sched_req **running; /* [max_seqs] in admission order: the last is the newest */
    int n_waiting, n_running;

    /* step scratch */
    sd_batch_seq *batch;    /* [max_seqs] */
    sd_sched_req **planned; /* [max_seqs] the request of each batch entry */
    float *logits;          /* [cap_rows, vocab] */
    int32_t cap_rows;
    float *raw;            /* [vocab] raw logits kept for logprobs (the sampler edits its row) */
    void *sampler_scratch; /* sd_sampler_scratch_bytes(vocab) */
    char *text;            /* [cap_text] decoded text of one token */
    size_t cap_text;
    sd_jmask *jm; /* the vocabulary's JSON mask, made at the first json_object request */
    sd_jvc *jvc;  /* compiled schemas and tool lists, shared by requests asking the same */

    /* sampling on the backend: the logits stay there and only tokens (and the logprobs
     * asked for) come back; steps that need logits rows on the host (prompt logprobs) and
     * backends without `sample` use the host sampler. SD_CPU_SAMPLING=1 turns it off. */
    int backend_sampling;
    sd_sample_prep prep;
    sd_sample_req *sreq; /* [cap_srows] */
    sd_sample_out *sout; /* [cap_srows] */
    sd_rng *srng;        /* [cap_srows] a drafting request's RNG after the draw of each of its rows */
    int *sslot;          /* [max_seqs] the (first) request of each batch entry in sreq, -1 for none */
    uint64_t *allow;     /* [max_seqs][(vocab + 63) / 64] the JSON masks of the step's requests */

    /* counters read by any thread */
    atomic_int st_running, st_waiting, st_blocks_used, st_blocks_cached;
    atomic_ullong st_prefix_query, st_prefix_hit, st_prefix_evicted;
    atomic_int st_prefix_cold_rule;
    atomic_ullong st_prompt_tokens, st_gen_tokens, st_steps, st_preemptions;
    atomic_ullong st_spec_draft, st_spec_accepted;
    atomic_int st_draft_blocks;
    atomic_ullong next_jv_id; /* the id of the next request's schema validator (sd_jval.id) */
};

/* sched.c: the KV blocks a sequence can take (free and idle cached), growing a block table (0 or
 * SD_ENOMEM), and ending a running request (its blocks back, then DONE for fin_or_err > 0 or
 * SD_EV_ERROR with msg, then freed). */
int32_t sd_sched__kv_free(const sd_sched *s);
int sd_sched__blocks_cover(sd_sched *s, sd_sched_req *r, int32_t n_tokens);
void sd_sched__finish_running(sd_sched *s, sd_sched_req *r, int fin_or_err, const char *msg);

/* sched_spec.c: speculative decoding. The draft model from the options (0 or an error); a decode's
 * drafts at planning time, at most `room` tokens (their count, 0 for none; a draft model's are
 * only counted here); once the step is planned, drafts to one length on a graph-replaying backend
 * and the draft model's proposals; the sampling requests of drafting batch entry k from row `row`
 * into s->sreq[*m..] (sets s->sslot[k]); and the verdict after the forward (host rows, or NULL
 * and the first request's slot in s->sout). */
int sd_sched__draft_init(sd_sched *s, const sd_engine_opts *o, sd_diag *d);
int32_t sd_sched__plan_draft(sd_sched *s, sd_sched_req *r, int32_t room);
void sd_sched__fill_drafts(sd_sched *s, int n);
int sd_sched__spec_requests(sd_sched *s, int k, sd_sched_req *r, int32_t row, int *m, sd_diag *d);
void sd_sched__process_spec(sd_sched *s, sd_sched_req *r, float *rows, int slot);

/* sched_req.c */
void sd_sched__emit_done(sd_sched_req *r, sd_finish f);
void sd_sched__emit_error(sd_sched_req *r, int code, const char *msg);
/* Stores prompt logprobs for the rows of a chunk that started at position `pos`. */
void sd_sched__prompt_rows(sd_sched *s, sd_sched_req *r, int32_t pos, int32_t n, const float *rows);
/* sched_json.c: a constrained request's validator from its params (0, or SD_EINVAL naming the
 * schema's or the tool list's problem); its free; its mask on a host row (0, SD_FINISH_STOP when nothing may
 * come next, or an error); the same as the backend's allow bitset (0, 1: nothing may come next and json_end
 * is set, or an error); and the chosen token's bytes into its state (0 / -1). */
int sd_sched__json_init(const sd_sched *s, sd_sched_req *r, const sd_request_params *p, sd_diag *d);
void sd_sched__json_free(sd_sched_req *r);
int sd_sched__json_mask(sd_sched *s, sd_sched_req *r, float *row);
int sd_sched__json_allow(sd_sched *s, sd_sched_req *r, uint64_t *out, sd_diag *d);
int sd_sched__json_take(const sd_sched *s, sd_sched_req *r, int32_t tok);
/* For drafts (engine/spec.h), on a copy of the state: the allow bitset after it (0, 1: nothing may
 * come next, or an error; json_end untouched), and a token's bytes into it (0, or -1: rejected, or
 * a special token). */
int sd_sched__json_allow_at(sd_sched *s, const sd_sched_req *r, const void *state, uint64_t *out, sd_diag *d);
int sd_sched__json_feed(const sd_sched *s, const sd_sched_req *r, void *state, int32_t tok);
/* The allowed tokens after validator state `state` (NULL: r's own, and json_end set when none is)
 * as the backend's mask (q->allow) in row m of s->allow: 0, 1 when no token is allowed, or an
 * error. */
int sd_sched__json_allow_row(sd_sched *s, sd_sched_req *r, const void *state, sd_sample_req *q, int m,
                             sd_diag *d);
/* Whether the request's next advance samples a token (else it ends for max_tokens). */
int sd_sched__wants_token(const sd_sched_req *r);
/* The sequence's cache reached its last token and `row` (edited in place) predicts the
 * next one: sends PROMPT (first time), samples (or takes the token the backend sampled,
 * `o`, with its logprobs; row is then unused), emits TOKEN. Returns 0 to continue, an
 * sd_finish (> 0) when the request is finished (the caller frees its blocks, then sends
 * DONE), or a negative code (the caller sends SD_EV_ERROR). */
int sd_sched__advance(sd_sched *s, sd_sched_req *r, float *row, const sd_sample_out *o);

#endif
