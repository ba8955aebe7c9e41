/* jinja_parse_stmt: the statement half of the parser: template structure (text, {{ }},
 * {% %}), for/if/set/macro/call/filter blocks, break/continue, assignment targets. */
#include "jinja_parse.h"

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
    P->loops++;
    x->v = subparse(P, body_end, &x->nv);
    P->loops--;
    if (is_name(P, "else")) {
        int saved = P->loops; /* the else body runs outside the loop */
        P->loops = 0;
        advance(P);
        end_block(P);
        x->w = subparse(P, else_end, &x->nw);
        P->loops = saved;
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
    int saved = P->loops; /* a macro body is a function of its own */
    P->loops = 0;
    x->v = subparse(P, ends, &x->nv);
    P->loops = saved;
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
        if (P->loops == 0)
            sd__jinja_fail(P->a->err, SD_EFORMAT, line, "'%s' outside loop", tag);
        x->kind = tag[0] == 'b' ? SD_JN_BREAK : SD_JN_CONTINUE;
        return x;
    } else if (!strcmp(tag, "call")) {
        x->kind = SD_JN_CALLBLK;
        x->a = parse_expression(P, 1);
        if (x->a->kind != SD_JN_CALL)
            fail_at(P, "expected a call");
        end_block(P);
        int saved = P->loops; /* caller() is a function of its own */
        P->loops = 0;
        x->v = subparse(P, call_end, &x->nv);
        P->loops = saved;
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
            end_block(P); /* every statement leaves its closing '%}' */
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
