/* jinja_eval: evaluates the AST: expressions, statements, scopes (jinja2's per-iteration loop
 * scopes, macro scopes), the loop variable, macros and call blocks, break/continue. */
#include "jinja_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum { CTL_NONE, CTL_BREAK, CTL_CONTINUE };

_Noreturn void sd__jinja_rt_fail(sd_jctx *c, int line, const char *fmt, ...)
{
    char msg[SD_DIAG_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sd__jinja_fail(&c->err, SD_EINVAL, line, "%s", msg);
}

static void step(sd_jctx *c, int line)
{
    if (++c->steps > c->lim.max_steps)
        sd__jinja_fail(&c->err, SD_EFULL, line, "template step limit (%llu) exceeded",
                       (unsigned long long)c->lim.max_steps);
}

/* ---- scopes ---- */

static sd_jframe *frame_push(sd_jctx *c, sd_jframe *parent)
{
    sd_jframe *f = sd__jinja_alloc(&c->a, sizeof *f);
    f->parent = parent;
    f->vars = sd__jv_dict_new(&c->a, SD_JV_DICT).u.d;
    return f;
}

static void frame_set(sd_jctx *c, sd_jframe *f, const char *name, sd_jv v)
{
    sd__jv_dict_set(&c->a, f->vars, sd__jv_str(name, strlen(name)), v);
}

static sd_jv lookup(sd_jctx *c, const char *name)
{
    size_t n = strlen(name);
    for (sd_jframe *f = c->frame; f; f = f->parent) {
        const sd_jv *v = sd__jv_dict_gets(f->vars, name, n);
        if (v)
            return *v;
    }
    int found = 0;
    sd_jv g = sd__jinja_global(c, name, &found);
    return found ? g : sd__jinja_undef_fmt(c, "'%s' is undefined", name);
}

/* ---- expressions ---- */

static sd_jv eval_seq(sd_jctx *c, const sd_jn *n)
{
    sd_jv l = sd__jv_list_new(&c->a, n->nv);
    for (size_t k = 0; k < n->nv; k++)
        l.u.l->v[k] = sd__jinja_eval(c, n->v[k]);
    if (n->kind == SD_JN_TUPLE)
        l.flags |= SD_JV_TUPLE;
    return l;
}

static sd_jv eval_dict(sd_jctx *c, const sd_jn *n)
{
    sd_jv d = sd__jv_dict_new(&c->a, SD_JV_DICT);
    for (size_t k = 0; k + 1 < n->nv; k += 2) {
        sd_jv key = sd__jinja_eval(c, n->v[k]);
        if (key.type == SD_JV_LIST && !(key.flags & SD_JV_TUPLE))
            sd__jinja_rt_fail(c, n->line, "unhashable type: 'list'");
        if (key.type == SD_JV_DICT || key.type == SD_JV_UNDEF)
            sd__jinja_rt_fail(c, n->line, "unhashable type: '%s'", sd__jv_type_name(&key));
        sd__jv_dict_set(&c->a, d.u.d, key, sd__jinja_eval(c, n->v[k + 1]));
    }
    return d;
}

/* Evaluates call arguments (positional, then SD_JN_KWARG) of node n. */
static sd_jargs eval_args(sd_jctx *c, const sd_jn *n)
{
    sd_jargs a = {0};
    sd_jv *pos = sd__jinja_alloc(&c->a, (n->nv + 1) * sizeof *pos);
    sd_jv *kv = sd__jinja_alloc(&c->a, (n->nv + 1) * sizeof *kv);
    const char **kn = sd__jinja_alloc(&c->a, (n->nv + 1) * sizeof *kn);
    for (size_t k = 0; k < n->nv; k++) {
        const sd_jn *x = n->v[k];
        if (x->kind == SD_JN_KWARG) {
            for (size_t j = 0; j < a.nk; j++)
                if (!strcmp(kn[j], x->name))
                    sd__jinja_rt_fail(c, x->line, "keyword argument repeated: %s", x->name);
            kn[a.nk] = x->name;
            kv[a.nk++] = sd__jinja_eval(c, x->a);
        } else {
            pos[a.n++] = sd__jinja_eval(c, x);
        }
    }
    a.v = pos;
    a.kname = kn;
    a.kv = kv;
    return a;
}

static sd_jv eval_filter(sd_jctx *c, const sd_jn *n, const sd_jv *operand)
{
    if (!sd__jinja_has_filter(n->name))
        sd__jinja_rt_fail(c, n->line, "No filter named '%s'.", n->name);
    sd_jv val = operand ? *operand : sd__jinja_eval(c, n->a);
    sd_jargs a = eval_args(c, n);
    return sd__jinja_filter(c, n->name, &val, &a, n->line);
}

/* Applies a filter chain whose innermost operand is NULL (filter blocks, set blocks). */
static sd_jv apply_chain(sd_jctx *c, const sd_jn *n, sd_jv val)
{
    if (n->a)
        val = apply_chain(c, n->a, val);
    return eval_filter(c, n, &val);
}

static sd_jv eval_compare(sd_jctx *c, const sd_jn *n)
{
    sd_jv left = sd__jinja_eval(c, n->a);
    for (size_t k = 0; k < n->nv; k++) {
        sd_jv right = sd__jinja_eval(c, n->v[k]->a);
        if (!sd__jinja_compare(c, n->v[k]->op, &left, &right, n->v[k]->line))
            return sd__jv_bool(0);
        left = right;
    }
    return sd__jv_bool(1);
}

static sd_jv eval_concat(sd_jctx *c, const sd_jn *n)
{
    sd_jbuf b = {.a = &c->a, .limit = c->lim.max_output};
    for (size_t k = 0; k < n->nv; k++) {
        sd_jv v = sd__jinja_eval(c, n->v[k]);
        sd__jv_str_append(&b, &v);
    }
    return sd__jbuf_value(&b);
}

static sd_jv eval_unary(sd_jctx *c, const sd_jn *n)
{
    sd_jv v = sd__jinja_eval(c, n->a);
    if (n->op == SD_JOP_NOT)
        return sd__jv_bool(!sd__jv_truthy(&v));
    if (v.type == SD_JV_UNDEF)
        sd__jinja_rt_fail(c, n->line, "%s", v.u.undef);
    if (!sd__jv_is_number(&v))
        sd__jinja_rt_fail(c, n->line, "bad operand type for unary %c: '%s'", n->op == SD_JOP_NEG ? '-' : '+',
                          sd__jv_type_name(&v));
    if (v.type == SD_JV_BOOL)
        v = sd__jv_int(v.u.b);
    if (n->op == SD_JOP_POS)
        return v;
    if (v.type == SD_JV_FLOAT)
        return sd__jv_float(-v.u.f);
    if (v.u.i == INT64_MIN)
        sd__jinja_rt_fail(c, n->line, "integer overflow");
    return sd__jv_int(-v.u.i);
}

sd_jv sd__jinja_eval(sd_jctx *c, const sd_jn *n)
{
    step(c, n->line);
    switch (n->kind) {
    case SD_JN_LIT:
        return n->lit;
    case SD_JN_NAME:
        return lookup(c, n->name);
    case SD_JN_LIST:
    case SD_JN_TUPLE:
        return eval_seq(c, n);
    case SD_JN_DICT:
        return eval_dict(c, n);
    case SD_JN_ATTR: {
        sd_jv obj = sd__jinja_eval(c, n->a);
        return sd__jinja_getattr(c, &obj, n->name, n->line);
    }
    case SD_JN_ITEM: {
        sd_jv obj = sd__jinja_eval(c, n->a);
        if (n->b->kind == SD_JN_SLICE) {
            const sd_jn *s = n->b;
            sd_jv none = sd__jv_none();
            sd_jv p0 = s->a ? sd__jinja_eval(c, s->a) : none;
            sd_jv p1 = s->b ? sd__jinja_eval(c, s->b) : none;
            sd_jv p2 = s->c ? sd__jinja_eval(c, s->c) : none;
            return sd__jinja_slice(c, &obj, &p0, &p1, &p2, n->line);
        }
        sd_jv key = sd__jinja_eval(c, n->b);
        return sd__jinja_getitem(c, &obj, &key, n->line);
    }
    case SD_JN_CALL: {
        sd_jv fn = sd__jinja_eval(c, n->a);
        sd_jargs a = eval_args(c, n);
        return sd__jinja_call(c, &fn, &a, n->line);
    }
    case SD_JN_FILTER:
        return eval_filter(c, n, NULL);
    case SD_JN_TEST: {
        if (!sd__jinja_has_test(n->name))
            sd__jinja_rt_fail(c, n->line, "No test named '%s'.", n->name);
        sd_jv val = sd__jinja_eval(c, n->a);
        sd_jargs a = eval_args(c, n);
        int r = sd__jinja_test(c, n->name, &val, &a, n->line);
        return sd__jv_bool(n->op ? !r : r);
    }
    case SD_JN_BINOP: {
        sd_jv x = sd__jinja_eval(c, n->a);
        if (n->op == SD_JOP_AND)
            return sd__jv_truthy(&x) ? sd__jinja_eval(c, n->b) : x;
        if (n->op == SD_JOP_OR)
            return sd__jv_truthy(&x) ? x : sd__jinja_eval(c, n->b);
        sd_jv y = sd__jinja_eval(c, n->b);
        return sd__jinja_binop(c, n->op, &x, &y, n->line);
    }
    case SD_JN_UNARY:
        return eval_unary(c, n);
    case SD_JN_CONCAT:
        return eval_concat(c, n);
    case SD_JN_COMPARE:
        return eval_compare(c, n);
    case SD_JN_COND: {
        sd_jv t = sd__jinja_eval(c, n->a);
        if (sd__jv_truthy(&t))
            return sd__jinja_eval(c, n->b);
        return n->c ? sd__jinja_eval(c, n->c)
                    : sd__jv_undef(
                          "the conditional expression evaluated to false and no else section was defined");
    }
    default:
        sd__jinja_rt_fail(c, n->line, "not an expression");
    }
}

/* ---- calls ---- */

/* Renders body statements into a fresh buffer with `f` as the scope; returns the text. */
static sd_jv render_into(sd_jctx *c, sd_jframe *f, sd_jn *const *v, size_t nv)
{
    sd_jbuf b = {.a = &c->a, .limit = c->lim.max_output};
    sd_jbuf *saved_out = c->out;
    sd_jframe *saved_frame = c->frame;
    c->out = &b;
    c->frame = f;
    sd__jinja_exec_body(c, v, nv);
    c->out = saved_out;
    c->frame = saved_frame;
    return sd__jbuf_value(&b);
}

static sd_jv call_macro(sd_jctx *c, const sd_jfunc *fn, sd_jargs *a, const sd_jv *caller, int line)
{
    const sd_jn *m = fn->mac;
    if (c->depth >= c->lim.max_depth)
        sd__jinja_fail(&c->err, SD_EFULL, line, "macro recursion limit (%d) exceeded", c->lim.max_depth);
    if (a->n > m->nw)
        sd__jinja_rt_fail(c, line, "macro '%s' takes not more than %zu argument(s)", fn->name, m->nw);
    sd_jframe *f = frame_push(c, fn->scope ? fn->scope : c->root);
    sd_jframe *saved = c->frame;
    c->frame = f;
    for (size_t k = 0; k < m->nw; k++) {
        const sd_jn *p = m->w[k];
        const sd_jv *v = k < a->n ? &a->v[k] : NULL;
        for (size_t j = 0; j < a->nk && !v; j++)
            if (!strcmp(a->kname[j], p->name))
                v = &a->kv[j];
        sd_jv val = v      ? *v
                    : p->a ? sd__jinja_eval(c, p->a)
                           : sd__jinja_undef_fmt(c, "'%s' is undefined", p->name);
        frame_set(c, f, p->name, val);
    }
    for (size_t j = 0; j < a->nk; j++) {
        int known = 0;
        for (size_t k = 0; k < m->nw; k++)
            known |= !strcmp(a->kname[j], m->w[k]->name);
        if (!known)
            sd__jinja_rt_fail(c, line, "macro '%s' has no argument named '%s'", fn->name, a->kname[j]);
    }
    if (caller)
        frame_set(c, f, "caller", *caller);
    c->frame = saved;
    c->depth++;
    sd_jv out = render_into(c, f, m->v, m->nv);
    c->depth--;
    return out;
}

sd_jv sd__jinja_call(sd_jctx *c, const sd_jv *fn, sd_jargs *a, int line)
{
    if (fn->type == SD_JV_UNDEF)
        sd__jinja_rt_fail(c, line, "%s", fn->u.undef);
    if (fn->type != SD_JV_FUNC)
        sd__jinja_rt_fail(c, line, "'%s' object is not callable", sd__jv_type_name(fn));
    if (fn->u.fn->fn)
        return fn->u.fn->fn(c, &fn->u.fn->self, a, line);
    return call_macro(c, fn->u.fn, a, NULL, line);
}

/* ---- statements ---- */

static void assign(sd_jctx *c, const sd_jn *target, sd_jv v, int line)
{
    if (target->kind == SD_JN_NAME) {
        frame_set(c, c->frame, target->name, v);
        return;
    }
    if (target->kind == SD_JN_ATTR) {
        sd_jv ns = lookup(c, target->a->name);
        if (ns.type != SD_JV_NS)
            sd__jinja_rt_fail(c, line, "cannot assign attribute on non-namespace object");
        sd_jv key = sd__jv_str(target->name, strlen(target->name));
        sd__jv_dict_set(&c->a, ns.u.d, key, v);
        return;
    }
    /* tuple unpacking */
    sd_jv items = sd__jinja_iterate(c, &v, line);
    if (items.u.l->n != target->nv)
        sd__jinja_rt_fail(c, line, "%s values to unpack (expected %zu, got %zu)",
                          items.u.l->n > target->nv ? "too many" : "not enough", target->nv, items.u.l->n);
    for (size_t k = 0; k < target->nv; k++)
        frame_set(c, c->frame, target->v[k]->name, items.u.l->v[k]);
}

static sd_jv loop_value(sd_jloop *l)
{
    sd_jv v = {SD_JV_LOOP, 0, {.loop = l}};
    return v;
}

static void exec_for(sd_jctx *c, const sd_jn *n)
{
    sd_jv seq = sd__jinja_eval(c, n->b);
    sd_jv items = sd__jinja_iterate(c, &seq, n->line);
    sd_jframe *outer = c->frame;
    if (n->c) { /* `for x in xs if cond`: loop.* counts the kept items only */
        sd_jv kept = sd__jv_list_new(&c->a, items.u.l->n);
        size_t nk = 0;
        sd_jframe *scratch = frame_push(c, outer);
        for (size_t k = 0; k < items.u.l->n; k++) {
            step(c, n->line);
            scratch->vars->n = 0;
            c->frame = scratch;
            assign(c, n->a, items.u.l->v[k], n->line);
            sd_jv t = sd__jinja_eval(c, n->c);
            if (sd__jv_truthy(&t))
                kept.u.l->v[nk++] = items.u.l->v[k];
            c->frame = outer;
        }
        kept.u.l->n = nk;
        items = kept;
    }
    sd_jloop *L = sd__jinja_alloc(&c->a, sizeof *L);
    L->length = (int64_t)items.u.l->n;
    L->items = items.u.l;
    /* jinja2 gives each iteration a fresh scope: a `set` in the body is not seen by the
     * next iteration nor after the loop. One frame, emptied per iteration, does that without
     * growing the arena (nothing keeps a reference to a loop frame). */
    sd_jframe *body = frame_push(c, outer);
    for (size_t k = 0; k < items.u.l->n; k++) {
        step(c, n->line);
        body->vars->n = 0;
        c->frame = body;
        L->index0 = (int64_t)k;
        frame_set(c, c->frame, "loop", loop_value(L));
        assign(c, n->a, items.u.l->v[k], n->line);
        sd__jinja_exec_body(c, n->v, n->nv);
        c->frame = outer;
        int ctl = c->ctl;
        c->ctl = CTL_NONE;
        if (ctl == CTL_BREAK)
            break;
    }
    if (items.u.l->n == 0 && n->nw) {
        c->frame = frame_push(c, outer);
        sd__jinja_exec_body(c, n->w, n->nw);
        c->frame = outer;
    }
}

static void exec_callblk(sd_jctx *c, const sd_jn *n)
{
    const sd_jn *call = n->a;
    sd_jv fn = sd__jinja_eval(c, call->a);
    sd_jargs a = eval_args(c, call);
    if (fn.type != SD_JV_FUNC || fn.u.fn->fn)
        sd__jinja_rt_fail(c, n->line, "call block needs a macro");
    sd_jfunc *cf = sd__jinja_alloc(&c->a, sizeof *cf);
    cf->name = "caller";
    cf->mac = n; /* no parameters; its body is n->v */
    cf->scope = c->frame;
    sd_jv caller = {SD_JV_FUNC, 0, {.fn = cf}};
    sd_jv out = call_macro(c, fn.u.fn, &a, &caller, n->line);
    sd__jbuf_put(c->out, out.u.s.p, out.u.s.n);
}

static void exec_stmt(sd_jctx *c, const sd_jn *n)
{
    step(c, n->line);
    switch (n->kind) {
    case SD_JN_OUTPUT:
        sd__jbuf_put(c->out, n->lit.u.s.p, n->lit.u.s.n);
        break;
    case SD_JN_EMIT: {
        sd_jv v = sd__jinja_eval(c, n->a);
        sd__jv_str_append(c->out, &v);
        break;
    }
    case SD_JN_IF: {
        sd_jv t = sd__jinja_eval(c, n->a);
        if (sd__jv_truthy(&t))
            sd__jinja_exec_body(c, n->v, n->nv);
        else
            sd__jinja_exec_body(c, n->w, n->nw);
        break;
    }
    case SD_JN_FOR:
        exec_for(c, n);
        break;
    case SD_JN_SET:
        assign(c, n->a, sd__jinja_eval(c, n->b), n->line);
        break;
    case SD_JN_SETBLK: {
        sd_jv v = render_into(c, c->frame, n->v, n->nv);
        assign(c, n->a, n->c ? apply_chain(c, n->c, v) : v, n->line);
        break;
    }
    case SD_JN_FILTBLK: {
        sd_jv v = render_into(c, c->frame, n->v, n->nv);
        v = apply_chain(c, n->c, v);
        sd__jv_str_append(c->out, &v);
        break;
    }
    case SD_JN_MACRO: {
        sd_jfunc *fn = sd__jinja_alloc(&c->a, sizeof *fn);
        fn->name = n->name;
        fn->mac = n;
        sd_jv v = {SD_JV_FUNC, 0, {.fn = fn}};
        frame_set(c, c->frame, n->name, v);
        break;
    }
    case SD_JN_CALLBLK:
        exec_callblk(c, n);
        break;
    case SD_JN_BREAK:
        c->ctl = CTL_BREAK;
        break;
    case SD_JN_CONTINUE:
        c->ctl = CTL_CONTINUE;
        break;
    case SD_JN_BODY:
        sd__jinja_exec_body(c, n->v, n->nv);
        break;
    default:
        sd__jinja_rt_fail(c, n->line, "not a statement");
    }
}

void sd__jinja_exec_body(sd_jctx *c, sd_jn *const *v, size_t nv)
{
    for (size_t k = 0; k < nv && c->ctl == CTL_NONE; k++)
        exec_stmt(c, v[k]);
}
