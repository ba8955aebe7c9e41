/* jv_cache: compiled validators (a JSON schema's, a tool list's) shared by the requests that ask
 * for the same constraint.
 *
 * Clients of structured outputs and tool calls send the same schema or tools with every request.
 * Compiled once per request, each got a validator id of its own, so the vocabulary mask's cache
 * (engine/jsonc_mask.c, keyed by id and state) never served one request with what another had
 * computed: every request walked the vocabulary trie afresh at every state (~0.1 ms a token on
 * Qwen3's vocabulary against ~25 us from the cache). Here a small LRU keyed by the constraint's
 * text hands out one refcounted validator, with one id, to all of them.
 *
 * Thread-safety: sd_jvc_get from any thread (a mutex); sd_jvc_put from any thread (an atomic
 * count; the last reference frees). An entry is immutable. */
#ifndef SD_JV_CACHE_H
#define SD_JV_CACHE_H

#include <stdatomic.h>

#include "diag.h"
#include "jsonc.h"
#include "toolcall.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sd_jvc sd_jvc;
typedef struct sd_jvc_entry sd_jvc_entry;

typedef enum sd_jvc_kind {
    SD_JVC_SCHEMA = 1, /* a JSON Schema (engine/jschema.h) */
    SD_JVC_TOOLS,      /* a tool list (engine/toolcall.h), in one of its modes */
} sd_jvc_kind;

/* A cache of up to `capacity` validators (1..256). */
int sd_jvc_init(sd_jvc **ret, int capacity, sd_diag *d);
/* Drops the cache's references; entries still held by requests live until their last put. */
void sd_jvc_free(sd_jvc *c);

/* The validator of (kind, mode, parallel, text): the cached one when the same was asked before
 * (the least recently used is dropped past capacity), else compiled now, with an id from *next_id.
 * Compile errors are as sd_jschema_compile's / sd_tcall_compile's (not cached). *ret holds a
 * reference for the caller (sd_jvc_put). mode, parallel: the tool list's sd_tcall_mode and calls
 * (ignored for schemas). The same tools in two modes are two entries: their validators accept
 * different texts. */
int sd_jvc_get(sd_jvc *c, sd_jvc_kind kind, sd_tcall_mode mode, int parallel, const char *text,
               atomic_ullong *next_id, sd_jvc_entry **ret, sd_diag *d);
void sd_jvc_put(sd_jvc_entry *e); /* NULL: no-op */

/* The entry's validator (ctx, id, state size, step functions) and a fresh state's bytes. */
const sd_jval *sd_jvc_jval(const sd_jvc_entry *e);
void sd_jvc_state_init(const sd_jvc_entry *e, void *state);
/* How many lookups found their validator cached, for tests and stats. */
uint64_t sd_jvc_hits(sd_jvc *c);

#ifdef __cplusplus
}
#endif
#endif
