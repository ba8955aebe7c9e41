/* jinja_parse: internal interface between the two halves of the parser: the parser state,
 * token helpers, and the expression entry points (jinja_parse.c) that the statement parser
 * (jinja_parse_stmt.c) calls. Included by those two files only. */
#ifndef SD_JINJA_PARSE_H
#define SD_JINJA_PARSE_H

#include "jinja_impl.h"

#include <string.h>

/* short names inside the parser; the symbols carry the module prefix */
#define fail_at sd__jp_fail_at
#define fail_unexpected sd__jp_fail_unexpected
#define expect_op sd__jp_expect_op
#define expect_type sd__jp_expect_type
#define expect_name sd__jp_expect_name
#define parse_expression sd__jp_parse_expression
#define parse_tuple sd__jp_parse_tuple
#define parse_filter sd__jp_parse_filter
#define parse_primary sd__jp_parse_primary

#define SD_JPARSE_MAX_DEPTH 200

typedef struct parser {
    sd_jarena *a;
    const sd_jtok *t;
    size_t n, i;
    int depth;
    int loops; /* enclosing for bodies in the current function (break/continue allowed) */
} parser;

/* a growable node list */
typedef struct nlist {
    sd_jn **v;
    size_t n, cap;
} nlist;

_Noreturn void fail_at(parser *P, const char *msg);
_Noreturn void fail_unexpected(parser *P, const char *expected);
void expect_op(parser *P, const char *op);
void expect_type(parser *P, int type, const char *what);
const char *expect_name(parser *P);
sd_jn *parse_expression(parser *P, int with_condexpr);
sd_jn *parse_tuple(parser *P, int simplified, int with_condexpr, int explicit_parens, const char *extra_end);
/* a filter chain |f|g(...) applied to x (start_inline: the first name has no '|') */
sd_jn *parse_filter(parser *P, sd_jn *x, int start_inline);
sd_jn *parse_primary(parser *P);

static inline void nl_push(parser *P, nlist *l, sd_jn *x)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        sd_jn **v = sd__jinja_alloc(P->a, cap * sizeof *v);
        if (l->n)
            memcpy(v, l->v, l->n * sizeof *v);
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = x;
}

static inline const sd_jtok *cur(const parser *P)
{
    return &P->t[P->i];
}

static inline const sd_jtok *peek(const parser *P, size_t k)
{
    return &P->t[P->i + k < P->n ? P->i + k : P->n - 1];
}

static inline void advance(parser *P)
{
    if (P->i + 1 < P->n)
        P->i++;
}

static inline int is_op(const parser *P, const char *op)
{
    return cur(P)->type == SD_JT_OP && strcmp(cur(P)->str, op) == 0;
}

static inline int is_name(const parser *P, const char *name)
{
    return cur(P)->type == SD_JT_NAME && strcmp(cur(P)->str, name) == 0;
}

static inline sd_jn *node(parser *P, int kind, int line)
{
    sd_jn *x = sd__jinja_alloc(P->a, sizeof *x);
    x->kind = kind;
    x->line = line;
    return x;
}

static inline void enter(parser *P)
{
    if (++P->depth > SD_JPARSE_MAX_DEPTH)
        fail_at(P, "template nested too deeply");
}

#endif
