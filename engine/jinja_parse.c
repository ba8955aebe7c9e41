/* jinja_parse: recursive-descent parser from tokens to the AST, following jinja2's grammar
 * and operator precedence (parser.py), for the statements chat templates use. */
#include "jinja_impl.h"

#include <string.h>

#define SD_JPARSE_MAX_DEPTH 200

typedef struct parser {
    sd_jarena *a;
    const sd_jtok *t;
    size_t n, i;
    int depth;
} parser;

/* a growable node list */
typedef struct nlist {
    sd_jn **v;
    size_t n, cap;
} nlist;

static void nl_push(parser *P, nlist *l, sd_jn *x)
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

static const sd_jtok *cur(const parser *P)
{
    return &P->t[P->i];
}

static const sd_jtok *peek(const parser *P, size_t k)
{
    return &P->t[P->i + k < P->n ? P->i + k : P->n - 1];
}

static void advance(parser *P)
{
    if (P->i + 1 < P->n)
        P->i++;
}

static _Noreturn void fail_at(parser *P, const char *msg)
{
    sd__jinja_fail(P->a->err, SD_EFORMAT, cur(P)->line, "%s", msg);
}

static const char *tok_desc(const sd_jtok *t)
{
    switch (t->type) {
    case SD_JT_EOF:
        return "end of template";
    case SD_JT_VAR_END:
        return "end of print statement";
    case SD_JT_BLOCK_END:
        return "end of statement block";
    case SD_JT_DATA:
        return "template data";
    default:
        return t->str;
    }
}

static _Noreturn void fail_unexpected(parser *P, const char *expected)
{
    sd__jinja_fail(P->a->err, SD_EFORMAT, cur(P)->line, "unexpected '%s'%s%s", tok_desc(cur(P)),
                   expected ? ", expected " : "", expected ? expected : "");
}

static int is_op(const parser *P, const char *op)
{
    return cur(P)->type == SD_JT_OP && strcmp(cur(P)->str, op) == 0;
}

static int is_name(const parser *P, const char *name)
{
    return cur(P)->type == SD_JT_NAME && strcmp(cur(P)->str, name) == 0;
}

static void expect_op(parser *P, const char *op)
{
    if (!is_op(P, op)) {
        char want[16];
        strcpy(want, "'");
        strncat(want, op, 4);
        strcat(want, "'");
        fail_unexpected(P, want);
    }
    advance(P);
}

static void expect_type(parser *P, int type, const char *what)
{
    if (cur(P)->type != type)
        fail_unexpected(P, what);
    advance(P);
}

static const char *expect_name(parser *P)
{
    if (cur(P)->type != SD_JT_NAME)
        fail_unexpected(P, "a name");
    const char *s = cur(P)->str;
    advance(P);
    return s;
}

static sd_jn *node(parser *P, int kind, int line)
{
    sd_jn *x = sd__jinja_alloc(P->a, sizeof *x);
    x->kind = kind;
    x->line = line;
    return x;
}

static void enter(parser *P)
{
    if (++P->depth > SD_JPARSE_MAX_DEPTH)
        fail_at(P, "template nested too deeply");
}

static sd_jn *parse_expression(parser *P, int with_condexpr);
static sd_jn *parse_unary(parser *P, int with_filter);
static sd_jn *parse_tuple(parser *P, int simplified, int with_condexpr, int explicit_parens,
                          const char *extra_end);
static sd_jn *parse_or(parser *P);

/* ---- primaries ---- */

static sd_jn *parse_primary(parser *P)
{
    const sd_jtok *t = cur(P);
    sd_jn *x;
    if (t->type == SD_JT_NAME) {
        const char *s = t->str;
        x = node(P, SD_JN_LIT, t->line);
        if (!strcmp(s, "true") || !strcmp(s, "True"))
            x->lit = sd__jv_bool(1);
        else if (!strcmp(s, "false") || !strcmp(s, "False"))
            x->lit = sd__jv_bool(0);
        else if (!strcmp(s, "none") || !strcmp(s, "None"))
            x->lit = sd__jv_none();
        else {
            x->kind = SD_JN_NAME;
            x->name = s;
        }
        advance(P);
        return x;
    }
    if (t->type == SD_JT_STRING) {
        /* adjacent literals concatenate, as in Python */
        sd_jbuf b = {.a = P->a};
        while (cur(P)->type == SD_JT_STRING) {
            sd__jbuf_put(&b, cur(P)->str, cur(P)->len);
            advance(P);
        }
        x = node(P, SD_JN_LIT, t->line);
        x->lit = sd__jbuf_value(&b);
        return x;
    }
    if (t->type == SD_JT_INT || t->type == SD_JT_FLOAT) {
        x = node(P, SD_JN_LIT, t->line);
        x->lit = t->type == SD_JT_INT ? sd__jv_int(t->i) : sd__jv_float(t->f);
        advance(P);
        return x;
    }
    if (is_op(P, "(")) {
        advance(P);
        x = parse_tuple(P, 0, 1, 1, NULL);
        expect_op(P, ")");
        return x;
    }
    if (is_op(P, "[") || is_op(P, "{")) {
        int dict = is_op(P, "{");
        const char *close = dict ? "}" : "]";
        nlist items = {0};
        x = node(P, dict ? SD_JN_DICT : SD_JN_LIST, t->line);
        advance(P);
        while (!is_op(P, close)) {
            if (items.n)
                expect_op(P, ",");
            if (is_op(P, close))
                break;
            nl_push(P, &items, parse_expression(P, 1));
            if (dict) {
                expect_op(P, ":");
                nl_push(P, &items, parse_expression(P, 1));
            }
        }
        expect_op(P, close);
        x->v = items.v;
        x->nv = items.n;
        return x;
    }
    fail_unexpected(P, NULL);
}

/* Call arguments after '(' ; kwargs become SD_JN_KWARG nodes. */
static void parse_call_args(parser *P, sd_jn *call)
{
    nlist args = {0};
    expect_op(P, "(");
    while (!is_op(P, ")")) {
        if (args.n)
            expect_op(P, ",");
        if (is_op(P, ")"))
            break;
        if (is_op(P, "*") || is_op(P, "**"))
            fail_at(P, "*args and **kwargs in calls are not supported");
        if (cur(P)->type == SD_JT_NAME && peek(P, 1)->type == SD_JT_OP && !strcmp(peek(P, 1)->str, "=")) {
            sd_jn *kw = node(P, SD_JN_KWARG, cur(P)->line);
            kw->name = expect_name(P);
            advance(P);
            kw->a = parse_expression(P, 1);
            nl_push(P, &args, kw);
        } else {
            for (size_t k = 0; k < args.n; k++)
                if (args.v[k]->kind == SD_JN_KWARG)
                    fail_at(P, "positional argument follows keyword argument");
            nl_push(P, &args, parse_expression(P, 1));
        }
    }
    expect_op(P, ")");
    call->v = args.v;
    call->nv = args.n;
}

static sd_jn *parse_subscribed(parser *P)
{
    sd_jn *parts[3] = {NULL, NULL, NULL};
    int line = cur(P)->line;
    if (!is_op(P, ":")) {
        sd_jn *e = parse_expression(P, 1);
        if (!is_op(P, ":"))
            return e;
        parts[0] = e;
    }
    advance(P); /* the first ':' */
    if (!is_op(P, ":") && !is_op(P, "]") && !is_op(P, ","))
        parts[1] = parse_expression(P, 1);
    if (is_op(P, ":")) {
        advance(P);
        if (!is_op(P, "]") && !is_op(P, ","))
            parts[2] = parse_expression(P, 1);
    }
    sd_jn *s = node(P, SD_JN_SLICE, line);
    s->a = parts[0];
    s->b = parts[1];
    s->c = parts[2];
    return s;
}

static sd_jn *parse_postfix(parser *P, sd_jn *x)
{
    for (;;) {
        int line = cur(P)->line;
        if (is_op(P, ".")) {
            advance(P);
            sd_jn *y;
            if (cur(P)->type == SD_JT_NAME) {
                y = node(P, SD_JN_ATTR, line);
                y->name = expect_name(P);
            } else if (cur(P)->type == SD_JT_INT) {
                y = node(P, SD_JN_ITEM, line);
                y->b = node(P, SD_JN_LIT, line);
                y->b->lit = sd__jv_int(cur(P)->i);
                advance(P);
            } else {
                fail_unexpected(P, "a name");
            }
            y->a = x;
            x = y;
        } else if (is_op(P, "[")) {
            advance(P);
            nlist args = {0};
            while (!is_op(P, "]")) {
                if (args.n)
                    expect_op(P, ",");
                if (is_op(P, "]"))
                    break;
                nl_push(P, &args, parse_subscribed(P));
            }
            expect_op(P, "]");
            if (args.n == 0)
                fail_at(P, "expected a subscript");
            sd_jn *y = node(P, SD_JN_ITEM, line);
            y->a = x;
            if (args.n == 1) {
                y->b = args.v[0];
            } else {
                y->b = node(P, SD_JN_TUPLE, line);
                y->b->v = args.v;
                y->b->nv = args.n;
            }
            x = y;
        } else if (is_op(P, "(")) {
            sd_jn *y = node(P, SD_JN_CALL, line);
            y->a = x;
            parse_call_args(P, y);
            x = y;
        } else {
            return x;
        }
    }
}

/* A filter or test name; jinja2 allows dotted names. */
static const char *parse_dotted_name(parser *P)
{
    sd_jbuf b = {.a = P->a};
    sd__jbuf_puts(&b, expect_name(P));
    while (is_op(P, ".")) {
        advance(P);
        sd__jbuf_putc(&b, '.');
        sd__jbuf_puts(&b, expect_name(P));
    }
    return b.p;
}

static sd_jn *parse_filter(parser *P, sd_jn *x, int start_inline)
{
    while (is_op(P, "|") || start_inline) {
        if (!start_inline)
            advance(P);
        start_inline = 0;
        sd_jn *f = node(P, SD_JN_FILTER, cur(P)->line);
        f->name = parse_dotted_name(P);
        f->a = x;
        if (is_op(P, "("))
            parse_call_args(P, f);
        x = f;
    }
    return x;
}

static sd_jn *parse_test(parser *P, sd_jn *x)
{
    sd_jn *t = node(P, SD_JN_TEST, cur(P)->line);
    advance(P); /* 'is' */
    if (is_name(P, "not")) {
        t->op = 1;
        advance(P);
    }
    t->name = parse_dotted_name(P);
    t->a = x;
    const sd_jtok *c = cur(P);
    if (is_op(P, "(")) {
        parse_call_args(P, t);
    } else if ((c->type == SD_JT_NAME || c->type == SD_JT_STRING || c->type == SD_JT_INT ||
                c->type == SD_JT_FLOAT || is_op(P, "[") || is_op(P, "{")) &&
               !is_name(P, "else") && !is_name(P, "or") && !is_name(P, "and")) {
        if (is_name(P, "is"))
            fail_at(P, "You cannot chain multiple tests with is");
        sd_jn *arg = parse_postfix(P, parse_primary(P));
        t->v = sd__jinja_alloc(P->a, sizeof *t->v);
        t->v[0] = arg;
        t->nv = 1;
    }
    return t;
}

static sd_jn *parse_filter_expr(parser *P, sd_jn *x)
{
    for (;;) {
        if (is_op(P, "|"))
            x = parse_filter(P, x, 0);
        else if (is_name(P, "is"))
            x = parse_test(P, x);
        else if (is_op(P, "(")) {
            sd_jn *y = node(P, SD_JN_CALL, cur(P)->line);
            y->a = x;
            parse_call_args(P, y);
            x = y;
        } else
            return x;
    }
}

/* ---- operators, by increasing binding strength ---- */

static sd_jn *binop(parser *P, int op, sd_jn *l, sd_jn *r, int line)
{
    sd_jn *x = node(P, SD_JN_BINOP, line);
    x->op = op;
    x->a = l;
    x->b = r;
    return x;
}

static sd_jn *parse_unary(parser *P, int with_filter)
{
    int line = cur(P)->line;
    sd_jn *x;
    enter(P);
    if (is_op(P, "-") || is_op(P, "+")) {
        int op = is_op(P, "-") ? SD_JOP_NEG : SD_JOP_POS;
        advance(P);
        x = node(P, SD_JN_UNARY, line);
        x->op = op;
        x->a = parse_unary(P, 0);
    } else {
        x = parse_postfix(P, parse_primary(P));
    }
    if (with_filter)
        x = parse_filter_expr(P, x);
    P->depth--;
    return x;
}

static sd_jn *parse_pow(parser *P)
{
    sd_jn *x = parse_unary(P, 1);
    while (is_op(P, "**")) {
        int line = cur(P)->line;
        advance(P);
        x = binop(P, SD_JOP_POW, x, parse_unary(P, 1), line);
    }
    return x;
}

static sd_jn *parse_math2(parser *P)
{
    sd_jn *x = parse_pow(P);
    for (;;) {
        int op = is_op(P, "*")    ? SD_JOP_MUL
                 : is_op(P, "/")  ? SD_JOP_DIV
                 : is_op(P, "//") ? SD_JOP_FLOORDIV
                 : is_op(P, "%")  ? SD_JOP_MOD
                                  : 0;
        if (!op)
            return x;
        int line = cur(P)->line;
        advance(P);
        x = binop(P, op, x, parse_pow(P), line);
    }
}

static sd_jn *parse_concat(parser *P)
{
    sd_jn *first = parse_math2(P);
    if (!is_op(P, "~"))
        return first;
    nlist parts = {0};
    sd_jn *x = node(P, SD_JN_CONCAT, cur(P)->line);
    nl_push(P, &parts, first);
    while (is_op(P, "~")) {
        advance(P);
        nl_push(P, &parts, parse_math2(P));
    }
    x->v = parts.v;
    x->nv = parts.n;
    return x;
}

static sd_jn *parse_math1(parser *P)
{
    sd_jn *x = parse_concat(P);
    while (is_op(P, "+") || is_op(P, "-")) {
        int op = is_op(P, "+") ? SD_JOP_ADD : SD_JOP_SUB;
        int line = cur(P)->line;
        advance(P);
        x = binop(P, op, x, parse_concat(P), line);
    }
    return x;
}

static int cmp_op(const parser *P)
{
    static const char *const names[] = {"==", "!=", "<", "<=", ">", ">="};
    static const int codes[] = {SD_JOP_EQ, SD_JOP_NE, SD_JOP_LT, SD_JOP_LE, SD_JOP_GT, SD_JOP_GE};
    for (int k = 0; k < 6; k++)
        if (is_op(P, names[k]))
            return codes[k];
    if (is_name(P, "in"))
        return SD_JOP_IN;
    if (is_name(P, "not") && peek(P, 1)->type == SD_JT_NAME && !strcmp(peek(P, 1)->str, "in"))
        return SD_JOP_NOTIN;
    return 0;
}

static sd_jn *parse_compare(parser *P)
{
    int line = cur(P)->line;
    sd_jn *first = parse_math1(P);
    int op = cmp_op(P);
    if (!op)
        return first;
    nlist ops = {0};
    while ((op = cmp_op(P)) != 0) {
        sd_jn *o = node(P, SD_JN_CMPOP, cur(P)->line);
        advance(P);
        if (op == SD_JOP_NOTIN)
            advance(P);
        o->op = op;
        o->a = parse_math1(P);
        nl_push(P, &ops, o);
    }
    sd_jn *x = node(P, SD_JN_COMPARE, line);
    x->a = first;
    x->v = ops.v;
    x->nv = ops.n;
    return x;
}

static sd_jn *parse_not(parser *P)
{
    if (is_name(P, "not")) {
        sd_jn *x = node(P, SD_JN_UNARY, cur(P)->line);
        advance(P);
        enter(P);
        x->op = SD_JOP_NOT;
        x->a = parse_not(P);
        P->depth--;
        return x;
    }
    return parse_compare(P);
}

static sd_jn *parse_and(parser *P)
{
    sd_jn *x = parse_not(P);
    while (is_name(P, "and")) {
        int line = cur(P)->line;
        advance(P);
        x = binop(P, SD_JOP_AND, x, parse_not(P), line);
    }
    return x;
}

static sd_jn *parse_or(parser *P)
{
    sd_jn *x = parse_and(P);
    while (is_name(P, "or")) {
        int line = cur(P)->line;
        advance(P);
        x = binop(P, SD_JOP_OR, x, parse_and(P), line);
    }
    return x;
}

static sd_jn *parse_condexpr(parser *P)
{
    enter(P);
    sd_jn *x = parse_or(P);
    while (is_name(P, "if")) {
        sd_jn *c = node(P, SD_JN_COND, cur(P)->line);
        advance(P);
        c->b = x;
        c->a = parse_or(P);
        if (is_name(P, "else")) {
            advance(P);
            c->c = parse_condexpr(P);
        }
        x = c;
    }
    P->depth--;
    return x;
}

static sd_jn *parse_expression(parser *P, int with_condexpr)
{
    return with_condexpr ? parse_condexpr(P) : parse_or(P);
}

static int tuple_end(const parser *P, const char *extra_end)
{
    int t = cur(P)->type;
    if (t == SD_JT_VAR_END || t == SD_JT_BLOCK_END || t == SD_JT_EOF || is_op(P, ")"))
        return 1;
    return extra_end && is_name(P, extra_end);
}

static sd_jn *parse_tuple(parser *P, int simplified, int with_condexpr, int explicit_parens,
                          const char *extra_end)
{
    int line = cur(P)->line;
    nlist items = {0};
    int is_tuple = 0;
    enter(P);
    for (;;) {
        if (items.n)
            expect_op(P, ",");
        if (tuple_end(P, extra_end))
            break;
        nl_push(P, &items, simplified ? parse_primary(P) : parse_expression(P, with_condexpr));
        if (!is_op(P, ","))
            break;
        is_tuple = 1;
    }
    P->depth--;
    if (!is_tuple) {
        if (items.n)
            return items.v[0];
        if (!explicit_parens)
            fail_unexpected(P, "an expression");
    }
    sd_jn *x = node(P, SD_JN_TUPLE, line);
    x->v = items.v;
    x->nv = items.n;
    return x;
}

/* ---- statements (jinja_parse_stmt.c would be the next seam if this grows) ---- */

static sd_jn **subparse(parser *P, const char *const *ends, size_t *ret_n);

static int is_end(const parser *P, const char *const *ends)
{
    for (size_t k = 0; ends && ends[k]; k++)
        if (is_name(P, ends[k]))
            return 1;
    return 0;
}

static void check_target(parser *P, const sd_jn *t)
{
    if (t->kind == SD_JN_NAME || (t->kind == SD_JN_ATTR && t->a->kind == SD_JN_NAME))
        return;
    if (t->kind == SD_JN_TUPLE) {
        for (size_t k = 0; k < t->nv; k++)
            if (t->v[k]->kind != SD_JN_NAME)
                fail_at(P, "can't assign to a nested target");
        return;
    }
    fail_at(P, "can't assign to this target");
}

static sd_jn *parse_assign_target(parser *P, int with_ns, const char *extra_end)
{
    sd_jn *t;
    if (with_ns && cur(P)->type == SD_JT_NAME && peek(P, 1)->type == SD_JT_OP &&
        !strcmp(peek(P, 1)->str, ".")) {
        t = node(P, SD_JN_ATTR, cur(P)->line);
        t->a = node(P, SD_JN_NAME, cur(P)->line);
        t->a->name = expect_name(P);
        advance(P);
        t->name = expect_name(P);
        return t;
    }
    t = parse_tuple(P, 1, 0, 0, extra_end);
    check_target(P, t);
    return t;
}

static void end_block(parser *P)
{
    expect_type(P, SD_JT_BLOCK_END, "end of statement block");
}

static sd_jn *parse_for(parser *P, sd_jn *x)
{
    static const char *const body_end[] = {"endfor", "else", NULL};
    static const char *const else_end[] = {"endfor", NULL};
    x->a = parse_assign_target(P, 0, "in");
    if (!is_name(P, "in"))
        fail_unexpected(P, "'in'");
    advance(P);
    x->b = parse_tuple(P, 0, 0, 0, "recursive");
    if (is_name(P, "if")) {
        advance(P);
        x->c = parse_expression(P, 1);
    }
    if (is_name(P, "recursive"))
        fail_at(P, "recursive loops are not supported");
    end_block(P);
    x->v = subparse(P, body_end, &x->nv);
    if (is_name(P, "else")) {
        advance(P);
        end_block(P);
        x->w = subparse(P, else_end, &x->nw);
    }
    advance(P);
    return x;
}

static sd_jn *parse_if(parser *P, sd_jn *x)
{
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    static const char *const else_end[] = {"endif", NULL};
    x->a = parse_tuple(P, 0, 1, 0, NULL);
    end_block(P);
    x->v = subparse(P, ends, &x->nv);
    if (is_name(P, "elif")) {
        sd_jn *y = node(P, SD_JN_IF, cur(P)->line);
        advance(P);
        x->w = sd__jinja_alloc(P->a, sizeof *x->w);
        x->w[0] = parse_if(P, y); /* consumes through endif */
        x->nw = 1;
        return x;
    }
    if (is_name(P, "else")) {
        advance(P);
        end_block(P);
        x->w = subparse(P, else_end, &x->nw);
    }
    advance(P);
    return x;
}

static sd_jn *parse_set(parser *P, sd_jn *x)
{
    static const char *const ends[] = {"endset", NULL};
    x->a = parse_assign_target(P, 1, NULL);
    if (is_op(P, "=")) {
        advance(P);
        x->b = parse_tuple(P, 0, 1, 0, NULL);
        return x;
    }
    x->kind = SD_JN_SETBLK;
    if (is_op(P, "|"))
        x->c = parse_filter(P, NULL, 0);
    end_block(P);
    x->v = subparse(P, ends, &x->nv);
    advance(P);
    return x;
}

static sd_jn *parse_macro(parser *P, sd_jn *x)
{
    static const char *const ends[] = {"endmacro", NULL};
    nlist params = {0};
    x->name = expect_name(P);
    expect_op(P, "(");
    while (!is_op(P, ")")) {
        if (params.n)
            expect_op(P, ",");
        sd_jn *p = node(P, SD_JN_KWARG, cur(P)->line);
        p->name = expect_name(P);
        if (is_op(P, "=")) {
            advance(P);
            p->a = parse_expression(P, 1);
        } else {
            for (size_t k = 0; k < params.n; k++)
                if (params.v[k]->a)
                    fail_at(P, "non-default argument follows default argument");
        }
        nl_push(P, &params, p);
    }
    expect_op(P, ")");
    x->w = params.v;
    x->nw = params.n;
    end_block(P);
    x->v = subparse(P, ends, &x->nv);
    advance(P);
    return x;
}

static sd_jn *parse_statement(parser *P)
{
    static const char *const call_end[] = {"endcall", NULL};
    static const char *const filter_end[] = {"endfilter", NULL};
    static const char *const gen_end[] = {"endgeneration", NULL};
    int line = cur(P)->line;
    if (cur(P)->type != SD_JT_NAME)
        fail_at(P, "tag name expected");
    const char *tag = cur(P)->str;
    sd_jn *x = node(P, SD_JN_BODY, line);
    advance(P);
    if (!strcmp(tag, "for")) {
        x->kind = SD_JN_FOR;
        return parse_for(P, x);
    } else if (!strcmp(tag, "if")) {
        x->kind = SD_JN_IF;
        return parse_if(P, x);
    } else if (!strcmp(tag, "set")) {
        x->kind = SD_JN_SET;
        return parse_set(P, x);
    } else if (!strcmp(tag, "macro")) {
        x->kind = SD_JN_MACRO;
        return parse_macro(P, x);
    } else if (!strcmp(tag, "break") || !strcmp(tag, "continue")) {
        x->kind = tag[0] == 'b' ? SD_JN_BREAK : SD_JN_CONTINUE;
        return x;
    } else if (!strcmp(tag, "call")) {
        x->kind = SD_JN_CALLBLK;
        x->a = parse_expression(P, 1);
        if (x->a->kind != SD_JN_CALL)
            fail_at(P, "expected a call");
        end_block(P);
        x->v = subparse(P, call_end, &x->nv);
    } else if (!strcmp(tag, "filter")) {
        x->kind = SD_JN_FILTBLK;
        x->c = parse_filter(P, NULL, 1);
        end_block(P);
        x->v = subparse(P, filter_end, &x->nv);
    } else if (!strcmp(tag, "generation")) {
        end_block(P); /* transformers' assistant-mask marker: renders its body */
        x->v = subparse(P, gen_end, &x->nv);
    } else {
        sd__jinja_fail(P->a->err, SD_EFORMAT, line, "Encountered unknown tag '%s'", tag);
    }
    advance(P); /* the end tag's name */
    return x;
}

/* Parses until one of `ends` opens a block (left current) or the template ends. */
static sd_jn **subparse(parser *P, const char *const *ends, size_t *ret_n)
{
    nlist body = {0};
    enter(P);
    for (;;) {
        const sd_jtok *t = cur(P);
        if (t->type == SD_JT_EOF) {
            if (ends)
                sd__jinja_fail(P->a->err, SD_EFORMAT, t->line, "Unexpected end of template, expected '%s'",
                               ends[0]);
            break;
        }
        if (t->type == SD_JT_DATA) {
            sd_jn *x = node(P, SD_JN_OUTPUT, t->line);
            x->lit = sd__jv_str(t->str, t->len);
            nl_push(P, &body, x);
            advance(P);
        } else if (t->type == SD_JT_VAR_BEGIN) {
            advance(P);
            sd_jn *x = node(P, SD_JN_EMIT, t->line);
            x->a = parse_tuple(P, 0, 1, 0, NULL);
            expect_type(P, SD_JT_VAR_END, "end of print statement");
            nl_push(P, &body, x);
        } else if (t->type == SD_JT_BLOCK_BEGIN) {
            advance(P);
            if (is_end(P, ends))
                break;
            if (cur(P)->type == SD_JT_NAME && !strncmp(cur(P)->str, "end", 3))
                sd__jinja_fail(P->a->err, SD_EFORMAT, cur(P)->line, "Encountered unknown tag '%s'",
                               cur(P)->str);
            sd_jn *x = parse_statement(P);
            if (x->kind != SD_JN_IF && x->kind != SD_JN_FOR && x->kind != SD_JN_MACRO)
                end_block(P);
            else
                end_block(P);
            nl_push(P, &body, x);
        } else {
            fail_unexpected(P, NULL);
        }
    }
    P->depth--;
    *ret_n = body.n;
    return body.v;
}

sd_jn *sd__jinja_parse_tokens(sd_jarena *a, const sd_jtok *toks, size_t n)
{
    parser P = {.a = a, .t = toks, .n = n};
    sd_jn *root = node(&P, SD_JN_BODY, 1);
    root->v = subparse(&P, NULL, &root->nv);
    return root;
}
