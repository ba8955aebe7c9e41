/* jschema_step: the validator of a compiled JSON Schema, a byte-level state machine over a small
 * fixed-size buffer (layout in jschema_impl.h) that the vocabulary-trie walk copies at every node:
 * no allocation, no jansson, every unused field kept zero so equal positions compare equal. The
 * tables it dispatches on come from compiling (jschema.c) and linking (jschema_link.c). */
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

/* A bounded number's digits as one integer, kept in lit, pos, len and zero (jschema_impl.h). */
static uint64_t num_digits(const jst *h)
{
    return (uint64_t)h->lit | (uint64_t)h->pos << 16 | (uint64_t)h->len << 32 | (uint64_t)h->zero << 48;
}

static void set_num_digits(jst *h, uint64_t m)
{
    h->lit = (uint16_t)m, h->pos = (uint16_t)(m >> 16), h->len = (uint16_t)(m >> 32),
    h->zero = (uint16_t)(m >> 48);
}

/* A bounded number moving to position `at` (SD__JS_NUM_*) with one more digit d (d < 0: none):
 * 0 and the state updated, or -1 when no number that begins so ends within the bounds, or it
 * would pass 19 digits (18 after the point). */
static int num_bound(const struct sd__js_node *n, jst *h, int at, int d)
{
    struct sd__js_numpos p = {at, h->hex, h->surr, num_digits(h)};
    if (d >= 0) {
        if (p.digits >= 1000000000000000000ull || (at == SD__JS_NUM_FRAC && p.nfrac >= 18))
            return -1;
        p.digits = p.digits * 10 + (uint64_t)d;
        p.nfrac += at == SD__JS_NUM_FRAC;
    }
    if (!sd__jschema_num_open(n, &p))
        return -1;
    set_num_digits(h, p.digits);
    h->surr = (uint8_t)p.nfrac;
    return 0;
}

/* Whether a bounded number may end here: the value written is within the bounds. */
static int num_ends(const struct sd__js_node *n, const jst *h)
{
    return !n->has_num || sd__jschema_num_in(n, h->hex, num_digits(h), h->surr);
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

/* A string with a pattern: the DFA state after one more character of symbol sym (lit holds the
 * state), or -1 where no match lies ahead (within maxLength: len counts the character already). */
static int re_move(const sd_jschema *s, const struct sd__js_node *n, const jst *h, unsigned sym)
{
    const struct sd__js_dfa *d = &s->dfas[n->re];
    uint16_t t = d->next[(size_t)h->lit * SD__JS_RE_SYMS + sym];
    if (t == SD__JS_NONE || (n->max_len != SD__JS_NONE && h->len + d->dist[t] > n->max_len))
        return -1;
    return t;
}

/* The character a short escape stands for ("\n" -> '\n'), or -1 ('u' and the invalid ones). */
static int short_escape(unsigned c)
{
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    const char *p = c ? strchr(from, (int)c) : NULL;
    return p ? (unsigned char)to[p - from] : -1;
}

/* A character of a pattern string: the DFA moves, or the byte is rejected. An escape is taken
 * only where one of the short escapes can follow (\u escapes are not written in such strings). */
static int re_char(const sd_jschema *s, const struct sd__js_node *n, jst *h, unsigned c)
{
    if (c == '\\') {
        for (const char *e = "\"\\/bfnrt"; *e; e++)
            if (re_move(s, n, h, (unsigned)short_escape((unsigned char)*e)) >= 0)
                return 0;
        return -1;
    }
    int t = re_move(s, n, h, c < 0x80 ? c : SD__JS_RE_OTHER);
    if (t < 0)
        return -1;
    h->lit = (uint16_t)t;
    return 0;
}

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
        if ((n->has_len && h->len < n->min_len) || (n->re != SD__JS_NONE && !s->dfas[n->re].accept[h->lit]))
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
    if (n->re != SD__JS_NONE && re_char(s, n, h, c) < 0)
        return -1;
    if (c == '\\') {
        h->phase = P_ESC;
        return 0;
    }
    if (c < 0x80)
        return 0;
    h->utf8 = utf8_lead(c);
    return h->utf8 ? 0 : -1;
}

static int esc_step(const sd_jschema *s, jst *h, unsigned c)
{
    const struct sd__js_node *n = &s->nodes[h->cur];
    if (n->re != SD__JS_NONE) { /* the escaped character moves the pattern's DFA */
        int e = c == 'u' ? -1 : short_escape(c), t = e < 0 ? -1 : re_move(s, n, h, (unsigned)e);
        if (t < 0)
            return -1;
        h->lit = (uint16_t)t;
        h->phase = P_STR;
        return 0;
    }
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
    int digit = c >= '0' && c <= '9', b = n->has_num; /* b: bounded, written without exponent */
    int frac = (n->types & SD__JS_T_NUM) != 0;
    int exp = frac && (c == 'e' || c == 'E');
    uint8_t p = h->phase, next;
    if (b && exp)
        return -1;
    switch (p) {
    case P_NUM_MINUS:
        if (!digit || (b && num_bound(n, h, c == '0' ? SD__JS_NUM_ZERO : SD__JS_NUM_INT, (int)(c - '0')) < 0))
            return -1;
        next = c == '0' ? P_NUM_ZERO : P_NUM_INT;
        break;
    case P_NUM_ZERO:
    case P_NUM_INT:
        if ((digit && p == P_NUM_ZERO) || (!digit && !(frac && c == '.') && !exp)) {
            if (!num_ends(n, h))
                return -1; /* a prefix that goes on into range ends outside it ("1" of [10, 20]) */
            value_done(h); /* "01" ends at "0"; the container then rejects the '1' */
            return 1;
        }
        if (b && (digit ? num_bound(n, h, SD__JS_NUM_INT, (int)(c - '0'))
                        : num_bound(n, h, SD__JS_NUM_DOT, -1)) < 0)
            return -1;
        next = digit ? P_NUM_INT : c == '.' ? P_NUM_DOT : P_NUM_E;
        break;
    case P_NUM_DOT:
    case P_NUM_ESIGN:
        if (!digit || (b && num_bound(n, h, SD__JS_NUM_FRAC, (int)(c - '0')) < 0))
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
            return b && num_bound(n, h, SD__JS_NUM_FRAC, (int)(c - '0')) < 0 ? -1 : 0;
        if (p == P_NUM_FRAC && exp) {
            next = P_NUM_E;
            break;
        }
        if (!num_ends(n, h))
            return -1;
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
        if (!n->has_num)
            return 0;
        h->hex = c == '-';
        return c == '-'   ? num_bound(n, h, SD__JS_NUM_SIGN, -1)
               : c == '0' ? num_bound(n, h, SD__JS_NUM_ZERO, 0)
                          : num_bound(n, h, SD__JS_NUM_INT, (int)(c - '0'));
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
    if (idx >= n->n_props) /* before the arithmetic: a schema with no properties has props NULL */
        return -1;
    const struct sd__js_prop *p = s->props + n->prop_lo;
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
        return esc_step(s, h, c);
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
    case P_NUM_FRAC:
        return num_ends(&s->nodes[h->cur], h);
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
    return h->phase == P_STR && h->utf8 == U_NONE && !s->nodes[h->cur].has_len &&
           s->nodes[h->cur].re == SD__JS_NONE;
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
