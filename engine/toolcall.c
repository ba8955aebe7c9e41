/* toolcall: compiles a tool list (parsed with jansson) into names sorted by bytes and one
 * compiled jschema per tool, and validates tool-call text byte by byte: fixed literals, a name
 * matched as a shrinking range of the sorted names, then the chosen tool's arguments; in Hermes
 * lazy mode, free text around them, watched for the trigger by a small automaton; in Llama mode,
 * a reply that is calls from its first '{' or free text from any other first byte. */
#include "toolcall.h"

#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jschema.h"
#include "jsonc_utf8.h"

struct tool {
    char name[SD_TCALL_MAX_NAME + 1];
    uint8_t len;
    uint8_t idx;    /* its index in the spec, for messages */
    sd_jschema *js; /* its "parameters" */
};

#define TRIG_LEN (sizeof SD_TCALL_LAZY_OPEN - 1)
#define THINK_OPEN "<think>"
#define THINK_CLOSE "</think>"
#define TOPEN_LEN (sizeof THINK_OPEN - 1)
#define TCLOSE_LEN (sizeof THINK_CLOSE - 1)

struct sd_tcall {
    struct tool *tools; /* [n] sorted by name bytes: the names sharing a prefix form a run */
    int n;
    int parallel;
    sd_tcall_mode mode;
    int max_calls;  /* calls the text may hold (1, or SD_TCALL_MAX_CALLS with parallel) */
    size_t js_size; /* bytes of the largest tool's jschema state */
    /* lazy: the trigger's matching automaton (KMP): trig[m][c] is how many of its bytes are matched
     * after byte c follows m matched ones; TRIG_LEN: the whole trigger. The same for the think
     * block's tags, which turn the trigger off and on again. */
    uint8_t trig[TRIG_LEN][256];
    uint8_t topen[TOPEN_LEN][256], tclose[TCLOSE_LEN][256];
};

/* The fixed parts of the text. A call's opening literal ends just inside the name's quotes;
 * lazy mode's follows the trigger and its closing one ends the markup. */
enum { L_OPEN, L_POPEN, L_NEXT, L_ARGS, L_CLOSE, L_LOPEN, L_LCLOSE, L_PARAMS, L_SEMI };
static const char *const lits[] = {
    [L_OPEN] = "{\"name\": \"",
    [L_POPEN] = "[{\"name\": \"",
    [L_NEXT] = ", {\"name\": \"",
    [L_ARGS] = ", \"arguments\": ",
    [L_CLOSE] = "}",
    [L_LOPEN] = "\n{\"name\": \"",
    [L_LCLOSE] = "}\n" SD_TCALL_LAZY_CLOSE,
    [L_PARAMS] = ", \"parameters\": ", /* Llama's key for the arguments */
    [L_SEMI] = "; {\"name\": \"",      /* Llama: the next call */
};

enum {
    P_LIT,   /* inside lits[lit], pos bytes matched */
    P_NAME,  /* pos bytes of a name typed: the sorted names [lo, hi] start with them */
    P_ARGS,  /* the arguments of tool lo: pos 0 before their '{', 1 after (the jschema state follows) */
    P_AFTER, /* a call closed: forced parallel, ", " and another or ']'; Llama, "; " and another or the
                end; Hermes, whitespace and another's trigger (`trig` bytes of it matched) or the end */
    P_DONE,  /* the whole text: nothing may follow */
    P_FREE,  /* lazy: free text, `trig` bytes of the trigger matched; Llama: free text to the end */
    P_START, /* Llama: only whitespace so far */
};

/* The state: this 8-byte header, then the chosen tool's jschema state (js_size bytes, zero outside
 * P_ARGS). Equal positions must give equal bytes, so every field a phase does not use is 0:
 *   P_LIT    lit, pos, calls; lo (the tool) in L_ARGS
 *   P_NAME   pos, lo, hi, calls
 *   P_ARGS   pos, lo, calls
 *   P_AFTER  calls; Hermes: trig, lo (whitespace bytes)
 *   P_DONE   nothing: calls is 0 too
 *   P_START  nothing
 *   P_FREE   trig, calls (lazy: they decide whether another call may open); hi: inside a think
 *            block, lo: the bytes of its closing tag matched there, of "<think>" outside (where
 *            trig runs beside it; inside, trig is 0) */
struct tc_state {
    uint8_t phase;
    uint8_t lit;
    uint8_t pos;
    uint8_t calls;  /* calls begun; lazy: kept in free text, where it decides whether another may open */
    uint8_t lo, hi; /* P_NAME: the candidate names; P_LIT of L_ARGS and P_ARGS: the tool is lo */
    uint8_t trig;   /* P_FREE: bytes of the trigger matched, 0..TRIG_LEN-1 */
    uint8_t zero;
};
_Static_assert(sizeof(struct tc_state) == 8, "the header keeps the jschema state 8-byte aligned");
_Static_assert(SD_TCALL_MAX_TOOLS <= 256 && SD_TCALL_MAX_NAME < 256 && SD_TCALL_MAX_CALLS < 256 &&
                   TRIG_LEN < 256 && TCLOSE_LEN < 256,
               "indices and counts fit the state's bytes");
_Static_assert(SD_TCALL_STATE_MAX >= sizeof(struct tc_state) + SD_JSCHEMA_STATE_MAX,
               "a header and any jschema state fit SD_TCALL_STATE_MAX");

#define DEFAULT_PARAMS "{\"type\": \"object\", \"properties\": {}}"

/* ---- compile ------------------------------------------------------------------------------- */

static int name_ok(const char *s, size_t n)
{
    if (n < 1 || n > SD_TCALL_MAX_NAME)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
              c == '-'))
            return 0;
    }
    return 1;
}

static int tool_cmp(const void *pa, const void *pb)
{
    return strcmp(((const struct tool *)pa)->name, ((const struct tool *)pb)->name);
}

/* jschema's message names the node as "schema/..."; here it is the tool's "parameters/...". The
 * rest is cut (never inside a UTF-8 character: property names appear in it) to fit the diag. */
static int schema_fail(sd_diag *d, const struct tool *t, const sd_diag *cd, int rc)
{
    if (!d)
        return rc;
    const char *m = sd_diag_str(cd, rc);
    const char *rest = strncmp(m, "schema", 6) == 0 ? m + 6 : NULL;
    char head[SD_TCALL_MAX_NAME + 64];
    int hn = snprintf(head, sizeof head, "tools[%d] (%s): parameters%s", t->idx, t->name, rest ? "" : ": ");
    if (!rest)
        rest = m;
    size_t room = SD_DIAG_MSG_MAX - 1 - (size_t)hn, n = strlen(rest);
    if (n > room) {
        n = room;
        while (n > 0 && ((unsigned char)rest[n] & 0xC0) == 0x80)
            n--;
    }
    return sd_diag_set(d, rc, "%s%.*s", head, (int)n, rest);
}

/* The arguments open with '{' right after "arguments": the schema must accept nothing else first
 * (jschema also takes leading whitespace, which the tool-call text never has). */
static int accepts_only_objects(const sd_jschema *js)
{
    uint64_t st[SD_JSCHEMA_STATE_MAX / 8], tmp[SD_JSCHEMA_STATE_MAX / 8];
    size_t size = sd_jschema_state_size(js);
    sd_jschema_init(js, st);
    int brace = 0;
    for (unsigned c = 0; c < 256; c++) {
        memcpy(tmp, st, size);
        if (sd_jschema_step(js, tmp, c) < 0 || json_ws(c))
            continue;
        if (c != '{')
            return 0;
        brace = 1;
    }
    return brace;
}

/* strict: enforce every keyword or refuse; otherwise leave out the content assertions jschema
 * lacks, as OpenAI does for tools without "strict": true (SD_JSCHEMA_LENIENT). */
static int compile_params(struct tool *t, const json_t *params, int strict, sd_diag *d)
{
    char *text = NULL;
    if (params && !json_is_null(params) && !(text = json_dumps(params, JSON_COMPACT | JSON_ENCODE_ANY)))
        return sd_diag_set(d, SD_ENOMEM, "tools: out of memory");
    const char *src = text ? text : DEFAULT_PARAMS;
    sd_diag cd = {0};
    int rc = sd_jschema_compile_opts(&t->js, src, strlen(src), strict ? 0 : SD_JSCHEMA_LENIENT, &cd);
    free(text);
    if (rc < 0)
        return rc == SD_EINVAL ? schema_fail(d, t, &cd, rc) : sd_diag_set(d, rc, "tools: out of memory");
    sd_jschema_set_max_ws(t->js, 1); /* see sd_jschema_set_max_ws: layout costs tokens */
    if (!accepts_only_objects(t->js))
        return sd_diag_set(d, SD_EINVAL, "tools[%d] (%s): parameters must describe an object", t->idx,
                           t->name);
    return 0;
}

static int compile_tool(struct tool *t, const json_t *v, int idx, sd_diag *d)
{
    t->idx = (uint8_t)idx;
    if (!json_is_object(v))
        return sd_diag_set(d, SD_EINVAL, "tools[%d]: must be an object", idx);
    const json_t *name = json_object_get(v, "name");
    if (!json_is_string(name))
        return sd_diag_set(d, SD_EINVAL, "tools[%d]: 'name' must be a string", idx);
    size_t n = json_string_length(name);
    if (!name_ok(json_string_value(name), n))
        return sd_diag_set(d, SD_EINVAL, "tools[%d]: 'name' must match [A-Za-z0-9_-]{1,%d}", idx,
                           SD_TCALL_MAX_NAME);
    memcpy(t->name, json_string_value(name), n);
    t->name[n] = '\0';
    t->len = (uint8_t)n;
    const json_t *strict = json_object_get(v, "strict");
    if (strict && !json_is_boolean(strict))
        return sd_diag_set(d, SD_EINVAL, "tools[%d] (%s): 'strict' must be a boolean", idx, t->name);
    return compile_params(t, json_object_get(v, "parameters"), json_is_true(strict), d);
}

/* Sorts the tools by name; two equal names are adjacent then. */
static int sort_names(sd_tcall *tc, sd_diag *d)
{
    qsort(tc->tools, (size_t)tc->n, sizeof *tc->tools, tool_cmp);
    for (int i = 1; i < tc->n; i++) {
        const struct tool *a = &tc->tools[i - 1], *b = &tc->tools[i];
        if (strcmp(a->name, b->name) == 0)
            return sd_diag_set(d, SD_EINVAL, "tools[%d] (%s): the name is also tools[%d]'s",
                               a->idx > b->idx ? a->idx : b->idx, a->name, a->idx < b->idx ? a->idx : b->idx);
    }
    return 0;
}

static int compile_list(sd_tcall *tc, const json_t *root, sd_diag *d)
{
    size_t n = json_array_size(root);
    if (!json_is_array(root) || n < 1 || n > SD_TCALL_MAX_TOOLS)
        return sd_diag_set(d, SD_EINVAL, "tools: must be an array of 1 to %d tools", SD_TCALL_MAX_TOOLS);
    if (!(tc->tools = calloc(n, sizeof *tc->tools)))
        return sd_diag_set(d, SD_ENOMEM, "tools: out of memory");
    for (size_t i = 0; i < n; i++) {
        tc->n = (int)i + 1; /* what sd_tcall_free must free on failure */
        SD_TRY(compile_tool(&tc->tools[i], json_array_get(root, i), (int)i, d));
        size_t size = sd_jschema_state_size(tc->tools[i].js);
        if (size > tc->js_size)
            tc->js_size = size;
    }
    return sort_names(tc, d);
}

/* A tag's automaton (a KMP DFA; tab[len][256]): a byte that does not extend j matched ones goes
 * where it would from x, the state of the same text less its first byte (the longest proper
 * border), so that "<<tool_call>" still matches. */
static void build_kmp(uint8_t (*tab)[256], const char *tag, size_t len)
{
    const unsigned char *p = (const unsigned char *)tag;
    memset(tab, 0, len * sizeof *tab);
    tab[0][p[0]] = 1;
    for (size_t j = 1, x = 0; j < len; j++) {
        memcpy(tab[j], tab[x], sizeof *tab);
        tab[j][p[j]] = (uint8_t)(j + 1);
        x = tab[x][p[j]];
    }
}

static void build_trigger(sd_tcall *tc)
{
    build_kmp(tc->trig, SD_TCALL_LAZY_OPEN, TRIG_LEN);
    build_kmp(tc->topen, THINK_OPEN, TOPEN_LEN);
    build_kmp(tc->tclose, THINK_CLOSE, TCLOSE_LEN);
}

int sd_tcall_compile(sd_tcall **ret, const char *spec, size_t len, int parallel, sd_tcall_mode mode,
                     sd_diag *d)
{
    if (mode != SD_TCALL_FORCED && mode != SD_TCALL_HERMES && mode != SD_TCALL_LLAMA)
        return sd_diag_set(d, SD_EINVAL, "tools: unknown mode %d", (int)mode);
    json_error_t err;
    json_t *root = json_loadb(spec, len, JSON_REJECT_DUPLICATES, &err);
    if (!root)
        return sd_diag_set(d, SD_EINVAL, "tools: invalid JSON at line %d column %d: %s", err.line, err.column,
                           err.text);
    sd_tcall *tc = calloc(1, sizeof *tc);
    int rc = tc ? compile_list(tc, root, d) : sd_diag_set(d, SD_ENOMEM, "tools: out of memory");
    json_decref(root);
    if (rc < 0) {
        sd_tcall_free(tc);
        return rc;
    }
    tc->parallel = parallel != 0;
    tc->mode = mode;
    tc->max_calls = mode != SD_TCALL_FORCED && !parallel ? 1 : SD_TCALL_MAX_CALLS;
    if (mode == SD_TCALL_HERMES)
        build_trigger(tc);
    *ret = tc;
    return 0;
}

void sd_tcall_free(sd_tcall *t)
{
    if (!t)
        return;
    for (int i = 0; t->tools && i < t->n; i++)
        sd_jschema_free(t->tools[i].js);
    free(t->tools);
    free(t);
}

/* ---- the validator ------------------------------------------------------------------------- */

size_t sd_tcall_state_size(const sd_tcall *t)
{
    return sizeof(struct tc_state) + t->js_size;
}

static void *js_state(void *state)
{
    return (char *)state + sizeof(struct tc_state);
}

static void lit_begin(struct tc_state *s, int lit, int pos)
{
    s->phase = P_LIT;
    s->lit = (uint8_t)lit;
    s->pos = (uint8_t)pos;
}

void sd_tcall_init(const sd_tcall *t, void *state)
{
    memset(state, 0, sd_tcall_state_size(t));
    if (t->mode == SD_TCALL_HERMES)
        ((struct tc_state *)state)->phase = P_FREE;
    else if (t->mode == SD_TCALL_LLAMA)
        ((struct tc_state *)state)->phase = P_START;
    else
        lit_begin(state, t->parallel ? L_POPEN : L_OPEN, 0);
}

/* A literal's last byte moves on to what follows it. */
static void lit_end(const sd_tcall *t, struct tc_state *s)
{
    int lit = s->lit;
    s->lit = 0;
    s->pos = 0;
    switch (lit) {
    case L_ARGS:
    case L_PARAMS:
        s->phase = P_ARGS;
        sd_jschema_init(t->tools[s->lo].js, js_state(s));
        break;
    case L_CLOSE:
    case L_LCLOSE: /* a forced list goes on to its ']'; in lazy and Llama modes, where no bracket
                      closes the calls, the last one that may come ends the text */
        s->phase = (t->mode == SD_TCALL_FORCED ? t->parallel : s->calls < t->max_calls) ? P_AFTER : P_DONE;
        s->calls = s->phase == P_DONE ? 0 : s->calls; /* done is one state, however many calls */
        break;
    default: /* a call's opening: any name may come */
        s->phase = P_NAME;
        s->calls++;
        s->lo = 0;
        s->hi = (uint8_t)(t->n - 1);
        break;
    }
}

static int step_lit(const sd_tcall *t, struct tc_state *s, unsigned c)
{
    const char *l = lits[s->lit];
    if ((unsigned char)l[s->pos] != c)
        return -1;
    if (l[++s->pos] == '\0')
        lit_end(t, s);
    return 0;
}

/* The byte at `pos` of a name, -1 past its end: over a run of names sharing their first pos
 * bytes these keys do not decrease (the sort order). */
static int key_at(const struct tool *tl, int pos)
{
    return pos < tl->len ? (unsigned char)tl->name[pos] : -1;
}

/* The first i in [lo, hi + 1) whose key at pos is >= k (or > k when `after`). */
static int bound(const sd_tcall *t, int lo, int hi, int pos, int k, int after)
{
    int a = lo, b = hi + 1;
    while (a < b) {
        int m = a + (b - a) / 2;
        int km = key_at(&t->tools[m], pos);
        if (km < k || (after && km == k))
            a = m + 1;
        else
            b = m;
    }
    return a;
}

static int step_name(const sd_tcall *t, struct tc_state *s, unsigned c)
{
    if (c == '"') { /* only the first of the run can end here: it is the one that is a prefix */
        if (t->tools[s->lo].len != s->pos)
            return -1;
        s->hi = 0;
        lit_begin(s, t->mode == SD_TCALL_LLAMA ? L_PARAMS : L_ARGS, 0);
        return 0;
    }
    int lo = bound(t, s->lo, s->hi, s->pos, (int)c, 0), hi = bound(t, s->lo, s->hi, s->pos, (int)c, 1) - 1;
    if (lo > hi)
        return -1;
    s->lo = (uint8_t)lo;
    s->hi = (uint8_t)hi;
    s->pos++;
    return 0;
}

static int step_args(const sd_tcall *t, struct tc_state *s, unsigned c)
{
    const sd_jschema *js = t->tools[s->lo].js;
    if (s->pos == 0 && c != '{')
        return -1; /* no whitespace before the arguments */
    s->pos = 1;
    if (sd_jschema_step(js, js_state(s), c) < 0)
        return -1;
    if (!sd_jschema_complete(js, js_state(s)))
        return 0;
    memset(js_state(s), 0, t->js_size); /* the object closed: the call's '}' comes next */
    s->lo = 0;
    lit_begin(s, t->mode == SD_TCALL_HERMES ? L_LCLOSE : L_CLOSE, 0);
    return 0;
}

/* Lazy mode's free text: any byte, but one that completes the trigger opens a call, if one more
 * may come (else it is rejected, so that no unconstrained call can start). */
static int step_free(const sd_tcall *t, struct tc_state *s, unsigned c)
{
    if (c > 0xFF)
        return -1;
    if (t->mode == SD_TCALL_LLAMA) /* the reply did not open with a call: it is text to its end */
        return 0;
    if (s->hi) { /* inside a think block: only its end matters */
        int e = t->tclose[s->lo][c];
        s->hi = e < (int)TCLOSE_LEN;
        s->lo = s->hi ? (uint8_t)e : 0;
        return 0;
    }
    int m = t->trig[s->trig][c], o = t->topen[s->lo][c];
    if (o == (int)TOPEN_LEN) { /* "<think>": the trigger is off until "</think>" */
        s->hi = 1;
        s->lo = s->trig = 0;
        return 0;
    }
    if (m < (int)TRIG_LEN) {
        s->trig = (uint8_t)m;
        s->lo = (uint8_t)o;
        return 0;
    }
    if (s->calls >= t->max_calls)
        return -1;
    s->trig = s->lo = 0;
    lit_begin(s, L_LOPEN, 0);
    return 0;
}

/* Llama's reply so far is whitespace: '{' opens a call, anything else makes it free text. */
static int step_start(struct tc_state *s, unsigned c)
{
    if (c > 0xFF)
        return -1;
    if (json_ws(c))
        return 0;
    if (c == '{')
        lit_begin(s, L_OPEN, 1);
    else
        s->phase = P_FREE;
    return 0;
}

/* Hermes, after a call (another may come): up to HERMES_WS bytes of whitespace (a model that has
 * nothing more to call must not pad to max_tokens), then the trigger of the next call (lo: the
 * whitespace bytes so far, trig: the trigger's). */
#define HERMES_WS 4
static int step_after_hermes(struct tc_state *s, unsigned c)
{
    static const char trig[] = SD_TCALL_LAZY_OPEN;
    if (s->trig == 0 && json_ws(c))
        return s->lo < HERMES_WS ? (s->lo++, 0) : -1;
    if (c != (unsigned char)trig[s->trig])
        return -1;
    s->lo = 0;
    if (++s->trig < TRIG_LEN)
        return 0;
    s->trig = 0;
    lit_begin(s, L_LOPEN, 0);
    return 0;
}

static int step_after(const sd_tcall *t, struct tc_state *s, unsigned c)
{
    if (t->mode == SD_TCALL_HERMES)
        return step_after_hermes(s, c);
    if (t->mode == SD_TCALL_LLAMA) { /* "; " and the next call, or the end */
        if (c != ';')
            return -1;
        lit_begin(s, L_SEMI, 1);
        return 0;
    }
    if (c == ']') {
        s->phase = P_DONE;
        s->calls = 0; /* done is one state, however many calls */
        return 0;
    }
    if (c != ',' || s->calls >= SD_TCALL_MAX_CALLS)
        return -1;
    lit_begin(s, L_NEXT, 1);
    return 0;
}

int sd_tcall_step(const sd_tcall *t, void *state, unsigned byte)
{
    struct tc_state *s = state;
    switch (s->phase) {
    case P_LIT:
        return step_lit(t, s, byte);
    case P_NAME:
        return step_name(t, s, byte);
    case P_ARGS:
        return step_args(t, s, byte);
    case P_AFTER:
        return step_after(t, s, byte);
    case P_FREE:
        return step_free(t, s, byte);
    case P_START:
        return step_start(s, byte);
    default:
        return -1;
    }
}

int sd_tcall_feed(const sd_tcall *t, void *state, const char *bytes, size_t n)
{
    uint64_t tmp[SD_TCALL_STATE_MAX / 8 + 1];
    size_t size = sd_tcall_state_size(t);
    memcpy(tmp, state, size);
    for (size_t i = 0; i < n; i++)
        if (sd_tcall_step(t, tmp, (unsigned char)bytes[i]) < 0)
            return -1;
    memcpy(state, tmp, size);
    return 0;
}

int sd_tcall_complete(const sd_tcall *t, const void *state)
{
    return ((const struct tc_state *)state)->phase == P_DONE;
}

int sd_tcall_can_end(const sd_tcall *t, const void *state)
{
    int phase = ((const struct tc_state *)state)->phase;
    if (t->mode == SD_TCALL_HERMES) /* in free text, between calls (not inside a trigger), after the last */
        return phase == P_FREE || phase == P_DONE ||
               (phase == P_AFTER && ((const struct tc_state *)state)->trig == 0);
    if (t->mode == SD_TCALL_LLAMA) /* before, beside or after the calls: never inside one */
        return phase == P_START || phase == P_FREE || phase == P_AFTER || phase == P_DONE;
    return sd_tcall_complete(t, state);
}

int sd_tcall_in_plain_string(const sd_tcall *t, const void *state)
{
    const struct tc_state *s = state;
    if (s->phase != P_ARGS)
        return 0;
    return sd_jschema_in_plain_string(t->tools[s->lo].js, (const char *)state + sizeof *s);
}
