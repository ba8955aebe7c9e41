/* reply: a chat reply's text split into reasoning, content and tool calls (server/reply.h). */
#include "server/reply.h"

#include <string.h>

#include "engine/toolcall.h"
#include "server/textscan.h"

static const char THINK_OPEN[] = "<think>", THINK_CLOSE[] = "</think>";

int sd_reply_think_open(const char *prompt, size_t len)
{
    /* the generation prompt's own tag, at its very end: a "<think>" in the conversation (a user
     * asking about it, a tool's text) opens nothing */
    size_t n = sd_scan_trim_end(prompt, len), m = strlen(THINK_OPEN);
    return n >= m && !memcmp(prompt + n - m, THINK_OPEN, m);
}

/* Where the parts lie in text[0, len): reasoning [r_from, r_to), content from c_from on
 * (len when it has not begun). 0 when the start is still undecided (whitespace, or a prefix of
 * "<think>"): nothing can be handed out yet. */
typedef struct parts {
    size_t r_from, r_to, c_from;
    int reasoning;
} parts;

/* pos->think_scan: where the search for "</think>" resumes (none ends before it). */
static int locate(const sd_reply_cfg *cfg, const char *t, size_t len, int final, sd_reply_pos *pos, parts *p)
{
    *p = (parts){0, 0, 0, 0};
    if (!cfg->think)
        return 1;
    size_t open = strlen(THINK_OPEN), close = strlen(THINK_CLOSE);
    if (!cfg->think_open) {
        size_t j = sd_scan_ws(t, 0, len), k = len - j < open ? len - j : open;
        if (!final && !memcmp(t + j, THINK_OPEN, k) && k < open)
            return 0; /* "", "  " or "<thi": may yet open a block */
        if (k < open || memcmp(t + j, THINK_OPEN, open))
            return 1; /* no thinking: all content */
        p->r_from = j + open;
    }
    p->reasoning = 1;
    size_t at = pos->think_scan > p->r_from && pos->think_scan <= len ? pos->think_scan : p->r_from;
    const char *e = sd_scan_find(t + at, len - at, THINK_CLOSE);
    if (e) {
        p->r_to = (size_t)(e - t);
        p->c_from = sd_scan_ws(t, p->r_to + close, len);
    } else {
        p->r_to = final ? len : len - sd_scan_partial_tail(t + p->r_from, len - p->r_from, THINK_CLOSE);
        p->c_from = len;
        pos->think_scan = len - sd_scan_partial_tail(t + at, len - at, THINK_CLOSE);
    }
    return 1;
}

#define MAX_CALLS 16
_Static_assert(MAX_CALLS >= SD_TCALL_MAX_CALLS, "every call the engine lets through is read");

static int push_call(sd_reply_delta *out, int index, const char *name, size_t name_len, const char *args,
                     size_t args_len)
{
    sd_api_tool_call *v = realloc(out->calls, (size_t)(out->n_calls + 1) * sizeof *v);
    char *nm = name ? strndup(name, name_len) : NULL, *a = strndup(args, args_len);
    if (v)
        out->calls = v;
    if (!v || (name && !nm) || !a) {
        free(nm);
        free(a);
        return -1;
    }
    v[out->n_calls++] = (sd_api_tool_call){index, nm, a};
    return 0;
}

/* Where a reply's calls are and in what form: all of its content, forced; from its first '{',
 * Llama's; from its first "<tool_call>", Hermes' (content before). */
enum { CALLS_FORCED, CALLS_LLAMA, CALLS_HERMES };

/* The calls of t[from, len) in form `kind`, offsets into t. */
static int scan(const sd_reply_cfg *cfg, int kind, const char *t, size_t len, size_t from,
                sd_api_call_span *sp, int *closed)
{
    int n = kind == CALLS_FORCED  ? sd_api_tools_scan(t + from, len - from, cfg->req->parallel_tool_calls, sp,
                                                      MAX_CALLS, closed)
            : kind == CALLS_LLAMA ? sd_api_tools_scan_llama(t + from, len - from, sp, MAX_CALLS, closed)
                                  : sd_api_tools_scan_hermes(t + from, len - from, sp, MAX_CALLS, closed);
    for (int k = 0; k < n; k++) {
        sp[k].name += from;
        sp[k].args += from;
    }
    return n;
}

/* The calls of a constrained reply, streamed as they are written (their form: kind, from t + from). */
static int constrained(const sd_reply_cfg *cfg, const char *t, size_t len, int final, int kind, size_t from,
                       sd_reply_pos *pos, sd_reply_delta *out)
{
    sd_api_call_span sp[MAX_CALLS];
    int closed = 0;
    int n = scan(cfg, kind, t, len, from, sp, &closed);
    for (int k = pos->call; k < n && sp[k].named; k++) {
        size_t sent = pos->args > sp[k].args ? pos->args : sp[k].args, to = sp[k].args + sp[k].args_len;
        int first = k >= pos->named;
        if ((first || to > sent) && push_call(out, k, first ? t + sp[k].name : NULL, sp[k].name_len, t + sent,
                                              to > sent ? to - sent : 0) < 0)
            return -1; /* pos stays: the piece goes out with the next one */
        pos->named = k + 1;
        pos->args = to;
        if (!sp[k].done)
            break;
        pos->call = k + 1;
    }
    /* "tool_calls" only for calls whole: one cut by a stop string keeps the engine's reason */
    out->called = final && pos->named > 0 && closed;
    out->content_null = final && pos->named > 0 && pos->content == 0;
    return 0;
}

/* Whether "auto" calls found at t + from stream as constrained ones: always while the text grows
 * (the engine holds it to their form), and at the end if a call was named. A final text with no
 * named call (cut inside the first name, or not in the exact form) is read by the split at the
 * end instead. */
static int auto_calls(const sd_reply_cfg *cfg, int kind, const char *t, size_t len, int final, size_t from,
                      const sd_reply_pos *pos)
{
    if (!final || pos->named)
        return 1;
    sd_api_call_span sp[MAX_CALLS];
    return scan(cfg, kind, t, len, from, sp, NULL) > 0 && sp[0].named;
}

/* "auto" in Llama's markup: a reply that opens with '{' is calls (engine/toolcall.h's Llama mode
 * constrains them), streamed as forced calls are. */
static int llama_calls(const sd_reply_cfg *cfg, const char *t, size_t len, int final, size_t c_from,
                       const sd_reply_pos *pos)
{
    if (cfg->req->tool_choice != SD_TOOLS_AUTO || cfg->fmt != SD_TOOL_FMT_LLAMA)
        return 0;
    size_t j = sd_scan_ws(t, c_from, len);
    return j < len && t[j] == '{' && auto_calls(cfg, CALLS_LLAMA, t, len, final, j, pos);
}

/* "auto" in the Hermes markup: from the first "<tool_call>" (found at *at, from c_from on) the
 * reply is calls (engine/toolcall.h's lazy mode holds it to calls and whitespace), streamed as
 * constrained ones are, the content before them first. */
static int hermes_calls(const sd_reply_cfg *cfg, const char *t, size_t len, int final, size_t c_from,
                        const sd_reply_pos *pos, size_t *at)
{
    if (cfg->req->tool_choice != SD_TOOLS_AUTO || cfg->fmt != SD_TOOL_FMT_HERMES)
        return 0;
    /* what went out as content holds no tag (the search resumes there: no rescan per token) */
    size_t from = pos->content > c_from && pos->content <= len ? pos->content : c_from;
    const char *p = sd_scan_find(t + from, len - from, SD_TCALL_LAZY_OPEN);
    if (!p)
        return 0;
    *at = (size_t)(p - t);
    return auto_calls(cfg, CALLS_HERMES, t, len, final, *at, pos);
}

/* The content's end that may go out now, [c_from, *end), and at the end the calls. */
static int content_end(const sd_reply_cfg *cfg, const char *t, size_t len, int final, size_t c_from,
                       const sd_reply_pos *pos, size_t *end, sd_reply_delta *out)
{
    const char *c = t + c_from;
    size_t n = len - c_from, keep = n;
    int rc = 0;
    if (cfg->req->tool_choice == SD_TOOLS_OFF)
        keep = n;
    else if (!final)
        keep = sd_api_tools_safe(cfg->req, cfg->fmt, c, n, pos->content > c_from ? pos->content - c_from : 0);
    else
        rc = sd_api_tools_split(cfg->req, cfg->fmt, c, n, &keep, &out->calls, &out->n_calls);
    *end = c_from + keep;
    return rc;
}

int sd_reply_next(const sd_reply_cfg *cfg, const char *text, size_t len, int final, sd_reply_pos *pos,
                  sd_reply_delta *out)
{
    memset(out, 0, sizeof *out);
    parts p;
    if (!locate(cfg, text, len, final, pos, &p))
        return 0;
    if (p.reasoning) {
        size_t from = pos->reasoning > p.r_from ? pos->reasoning : p.r_from;
        if (p.r_to > from) {
            out->reasoning = text + from;
            out->reasoning_len = p.r_to - from;
            pos->reasoning = p.r_to;
        }
        out->had_reasoning = final;
    }
    if (cfg->req->tool_choice == SD_TOOLS_REQUIRED || cfg->req->tool_choice == SD_TOOLS_NAMED)
        return constrained(cfg, text, len, final, CALLS_FORCED, p.c_from, pos, out); /* after the thinking */
    if (p.c_from >= len && !final)
        return 0;
    if (llama_calls(cfg, text, len, final, p.c_from, pos))
        return constrained(cfg, text, len, final, CALLS_LLAMA, sd_scan_ws(text, p.c_from, len), pos, out);
    size_t at = 0;
    if (hermes_calls(cfg, text, len, final, p.c_from, pos, &at)) {
        /* the content before the calls, whitespace before the tag left out, then the calls */
        size_t end = sd_scan_trim_end(text, at), from = pos->content > p.c_from ? pos->content : p.c_from;
        if (end > from) {
            out->content = text + from;
            out->content_len = end - from;
            pos->content = end;
        }
        return constrained(cfg, text, len, final, CALLS_HERMES, at, pos, out);
    }
    size_t end = len;
    int rc = content_end(cfg, text, len, final, p.c_from, pos, &end, out);
    size_t from = pos->content > p.c_from ? pos->content : p.c_from;
    if (end > from) { /* never behind what was sent: the held-back part only ever grows into content */
        out->content = text + from;
        out->content_len = end - from;
        pos->content = end;
    }
    out->content_null = final && out->n_calls > 0 && end <= p.c_from;
    out->called = final && out->n_calls > 0;
    return rc;
}
