/* jinja_parse: the expression half of the recursive-descent parser (jinja2's grammar and
 * operator precedence, parser.py) and the token helpers the statement half uses. */
#include "jinja_parse.h"

#include <string.h>

_Noreturn void fail_at(parser *P, const char *msg)
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

_Noreturn void fail_unexpected(parser *P, const char *expected)
{
    sd__jinja_fail(P->a->err, SD_EFORMAT, cur(P)->line, "unexpected '%s'%s%s", tok_desc(cur(P)),
                   expected ? ", expected " : "", expected ? expected : "");
}

void expect_op(parser *P, const char *op)
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

void expect_type(parser *P, int type, const char *what)
{
    if (cur(P)->type != type)
        fail_unexpected(P, what);
    advance(P);
}

const char *expect_name(parser *P)
{
    if (cur(P)->type != SD_JT_NAME)
        fail_unexpected(P, "a name");
    const char *s = cur(P)->str;
    advance(P);
    return s;
}

static sd_jn *parse_unary(parser *P, int with_filter);
static sd_jn *parse_or(parser *P);

/* ---- primaries ---- */

sd_jn *parse_primary(parser *P)
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

sd_jn *parse_filter(parser *P, sd_jn *x, int start_inline)
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

sd_jn *parse_expression(parser *P, int with_condexpr)
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

sd_jn *parse_tuple(parser *P, int simplified, int with_condexpr, int explicit_parens, const char *extra_end)
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
