/* jschema_step: the validator of a compiled JSON Schema, a byte-level state machine over a small
 * fixed-size buffer (layout in jschema_impl.h) that the vocabulary-trie walk copies at every node:
 * no allocation, no jansson, every unused field kept zero so equal positions compare equal.
 * Also the link step of compiling, which turns the node graph into the tables the machine
 * dispatches on (first-byte alternatives) and sizes its state. */
#include "jschema_impl.h"
#include "jsonc_utf8.h"

#include <string.h>

_Static_assert(sizeof(struct sd__js_state) == 16, "the state header must have no padding");
_Static_assert(sizeof(struct sd__js_state) + 3 * SD_JSCHEMA_MAX_DEPTH <= SD_JSCHEMA_STATE_MAX,
               "the deepest state must fit SD_JSCHEMA_STATE_MAX");

typedef struct sd__js_state jst;

enum {
    P_VALUE,     /* a value of node cur (leading whitespace allowed) */
    P_OBJ_OPEN,  /* after '{': a key or '}' */
    P_OBJ_KEY,   /* after ',' in an object: a key */
    P_KEY,       /* in a key: lit = the first property still matching, pos = bytes matched */
    P_COLON,     /* after a key: ':' (cur = the node of its value) */
    P_ARR_OPEN,  /* after '[': an element (of node cur) or ']' */
    P_AFTER,     /* after a value in a container: ',' or its closing bracket */
    P_STR,       /* in a string value of node cur */
    P_ESC,       /* after '\' */
    P_HEX,       /* in \uXXXX: hex = digits read, surr = SURR_* */
    P_LOW_BS,    /* after a high-surrogate escape: the '\' of its low half */
    P_LOW_U,     /* then the 'u' */
    P_LIT,       /* in an enum/const value, true, false or null: lit, pos as in P_KEY */
    P_NUM_MINUS, /* numbers, -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? : after '-' */
    P_NUM_ZERO,  /* after a leading 0 */
    P_NUM_INT,   /* in the integer digits after [1-9] */
    P_NUM_DOT,   /* after '.' */
    P_NUM_FRAC,  /* in the fraction digits */
    P_NUM_E,     /* after e/E */
    P_NUM_ESIGN, /* after the exponent's sign */
    P_NUM_EXP,   /* in the exponent digits */
    P_DONE,      /* the top-level value has ended: nothing more */
};

int sd__jschema_class(unsigned c)
{
    static const int8_t cls[256] = {
        ['{'] = SD__JS_C_OBJ + 1,  ['['] = SD__JS_C_ARR + 1,  ['"'] = SD__JS_C_STR + 1,
        ['-'] = SD__JS_C_NUM + 1,  ['0'] = SD__JS_C_NUM + 1,  ['1'] = SD__JS_C_NUM + 1,
        ['2'] = SD__JS_C_NUM + 1,  ['3'] = SD__JS_C_NUM + 1,  ['4'] = SD__JS_C_NUM + 1,
        ['5'] = SD__JS_C_NUM + 1,  ['6'] = SD__JS_C_NUM + 1,  ['7'] = SD__JS_C_NUM + 1,
        ['8'] = SD__JS_C_NUM + 1,  ['9'] = SD__JS_C_NUM + 1,  ['t'] = SD__JS_C_BOOL + 1,
        ['f'] = SD__JS_C_BOOL + 1, ['n'] = SD__JS_C_NULL + 1,
    };
    return cls[c & 0xFF] - 1;
}

/* ---- frames and transitions ------------------------------------------------------------- */

static uint8_t *frame_idx(const sd_jschema *s, jst *h)
{
    return (uint8_t *)(h->node + s->depth);
}

/* The innermost container's node (without SD__JS_ARR_BIT) and whether it is an array. */
static const struct sd__js_node *top_node(const sd_jschema *s, const jst *h, int *is_arr)
{
    uint16_t f = h->node[h->depth - 1];
    *is_arr = (f & SD__JS_ARR_BIT) != 0;
    return &s->nodes[f & ~SD__JS_ARR_BIT];
}

/* Enters phase p expecting node cur; clears what belongs to the phase left (canonical bytes). */
static void enter(jst *h, uint8_t p, uint16_t cur)
{
    h->phase = p;
    h->cur = cur;
    h->utf8 = h->hex = h->surr = 0;
    h->lit = h->pos = h->len = h->zero = 0; /* zero: a bounded integer's high bits */
}

/* A value has ended: its container wants ',' or its bracket; at the top, the text is done. */
static void value_done(jst *h)
{
    enter(h, h->depth ? P_AFTER : P_DONE, 0);
}

/* A bounded integer's magnitude, kept in lit, pos, len and zero (jschema_impl.h). */
static uint64_t int_mag(const jst *h)
{
    return (uint64_t)h->lit | (uint64_t)h->pos << 16 | (uint64_t)h->len << 32 | (uint64_t)h->zero << 48;
}

static void set_int_mag(jst *h, uint64_t m)
{
    h->lit = (uint16_t)m, h->pos = (uint16_t)(m >> 16), h->len = (uint16_t)(m >> 32),
    h->zero = (uint16_t)(m >> 48);
}

/* One more digit d of a bounded integer (digits: how many it has now, d included): 0, or -1 when
 * no integer that begins so ends within the bounds. */
static int int_digit(const struct sd__js_node *n, jst *h, unsigned d, int digits)
{
    uint64_t m = int_mag(h);
    if (m > (UINT64_MAX - 9) / 10)
        return -1;
    m = m * 10 + d;
    if (!sd__jschema_int_open(n, h->hex, m, digits))
        return -1;
    set_int_mag(h, m);
    return 0;
}

/* Whether a value expected at node e fits below the open containers: the fewest it nests
 * (min_depth) within the limit. */
static int fits(const sd_jschema *s, const jst *h, uint16_t e)
{
    return h->depth + (unsigned)s->nodes[e].min_depth <= s->depth;
}

/* Opens a container, if what it needs inside fits too (a required key or element that nests
 * further): a container that could never close would leave the text at a dead end. */
static int push(const sd_jschema *s, jst *h, uint16_t id, int is_arr)
{
    const struct sd__js_node *n = &s->nodes[id];
    if (h->depth >= s->depth || h->depth + (unsigned)(is_arr ? n->arr_min : n->obj_min) > s->depth)
        return -1;
    h->node[h->depth] = (uint16_t)(id | (is_arr ? SD__JS_ARR_BIT : 0));
    frame_idx(s, h)[h->depth] = 0;
    h->depth++;
    enter(h, is_arr ? P_ARR_OPEN : P_OBJ_OPEN, is_arr ? s->nodes[id].items : 0);
    return 0;
}

static int pop(const sd_jschema *s, jst *h)
{
    h->depth--;
    h->node[h->depth] = 0;
    frame_idx(s, h)[h->depth] = 0;
    value_done(h);
    return 0;
}

/* ---- literals and keys: prefix matching against sorted or ordered candidates ----------- */

static int lit_extends(const sd_jschema *s, unsigned k, unsigned pos)
{
    const struct sd__js_lit *a = &s->lits[k], *b = a + 1;
    return k + 1u < a->end && b->len > pos && memcmp(s->bytes + b->off, s->bytes + a->off, pos) == 0;
}

/* One byte of a literal: 0 consumed, -1 rejected, 1 the literal (a number that another one
 * extends) ended before c, which its container must take. The literals sharing the matched
 * prefix are a sorted run starting at lit, so the next match is the first of the run with c. */
static int lit_step(const sd_jschema *s, jst *h, unsigned c)
{
    unsigned k = h->lit, pos = h->pos;
    const struct sd__js_lit *l = s->lits;
    const unsigned char *b = (const unsigned char *)s->bytes;
    if (pos >= l[k].len || b[l[k].off + pos] != c) {
        unsigned j = k + 1;
        for (; j < l[k].end; j++) {
            if (l[j].len <= pos || memcmp(b + l[j].off, b + l[k].off, pos) || b[l[j].off + pos] > c) {
                j = l[k].end; /* past the run, or past c within it */
                break;
            }
            if (b[l[j].off + pos] == c)
                break;
        }
        if (j >= l[k].end) {
            if (l[k].len != pos)
                return -1;
            value_done(h);
            return 1;
        }
        k = j;
        h->lit = (uint16_t)k;
    }
    h->pos = (uint16_t)++pos;
    if (pos == l[k].len && !lit_extends(s, k, pos))
        value_done(h);
    return 0;
}

/* Starts a literal of the group beginning at lo with its first byte. */
static int lit_begin(const sd_jschema *s, jst *h, uint16_t lo, unsigned c)
{
    enter(h, P_LIT, 0);
    h->lit = lo;
    return lit_step(s, h, c) == 0 ? 0 : -1;
}

/* One byte of a key: the candidates are the properties from lit to props[lit].last (keys come
 * in schema order, optional ones may be skipped, required ones may not); names end with their
 * closing quote, so they are prefix-free and a full match ends the key. */
static int key_step(const sd_jschema *s, jst *h, unsigned c)
{
    int is_arr;
    const struct sd__js_node *n = top_node(s, h, &is_arr);
    const struct sd__js_prop *p = s->props + n->prop_lo;
    const unsigned char *b = (const unsigned char *)s->bytes;
    unsigned k = h->lit, pos = h->pos;
    if (pos >= p[k].name_len || b[p[k].name + pos] != c) {
        unsigned j = k + 1, last = p[k].last;
        for (; j <= last; j++)
            if (p[j].name_len > pos && b[p[j].name + pos] == c &&
                memcmp(b + p[j].name, b + p[k].name, pos) == 0 && fits(s, h, p[j].child))
                break;
        if (j > last)
            return -1;
        k = j;
        h->lit = (uint16_t)k;
    }
    if (++h->pos < p[k].name_len)
        return 0;
    frame_idx(s, h)[h->depth - 1] = (uint8_t)(k + 1);
    enter(h, P_COLON, p[k].child);
    return 0;
}

/* ---- strings ----------------------------------------------------------------------------- */

static int str_step(const sd_jschema *s, jst *h, unsigned c)
{
    if (h->utf8) {
        if (c < utf8_next[h->utf8].lo || c > utf8_next[h->utf8].hi)
            return -1;
        h->utf8 = utf8_next[h->utf8].next;
        return 0;
    }
    const struct sd__js_node *n = &s->nodes[h->cur];
    if (c == '"') {
        if (n->has_len && h->len < n->min_len)
            return -1;
        value_done(h);
        return 0;
    }
    if (c < 0x20)
        return -1;
    if (n->has_len) { /* a character begins here (an escape's low half comes via P_LOW_BS) */
        if (n->max_len != SD__JS_NONE && h->len >= n->max_len)
            return -1;
        h->len += h->len < n->len_cap;
    }
    if (c == '\\') {
        h->phase = P_ESC;
        return 0;
    }
    if (c < 0x80)
        return 0;
    h->utf8 = utf8_lead(c);
    return h->utf8 ? 0 : -1;
}

static int esc_step(jst *h, unsigned c)
{
    if (c == 'u') {
        h->phase = P_HEX;
        return 0;
    }
    if (!json_simple_escape(c))
        return -1;
    h->phase = P_STR;
    return 0;
}

/* One hex digit of \uXXXX (jsonc_utf8.h's rules). */
static int hex_step(jst *h, unsigned c)
{
    if (json_hex_digit(c, h->hex, &h->surr) < 0)
        return -1;
    if (++h->hex < 4)
        return 0;
    h->phase = (h->surr & SURR_HIGH) ? P_LOW_BS : P_STR;
    h->hex = h->surr = 0;
    return 0;
}

/* ---- numbers ----------------------------------------------------------------------------- */

/* A byte in a number: 0 consumed, -1 rejected, 1 the number ended before c (the value is done
 * and c goes to its container: "1," "1]" "1 "). An integer ends at '.' or 'e', which the
 * container then rejects. */
static int num_step(const sd_jschema *s, jst *h, unsigned c)
{
    const struct sd__js_node *n = &s->nodes[h->cur];
    int digit = c >= '0' && c <= '9';
    int frac = (n->types & SD__JS_T_NUM) != 0;
    int exp = frac && (c == 'e' || c == 'E');
    uint8_t p = h->phase, next;
    switch (p) {
    case P_NUM_MINUS:
        if (!digit || (n->has_int && int_digit(n, h, c - '0', 1) < 0))
            return -1;
        next = c == '0' ? P_NUM_ZERO : P_NUM_INT;
        break;
    case P_NUM_ZERO:
    case P_NUM_INT:
        if ((digit && p == P_NUM_ZERO) || (!digit && !(frac && c == '.') && !exp)) {
            if (n->has_int && !sd__jschema_int_in(n, h->hex, int_mag(h)))
                return -1; /* a prefix that goes on into range ends outside it ("1" of [10, 20]) */
            value_done(h); /* "01" ends at "0"; the container then rejects the '1' */
            return 1;
        }
        if (digit && n->has_int && int_digit(n, h, c - '0', 2) < 0)
            return -1;
        next = digit ? P_NUM_INT : c == '.' ? P_NUM_DOT : P_NUM_E;
        break;
    case P_NUM_DOT:
    case P_NUM_ESIGN:
        if (!digit)
            return -1;
        next = p == P_NUM_DOT ? P_NUM_FRAC : P_NUM_EXP;
        break;
    case P_NUM_E:
        if (!digit && c != '+' && c != '-')
            return -1;
        next = digit ? P_NUM_EXP : P_NUM_ESIGN;
        break;
    default: /* P_NUM_FRAC, P_NUM_EXP */
        if (digit)
            return 0;
        if (p == P_NUM_FRAC && exp) {
            next = P_NUM_E;
            break;
        }
        value_done(h);
        return 1;
    }
    h->phase = next;
    return 0;
}

/* ---- structure ---------------------------------------------------------------------------- */

/* The first byte of a value expected at node e (an anyOf picks its alternative by the byte). */
static int value_start(const sd_jschema *s, jst *h, uint16_t e, unsigned c)
{
    int cls = sd__jschema_class(c);
    uint16_t id = cls < 0 ? SD__JS_NONE : s->nodes[e].alt[cls];
    if (id == SD__JS_NONE)
        return -1;
    const struct sd__js_node *n = &s->nodes[id];
    if (h->depth) {
        int is_arr;
        const struct sd__js_node *t = top_node(s, h, &is_arr);
        uint8_t *count = &frame_idx(s, h)[h->depth - 1];
        if (is_arr)
            *count += *count < t->item_cap;
    }
    if (n->lit_n)
        return lit_begin(s, h, n->lit_lo, c);
    switch (cls) {
    case SD__JS_C_OBJ:
    case SD__JS_C_ARR:
        return push(s, h, id, cls == SD__JS_C_ARR);
    case SD__JS_C_STR:
        enter(h, P_STR, id);
        return 0;
    case SD__JS_C_NUM:
        enter(h, c == '-' ? P_NUM_MINUS : c == '0' ? P_NUM_ZERO : P_NUM_INT, id);
        if (!n->has_int)
            return 0;
        h->hex = c == '-';
        return c == '-' ? (sd__jschema_int_open(n, 1, 0, 0) ? 0 : -1) : int_digit(n, h, c - '0', 1);
    case SD__JS_C_BOOL:
        return lit_begin(s, h, s->bool_lit, c);
    default:
        return lit_begin(s, h, s->null_lit, c);
    }
}

/* The first key from the object's property idx on that may come and whose value fits (an
 * optional key nesting too deep is left out: its value could not be written), -1 if none. */
static int first_key(const sd_jschema *s, const jst *h, unsigned idx)
{
    int is_arr;
    const struct sd__js_node *n = top_node(s, h, &is_arr);
    const struct sd__js_prop *p = s->props + n->prop_lo;
    if (idx >= n->n_props)
        return -1;
    for (unsigned j = idx; j <= p[idx].last; j++)
        if (fits(s, h, p[j].child))
            return (int)j;
    return -1;
}

/* A key's opening quote: lit is the first candidate (key_step moves on from it). */
static int key_begin(const sd_jschema *s, jst *h, unsigned idx)
{
    int k = first_key(s, h, idx);
    if (k < 0)
        return -1;
    enter(h, P_KEY, 0);
    h->lit = (uint16_t)k;
    return 0;
}

/* After a value in the innermost container: ',' if another member may come, else its bracket
 * if nothing more is required. */
static int after_step(const sd_jschema *s, jst *h, unsigned c)
{
    int is_arr;
    const struct sd__js_node *n = top_node(s, h, &is_arr);
    unsigned idx = frame_idx(s, h)[h->depth - 1];
    if (is_arr) {
        if (c == ',' && (n->max_items == SD__JS_NONE || idx < n->max_items)) {
            enter(h, P_VALUE, n->items);
            return 0;
        }
        return c == ']' && idx >= n->min_items ? pop(s, h) : -1;
    }
    if (c == ',' && first_key(s, h, idx) >= 0) {
        enter(h, P_OBJ_KEY, 0);
        return 0;
    }
    return c == '}' && idx >= n->req_end ? pop(s, h) : -1;
}

/* Outside strings, numbers and literals: whitespace (in bounded runs), punctuation, values. */
static int struct_step(const sd_jschema *s, jst *h, unsigned c)
{
    if (h->phase == P_DONE)
        return -1;
    if (json_ws(c)) {
        if (h->ws >= s->max_ws)
            return -1;
        h->ws++;
        return 0;
    }
    h->ws = 0;
    int is_arr;
    switch (h->phase) {
    case P_VALUE:
        return value_start(s, h, h->cur, c);
    case P_OBJ_OPEN:
        if (c == '}')
            return top_node(s, h, &is_arr)->req_end == 0 ? pop(s, h) : -1;
        return c == '"' ? key_begin(s, h, 0) : -1;
    case P_OBJ_KEY:
        return c == '"' ? key_begin(s, h, frame_idx(s, h)[h->depth - 1]) : -1;
    case P_COLON:
        if (c != ':')
            return -1;
        h->phase = P_VALUE;
        return 0;
    case P_ARR_OPEN: {
        const struct sd__js_node *n = top_node(s, h, &is_arr);
        if (c == ']')
            return n->min_items == 0 ? pop(s, h) : -1;
        return n->max_items != 0 ? value_start(s, h, h->cur, c) : -1;
    }
    case P_AFTER:
        return after_step(s, h, c);
    default:
        return -1;
    }
}

static int step(const sd_jschema *s, jst *h, unsigned c)
{
    int r;
    switch (h->phase) {
    case P_STR:
        return str_step(s, h, c);
    case P_ESC:
        return esc_step(h, c);
    case P_HEX:
        return hex_step(h, c);
    case P_LOW_BS:
        if (c != '\\')
            return -1;
        h->phase = P_LOW_U;
        return 0;
    case P_LOW_U:
        if (c != 'u')
            return -1;
        h->phase = P_HEX;
        h->surr = SURR_LOW;
        return 0;
    case P_KEY:
        return key_step(s, h, c);
    case P_LIT:
        r = lit_step(s, h, c);
        if (r <= 0)
            return r;
        break;
    default:
        if (h->phase >= P_NUM_MINUS && h->phase <= P_NUM_EXP) {
            r = num_step(s, h, c);
            if (r <= 0)
                return r;
        }
        break;
    }
    return struct_step(s, h, c);
}

/* ---- linking: $ref chains, anyOf first-byte tables, nesting depth ------------------------ */

/* What link works on: the compiled nodes and what compile knew of them. */
struct lk {
    sd_jschema *s;
    struct sd__js_cnode *cn; /* [s->n_nodes] */
    uint16_t *alts;          /* anyOf alternatives */
    sd_diag *d;
};

#define DEPTH_INF (SD_JSCHEMA_MAX_DEPTH + 1)
#define DEPTH_UNSET 0xFF

/* The node a chain of $refs ends at (link_refs has pointed each $ref at its chain's end). */
static uint16_t deref(const struct sd__js_cnode *cn, uint16_t id)
{
    while (id != SD__JS_NONE && cn[id].kind == SD__JS_K_REF)
        id = cn[id].ref;
    return id;
}

/* Rejects $ref loops that never reach a schema, then points every reference past the $refs.
 * Each chain is walked once (following it from every node on it would cost its length squared:
 * a second for 30000 chained $defs): its $refs are marked 1 on the way and 2 once pointed at its
 * end; a walk that meets a 1 has looped. */
static int link_refs(struct lk *c)
{
    sd_jschema *s = c->s;
    struct sd__js_cnode *cn = c->cn;
    for (uint32_t i = 0; i < s->n_nodes; i++) {
        uint16_t id = (uint16_t)i, end;
        for (; cn[id].kind == SD__JS_K_REF && cn[id].mark == 0; id = cn[id].ref)
            cn[id].mark = 1;
        if (cn[id].kind == SD__JS_K_REF && cn[id].mark == 1)
            return sd__jschema_fail(c->d, cn[i].path, "'$ref' loops without reaching a schema");
        end = cn[id].kind == SD__JS_K_REF ? cn[id].ref : id; /* a 2 points at its end already */
        for (id = (uint16_t)i; cn[id].kind == SD__JS_K_REF && cn[id].mark == 1;) {
            uint16_t next = cn[id].ref;
            cn[id].mark = 2;
            cn[id].ref = end;
            id = next;
        }
    }
    for (uint32_t i = 0; i < s->n_nodes; i++)
        cn[i].mark = 0; /* any_alts' scratch next */
    for (uint32_t i = 0; i < s->n_nodes; i++) {
        s->nodes[i].items = deref(c->cn, s->nodes[i].items);
        for (uint32_t k = 0; c->cn[i].kind == SD__JS_K_ANY && k < c->cn[i].n_alt; k++)
            c->alts[c->cn[i].alt_lo + k] = deref(c->cn, c->alts[c->cn[i].alt_lo + k]);
    }
    for (uint32_t i = 0; i < s->n_props; i++)
        s->props[i].child = deref(c->cn, s->props[i].child);
    s->root = deref(c->cn, s->root);
    return 0;
}

/* A value node accepts the first bytes of its literals, else those of its types. */
static void value_alts(sd_jschema *s, uint16_t id)
{
    struct sd__js_node *n = &s->nodes[id];
    static const uint8_t type_class[7] = {SD__JS_C_OBJ, SD__JS_C_ARR,  SD__JS_C_STR, SD__JS_C_NUM,
                                          SD__JS_C_NUM, SD__JS_C_BOOL, SD__JS_C_NULL};
    for (uint32_t k = 0; k < n->lit_n; k++)
        n->alt[sd__jschema_class((unsigned char)s->bytes[s->lits[n->lit_lo + k].off])] = id;
    for (int b = 0; b < 7 && !n->lit_n; b++)
        if (n->types & (1 << b))
            n->alt[type_class[b]] = id;
}

/* An anyOf's table: each class from the one alternative that accepts it. */
static int any_alts(struct lk *c, uint16_t id)
{
    static const char *const names[SD__JS_N_CLASS] = {"'{'",        "'['", "'\"'", "a digit or '-'",
                                                      "'t' or 'f'", "'n'"};
    struct sd__js_cnode *cn = &c->cn[id];
    if (cn->mark == 2)
        return 0;
    if (cn->mark == 1)
        return sd__jschema_fail(c->d, cn->path, "'anyOf' contains itself without a value in between");
    cn->mark = 1;
    for (uint32_t i = 0; i < cn->n_alt; i++) {
        uint16_t a = c->alts[cn->alt_lo + i];
        if (c->cn[a].kind == SD__JS_K_ANY)
            SD_TRY(any_alts(c, a));
        for (int k = 0; k < SD__JS_N_CLASS; k++) {
            uint16_t v = c->s->nodes[a].alt[k], *mine = &c->s->nodes[id].alt[k];
            if (v == SD__JS_NONE)
                continue;
            if (*mine != SD__JS_NONE && (*mine != v || cn->one))
                return sd__jschema_fail(
                    c->d, cn->path,
                    "alternatives overlap: two accept a value starting with %s (they must "
                    "differ in type: object, array, string, number, boolean, null)",
                    names[k]);
            *mine = v;
        }
    }
    cn->mark = 2;
    return 0;
}

/* The deepest nesting of each node's values (cn[].omax, amax, emax), level by level: a value
 * settles once all it may contain has, at the latest in the round of its depth; values on a
 * cycle (recursion) never do, nor do those deeper than the limit: both count as DEPTH_INF.
 * Iterative, so $defs chained thousands deep need no deep stack. */
static unsigned link_max_depth(struct lk *c)
{
    sd_jschema *s = c->s;
    struct sd__js_cnode *cn = c->cn;
    for (uint32_t i = 0; i < s->n_nodes; i++)
        cn[i].omax = cn[i].amax = cn[i].emax = DEPTH_UNSET;
    for (unsigned round = 0; round <= SD_JSCHEMA_MAX_DEPTH; round++) {
        for (uint32_t i = 0; i < s->n_nodes; i++) {
            const struct sd__js_node *n = &s->nodes[i];
            unsigned d = 0, ok = n->alt[SD__JS_C_OBJ] == i && cn[i].omax == DEPTH_UNSET;
            for (uint32_t k = 0; ok && k < n->n_props; k++) {
                unsigned x = cn[s->props[n->prop_lo + k].child].emax;
                ok = x != DEPTH_UNSET;
                d = x > d ? x : d;
            }
            if (ok)
                cn[i].omax = (uint8_t)(d + 1 < DEPTH_INF ? d + 1 : DEPTH_INF);
            if (n->alt[SD__JS_C_ARR] == i && cn[i].amax == DEPTH_UNSET && cn[n->items].emax != DEPTH_UNSET)
                cn[i].amax = (uint8_t)(cn[n->items].emax + 1 < DEPTH_INF ? cn[n->items].emax + 1 : DEPTH_INF);
        }
        for (uint32_t i = 0; i < s->n_nodes; i++) {
            const struct sd__js_node *n = &s->nodes[i];
            uint16_t o = n->alt[SD__JS_C_OBJ], a = n->alt[SD__JS_C_ARR];
            unsigned x = o == SD__JS_NONE ? 0 : cn[o].omax, y = a == SD__JS_NONE ? 0 : cn[a].amax;
            if (cn[i].emax == DEPTH_UNSET && x != DEPTH_UNSET && y != DEPTH_UNSET)
                cn[i].emax = (uint8_t)(x > y ? x : y); /* scalars nest nothing */
        }
    }
    unsigned root = cn[s->root].emax;
    return root == DEPTH_UNSET ? DEPTH_INF : root;
}

/* obj_min, arr_min and min_depth (jschema_impl.h), level by level: an object needs lv
 * containers once each required key's value needs fewer, an array once its elements do (or none
 * are required). What needs fewer than lv is settled before level lv, so one pass per level
 * suffices, recursion included; what no level up to the limit settles stays SD__JS_MIN_INF. */
static void link_min_depth(sd_jschema *s)
{
    for (uint32_t i = 0; i < s->n_nodes; i++) {
        struct sd__js_node *n = &s->nodes[i];
        n->obj_min = n->arr_min = n->min_depth = SD__JS_MIN_INF;
        for (int k = SD__JS_C_STR; k < SD__JS_N_CLASS; k++)
            n->min_depth = n->alt[k] != SD__JS_NONE ? 0 : n->min_depth; /* a scalar needs none */
    }
    for (unsigned lv = 1; lv <= SD_JSCHEMA_MAX_DEPTH; lv++) {
        for (uint32_t i = 0; i < s->n_nodes; i++) {
            struct sd__js_node *n = &s->nodes[i];
            int ok = n->alt[SD__JS_C_OBJ] == i && n->obj_min == SD__JS_MIN_INF;
            for (uint32_t k = 0; ok && k < n->n_props; k++) {
                const struct sd__js_prop *p = &s->props[n->prop_lo + k];
                ok = !p->req || s->nodes[p->child].min_depth < lv;
            }
            n->obj_min = ok ? (uint8_t)lv : n->obj_min;
            if (n->alt[SD__JS_C_ARR] == i && n->arr_min == SD__JS_MIN_INF &&
                (n->min_items == 0 || s->nodes[n->items].min_depth < lv))
                n->arr_min = (uint8_t)lv;
        }
        for (uint32_t i = 0; i < s->n_nodes; i++) {
            struct sd__js_node *n = &s->nodes[i];
            uint16_t o = n->alt[SD__JS_C_OBJ], a = n->alt[SD__JS_C_ARR];
            if (o != SD__JS_NONE && s->nodes[o].obj_min < n->min_depth)
                n->min_depth = s->nodes[o].obj_min;
            if (a != SD__JS_NONE && s->nodes[a].arr_min < n->min_depth)
                n->min_depth = s->nodes[a].arr_min;
        }
    }
}

int sd__jschema_link(sd_jschema *s, struct sd__js_cnode *cn, uint16_t *alts, sd_diag *d)
{
    struct lk c = {s, cn, alts, d};
    SD_TRY(link_refs(&c));
    for (uint32_t i = 0; i < s->n_nodes; i++)
        if (cn[i].kind == SD__JS_K_VALUE)
            value_alts(s, (uint16_t)i);
    for (uint32_t i = 0; i < s->n_nodes; i++)
        if (cn[i].kind == SD__JS_K_ANY)
            SD_TRY(any_alts(&c, (uint16_t)i));
    link_min_depth(s);
    if (s->nodes[s->root].min_depth == SD__JS_MIN_INF) /* e.g. a required key whose value is the object */
        return sd__jschema_fail(d, cn[s->root].path,
                                "no document nests fewer than %d containers (required properties or items "
                                "recurse without end)",
                                SD_JSCHEMA_MAX_DEPTH + 1);
    unsigned depth = link_max_depth(&c);
    s->depth = (uint8_t)(depth < SD_JSCHEMA_MAX_DEPTH ? depth : SD_JSCHEMA_MAX_DEPTH);
    s->max_ws = SD_JSCHEMA_MAX_WS;
    s->state_size = (uint32_t)((sizeof(struct sd__js_state) + 3u * s->depth + 7) & ~(size_t)7);
    return 0;
}

/* ---- the public face ---------------------------------------------------------------------- */

size_t sd_jschema_state_size(const sd_jschema *s)
{
    return s->state_size;
}

void sd_jschema_init(const sd_jschema *s, void *state)
{
    memset(state, 0, s->state_size);
    jst *h = state;
    h->phase = P_VALUE;
    h->cur = s->root;
}

int sd_jschema_step(const sd_jschema *s, void *state, unsigned byte)
{
    return step(s, state, byte & 0xFF);
}

int sd_jschema_feed(const sd_jschema *s, void *state, const char *bytes, size_t n)
{
    union {
        jst h;
        uint64_t align[SD_JSCHEMA_STATE_MAX / 8];
    } tmp;
    memcpy(&tmp, state, s->state_size);
    for (size_t i = 0; i < n; i++)
        if (step(s, &tmp.h, (unsigned char)bytes[i]) < 0)
            return -1;
    memcpy(state, &tmp, s->state_size);
    return 0;
}

int sd_jschema_complete(const sd_jschema *s, const void *state)
{
    const jst *h = state;
    return h->phase == P_DONE;
}

int sd_jschema_can_end(const sd_jschema *s, const void *state)
{
    const jst *h = state;
    if (h->phase == P_DONE)
        return 1;
    if (h->depth)
        return 0;
    switch (h->phase) {
    case P_NUM_ZERO:
    case P_NUM_INT:
        return !s->nodes[h->cur].has_int || sd__jschema_int_in(&s->nodes[h->cur], h->hex, int_mag(h));
    case P_NUM_FRAC:
    case P_NUM_EXP:
        return 1;
    case P_LIT:
        return h->pos == s->lits[h->lit].len;
    default:
        return 0;
    }
}

int sd_jschema_in_plain_string(const sd_jschema *s, const void *state)
{
    const jst *h = state;
    return h->phase == P_STR && h->utf8 == U_NONE && !s->nodes[h->cur].has_len;
}

int sd_jschema_in_string(const sd_jschema *s, const void *state)
{
    const jst *h = state;
    switch (h->phase) {
    case P_STR:
    case P_ESC:
    case P_HEX:
    case P_LOW_BS:
    case P_LOW_U:
    case P_KEY:
        return 1;
    case P_LIT: /* a string literal is left at its closing quote */
        return s->bytes[s->lits[h->lit].off] == '"';
    default:
        return 0;
    }
}
