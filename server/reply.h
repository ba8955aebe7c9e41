/* reply: what of a chat reply's text is reasoning, content and tool calls, as the text grows.
 *
 * A reasoning model (its chat template speaks of <think> ... </think>: Qwen3, DeepSeek-R1)
 * writes its thinking first; that part goes to `reasoning_content` and the rest, leading
 * whitespace dropped, to `content`. The thinking either opens in the reply ("<think>" first,
 * after whitespace) or was opened by the prompt (a template that ends the generation prompt
 * with "<think>\n"). A reply still thinking when it ends (max_tokens) is all reasoning. Then the
 * content may hold tool calls (server/api_tools.c).
 *
 * sd_reply_next hands out the increments: the bytes of each part not yet sent that are sure to
 * stay in it (a partial "</think>" or "<tool_call>" is held back until the next bytes decide),
 * and, once the text is final, the rest and the calls. A constrained reply ("required" or a
 * named function) is, after its thinking, all calls, handed out as they are written: each call's name once it
 * has ended, then its arguments piece by piece, as OpenAI streams them; one cut by max_tokens stays a call
 * with the arguments written so far (finish "length", as OpenAI's). "auto" calls stream the same way: a Llama
 * reply that opens with '{' is calls, and a Hermes reply is calls from its first
 * "<tool_call>" on (the engine constrains both so), its content before them. A reply whose final
 * text holds no call in that exact form is split at the end (server/api_tools.c). Streaming calls
 * it after every token; a whole response calls it once, final. */
#ifndef SD_REPLY_H
#define SD_REPLY_H

#include <stddef.h>

#include "server/api.h"

typedef struct sd_reply_cfg {
    const sd_api_req *req; /* tool_choice, tools */
    sd_api_tool_fmt fmt;   /* the markup of "auto" calls */
    int think;             /* split <think> ... </think> off as reasoning */
    int think_open;        /* the prompt opened the thinking: the reply starts inside it */
} sd_reply_cfg;

/* How far a choice's parts have been handed out (offsets into its text); zero to begin. */
typedef struct sd_reply_pos {
    size_t reasoning, content;
    int call, named;   /* constrained: the call whose arguments go out now; calls named so far */
    size_t args;       /* constrained: where the current call's unsent arguments begin */
    size_t think_scan; /* where the search for "</think>" resumes (streams: no rescanning) */
} sd_reply_pos;

/* One increment; pointers into the text, except calls (malloc'd: sd_api_tool_calls_free). */
typedef struct sd_reply_delta {
    const char *reasoning;
    size_t reasoning_len;
    const char *content;
    size_t content_len;
    sd_api_tool_call *calls; /* final only */
    int n_calls;
    int content_null;  /* final: tool calls and no content at all */
    int called;        /* final: the reply holds tool calls (finish "stop" becomes "tool_calls") */
    int had_reasoning; /* final: the reply held reasoning (message.reasoning_content is given) */
} sd_reply_delta;

/* The next increment of text[0, len) (final: the text is complete), advancing pos. -1: out of
 * memory splitting calls (the reply is then all content, as if it had none). */
int sd_reply_next(const sd_reply_cfg *cfg, const char *text, size_t len, int final, sd_reply_pos *pos,
                  sd_reply_delta *out);

/* Whether a rendered prompt ends by opening a <think> block ("<think>" and whitespace at its
 * very end, as DeepSeek-R1's and Qwen3 thinking templates' generation prompts do). */
int sd_reply_think_open(const char *prompt, size_t len);

#endif
