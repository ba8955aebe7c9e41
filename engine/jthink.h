/* jthink: a reasoning model thinks first, then writes what a validator constrains.
 *
 * Qwen3 and DeepSeek-R1 write "<think> ... </think>" before their answer. A JSON schema, JSON mode
 * or a forced tool call held from the reply's first byte makes them answer without thinking (or
 * write the JSON inside the block), which costs them what the thinking was for. As vLLM's
 * structured outputs with a reasoning parser do, the constraint here starts where the thinking
 * ends: sd_jthink wraps any engine/jsonc.h validator (the inner one) into another that accepts
 *
 *   [<think> THOUGHTS </think> WS] TEXT          (start SD_THINK_MAY: the block is optional)
 *   THOUGHTS </think> WS TEXT                    (start SD_THINK_OPEN: the prompt opened it)
 *
 * where THOUGHTS are any bytes without "</think>", WS is at most SD_JTHINK_MAX_GAP bytes of
 * whitespace and TEXT is what the inner validator accepts. The text may not end inside the block
 * (end-of-sequence is masked there, as everywhere before the inner validator may end), and
 * sd_jthink_close caps the thinking: from then on only the rest of "</think>" may follow (the
 * request's thinking_token_budget, counted by the scheduler).
 *
 * sd_jval_free is the validator of any text (it may end anywhere): wrapped, it gives a reply whose
 * thinking is capped and whose answer is free.
 *
 * A state is an 8-byte header and the inner validator's state after it; states stay canonical
 * (equal places, equal bytes) as the mask's cache needs. The wrapped validator's id is the inner
 * one's with the top bit set, so the mask keeps their allowed sets apart. */
#ifndef SD_JTHINK_H
#define SD_JTHINK_H

#include "jsonc.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SD_JTHINK_HEADER 8 /* bytes before the inner state */
#define SD_JTHINK_MAX_GAP 4
#define SD_JVAL_FREE_ID ((uint64_t)1 << 62) /* sd_jval_free's id (the schedulers' ids count from 1) */

/* How a constrained reply may think (sd_request_params.think). */
typedef enum sd_think {
    SD_THINK_NONE = 0, /* the constraint holds from the first byte */
    SD_THINK_MAY,      /* the reply may open with a <think> block */
    SD_THINK_OPEN,     /* the prompt opened the block: the reply begins inside it */
} sd_think;

extern const sd_jval sd_jval_free;

/* The validator that wraps *inner (which must outlive it: inner is its context). SD_EINVAL (0 on
 * success) when the inner state would not fit: inner->size + SD_JTHINK_HEADER > SD_JVAL_MAX_STATE. */
int sd_jthink_wrap(const sd_jval *inner, sd_jval *ret);
/* Starts a wrapped state: the header for `start` (SD_THINK_MAY or SD_THINK_OPEN); the caller then
 * initialises the inner state at sd_jthink_inner(state). */
void sd_jthink_init(void *state, sd_think start);
void *sd_jthink_inner(void *state);
/* 1 inside the block (after "<think>", or from the start with SD_THINK_OPEN, until "</think>"). */
int sd_jthink_thinking(const void *state);
/* 1 once the text is past where a block could be: after "</think>", or the inner text begun
 * without one. From there on a wrapped sd_jval_free accepts every byte. */
int sd_jthink_past(const void *state);
/* Ends the thinking: inside the block, only the rest of "</think>" may follow; elsewhere no-op. */
void sd_jthink_close(void *state);

#ifdef __cplusplus
}
#endif
#endif
