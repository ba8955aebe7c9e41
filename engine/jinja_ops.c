/* jinja_ops: Python semantics of the operators on template values: arithmetic, comparison,
 * membership, attribute and item access (jinja2's sandboxed getattr/getitem), slicing and
 * iteration. */
#include "jinja_impl.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

sd_jv sd__jinja_undef_fmt(sd_jctx *c, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return sd__jv_undef(sd__jinja_strdup(&c->a, msg, strlen(msg)));
}

static void no_undef(sd_jctx *c, const sd_jv *v, int line)
{
    if (v->type == SD_JV_UNDEF)
        sd__jinja_rt_fail(c, line, "%s", v->u.undef);
}

static int64_t as_int(const sd_jv *v)
{
    return v->type == SD_JV_BOOL ? v->u.b : v->u.i;
}

static _Noreturn void type_error(sd_jctx *c, const char *op, const sd_jv *x, const sd_jv *y, int line)
{
    sd__jinja_rt_fail(c, line, "unsupported operand type(s) for %s: '%s' and '%s'", op, sd__jv_type_name(x),
                      sd__jv_type_name(y));
}

static sd_jv repeat(sd_jctx *c, const sd_jv *seq, int64_t times, int line)
{
    if (times < 0)
        times = 0;
    size_t unit = seq->type == SD_JV_STR ? seq->u.s.n : seq->u.l->n;
    if (unit && (uint64_t)times > c->lim.max_output / unit)
        sd__jinja_fail(&c->err, SD_EFULL, line, "repetition result too large");
    if (seq->type == SD_JV_STR) {
        sd_jbuf b = {.a = &c->a, .limit = c->lim.max_output};
        for (int64_t k = 0; k < times; k++)
            sd__jbuf_put(&b, seq->u.s.p, seq->u.s.n);
        return sd__jbuf_value(&b);
    }
    sd_jv l = sd__jv_list_new(&c->a, unit * (size_t)times);
    for (int64_t k = 0; k < times; k++)
        memcpy(l.u.l->v + (size_t)k * unit, seq->u.l->v, unit * sizeof(sd_jv));
    l.flags = seq->flags;
    return l;
}

static sd_jv concat(sd_jctx *c, const sd_jv *x, const sd_jv *y)
{
    if (x->type == SD_JV_STR) {
        sd_jbuf b = {.a = &c->a, .limit = c->lim.max_output};
        sd__jbuf_put(&b, x->u.s.p, x->u.s.n);
        sd__jbuf_put(&b, y->u.s.p, y->u.s.n);
        return sd__jbuf_value(&b);
    }
    sd_jv l = sd__jv_list_new(&c->a, x->u.l->n + y->u.l->n);
    memcpy(l.u.l->v, x->u.l->v, x->u.l->n * sizeof(sd_jv));
    memcpy(l.u.l->v + x->u.l->n, y->u.l->v, y->u.l->n * sizeof(sd_jv));
    l.flags = x->flags;
    return l;
}

static sd_jv int_arith(sd_jctx *c, int op, int64_t a, int64_t b, int line)
{
    int64_t r = 0;
    int ovf = 0;
    switch (op) {
    case SD_JOP_ADD:
        ovf = __builtin_add_overflow(a, b, &r);
        break;
    case SD_JOP_SUB:
        ovf = __builtin_sub_overflow(a, b, &r);
        break;
    case SD_JOP_MUL:
        ovf = __builtin_mul_overflow(a, b, &r);
        break;
    case SD_JOP_FLOORDIV:
    case SD_JOP_MOD:
        if (b == 0)
            sd__jinja_rt_fail(c, line, "integer division or modulo by zero");
        if (a == INT64_MIN && b == -1) {
            ovf = op == SD_JOP_FLOORDIV;
            break;
        }
        r = op == SD_JOP_FLOORDIV ? a / b : a % b;
        /* Python rounds toward negative infinity */
        if ((a % b != 0) && ((a < 0) != (b < 0)))
            r = op == SD_JOP_FLOORDIV ? r - 1 : r + b;
        break;
    case SD_JOP_POW:
        if (b < 0)
            return sd__jv_float(pow((double)a, (double)b));
        if (a == 0 || a == 1)
            r = (b == 0) ? 1 : a;
        else if (a == -1)
            r = (b % 2) ? -1 : 1;
        else /* |a| >= 2 overflows within 64 rounds */
            for (r = 1; b > 0 && !ovf; b--)
                ovf = __builtin_mul_overflow(r, a, &r);
        break;
    }
    if (ovf)
        sd__jinja_rt_fail(c, line, "integer overflow");
    return sd__jv_int(r);
}

static sd_jv float_arith(sd_jctx *c, int op, double a, double b, int line)
{
    switch (op) {
    case SD_JOP_ADD:
        return sd__jv_float(a + b);
    case SD_JOP_SUB:
        return sd__jv_float(a - b);
    case SD_JOP_MUL:
        return sd__jv_float(a * b);
    case SD_JOP_DIV:
        if (b == 0)
            sd__jinja_rt_fail(c, line, "division by zero");
        return sd__jv_float(a / b);
    case SD_JOP_FLOORDIV:
        if (b == 0)
            sd__jinja_rt_fail(c, line, "float floor division by zero");
        return sd__jv_float(floor(a / b));
    case SD_JOP_MOD: {
        if (b == 0)
            sd__jinja_rt_fail(c, line, "float modulo");
        double m = fmod(a, b);
        if (m != 0 && ((m < 0) != (b < 0)))
            m += b;
        return sd__jv_float(m);
    }
    default:
        return sd__jv_float(pow(a, b));
    }
}

sd_jv sd__jinja_binop(sd_jctx *c, int op, const sd_jv *x, const sd_jv *y, int line)
{
    static const char *const names[] = {"", "+", "-", "*", "/", "//", "%", "**"};
    no_undef(c, x, line);
    no_undef(c, y, line);
    const char *name = op <= SD_JOP_POW ? names[op] : "?";
    if (sd__jv_is_number(x) && sd__jv_is_number(y)) {
        if (x->type != SD_JV_FLOAT && y->type != SD_JV_FLOAT && op != SD_JOP_DIV)
            return int_arith(c, op, as_int(x), as_int(y), line);
        return float_arith(c, op, sd__jv_as_double(x), sd__jv_as_double(y), line);
    }
    if (op == SD_JOP_ADD && x->type == y->type && (x->type == SD_JV_STR || x->type == SD_JV_LIST)) {
        if (x->type == SD_JV_LIST && (x->flags & SD_JV_TUPLE) != (y->flags & SD_JV_TUPLE))
            type_error(c, name, x, y, line);
        return concat(c, x, y);
    }
    if (op == SD_JOP_MUL) {
        int xs = x->type == SD_JV_STR || x->type == SD_JV_LIST;
        int ys = y->type == SD_JV_STR || y->type == SD_JV_LIST;
        if (xs && (y->type == SD_JV_INT || y->type == SD_JV_BOOL))
            return repeat(c, x, as_int(y), line);
        if (ys && (x->type == SD_JV_INT || x->type == SD_JV_BOOL))
            return repeat(c, y, as_int(x), line);
    }
    if (op == SD_JOP_MOD && x->type == SD_JV_STR)
        sd__jinja_rt_fail(c, line, "printf-style string formatting is not supported");
    type_error(c, name, x, y, line);
}

static int contains(sd_jctx *c, const sd_jv *x, const sd_jv *y, int line)
{
    switch (y->type) {
    case SD_JV_UNDEF:
        return 0;
    case SD_JV_STR:
        if (x->type != SD_JV_STR)
            sd__jinja_rt_fail(c, line, "'in <string>' requires string as left operand, not %s",
                              sd__jv_type_name(x));
        return x->u.s.n == 0 || memmem(y->u.s.p, y->u.s.n, x->u.s.p, x->u.s.n) != NULL;
    case SD_JV_LIST:
        for (size_t k = 0; k < y->u.l->n; k++)
            if (sd__jv_equal(x, &y->u.l->v[k]))
                return 1;
        return 0;
    case SD_JV_DICT:
        return sd__jv_dict_get(y->u.d, *x) != NULL;
    default:
        sd__jinja_rt_fail(c, line, "argument of type '%s' is not iterable", sd__jv_type_name(y));
    }
}

/* -1, 0, 1 for x < y, x == y, x > y under Python ordering; type errors unwind. */
static int order(sd_jctx *c, const sd_jv *x, const sd_jv *y, const char *op, int line)
{
    no_undef(c, x, line);
    no_undef(c, y, line);
    if (sd__jv_is_number(x) && sd__jv_is_number(y)) {
        if (x->type != SD_JV_FLOAT && y->type != SD_JV_FLOAT)
            return (as_int(x) > as_int(y)) - (as_int(x) < as_int(y));
        double a = sd__jv_as_double(x), b = sd__jv_as_double(y);
        if (isnan(a) || isnan(b))
            return 2; /* unordered: every comparison false */
        return (a > b) - (a < b);
    }
    if (x->type == SD_JV_STR && y->type == SD_JV_STR) {
        size_t n = x->u.s.n < y->u.s.n ? x->u.s.n : y->u.s.n;
        int r = memcmp(x->u.s.p, y->u.s.p, n);
        if (r)
            return r < 0 ? -1 : 1;
        return (x->u.s.n > y->u.s.n) - (x->u.s.n < y->u.s.n);
    }
    if (x->type == SD_JV_LIST && y->type == SD_JV_LIST &&
        (x->flags & SD_JV_TUPLE) == (y->flags & SD_JV_TUPLE)) {
        for (size_t k = 0; k < x->u.l->n && k < y->u.l->n; k++) {
            if (sd__jv_equal(&x->u.l->v[k], &y->u.l->v[k]))
                continue;
            return order(c, &x->u.l->v[k], &y->u.l->v[k], op, line);
        }
        return (x->u.l->n > y->u.l->n) - (x->u.l->n < y->u.l->n);
    }
    sd__jinja_rt_fail(c, line, "'%s' not supported between instances of '%s' and '%s'", op,
                      sd__jv_type_name(x), sd__jv_type_name(y));
}

int sd__jinja_compare(sd_jctx *c, int op, const sd_jv *x, const sd_jv *y, int line)
{
    int r;
    switch (op) {
    case SD_JOP_EQ:
        return sd__jv_equal(x, y);
    case SD_JOP_NE:
        return !sd__jv_equal(x, y);
    case SD_JOP_IN:
        return contains(c, x, y, line);
    case SD_JOP_NOTIN:
        return !contains(c, x, y, line);
    case SD_JOP_LT:
        r = order(c, x, y, "<", line);
        return r == -1;
    case SD_JOP_LE:
        r = order(c, x, y, "<=", line);
        return r == -1 || r == 0;
    case SD_JOP_GT:
        r = order(c, x, y, ">", line);
        return r == 1;
    default:
        r = order(c, x, y, ">=", line);
        return r == 1 || r == 0;
    }
}

/* ---- attribute and item access ---- */

static sd_jv loop_attr(sd_jctx *c, const sd_jv *obj, const char *name, int *found)
{
    const sd_jloop *l = obj->u.loop;
    int64_t i = l->index0, n = l->length;
    int depth = 1; /* jinja2 counts depth in recursive loops only, which we do not support */
    *found = 1;
    if (!strcmp(name, "index"))
        return sd__jv_int(i + 1);
    if (!strcmp(name, "index0"))
        return sd__jv_int(i);
    if (!strcmp(name, "revindex"))
        return sd__jv_int(n - i);
    if (!strcmp(name, "revindex0"))
        return sd__jv_int(n - i - 1);
    if (!strcmp(name, "first"))
        return sd__jv_bool(i == 0);
    if (!strcmp(name, "last"))
        return sd__jv_bool(i == n - 1);
    if (!strcmp(name, "length"))
        return sd__jv_int(n);
    if (!strcmp(name, "depth"))
        return sd__jv_int(depth);
    if (!strcmp(name, "depth0"))
        return sd__jv_int(depth - 1);
    if (!strcmp(name, "previtem"))
        return i > 0 ? l->items->v[i - 1] : sd__jinja_undef_fmt(c, "there is no previous item");
    if (!strcmp(name, "nextitem"))
        return i + 1 < n ? l->items->v[i + 1] : sd__jinja_undef_fmt(c, "there is no next item");
    *found = 0;
    return sd__jinja_method(c, obj, name, found);
}

sd_jv sd__jinja_getattr(sd_jctx *c, const sd_jv *obj, const char *name, int line)
{
    int found = 0;
    no_undef(c, obj, line);
    switch (obj->type) {
    case SD_JV_DICT: {
        /* jinja2 tries the Python attribute first: d.items is the method */
        sd_jv m = sd__jinja_method(c, obj, name, &found);
        if (found)
            return m;
        const sd_jv *v = sd__jv_dict_gets(obj->u.d, name, strlen(name));
        if (v)
            return *v;
        return sd__jinja_undef_fmt(c, "'dict object' has no attribute '%s'", name);
    }
    case SD_JV_NS: {
        const sd_jv *v = sd__jv_dict_gets(obj->u.d, name, strlen(name));
        if (v)
            return *v;
        break;
    }
    case SD_JV_LOOP: {
        sd_jv v = loop_attr(c, obj, name, &found);
        if (found)
            return v;
        break;
    }
    default: {
        sd_jv m = sd__jinja_method(c, obj, name, &found);
        if (found)
            return m;
    }
    }
    return sd__jinja_undef_fmt(c, "'%s object' has no attribute '%s'", sd__jv_type_name(obj), name);
}

/* Byte offset of code point `idx` in s (idx <= length). */
static size_t cp_offset(const char *s, size_t n, size_t idx)
{
    size_t pos = 0;
    for (size_t k = 0; k < idx && pos < n; k++)
        sd__utf8_next(s, n, &pos);
    return pos;
}

sd_jv sd__jinja_getitem(sd_jctx *c, const sd_jv *obj, const sd_jv *key, int line)
{
    no_undef(c, obj, line);
    int int_key = key->type == SD_JV_INT || key->type == SD_JV_BOOL;
    if (obj->type == SD_JV_DICT || obj->type == SD_JV_NS) {
        const sd_jv *v = sd__jv_dict_get(obj->u.d, *key);
        if (v)
            return *v;
    } else if ((obj->type == SD_JV_LIST || obj->type == SD_JV_STR) && int_key) {
        int64_t i = as_int(key);
        size_t n = obj->type == SD_JV_LIST ? obj->u.l->n : sd__utf8_len(obj->u.s.p, obj->u.s.n);
        if (i < 0)
            i += (int64_t)n;
        if (i >= 0 && (uint64_t)i < n) {
            if (obj->type == SD_JV_LIST)
                return obj->u.l->v[i];
            size_t a = cp_offset(obj->u.s.p, obj->u.s.n, (size_t)i), b = a;
            sd__utf8_next(obj->u.s.p, obj->u.s.n, &b);
            return sd__jv_str(obj->u.s.p + a, b - a);
        }
        return sd__jinja_undef_fmt(c, "%s object has no element %lld", sd__jv_type_name(obj),
                                   (long long)as_int(key));
    }
    if (key->type == SD_JV_STR) {
        /* jinja2 falls back to the attribute for string keys */
        char *name = sd__jinja_strdup(&c->a, key->u.s.p, key->u.s.n);
        if (obj->type != SD_JV_DICT)
            return sd__jinja_getattr(c, obj, name, line);
        int found = 0;
        sd_jv m = sd__jinja_method(c, obj, name, &found);
        if (found)
            return m;
        return sd__jinja_undef_fmt(c, "'dict object' has no attribute '%s'", name);
    }
    return sd__jinja_undef_fmt(c, "'%s object' has no element", sd__jv_type_name(obj));
}

static int64_t slice_bound(sd_jctx *c, const sd_jv *v, int64_t dflt, int line)
{
    if (v->type == SD_JV_NONE)
        return dflt;
    if (v->type != SD_JV_INT && v->type != SD_JV_BOOL)
        sd__jinja_rt_fail(c, line, "slice indices must be integers or None");
    return as_int(v);
}

/* Python's PySlice_AdjustIndices for one bound. */
static int64_t clamp_bound(int64_t v, int64_t n, int64_t step)
{
    if (v < 0) {
        v += n;
        if (v < 0)
            v = step < 0 ? -1 : 0;
    } else if (v >= n) {
        v = step < 0 ? n - 1 : n;
    }
    return v;
}

sd_jv sd__jinja_slice(sd_jctx *c, const sd_jv *obj, const sd_jv *start, const sd_jv *stop, const sd_jv *step,
                      int line)
{
    no_undef(c, obj, line);
    if (obj->type != SD_JV_LIST && obj->type != SD_JV_STR)
        return sd__jinja_undef_fmt(c, "'%s object' is not subscriptable", sd__jv_type_name(obj));
    int64_t st = slice_bound(c, step, 1, line);
    if (st == 0)
        sd__jinja_rt_fail(c, line, "slice step cannot be zero");
    if (st == INT64_MIN)
        st = -INT64_MAX;
    int is_str = obj->type == SD_JV_STR;
    size_t *offs = NULL; /* code point byte offsets of a string, [n + 1] */
    int64_t n;
    if (is_str) {
        n = (int64_t)sd__utf8_len(obj->u.s.p, obj->u.s.n);
        offs = sd__jinja_alloc(&c->a, ((size_t)n + 1) * sizeof *offs);
        size_t pos = 0;
        for (int64_t k = 0; k < n; k++) {
            offs[k] = pos;
            sd__utf8_next(obj->u.s.p, obj->u.s.n, &pos);
        }
        offs[n] = obj->u.s.n;
    } else {
        n = (int64_t)obj->u.l->n;
    }
    int64_t a = clamp_bound(slice_bound(c, start, st < 0 ? n - 1 : 0, line), n, st);
    int64_t b = clamp_bound(slice_bound(c, stop, st < 0 ? -n - 1 : n, line), n, st);
    if (start->type == SD_JV_NONE)
        a = st < 0 ? n - 1 : 0;
    if (stop->type == SD_JV_NONE)
        b = st < 0 ? -1 : n;
    int64_t count = 0;
    if (st > 0 && a < b)
        count = (b - a - 1) / st + 1;
    else if (st < 0 && a > b)
        count = (a - b - 1) / (-st) + 1;
    if (is_str) {
        sd_jbuf buf = {.a = &c->a};
        for (int64_t k = 0, i = a; k < count; k++, i += st)
            sd__jbuf_put(&buf, obj->u.s.p + offs[i], offs[i + 1] - offs[i]);
        return sd__jbuf_value(&buf);
    }
    sd_jv l = sd__jv_list_new(&c->a, (size_t)count);
    for (int64_t k = 0, i = a; k < count; k++, i += st)
        l.u.l->v[k] = obj->u.l->v[i];
    l.flags = obj->flags;
    return l;
}

sd_jv sd__jinja_iterate(sd_jctx *c, const sd_jv *v, int line)
{
    switch (v->type) {
    case SD_JV_UNDEF:
        return sd__jv_list_new(&c->a, 0);
    case SD_JV_LIST: {
        sd_jv l = *v;
        l.flags = 0;
        return l;
    }
    case SD_JV_DICT: {
        sd_jv l = sd__jv_list_new(&c->a, v->u.d->n);
        memcpy(l.u.l->v, v->u.d->k, v->u.d->n * sizeof(sd_jv));
        return l;
    }
    case SD_JV_STR: {
        sd_jv l = sd__jv_list_new(&c->a, sd__utf8_len(v->u.s.p, v->u.s.n));
        size_t pos = 0;
        for (size_t k = 0; k < l.u.l->n; k++) {
            size_t start = pos;
            sd__utf8_next(v->u.s.p, v->u.s.n, &pos);
            l.u.l->v[k] = sd__jv_str(v->u.s.p + start, pos - start);
        }
        return l;
    }
    default:
        sd__jinja_rt_fail(c, line, "'%s' object is not iterable", sd__jv_type_name(v));
    }
}
