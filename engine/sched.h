/* sched: the continuous-batching scheduler — waiting queue (priority, then FIFO), running
 * sequences, KV block accounting, chunked prefill, preemption by recompute, sampling,
 * detokenization, stop strings and the per-request events.
 *
 * Threading: everything here runs on the engine thread, except sd_sched_req_new (reads only
 * what sd_sched_init fixed) and sd_sched_stats (atomic counters), which any thread may call.
 * sd_sched_step is synchronous, so tests can drive the scheduler without the engine thread. */
#ifndef SD_SCHED_H
#define SD_SCHED_H

#include <stdint.h>

#include "engine.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sd_sched sd_sched;
typedef struct sd_sched_req sd_sched_req;

/* Builds a scheduler over a model and backend (both outlive it). Options are clamped to what
 * the backend allows (max_batch_tokens, KV pool); max_model_len 0 means the model's. */
int sd_sched_init(sd_sched **ret, const sd_model *m, sd_backend *b, const sd_engine_opts *o, sd_diag *d);
/* Frees the scheduler and every request it holds WITHOUT sending events (call
 * sd_sched_fail_all first to give them a final event). */
void sd_sched_free(sd_sched *s);

/* Validates params (SD_EINVAL naming the field: prompt length, max_tokens against
 * max_model_len and the KV pool, token ids, logprobs, stop strings) and builds a request
 * that copies everything it needs. Any thread. */
int sd_sched_req_new(const sd_sched *s, const sd_request_params *p, sd_event_cb cb, void *ud, uint64_t id,
                     sd_sched_req **ret, sd_diag *d);
/* Frees a request that was never added. NULL is a no-op. */
void sd_sched_req_free(sd_sched_req *r);

/* Queues a request (takes ownership). No event is sent here. */
void sd_sched_add(sd_sched *s, sd_sched_req *r);
/* Marks a request cancelled; at the next step its blocks are freed and DONE(ABORT) sent.
 * Unknown ids are ignored. */
void sd_sched_cancel(sd_sched *s, uint64_t id);
/* 1 while anything waits or runs (including cancelled requests not yet reaped). */
int sd_sched_has_work(const sd_sched *s);

/* One iteration: reap cancelled requests, schedule decodes and prefill chunks (admitting
 * waiting requests, preempting the newest when blocks run out), run one forward pass,
 * sample and emit events. Returns 0, or the backend's error code (the requests of that
 * batch then got SD_EV_ERROR and were removed; the scheduler stays usable). */
int sd_sched_step(sd_sched *s, sd_diag *d);

/* Sends SD_EV_ERROR (code, msg) to every request held and drops them all. */
void sd_sched_fail_all(sd_sched *s, int code, const char *msg);

/* Counters for /metrics; any thread. `waiting` counts the scheduler's queue only. */
void sd_sched_stats(const sd_sched *s, sd_engine_stats *st);
/* The effective limits after clamping (for tests and the server). */
int32_t sd_sched_max_model_len(const sd_sched *s);

#ifdef __cplusplus
}
#endif
#endif
