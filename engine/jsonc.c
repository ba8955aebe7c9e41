/* jsonc: the JSON-object validator (sd_jfsm), a byte-level state machine small enough to copy
 * at every node of the vocabulary trie that jsonc_mask.c walks. */
#include "jsonc.h"
#include "jsonc_utf8.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(sd_jfsm) == 16, "sd_jfsm must have no padding: its bytes are the cache key");
_Static_assert(SD_JFSM_MAX_DEPTH <= 64, "the container stack is one uint64");

/* ---- the validator ---------------------------------------------------------------------- */

enum {
    J_START,     /* before the top-level '{' */
    J_OBJ_OPEN,  /* after '{': a key or '}' */
    J_OBJ_KEY,   /* after ',' in an object: a key */
    J_COLON,     /* after a key: ':' */
    J_VALUE,     /* after ':', or after ',' in an array: a value */
    J_ARR_OPEN,  /* after '[': a value or ']' */
    J_AFTER,     /* after a value: ',' or the bracket that closes the innermost container */
    J_STR,       /* inside a string (key says whether it is a key) */
    J_ESC,       /* after '\' in a string */
    J_HEX,       /* in \uXXXX: sub = hex digits read, aux = SURR_* flags */
    J_LOW_BS,    /* after a high-surrogate escape: the '\' of its low half */
    J_LOW_U,     /* then the 'u' */
    J_LIT,       /* in true/false/null: aux = which, sub = bytes matched */
    J_NUM_MINUS, /* numbers, -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? : after '-' */
    J_NUM_ZERO,  /* after a leading 0 */
    J_NUM_INT,   /* in the integer digits after [1-9] */
    J_NUM_DOT,   /* after '.' */
    J_NUM_FRAC,  /* in the fraction digits */
    J_NUM_E,     /* after e/E */
    J_NUM_ESIGN, /* after the exponent's sign */
    J_NUM_EXP,   /* in the exponent digits */
    J_DONE,      /* the top-level object has closed: nothing more */
};

/* Moves to state s; sub and aux belong to one state, so they are cleared to keep the struct
 * canonical (equal states, equal bytes). */
static void jset(sd_jfsm *m, uint8_t s)
{
    m->state = s;
    m->sub = 0;
    m->aux = 0;
}

static int jpush(sd_jfsm *m, int is_obj)
{
    if (m->depth >= SD_JFSM_MAX_DEPTH)
        return -1;
    m->stack |= (uint64_t)is_obj << m->depth;
    m->depth++;
    jset(m, is_obj ? J_OBJ_OPEN : J_ARR_OPEN);
    return 0;
}

static int jpop(sd_jfsm *m)
{
    m->depth--;
    m->stack &= ~((uint64_t)1 << m->depth);
    jset(m, m->depth ? J_AFTER : J_DONE);
    return 0;
}

static int top_is_obj(const sd_jfsm *m)
{
    return (int)((m->stack >> (m->depth - 1)) & 1);
}

static int value_start(sd_jfsm *m, unsigned c)
{
    switch (c) {
    case '{':
        return jpush(m, 1);
    case '[':
        return jpush(m, 0);
    case '"':
        jset(m, J_STR);
        m->key = 0;
        return 0;
    case '-':
        jset(m, J_NUM_MINUS);
        return 0;
    case '0':
        jset(m, J_NUM_ZERO);
        return 0;
    case 't':
    case 'f':
    case 'n':
        jset(m, J_LIT);
        m->aux = c == 't' ? 0 : c == 'f' ? 1 : 2;
        m->sub = 1;
        return 0;
    default:
        if (c < '1' || c > '9')
            return -1;
        jset(m, J_NUM_INT);
        return 0;
    }
}

/* Outside strings: whitespace (in bounded runs), punctuation, the start of a value. */
static int struct_step(sd_jfsm *m, unsigned c)
{
    if (json_ws(c)) {
        if (m->ws >= SD_JFSM_MAX_WS)
            return -1;
        m->ws++;
        return 0;
    }
    m->ws = 0;
    switch (m->state) {
    case J_START:
        return c == '{' ? jpush(m, 1) : -1;
    case J_OBJ_OPEN:
    case J_OBJ_KEY:
        if (c == '}' && m->state == J_OBJ_OPEN)
            return jpop(m);
        if (c != '"')
            return -1;
        jset(m, J_STR);
        m->key = 1;
        return 0;
    case J_COLON:
        if (c != ':')
            return -1;
        jset(m, J_VALUE);
        return 0;
    case J_ARR_OPEN:
    case J_VALUE:
        if (c == ']' && m->state == J_ARR_OPEN)
            return jpop(m);
        return value_start(m, c);
    case J_AFTER:
        if (c == ',') {
            jset(m, top_is_obj(m) ? J_OBJ_KEY : J_VALUE);
            return 0;
        }
        return c == (top_is_obj(m) ? '}' : ']') ? jpop(m) : -1;
    default:
        return -1;
    }
}

static int str_step(sd_jfsm *m, unsigned c)
{
    if (m->utf8) {
        if (c < utf8_next[m->utf8].lo || c > utf8_next[m->utf8].hi)
            return -1;
        m->utf8 = utf8_next[m->utf8].next;
        return 0;
    }
    if (c == '"') {
        jset(m, m->key ? J_COLON : J_AFTER);
        m->key = 0;
        return 0;
    }
    if (c == '\\') {
        jset(m, J_ESC);
        return 0;
    }
    if (c < 0x20)
        return -1;
    if (c < 0x80)
        return 0;
    m->utf8 = utf8_lead(c);
    return m->utf8 ? 0 : -1;
}

static int esc_step(sd_jfsm *m, unsigned c)
{
    if (c == 'u') {
        jset(m, J_HEX);
        return 0;
    }
    if (!json_simple_escape(c))
        return -1;
    jset(m, J_STR);
    return 0;
}

/* One hex digit of \uXXXX (jsonc_utf8.h's rules). */
static int hex_step(sd_jfsm *m, unsigned c)
{
    if (json_hex_digit(c, m->sub, &m->aux) < 0)
        return -1;
    if (++m->sub < 4)
        return 0;
    jset(m, (m->aux & SURR_HIGH) ? J_LOW_BS : J_STR);
    return 0;
}

static int lit_step(sd_jfsm *m, unsigned c)
{
    static const char *const lits[] = {"true", "false", "null"};
    const char *lit = lits[m->aux];
    if (c != (unsigned char)lit[m->sub])
        return -1;
    if (lit[++m->sub] == '\0')
        jset(m, J_AFTER);
    return 0;
}

/* A byte in a number: 0 consumed, -1 rejected, 1 the number ended before c (the state is
 * now J_AFTER and c must be processed there: "1," "1]" "1}" "1 "). */
static int num_step(sd_jfsm *m, unsigned c)
{
    int digit = c >= '0' && c <= '9';
    int exp = c == 'e' || c == 'E';
    uint8_t s = m->state, next;
    switch (s) {
    case J_NUM_MINUS:
        if (!digit)
            return -1;
        next = c == '0' ? J_NUM_ZERO : J_NUM_INT;
        break;
    case J_NUM_ZERO:
    case J_NUM_INT:
        if ((digit && s == J_NUM_ZERO) || (!digit && c != '.' && !exp)) {
            jset(m, J_AFTER); /* "01" ends at "0"; J_AFTER then rejects the '1' */
            return 1;
        }
        next = digit ? J_NUM_INT : c == '.' ? J_NUM_DOT : J_NUM_E;
        break;
    case J_NUM_DOT:
    case J_NUM_ESIGN:
        if (!digit)
            return -1;
        next = s == J_NUM_DOT ? J_NUM_FRAC : J_NUM_EXP;
        break;
    case J_NUM_E:
        if (!digit && c != '+' && c != '-')
            return -1;
        next = digit ? J_NUM_EXP : J_NUM_ESIGN;
        break;
    default: /* J_NUM_FRAC, J_NUM_EXP */
        if (digit)
            return 0;
        if (s == J_NUM_FRAC && exp) {
            next = J_NUM_E;
            break;
        }
        jset(m, J_AFTER);
        return 1;
    }
    jset(m, next);
    return 0;
}

/* Advances m by one byte: 0, or -1 when c cannot come next (m is then unspecified). */
static inline int jstep(sd_jfsm *m, unsigned c)
{
    switch (m->state) {
    case J_STR:
        return str_step(m, c);
    case J_ESC:
        return esc_step(m, c);
    case J_HEX:
        return hex_step(m, c);
    case J_LOW_BS:
        if (c != '\\')
            return -1;
        m->state = J_LOW_U;
        return 0;
    case J_LOW_U:
        if (c != 'u')
            return -1;
        jset(m, J_HEX);
        m->aux = SURR_LOW;
        return 0;
    case J_LIT:
        return lit_step(m, c);
    case J_DONE:
        return -1;
    default:
        break;
    }
    if (m->state >= J_NUM_MINUS) {
        int r = num_step(m, c);
        if (r <= 0)
            return r;
    }
    return struct_step(m, c);
}

void sd_jfsm_init(sd_jfsm *m)
{
    memset(m, 0, sizeof *m);
    m->state = J_START;
}

int sd_jfsm_feed(sd_jfsm *m, const char *bytes, size_t n)
{
    sd_jfsm s = *m;
    for (size_t i = 0; i < n; i++)
        if (jstep(&s, (unsigned char)bytes[i]) < 0)
            return -1;
    *m = s;
    return 0;
}

int sd_jfsm_complete(const sd_jfsm *m)
{
    return m->state == J_DONE;
}

int sd__jfsm_step(sd_jfsm *m, unsigned c)
{
    return jstep(m, c);
}

int sd__jfsm_in_string(const sd_jfsm *m)
{
    return m->state == J_STR;
}

int sd__jfsm_in_plain_string(const sd_jfsm *m)
{
    return m->state == J_STR && m->utf8 == U_NONE;
}
