/* toolcall: constrained tool calls (OpenAI `tool_choice: "required"` or a named function; with
 * "auto", lazily: each call the model opens inside its free text).
 *
 * sd_tcall_compile turns a list of tools into a byte-level incremental validator of the same
 * shape as engine/jschema.h's, which the vocabulary mask (engine/jsonc.h, sd_jval) walks. The
 * text it accepts is exactly, with no whitespace freedom outside the arguments:
 *
 *   one call (parallel 0):  {"name": "NAME", "arguments": ARGS}
 *   parallel (parallel 1):  [CALL, CALL, ...]   1..SD_TCALL_MAX_CALLS calls, ", " between them
 *
 * NAME is one of the tools' names byte for byte; ARGS is a JSON object that the chosen tool's
 * "parameters" schema accepts (compiled with engine/jschema.h: its subset and depth limit inside
 * ARGS, whitespace runs of at most one byte there, as `{"a": 1, "b": 2}` has; no whitespace
 * before ARGS' opening brace). Nothing may follow the
 * last '}' (one call) or ']' (parallel): the text then ends with end-of-sequence.
 *
 * Lazy mode (SD_TCALL_HERMES; tool_choice "auto" with Hermes markup, as llama.cpp's lazy
 * grammars): free text until SD_TCALL_LAZY_OPEN opens a call, then calls to the end:
 *
 *   FREE <tool_call>\n{"name": "NAME", "arguments": ARGS}\n</tool_call> WS <tool_call>\n...
 *
 * FREE is any bytes (one may end the text anywhere in it, even inside a partial "<tool_c"); the
 * trigger is found wherever it ends ("<<tool_call>" opens a call). Once a call has closed, only
 * up to 4 bytes of whitespace (WS) and another call's trigger may follow, so a reply is content,
 * then calls, and the server may stream them as they are written; the last call that may come (1
 * with parallel 0, SD_TCALL_MAX_CALLS with 1) ends the text: complete() is 1 after it and 0
 * before. can_end() is 1 in FREE text, between calls and after the last, 0 from the trigger's '>'
 * to the end of "\n</tool_call>" and inside a trigger after a call. Inside a "<think>" ...
 * "</think>" block of the free text the trigger opens nothing: a thinking model (Qwen3) writes
 * about the markup as it plans ("I'll answer within <tool_call> tags") before it calls (a block
 * the prompt opened is engine/jthink.h's to skip).
 *
 * Llama mode (SD_TCALL_LLAMA; tool_choice "auto" with Llama 3.1-3.3's markup, where the
 * whole reply is the call, as their templates teach): leading whitespace, then either calls
 *
 *   {"name": "NAME", "parameters": ARGS}          then the end (parallel 0), or
 *   CALL; CALL; ...                               up to SD_TCALL_MAX_CALLS, "; " between (parallel 1)
 *
 * when the first other byte is '{', or free text to the end when it is anything else. A '{' that
 * opens the reply therefore always opens a call (a JSON answer the model meant as content would
 * be read as one; llama.cpp's Llama handler does the same). complete() is 1 after the last call
 * that may come; can_end() is 1 everywhere but inside a call. The python tag (a special token)
 * is not a byte here: the vocabulary mask never lets one through, so the model writes the JSON.
 *
 * The spec: JSON text, an array of 1..SD_TCALL_MAX_TOOLS objects {"name": NAME, "parameters":
 * SCHEMA, "strict": BOOL}; other keys (e.g. "description") are ignored. Names match
 * [A-Za-z0-9_-]{1,64} and are distinct. "parameters" absent or null means {"type": "object",
 * "properties": {}} (ARGS is then `{}`); a schema must accept only objects. Without "strict":
 * true, a schema compiles leniently (SD_JSCHEMA_LENIENT: content assertions jschema lacks, such
 * as "minimum" or "pattern", are left out, as OpenAI leaves non-strict tools unenforced); with
 * it, they are refused.
 *
 * Threading: an sd_tcall is read-only after compile. A state is a plain buffer owned by its
 * request, 8-byte aligned (malloc'd, or slots of sd_tcall_state_size bytes in one such buffer). */
#ifndef SD_TOOLCALL_H
#define SD_TOOLCALL_H

#include <stddef.h>

#include "diag.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SD_TCALL_MAX_TOOLS 128       /* tools in a spec at most */
#define SD_TCALL_MAX_NAME 64         /* bytes of a tool name at most */
#define SD_TCALL_MAX_CALLS 16        /* calls in a parallel array at most */
#define SD_TCALL_STATE_MAX (8 + 128) /* sd_tcall_state_size is never larger: a header + a jschema state */

/* Lazy mode's markup: the trigger that opens a call, and what closes it (after a newline). */
#define SD_TCALL_LAZY_OPEN "<tool_call>"
#define SD_TCALL_LAZY_CLOSE "</tool_call>"

/* A compiled tool list: immutable after compile, shareable across threads. */
typedef struct sd_tcall sd_tcall;

/* What text a compiled tool list accepts (the modes above). */
typedef enum sd_tcall_mode {
    SD_TCALL_FORCED = 0, /* the calls alone (tool_choice "required" or a named function) */
    SD_TCALL_HERMES,     /* lazy mode: free text, each <tool_call> opening a call ("auto") */
    SD_TCALL_LLAMA,      /* Llama mode: calls in Llama 3.1-3.3's form, or free text ("auto") */
} sd_tcall_mode;

/* Compiles a tool list given as JSON text (len bytes, no terminator needed) for mode; parallel: 1
 * for an array of calls (lazy and Llama modes: up to SD_TCALL_MAX_CALLS), 0 for exactly one (at
 * most one). SD_EINVAL with a message naming the problem, starting with
 * "tools" ("tools: invalid JSON ...", "tools[2]: name 'a b' must match [A-Za-z0-9_-]{1,64}",
 * "tools[2] (get_weather): parameters/properties/x: 'pattern' is not supported"); SD_ENOMEM. *ret
 * is set only on success. */
int sd_tcall_compile(sd_tcall **ret, const char *spec, size_t len, int parallel, sd_tcall_mode mode,
                     sd_diag *d);
void sd_tcall_free(sd_tcall *t); /* NULL: no-op */

/* Bytes of one state: fixed per tool list, a multiple of 8, at most SD_TCALL_STATE_MAX. States are
 * canonical: texts that leave the validator in the same place give states equal under memcmp. In
 * lazy mode's free text the place is the trigger's bytes matched; between calls, also the calls
 * made so far (they decide whether another may open). */
size_t sd_tcall_state_size(const sd_tcall *t);
/* Sets state to the start of the text. */
void sd_tcall_init(const sd_tcall *t, void *state);
/* One byte: 0 while the text is still a valid prefix; -1 when rejected (state unspecified). */
int sd_tcall_step(const sd_tcall *t, void *state, unsigned byte);
/* n bytes, all or nothing: -1 leaves state as it was. */
int sd_tcall_feed(const sd_tcall *t, void *state, const char *bytes, size_t n);
/* 1 once the whole text has been read (after the final '}' or ']'): every byte is then rejected.
 * Lazy and Llama modes: after the last call that may come. */
int sd_tcall_complete(const sd_tcall *t, const void *state);
/* 1 when the text may end here: the same as complete (a tool call never ends in a number). Lazy
 * mode: in free text and between calls. Llama mode: anywhere outside a call. */
int sd_tcall_can_end(const sd_tcall *t, const void *state);
/* 1 inside an argument string whose content is unconstrained (sd_jschema_in_plain_string). 0 in
 * lazy mode's free text: a plain token there may still complete the trigger and break the call. */
int sd_tcall_in_plain_string(const sd_tcall *t, const void *state);

#ifdef __cplusplus
}
#endif
#endif
