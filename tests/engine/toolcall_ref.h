/* toolcall_ref: what the tool-call validator's tests share (test_toolcall, test_toolcall_lazy): the
 * state buffer, the test tool list, compiling it either way, comparing the states of text pairs,
 * the bytes a state accepts, and the check of one parsed call. */
#ifndef SD_TEST_TOOLCALL_REF_H
#define SD_TEST_TOOLCALL_REF_H

#include <jansson.h>
#include <stdint.h>

#include "engine/jsonc.h"
#include "engine/toolcall.h"
#include "tests/engine/text_util.h"
#include "tests/harness.h"

/* What a text checker reports besides the first byte rejected: all taken, and the text may end
 * there (DOC), or all taken, more needed (PREFIX). */
enum { DOC = -1, PREFIX = -2 };

#define WALK_MAX 200000 /* bytes: a random walk that has not finished by then has run away */

typedef union {
    uint64_t w[SD_TCALL_STATE_MAX / 8];
    unsigned char b[SD_TCALL_STATE_MAX];
} tstate;

/* Names that are prefixes of others ("get" of "get_time" and "get_weather"), a tool without
 * parameters and one with null parameters, a required key, an enum, nesting. */
static const char tools[] =
    "[{'name':'get','parameters':{'type':'object','properties':{'id':{'type':'integer'}},'required':['id']}},"
    "{'name':'get_time','description':'now','parameters':{'type':'object','properties':{'tz':{'type':'string'"
    "}"
    "}}},"
    "{'name':'get_weather','parameters':{'type':'object','properties':{"
    "'city':{'type':'string','maxLength':20},'unit':{'enum':['c','f']},"
    "'days':{'type':'array','items':{'type':'integer'},'maxItems':3},"
    "'opts':{'type':'object','properties':{'deep':{'type':'boolean'}},'required':['deep']}},"
    "'required':['city','unit'],'additionalProperties':false}},"
    "{'name':'ping'},{'name':'Z-9','parameters':null}]";

enum { FORCED = SD_TCALL_FORCED, LAZY = SD_TCALL_HERMES, LLAMA = SD_TCALL_LLAMA }; /* compile_mode's modes */

/* spec (with ' for ") compiled in the forced form, lazily or for Llama; NULL (and a failed check)
 * on error. */
static inline sd_tcall *compile_mode(const char *spec, int parallel, int mode)
{
    sd_tcall *t = NULL;
    sd_diag d = {0};
    const char *json = q(spec);
    int rc = sd_tcall_compile(&t, json, strlen(json), parallel, (sd_tcall_mode)mode, &d);
    CHECK_MSG(rc == 0, "compile: %s", d.msg);
    return rc == 0 ? t : NULL;
}

static inline sd_tcall *compile_ok(const char *spec, int parallel)
{
    return compile_mode(spec, parallel, FORCED);
}

/* Feeds each pair's texts to fresh states (poisoned differently first) and checks their bytes
 * are equal exactly where equal[k] says; plain[k] (if given): sd_tcall_in_plain_string of the
 * first. */
static inline void check_pairs(const sd_tcall *t, const char *const (*pairs)[2], const int *equal,
                               const int *plain, size_t n, int tag)
{
    size_t size = sd_tcall_state_size(t);
    for (size_t k = 0; k < n; k++) {
        tstate a, b;
        memset(&a, 0xAB, sizeof a);
        memset(&b, 0xCD, sizeof b);
        sd_tcall_init(t, &a);
        sd_tcall_init(t, &b);
        const char *ta = q(pairs[k][0]), *tb = q(pairs[k][1]);
        REQUIRE(sd_tcall_feed(t, &a, ta, strlen(ta)) == 0 && sd_tcall_feed(t, &b, tb, strlen(tb)) == 0);
        CHECK_MSG((memcmp(&a, &b, size) == 0) == equal[k], "%d: pair %zu", tag, k);
        if (plain)
            CHECK_MSG(sd_tcall_in_plain_string(t, &a) == plain[k], "%d: pair %zu", tag, k);
    }
}

/* Bytes the state accepts next, into allowed[]; returns how many. */
static inline int allowed_bytes(const sd_tcall *t, const tstate *st, unsigned char *allowed)
{
    int n = 0;
    size_t size = sd_tcall_state_size(t);
    for (unsigned c = 0; c < 256; c++) {
        tstate tmp;
        memcpy(&tmp, st, size);
        if (sd_tcall_step(t, &tmp, c) == 0)
            allowed[n++] = (unsigned char)c;
    }
    return n;
}

static inline int name_in(const char *name, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(name, names[i]) == 0)
            return 1;
    return 0;
}

/* One call as the text must have it: exactly "name" and `argkey` ("arguments"; Llama's
 * "parameters"), the name one of the tools, the arguments an object; get_weather's required keys
 * and enum; ping's empty arguments. */
static inline void check_call_key(const json_t *call, const char *argkey, const char *const *names,
                                  int n_names, const char *text)
{
    const json_t *name = json_object_get(call, "name"), *args = json_object_get(call, argkey);
    CHECK_MSG(json_is_object(call) && json_object_size(call) == 2 && json_is_string(name) &&
                  json_is_object(args),
              "shape: %s", text);
    if (!json_is_string(name) || !json_is_object(args))
        return;
    const char *nm = json_string_value(name);
    CHECK_MSG(name_in(nm, names, n_names), "name %s: %s", nm, text);
    if (strcmp(nm, "get_weather") == 0) {
        const char *unit = json_string_value(json_object_get(args, "unit"));
        CHECK_MSG(json_is_string(json_object_get(args, "city")) && unit &&
                      (strcmp(unit, "c") == 0 || strcmp(unit, "f") == 0),
                  "get_weather: %s", text);
    } else if (strcmp(nm, "get") == 0) {
        CHECK_MSG(json_is_number(json_object_get(args, "id")), "get: %s", text);
    } else if (strcmp(nm, "ping") == 0 || strcmp(nm, "Z-9") == 0) {
        CHECK_MSG(json_object_size(args) == 0, "%s: %s", nm, text);
    }
}

static inline void check_call(const json_t *call, const char *const *names, int n_names, const char *text)
{
    check_call_key(call, "arguments", names, n_names, text);
}

static inline sd_tcall *compile_lazy_ok(const char *spec, int parallel)
{
    return compile_mode(spec, parallel, LAZY);
}

#endif
