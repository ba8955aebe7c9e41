/* jsonc: JSON-constrained sampling (OpenAI `response_format: {"type": "json_object"}`).
 *
 * sd_jfsm is a byte-level incremental validator for one top-level JSON object (RFC 8259);
 * sd_jmask turns a validator state into a logits mask over a tokenizer's vocabulary, so that
 * the sampler only picks tokens that keep the text a prefix of one valid JSON object and,
 * once the object has closed, only an end-of-sequence token.
 *
 * Beyond RFC 8259, to keep a model from running away and the output parseable everywhere:
 *  - nesting depth is at most SD_JFSM_MAX_DEPTH (the top-level object is level 1);
 *  - whitespace outside strings comes in runs of at most SD_JFSM_MAX_WS bytes (models
 *    otherwise fall into endless newlines);
 *  - \uXXXX escapes must form valid UTF-16: a high surrogate must be followed at once by
 *    an escaped low surrogate, a lone low surrogate is rejected (strict parsers such as
 *    jansson reject them too);
 *  - nothing may follow the closing brace, not even whitespace: the sequence ends there.
 *
 * Threading: an sd_jfsm is a plain value owned by its request. An sd_jmask is read-only
 * after init except for its cache: sd_jmask_apply takes one caller at a time (the engine
 * thread). */
#ifndef SD_JSONC_H
#define SD_JSONC_H

#include <stddef.h>
#include <stdint.h>

#include "diag.h"
#include "tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SD_JFSM_MAX_DEPTH 64
#define SD_JFSM_MAX_WS 32

/* The validator state: small and copyable by value (no pointers, no heap). Every field is
 * kept canonical (unused ones 0, the struct has no padding), so texts that leave the parser
 * in the same place give states equal under memcmp; sd_jmask keys its cache on these bytes. */
typedef struct sd_jfsm {
    uint64_t stack; /* bit i: level i+1 is an object (1) or an array (0); bits >= depth are 0 */
    uint8_t depth;  /* open containers, 0..SD_JFSM_MAX_DEPTH */
    uint8_t state;  /* where the parser is (enum in jsonc.c) */
    uint8_t sub;    /* per state: literal bytes matched, \u hex digits read */
    uint8_t aux;    /* per state: which literal, surrogate flags of a \u escape */
    uint8_t utf8;   /* inside strings: what the next UTF-8 continuation byte must be, 0 none */
    uint8_t ws;     /* length of the current whitespace run outside strings */
    uint8_t key;    /* 1 while inside an object key */
    uint8_t zero;   /* always 0: fills what would be padding */
} sd_jfsm;

/* Starts before the top-level object (leading whitespace allowed). */
void sd_jfsm_init(sd_jfsm *m);
/* Feeds n bytes. Returns 0 when the text so far is still a prefix of a valid object (m
 * advanced), -1 when a byte is rejected (m is then left as it was before the call). */
int sd_jfsm_feed(sd_jfsm *m, const char *bytes, size_t n);
/* 1 once the top-level object has closed (after which every byte is rejected), else 0. */
int sd_jfsm_complete(const sd_jfsm *m);

/* Internal, for jsonc_mask.c's trie walk: one byte (0 / -1, m unspecified on -1); whether m is
 * inside a string; and inside one with no UTF-8 character pending (where plain text stays
 * plain). */
int sd__jfsm_step(sd_jfsm *m, unsigned c);
int sd__jfsm_in_string(const sd_jfsm *m);
int sd__jfsm_in_plain_string(const sd_jfsm *m);

/* A byte-level validator the mask can walk: its states are `size` bytes (a multiple of 8: the
 * walk keeps them 8-byte aligned), copied by value and compared with memcmp (equal positions
 * must have equal bytes). JSON mode's is sd_jval_json
 * (states are sd_jfsm); a compiled JSON schema is another (engine/jschema.h), and so is a compiled
 * tool list (engine/toolcall.h: a header and a jschema state, hence more than a schema's 128). */
#define SD_JVAL_MAX_STATE 256
typedef struct sd_jval {
    const void *ctx; /* the validator's constant part (a compiled schema), NULL for JSON mode */
    uint64_t id;     /* tells validators apart in the mask's cache: never reused while the mask
                        lives (a freed schema's address may come back for another); 0: JSON mode */
    size_t size;     /* bytes of a state, <= SD_JVAL_MAX_STATE */
    int (*step)(const void *ctx, void *state, unsigned byte); /* 0, or -1: rejected (state unspecified) */
    int (*complete)(const void *ctx, const void *state);      /* 1: a whole document; no byte may follow */
    /* 1: a whole document that more bytes could still extend (a top-level number): eos is
     * allowed beside them. NULL: never (JSON mode's object ends at its brace) */
    int (*can_end)(const void *ctx, const void *state);
    /* 1 inside a string that any plain text continues (no quote, backslash or control byte; valid
     * UTF-8), with no UTF-8 character pending: exact, 0 when unsure */
    int (*in_plain_string)(const void *ctx, const void *state);
} sd_jval;
extern const sd_jval sd_jval_json;

typedef struct sd_jmask sd_jmask;

/* Builds, for tokenizer t, a trie of the byte strings (sd_tok_token_bytes) of every token
 * that is not special (sd_tok_is_special) and not empty; special tokens are never allowed
 * inside JSON. The mask keeps no reference to t. One mask serves every request on that
 * tokenizer: 12 bytes per trie node plus 64 cached bitsets of vocab bits (about 6 MB and
 * 45 ms to build for Qwen3's 151K tokens). SD_EINVAL for a NULL or empty tokenizer, SD_ENOMEM;
 * *ret is set only on success. */
int sd_jmask_init(sd_jmask **ret, const sd_tokenizer *t, sd_diag *d);
void sd_jmask_free(sd_jmask *jm); /* NULL: no-op */

/* Sets logits[i] = -INFINITY for every token i in [0, vocab) that cannot come next in state
 * m: tokens whose bytes m rejects, special tokens, empty tokens, ids beyond the tokenizer's
 * vocabulary, the eos ids themselves before completion (they would end the text short of a
 * whole object), and, once sd_jfsm_complete(m), every token except eos[0..n_eos). Other
 * logits are left as they are. Returns how many tokens stay allowed (0 means the caller
 * must end the sequence). Not thread-safe (it caches the allowed set of the last 64
 * distinct states); one caller at a time. */
int32_t sd_jmask_apply(sd_jmask *jm, const sd_jfsm *m, const int32_t *eos, int n_eos, float *logits,
                       int32_t vocab);
/* The same set as a bitset for a sampler that masks the row itself (sd_sample_req.allow):
 * out[(vocab + 63) / 64], bit i set where sd_jmask_apply would leave logits[i] as it is. Returns
 * how many bits are set. */
int32_t sd_jmask_allowed(sd_jmask *jm, const sd_jfsm *m, const int32_t *eos, int n_eos, int32_t vocab,
                         uint64_t *out);
/* The same two for any validator v in state `state` (sd_jmask_apply is sd_jmask_apply_v with
 * sd_jval_json). The cache keeps the sets of different validators apart. */
int32_t sd_jmask_apply_v(sd_jmask *jm, const sd_jval *v, const void *state, const int32_t *eos, int n_eos,
                         float *logits, int32_t vocab);
int32_t sd_jmask_allowed_v(sd_jmask *jm, const sd_jval *v, const void *state, const int32_t *eos, int n_eos,
                           int32_t vocab, uint64_t *out);

#ifdef __cplusplus
}
#endif
#endif
