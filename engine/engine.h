/* engine: the serving engine — a thread that owns the scheduler (continuous batching),
 * the KV block manager and a backend, and runs requests submitted from other threads.
 *
 * Threading contract: sd_engine_submit/cancel/stats may be called from any thread. Event
 * callbacks run on the engine thread, must not block, and must copy what they keep
 * (pointers in an event are valid only during the call). */
#ifndef SD_ENGINE_H
#define SD_ENGINE_H

#include <stdint.h>

#include "backend.h"
#include "sampler.h"
#include "spec.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sd_engine sd_engine;

typedef struct sd_engine_opts {
    int max_seqs;          /* running sequences at most (batch size) */
    int max_batch_tokens;  /* tokens per step (prefill chunks + decodes) */
    int max_waiting;       /* waiting queue bound; submit beyond it fails with SD_EFULL */
    int32_t max_model_len; /* prompt + max_tokens at most (0 => model's max_position_embeddings) */
    int prefix_caching;    /* keep computed KV blocks for prompts that start the same (engine/prefix.h) */
    sd_spec_opts spec;     /* speculative decoding by prompt lookup (engine/spec.h); tokens 0: off */
} sd_engine_opts;

void sd_engine_opts_default(sd_engine_opts *o);

#define SD_MAX_STOP 8

typedef struct sd_request_params {
    const int32_t *prompt; /* [n_prompt] token ids, copied at submit */
    int32_t n_prompt;
    int32_t max_tokens; /* >= 0; 0 only makes sense with prompt_logprobs */
    sd_sampling sampling;
    const char *stop[SD_MAX_STOP]; /* stop strings, copied at submit */
    int n_stop;
    int ignore_eos;
    int logprobs;            /* -1: none; k >= 0: the chosen token's logprob and the top k */
    int prompt_logprobs;     /* 1: emit SD_EV_PROMPT with the prompt tokens' logprobs */
    int json_object;         /* 1: sample only tokens that keep the text one JSON object, then EOS
                                (response_format json_object; engine/jsonc.h) */
    const char *json_schema; /* JSON Schema text: the text must be a document it accepts, then EOS
                                (response_format json_schema; engine/jschema.h); compiled at submit */
    const char *tool_spec;   /* JSON text [{"name": "...", "parameters": {JSON Schema}}, ...] (1..128
                                tools): the text must be tool call(s) in the exact form of
                                engine/toolcall.h, then EOS (tool_choice "required" or a named
                                function); compiled at submit; not with json_object / json_schema */
    int tool_parallel;       /* with tool_spec: 1, a JSON array of 1..SD_TCALL_MAX_CALLS calls; 0,
                                exactly one call object (lazy: up to 16 calls, or at most one) */
    int tool_mode;           /* with tool_spec (engine/toolcall.h sd_tcall_mode): SD_TCALL_FORCED, the
                                calls alone; "auto": SD_TCALL_HERMES, free text in which each
                                "<tool_call>" opens one constrained call, EOS anywhere outside a
                                call; SD_TCALL_LLAMA, a reply that opens with '{' is constrained
                                calls, any other free text */
    int think;               /* engine/jthink.h sd_think: a reasoning model's <think> block comes before
                                what json_object / json_schema / tool_spec constrain (SD_THINK_MAY:
                                the reply may open one; SD_THINK_OPEN: the prompt opened it) */
    int32_t think_budget;    /* with think: the most tokens inside the block (0: none), then
                                "</think>" is forced, also without a constraint; -1: no limit */
    uint64_t priority;       /* lower runs first among waiting requests (0 = normal) */
} sd_request_params;

void sd_request_params_default(sd_request_params *p);

typedef enum sd_event_type {
    SD_EV_PROMPT = 1, /* prompt logprobs (once, before the first token) */
    SD_EV_TOKEN,      /* one generated token and the text it released */
    SD_EV_DONE,       /* final: finish reason and counts */
    SD_EV_ERROR,      /* final: the request failed */
} sd_event_type;

typedef enum sd_finish {
    SD_FINISH_STOP = 1, /* EOS or a stop string */
    SD_FINISH_LENGTH,   /* max_tokens or the context limit */
    SD_FINISH_ABORT,    /* cancelled */
} sd_finish;

#define SD_MAX_TOP_LOGPROBS 20

/* Event order per request: PROMPT (if asked, once), TOKEN..., then exactly one DONE or ERROR.
 * - Every sampled token gets a TOKEN, the EOS token too (its text is empty: special tokens
 *   are not part of the text); it counts in n_generated.
 * - Text that could be the start of a stop string is held back (TOKEN text may be empty) until
 *   it cannot match any more. On a stop match the text before it is released with the TOKEN
 *   of the token that completed the match, and DONE(STOP) follows. When the request ends for
 *   EOS or max_tokens, whatever is held back (and an incomplete UTF-8 tail, as U+FFFD) is
 *   released in that last TOKEN's text. Cancelled requests drop held-back text.
 * - PROMPT's top alternatives use k = max(logprobs, 0) of the request. */
typedef struct sd_event {
    sd_event_type type;
    uint64_t req_id;
    /* SD_EV_TOKEN */
    int32_t token;
    const char *text; /* UTF-8 released by this token (may be empty: held back for stop strings) */
    size_t text_len;
    float logprob; /* of the chosen token (raw logits' log-softmax) */
    int n_top;
    const int32_t *top_ids;
    const float *top_logprobs;
    /* SD_EV_PROMPT: logprob of prompt token i given tokens < i, for i in [1, n_prompt);
     * with top_k alternatives per position in prompt_top_* ([n_prompt-1][n_top]) */
    const float *prompt_logprobs;
    const int32_t *prompt_top_ids;
    const float *prompt_top_logprobs;
    /* SD_EV_DONE */
    sd_finish finish;
    int32_t n_prompt, n_generated;
    int32_t n_cached; /* prompt tokens the prefix cache supplied when it was first scheduled */
    /* SD_EV_ERROR */
    int code;
    const char *message;
} sd_event;

typedef void (*sd_event_cb)(void *ud, const sd_event *ev);

/* Starts the engine thread over a model and backend (both outlive the engine). */
int sd_engine_init(sd_engine **ret, const sd_model *m, sd_backend *b, const sd_engine_opts *o, sd_diag *d);
/* Stops the thread; requests still running get SD_EV_ERROR. */
void sd_engine_free(sd_engine *e);

/* Queues a request. SD_EFULL when the waiting queue is full; SD_EINVAL (message naming
 * the field) when prompt + max_tokens exceed the context or params are out of range. */
int sd_engine_submit(sd_engine *e, const sd_request_params *p, sd_event_cb cb, void *ud, uint64_t *ret_id,
                     sd_diag *d);
/* Aborts a request; its final event (SD_EV_DONE with SD_FINISH_ABORT) arrives later and
 * its KV blocks return at the next step. Unknown or finished ids are ignored. */
void sd_engine_cancel(sd_engine *e, uint64_t id);

typedef struct sd_engine_stats {
    int running, waiting;
    int32_t kv_blocks_total, kv_blocks_used;         /* used: held by sequences */
    int32_t kv_blocks_cached;                        /* held only by the prefix cache (free on demand) */
    uint64_t prefix_query_tokens, prefix_hit_tokens; /* at admissions: tokens looked up / found cached */
    uint64_t prefix_evicted_blocks;                  /* cached blocks given back for room */
    int prefix_cold_rule; /* new cached blocks mostly enter cold (engine/prefix_shadow.h) */
    uint64_t prompt_tokens, generation_tokens; /* totals since start */
    uint64_t steps, preemptions;
    uint64_t spec_draft_tokens, spec_accepted_tokens; /* drafted / kept by the model (engine/spec.h) */
    int32_t spec_draft_blocks_used;                   /* the draft model's cache held by sequences */
} sd_engine_stats;

void sd_engine_stats_get(sd_engine *e, sd_engine_stats *s);

#ifdef __cplusplus
}
#endif
#endif
