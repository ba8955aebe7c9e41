/* prefix_sim: the prefix cache (engine/prefix.h) over a KV pool (engine/kv.h) on synthetic
 * request streams, without a model — the hit rate a policy gets where the stream's prompts do or
 * do not fit the pool. `sparsed bench prefix` prints it for both policies side by side, and
 * tests/engine/test_prefix.c asserts what the adaptive rule must keep and gain. Deterministic:
 * the same options give the same numbers. */
#ifndef SD_PREFIX_SIM_H
#define SD_PREFIX_SIM_H

#include <stdint.h>

#include "engine/diag.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The streams, by name:
 *   cycle        16 prompts of 64 blocks taken in turn (each with 4 blocks of its own)
 *   chat         60 conversations picked at random; a turn adds 4 blocks of message and 4 of
 *                reply to the history its prompt resends; a conversation restarts after 12 turns
 *   chat-zipf    the same, a few conversations far more often than the rest
 *   system+docs  one of 4 system prompts of 32 blocks, then a document of 20-120 blocks of its own
 *   zipf         one of 100 prompts of 32 blocks by a power law, then 8 blocks of its own
 *   mixed        each request drawn from cycle, chat or system+docs */
extern const char *const sd_prefix_sim_streams[];

typedef struct sd_prefix_sim_opts {
    const char *stream;
    int32_t pool;       /* KV blocks */
    int32_t block_size; /* tokens a block */
    int32_t requests;
    int32_t running; /* requests in flight: each holds its blocks until `running` later ones arrive */
    uint64_t seed;
} sd_prefix_sim_opts;

typedef struct sd_prefix_sim_result {
    double hit_rate;  /* prompt tokens found cached / prompt tokens looked up */
    uint64_t evicted; /* blocks the cache gave back */
    uint64_t cold;    /* blocks cached at the cold end */
    int32_t skipped;  /* requests that could not fit beside the running ones */
} sd_prefix_sim_result;

void sd_prefix_sim_defaults(sd_prefix_sim_opts *o);
/* policy: SD_PREFIX_LRU or SD_PREFIX_ADAPTIVE. SD_EINVAL for an unknown stream or sizes. */
int sd_prefix_sim_run(const sd_prefix_sim_opts *o, int policy, sd_prefix_sim_result *res, sd_diag *d);

#ifdef __cplusplus
}
#endif
#endif
