/* jschema_impl: the compiled layout of a JSON schema, shared by jschema.c (compile) and
 * jschema_step.c (the validator) and read by test_jschema's white-box checks; not for callers. */
#ifndef SD_JSCHEMA_IMPL_H
#define SD_JSCHEMA_IMPL_H

#include "jschema.h"

#define SD__JS_NONE 0xFFFF    /* no node; no upper bound */
#define SD__JS_ARR_BIT 0x8000 /* in a frame's node id: the container is an array (else an object) */
#define SD__JS_MAX_NODES 0x7FFF
#define SD__JS_MAX_LEN 0xFFFE /* the largest minLength / maxLength */

/* Kinds of first byte, one per JSON type (number and integer share '-0-9'). */
enum { SD__JS_C_OBJ, SD__JS_C_ARR, SD__JS_C_STR, SD__JS_C_NUM, SD__JS_C_BOOL, SD__JS_C_NULL, SD__JS_N_CLASS };
/* The class of a value's first byte (SD__JS_C_*), -1 if no value starts with it. */
int sd__jschema_class(unsigned c);
/* "type" bits */
enum {
    SD__JS_T_OBJ = 1,
    SD__JS_T_ARR = 2,
    SD__JS_T_STR = 4,
    SD__JS_T_NUM = 8,
    SD__JS_T_INT = 16,
    SD__JS_T_BOOL = 32,
    SD__JS_T_NULL = 64,
};

/* A schema node. A value starts at node e: its first byte's class i picks alt[i], the node that
 * parses it (e itself, or one alternative of an anyOf; SD__JS_NONE: not allowed). The nodes
 * alt[] leads to are plain value nodes; the fields below belong to those. */
struct sd__js_node {
    uint16_t alt[SD__JS_N_CLASS];
    uint8_t types;      /* SD__JS_T_* */
    uint8_t has_len;    /* a string length limit applies (minLength > 0 or maxLength) */
    uint16_t prop_lo;   /* object: its properties are s->props[prop_lo, prop_lo + n_props) */
    uint8_t n_props;    /* 0..255 */
    uint8_t req_end;    /* 1 + the index of the last required property, 0 if none: '}' needs idx >= it */
    uint16_t items;     /* array: the node of its elements */
    uint8_t min_items;  /* 0..255 */
    uint8_t item_cap;   /* the element count saturates here: maxItems if bounded, else minItems */
    uint16_t max_items; /* 0..255, SD__JS_NONE unbounded */
    uint16_t min_len, max_len; /* string: code points; max_len SD__JS_NONE unbounded */
    uint16_t len_cap;          /* the count saturates here: max_len if bounded, else min_len */
    uint16_t lit_lo, lit_n;    /* enum/const: the value is one of s->lits[lit_lo, lit_lo + lit_n) */
    /* The fewest containers, its own included, that a value needs when it is an object (obj_min),
     * an array (arr_min), and when it is any value a node expects (min_depth: over alt[]);
     * SD__JS_MIN_INF when none fits SD_JSCHEMA_MAX_DEPTH. The validator opens a container, takes
     * a key or an element only where what they need still fits the nesting limit, so that every
     * prefix it accepts can be completed. */
    uint8_t obj_min, arr_min, min_depth;
    uint16_t re;             /* string: the DFA of its pattern / format in s->dfas, SD__JS_NONE if none */
    uint8_t has_num;         /* number / integer: bounded by [num_lo, num_hi] (jschema_num.c) */
    __int128 num_lo, num_hi; /* in 10^-18 units: minimum / maximum, exclusive ones moved inward */
};

#define SD__JS_MIN_INF 0xFF

struct sd__js_prop {
    uint32_t name;     /* offset in s->bytes of the key followed by its closing '"' */
    uint16_t name_len; /* bytes, the quote included */
    uint16_t child;    /* the node of the value */
    uint8_t last;      /* while this is the first key that may come, the last one that may: the
                        * first required key at or after it, else the object's last key */
    uint8_t req;       /* a required property */
};

/* An enum/const value as JSON text. A node's literals are one group sorted by bytes, so the
 * literals sharing a prefix are a run of the group. */
struct sd__js_lit {
    uint32_t off; /* in s->bytes */
    uint16_t len;
    uint16_t end; /* one past the last literal of its group */
};

/* A string pattern's DFA (jschema_re.c) over SD__JS_RE_SYMS symbols: the 128 ASCII code points
 * and SD__JS_RE_OTHER for every other character. State 0 starts; next[state * SYMS + sym] is
 * SD__JS_NONE where no match lies ahead; dist[state]: the fewest characters to a match. */
#define SD__JS_RE_SYMS 129
#define SD__JS_RE_OTHER 128
struct sd__js_dfa {
    uint16_t n;
    uint16_t *next;  /* [n * SD__JS_RE_SYMS] */
    uint8_t *accept; /* [n] */
    uint16_t *dist;  /* [n] */
};

struct sd_jschema {
    struct sd__js_dfa *dfas; /* [n_dfas] */
    uint32_t n_dfas;
    struct sd__js_node *nodes; /* [n_nodes] */
    struct sd__js_prop *props; /* [n_props] */
    struct sd__js_lit *lits;   /* [n_lits] */
    char *bytes;               /* [n_bytes] property names and literals */
    uint32_t n_nodes, n_props, n_lits;
    size_t n_bytes;
    uint16_t root;       /* the node of the top-level value */
    uint16_t bool_lit;   /* the group "false", "true" of type boolean */
    uint16_t null_lit;   /* the group "null" */
    uint8_t depth;       /* frames per state: the deepest nesting the schema allows, capped */
    uint8_t max_ws;      /* the longest whitespace run (sd_jschema_set_max_ws) */
    uint32_t state_size; /* sizeof(struct sd__js_state) + 3 * depth, rounded up to 8 */
};

/* What compile (jschema.c) knows of a node beside the runtime fields, for link (jschema_step.c). */
enum { SD__JS_K_VALUE, SD__JS_K_REF, SD__JS_K_ANY };
struct sd__js_cnode {
    char *path;               /* the node's JSON pointer, for messages */
    uint8_t kind;             /* SD__JS_K_*: a value schema, a $ref (to ref), an anyOf (alternatives
                               * alts[alt_lo, alt_lo + n_alt)) */
    uint8_t mark;             /* link's scratch: $ref chains, then anyOf resolution; 1 in progress, 2 done */
    uint8_t omax, amax, emax; /* containers nested in its values, their own included, as an object,
                               * an array, any value it expects: link's, capped */
    uint8_t one;              /* oneOf: a value two alternatives accept fails it even when they are one
                               * schema (two $refs to it), so link rejects that overlap too */
    uint16_t ref;
    uint32_t alt_lo, n_alt;
};

/* Resolves the compiled graph into what the validator reads: follows $refs, fills each anyOf's
 * first-byte table from its alternatives, sizes the state by the deepest nesting. SD_EINVAL for
 * $ref loops, anyOf alternatives that overlap or contain themselves. */
int sd__jschema_link(sd_jschema *s, struct sd__js_cnode *cn, uint16_t *alts, sd_diag *d);

/* jschema_num.c. The bounds of schema object sch (minimum, maximum, exclusiveMinimum,
 * exclusiveMaximum) into n (has_num, num_lo, num_hi): 0, or -1 with the reason in why (a bound
 * on a node that is no number, one that is not a finite number, an empty range). */
struct json_t;
int sd__jschema_num_bounds(const struct json_t *sch, uint8_t types, struct sd__js_node *n, char *why,
                           size_t cap);
/* Where a bounded number stands: after its sign, in its integer digits, after a lone 0, after
 * the point, in its fraction; `digits` all its digits so far as one integer (19 at most), nfrac
 * of them after the point. */
enum { SD__JS_NUM_SIGN, SD__JS_NUM_INT, SD__JS_NUM_ZERO, SD__JS_NUM_DOT, SD__JS_NUM_FRAC };
struct sd__js_numpos {
    int at, neg, nfrac;
    uint64_t digits;
};
/* Whether a number of bounded node n that begins as p says can still end within its bounds, now
 * or after more characters; and whether the number read (digits, nfrac after the point) is. */
int sd__jschema_num_open(const struct sd__js_node *n, const struct sd__js_numpos *p);
int sd__jschema_num_in(const struct sd__js_node *n, int neg, uint64_t digits, int nfrac);

/* jschema_re.c. Compiles pattern (len bytes) into d: 0, or -1 with the reason in why ("'pattern':
 * ..."), d then empty. */
int sd__jschema_re_compile(const char *pattern, size_t len, struct sd__js_dfa *d, char *why, size_t cap);
void sd__jschema_dfa_free(struct sd__js_dfa *d);
/* The pattern a "format" stands for (date, time, date-time, uuid, email, ipv4), NULL for others. */
const char *sd__jschema_format_pattern(const char *format);
/* A string node's "pattern" or "format" (of schema object sch) compiled into s->dfas, its index in
 * *re (SD__JS_NONE without either): 0, or -1 with the reason in why (not a string type, beside
 * minLength, enum or const, an unknown format, a pattern outside the subset). lenient: what cannot
 * be followed is left out (0, *re NONE) instead. */
int sd__jschema_string_re(sd_jschema *s, const struct json_t *sch, uint8_t types, uint16_t min_len,
                          int lenient, int has_lits, uint16_t *re, char *why, size_t cap);

/* SD_EINVAL with "path: message" in d, short enough for a caller's prefix ("response_format: ")
 * and never cut inside a UTF-8 character (property names appear in it). */
int sd__jschema_fail(sd_diag *d, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The state: this header, then uint16_t node[depth] (each open container's node, innermost
 * last, SD__JS_ARR_BIT for arrays), then uint8_t idx[depth] (object: the index of the next
 * property that may come; array: the elements begun, saturating at item_cap), then zeros. Only
 * the innermost container has a position beyond "in a value" (phase). */
struct sd__js_state {
    uint8_t phase; /* enum in jschema_step.c */
    uint8_t depth; /* open containers */
    uint8_t ws;    /* length of the current whitespace run */
    uint8_t utf8;  /* in strings: what the next UTF-8 continuation byte must be, 0 none */
    uint8_t hex;   /* in \uXXXX: hex digits read */
    uint8_t surr;  /* in \uXXXX: surrogate flags */
    uint16_t cur;  /* the node of the value being read or expected */
    uint16_t lit;  /* key: the first property still matching; literal: the first one matching */
    uint16_t pos;  /* key, literal: bytes matched */
    uint16_t len;  /* string with a length limit: code points so far, saturating at len_cap */
    uint16_t zero; /* 0, but in a bounded number (below) */
    /* In a string with a pattern (re) lit is its DFA state. */
    /* In a bounded number (has_num) lit, pos, len and zero hold its digits read so far as one
     * integer, 16 bits each from the lowest (jschema_step.c num_digits), hex is 1 after a '-' and
     * surr counts the digits after the point. */
    uint16_t node[]; /* [depth] */
};

#endif
