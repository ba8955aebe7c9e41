/* api: the OpenAI request schemas (parsing and validation of /v1/completions and
 * /v1/chat/completions bodies) and the response shapes (JSON bodies, SSE chunks, errors),
 * built with jansson. No engine or HTTP state lives here: the HTTP layer feeds results in. */
#ifndef SD_API_H
#define SD_API_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"
#include "engine/tokenizer.h"

#define SD_API_MAX_N 128       /* choices per prompt */
#define SD_API_MAX_PROMPTS 256 /* prompts per completions request */

typedef enum sd_api_kind {
    SD_API_COMPLETION = 1,
    SD_API_CHAT,
} sd_api_kind;

/* An error answer: HTTP status and the OpenAI error object's fields. */
typedef struct sd_api_err {
    int status;
    char message[512];
    const char *type;  /* "invalid_request_error", ... */
    const char *param; /* field at fault or NULL */
    const char *code;  /* machine code or NULL */
} sd_api_err;

/* Fills e and returns -1 (so parse functions can `return sd_api_fail(...)`). */
int sd_api_fail(sd_api_err *e, int status, const char *param, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* tool_choice, once parsed. OFF: no tools, or "none" (the template does not see them). */
typedef enum sd_api_tool_choice {
    SD_TOOLS_OFF = 0,
    SD_TOOLS_AUTO,     /* the model may call: its own markup is parsed from the text */
    SD_TOOLS_REQUIRED, /* at least one call: the output is constrained to calls */
    SD_TOOLS_NAMED,    /* one call of the named function, constrained */
} sd_api_tool_choice;

/* The tool-call markup a model's chat template teaches, which "auto" parses. */
typedef enum sd_api_tool_fmt {
    SD_TOOL_FMT_NONE = 0, /* nothing to parse (constrained calls are plain JSON) */
    SD_TOOL_FMT_HERMES,   /* <tool_call>{"name": ..., "arguments": {...}}</tool_call> (Qwen, Hermes) */
    SD_TOOL_FMT_LLAMA,    /* the whole reply {"name": ..., "parameters": {...}} (Llama 3.1-3.3) */
} sd_api_tool_fmt;

/* One tool call of a reply, or in a stream the next piece of one. */
typedef struct sd_api_tool_call {
    int index;       /* the call's place in the reply: its id and its "index" in deltas */
    char *name;      /* NULL in a stream's later pieces of a call */
    char *arguments; /* JSON text of an object, or the next piece of it */
} sd_api_tool_call;

/* A call of the constrained form (engine/toolcall.h) as far as a text goes: offsets into it. */
typedef struct sd_api_call_span {
    size_t name, name_len; /* the name's bytes (so far) */
    size_t args, args_len; /* the arguments' bytes so far */
    int named;             /* the name has ended */
    int done;              /* the arguments have ended */
} sd_api_call_span;

typedef struct sd_api_prompt {
    char *text;   /* a text prompt (tokenized later), or NULL */
    int32_t *ids; /* [n_ids] token-id prompt, or NULL */
    size_t n_ids;
} sd_api_prompt;

typedef struct sd_api_req {
    sd_api_kind kind;
    char *model; /* requested model id, NULL if absent */
    /* completions */
    sd_api_prompt *prompts; /* [n_prompts] */
    int n_prompts;
    int echo;
    /* chat */
    json_t *messages; /* normalised (sd_chat_messages_normalize): content as strings, tool-call
                         arguments as objects */
    int add_generation_prompt;
    json_t *template_kwargs; /* chat_template_kwargs: more variables for the template, or NULL */
    int32_t think_budget;    /* thinking_token_budget: the most tokens a reasoning model's <think>
                                block may take before "</think>" is forced; -1: no limit */
    /* both */
    int32_t max_tokens; /* -1: default (completions 16; chat: up to the context) */
    int n;
    sd_sampling sampling; /* .bias points at `bias` */
    sd_logit_bias *bias;  /* [sampling.n_bias], owned: logit_bias */
    int has_seed;
    char *stop[SD_MAX_STOP];
    int n_stop;
    int logprobs; /* -1: none; k in [0, 20]: chosen token's logprob + top k */
    int stream, include_usage;
    int ignore_eos;
    int json_object;   /* response_format {"type": "json_object"} */
    char *json_schema; /* response_format json_schema: the schema as JSON text (owned) */
    /* chat tools (api_tools.c) */
    sd_api_tool_choice tool_choice; /* SD_TOOLS_OFF unless tools were given and not "none" */
    json_t *tools;                  /* "tools" as given (validated), for the chat template; or NULL */
    int parallel_tool_calls;        /* default 1 */
    char *tool_spec;                /* the engine's constraint of the calls (owned): [{"name": ...,
                                       "parameters": {...}, "strict": ...}] (engine/toolcall.h): the
                                       offered tools, or the named one */
} sd_api_req;

/* Parses and validates a request body. Unknown fields are ignored; wrong types, out-of-range
 * values, malformed JSON and invalid UTF-8 fill e (status 400, param naming the field) and
 * return -1. On success r owns its allocations (sd_api_req_free). */
int sd_api_parse(sd_api_req *r, sd_api_kind kind, const char *body, size_t len, sd_api_err *e);
void sd_api_req_free(sd_api_req *r);

/* One generated (or echoed prompt) token with its logprobs. */
typedef struct sd_api_tok {
    int32_t id;
    float lp; /* NAN: none (the first prompt token) */
    int n_top;
    int32_t top_ids[SD_MAX_TOP_LOGPROBS];
    float top_lps[SD_MAX_TOP_LOGPROBS];
} sd_api_tok;

/* What a choice has produced so far (or in total). */
typedef struct sd_api_choice_out {
    int index;
    const char *text; /* [text_len] UTF-8 */
    size_t text_len;
    const sd_api_tok *toks; /* [n_toks]; NULL unless logprobs were asked */
    int n_toks;
    size_t text_offset0;   /* completions logprobs: offset (chars) of the first token's text */
    const char *finish;    /* "stop" | "length" | "tool_calls" | NULL (not finished) */
    const char *reasoning; /* [reasoning_len] chat: reasoning_content (server/reply.h) */
    size_t reasoning_len;
    int has_reasoning;             /* whole responses: message.reasoning_content is given */
    const sd_api_tool_call *calls; /* [n_calls] chat tool calls (message.tool_calls / delta) */
    int n_calls;
    int content_null; /* chat: "content": null (a reply of tool calls only) */
} sd_api_choice_out;

typedef struct sd_api_usage {
    int64_t prompt, completion;
    int64_t cached; /* of the prompt tokens, those the prefix cache supplied */
} sd_api_usage;

/* Common response header fields. */
typedef struct sd_api_meta {
    sd_api_kind kind;
    const char *id; /* "cmpl-..." / "chatcmpl-..." */
    int64_t created;
    const char *model;
    int logprobs; /* as sd_api_req.logprobs */
    const sd_tokenizer *tok;
} sd_api_meta;

/* The non-streaming response. Returns a malloc'd JSON text or NULL (out of memory). */
char *sd_api_response(const sd_api_meta *m, const sd_api_choice_out *c, int n, const sd_api_usage *u);
/* One SSE event "data: {chunk}\n\n" for one choice's increment; `role_only` builds the chat
 * opening chunk (delta {"role":"assistant","content":""}). `with_usage` adds "usage": null
 * as OpenAI does when stream_options.include_usage is set. */
char *sd_api_chunk(const sd_api_meta *m, const sd_api_choice_out *c, int role_only, int with_usage);
/* The final usage event (choices: []). */
char *sd_api_usage_chunk(const sd_api_meta *m, const sd_api_usage *u);
/* {"error": {...}} as JSON text, and as an SSE event. */
char *sd_api_error_json(const sd_api_err *e);
char *sd_api_error_event(const sd_api_err *e);
/* GET /v1/models */
char *sd_api_models(const char *model_id, int64_t created, int32_t max_model_len);

/* api_tools.c: "tools", "tool_choice", "parallel_tool_calls" and the legacy "functions" of a
 * chat body into r (400s naming the field). Called by sd_api_parse. */
int sd_api_parse_tools(sd_api_req *r, json_t *body, sd_api_err *e);
/* How many bytes of a reply so far are content for sure (streamed as it comes): the rest may
 * yet turn out to be a tool call. All of it without tools, none of a constrained reply. `from`:
 * no call begins before it (what went out already), where the search may start. */
size_t sd_api_tools_safe(const sd_api_req *r, sd_api_tool_fmt fmt, const char *text, size_t len, size_t from);
/* A finished "auto" reply split into content, text[0, *content_len), and tool calls (*calls,
 * malloc'd; free with sd_api_tool_calls_free). A reply whose calls do not parse, or name a
 * function the request did not offer, is all content with no calls. -1: out of memory.
 * (Constrained replies are read with sd_api_tools_scan.) */
int sd_api_tools_split(const sd_api_req *r, sd_api_tool_fmt fmt, const char *text, size_t len,
                       size_t *content_len, sd_api_tool_call **calls, int *n_calls);
void sd_api_tool_calls_free(sd_api_tool_call *calls, int n);
/* The calls of a constrained reply ("required" / a named function: the exact form of
 * engine/toolcall.h) that text[0, len) has begun, at most max; returns how many. *closed (if
 * not NULL): 1 when the text holds the whole form, its last '}' (one call) or ']' read. */
int sd_api_tools_scan(const char *text, size_t len, int parallel, sd_api_call_span *spans, int max,
                      int *closed);
/* The same for an "auto" reply in Llama's markup that opens with '{' (text from that brace on):
 * {"name": ..., "parameters": ...} calls, "; " between them, as engine/toolcall.h's Llama mode
 * constrains them. *closed: 1 when the last call begun has ended (another may still follow). */
int sd_api_tools_scan_llama(const char *text, size_t len, sd_api_call_span *spans, int max, int *closed);
/* The same for "auto" calls in the Hermes markup (text from the first "<tool_call>" on): blocks
 * <tool_call>\n{"name": ..., "arguments": ...}\n</tool_call> with whitespace between them, as
 * engine/toolcall.h's lazy mode constrains them. *closed: 1 when the last block begun has closed. */
int sd_api_tools_scan_hermes(const char *text, size_t len, sd_api_call_span *spans, int max, int *closed);

/* Writes `len` bytes as valid UTF-8 into a malloc'd string (invalid sequences become
 * U+FFFD), for token strings that cut a character in two. */
char *sd_api_utf8_sanitize(const char *s, size_t len, size_t *ret_len);
/* Number of code points in a valid UTF-8 string (Python len()). */
size_t sd_api_utf8_chars(const char *s, size_t len);

#endif
