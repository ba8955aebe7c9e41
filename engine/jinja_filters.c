/* jinja_filters: jinja2's builtin filters and tests used by chat templates, with transformers'
 * tojson (json.dumps, ensure_ascii=False). */
#include "jinja_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef sd_jv (*filter_fn)(sd_jctx *c, const sd_jv *v, sd_jargs *a, int line);

static sd_jargs no_args(void)
{
    sd_jargs a = {0};
    return a;
}

/* Calls the Python method `name` of value s with args a. */
static sd_jv call_method(sd_jctx *c, const sd_jv *s, const char *name, sd_jargs *a, int line)
{
    int found = 0;
    sd_jv m = sd__jinja_method(c, s, name, &found);
    if (!found)
        sd__jinja_rt_fail(c, line, "'%s' object has no attribute '%s'", sd__jv_type_name(s), name);
    return sd__jinja_call(c, &m, a, line);
}

static sd_jv str_of(sd_jctx *c, const sd_jv *v)
{
    return sd__jv_to_str(&c->a, v);
}

static sd_jv f_length(sd_jctx *c, const sd_jv *v, sd_jargs *a, int line)
{
    switch (v->type) {
    case SD_JV_UNDEF:
        return sd__jv_int(0);
    case SD_JV_STR:
        return sd__jv_int((int64_t)sd__utf8_len(v->u.s.p, v->u.s.n));
    case SD_JV_LIST:
        return sd__jv_int((int64_t)v->u.l->n);
    case SD_JV_DICT:
        return sd__jv_int((int64_t)v->u.d->n);
    default:
        sd__jinja_rt_fail(c, line, "object of type '%s' has no len()", sd__jv_type_name(v));
    }
}

static sd_jv f_trim(sd_jctx *c, const sd_jv *v, sd_jargs *a, int line)
{
    static const char *const kws[] = {"chars", NULL};
    sd__jargs_check(c, a, 1, kws, "trim", line);
    const sd_jv *ch = sd__jargs_get(a, 0, "chars");
    sd_jargs m = no_args();
    m.n = ch ? 1 : 0;
    m.v = ch;
    sd_jv s = str_of(c, v);
    return call_method(c, &s, "strip", &m, line);
}

static sd_jv f_tojson(sd_jctx *c, const sd_jv *v, sd_jargs *a, int line)
{
    static const char *const kws[] = {"ensure_ascii", "indent", "separators", "sort_keys", NULL};
    sd__jargs_check(c, a, 4, kws, "tojson", line);
    const sd_jv *ea = sd__jargs_get(a, 0, "ensure_ascii");
    const sd_jv *ind = sd__jargs_get(a, 1, "indent");
    const sd_jv *sep = sd__jargs_get(a, 2, "separators");
    const sd_jv *sk = sd__jargs_get(a, 3, "sort_keys");
    if (ea && sd__jv_truthy(ea))
        sd__jinja_rt_fail(c, line, "tojson(ensure_ascii=True) is not supported");
    if (sep && sep->type != SD_JV_NONE)
        sd__jinja_rt_fail(c, line, "tojson(separators=...) is not supported");
    int indent = -1;
    if (ind && ind->type != SD_JV_NONE) {
        int64_t i = sd__jinja_want_int(c, ind, "indent", line);
        indent = i < 0 ? 0 : i > 64 ? 64 : (int)i; /* json.dumps: negative acts as 0 */
    }
    sd_jbuf b = {.a = &c->a, .limit = c->lim.max_output};
    if (sd__jv_tojson(&b, v, indent, sk && sd__jv_truthy(sk), 0) < 0)
        sd__jinja_rt_fail(c, line, "Object of type %s is not JSON serializable", sd__jv_type_name(v));
    return sd__jbuf_value(&b);
}

static sd_jv attr_path(sd_jctx *c, const sd_jv *item, const sd_jv *attr, int line)
{
    if (attr->type == SD_JV_INT)
        return sd__jinja_getitem(c, item, attr, line);
    sd_jv s = sd__jinja_want_str(c, attr, "attribute", line);
    /* "a.b" walks nested attributes; digits index lists */
    sd_jv cur = *item;
    const char *p = s.u.s.p, *end = p + s.u.s.n;
    while (p <= end) {
        const char *dot = memchr(p, '.', (size_t)(end - p));
        size_t n = dot ? (size_t)(dot - p) : (size_t)(end - p);
        sd_jv key = sd__jv_str(p, n);
        cur = sd__jinja_getitem(c, &cur, &key, line);
        if (!dot)
            break;
        p = dot + 1;
    }
    return cur;
}

static sd_jv f_join(sd_jctx *c, const sd_jv *v, sd_jargs *a, int line)
{
    static const char *const kws[] = {"d", "attribute", NULL};
    sd__jargs_check(c, a, 2, kws, "join", line);
    const sd_jv *d = sd__jargs_get(a, 0, "d");
    const sd_jv *attr = sd__jargs_get(a, 1, "attribute");
    sd_jv sep = d ? str_of(c, d) : sd__jv_str("", 0);
    sd_jv items = sd__jinja_iterate(c, v, line);
    sd_jbuf b = {.a = &c->a, .limit = c->lim.max_output};
    for (size_t k = 0; k < items.u.l->n; k++) {
        if (k)
            sd__jbuf_put(&b, sep.u.s.p, sep.u.s.n);
        sd_jv it =
            attr && attr->type != SD_JV_NONE ? attr_path(c, &items.u.l->v[k], attr, line) : items.u.l->v[k];
        sd__jv_str_append(&b, &it);
    }
    return sd__jbuf_value(&b);
}

static sd_jv f_default(sd_jctx *c, const sd_jv *v, sd_jargs *a, int line)
{
    static const char *const kws[] = {"default_value", "boolean", NULL};
    sd__jargs_check(c, a, 2, kws, "default", line);
    const sd_jv *dv = sd__jargs_get(a, 0, "default_value");
    const sd_jv *boolean = sd__jargs_get(a, 1, "boolean");
    int use = v->type == SD_JV_UNDEF || (boolean && sd__jv_truthy(boolean) && !sd__jv_truthy(v));
    if (!use)
        return *v;
    return dv ? *dv : sd__jv_str("", 0);
}

static sd_jv f_upper(sd_jctx *c, const sd_jv *v, sd_jargs *a, int line)
{
    sd_jv s = str_of(c, v);
    return call_method(c, &s, "upper", a, line);
}

static sd_jv f_lower(sd_jctx *c, const sd_jv *v, sd_jargs *a, int line)
{
    sd_jv s = str_of(c, v);
    return call_method(c, &s, "lower", a, line);
}

static sd_jv f_capitalize(sd_jctx *c, const sd_jv *v, sd_jargs *a, int line)
{
    sd_jv s = str_of(c, v);
    return call_method(c, &s, "capitalize", a, line);
}

/* jinja2's title: capitalise each piece split at runs of [-\s({[<]. */
static sd_jv f_title(sd_jctx *c, const sd_jv *v, sd_jargs *a, int line)
{
    sd__jargs_check(c, a, 0, NULL, "title", line);
    sd_jv s = str_of(c, v);
    sd_jbuf b = {.a = &c->a};
    size_t pos = 0, n = s.u.s.n;
    int at_start = 1;
    while (pos < n) {
        size_t start = pos;
        uint32_t cp = sd__utf8_next(s.u.s.p, n, &pos);
        int sep = cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || sd__py_isspace(cp);
        sd_jv one = sd__jv_str(s.u.s.p + start, pos - start);
        sd_jargs none = no_args();
        sd_jv m = call_method(c, &one, at_start ? "upper" : "lower", &none, line);
        sd__jbuf_put(&b, m.u.s.p, m.u.s.n);
        at_start = sep;
    }
    return sd__jbuf_value(&b);
}

static sd_jv f_replace(sd_jctx *c, const sd_jv *v, sd_jargs *a, int line)
{
    sd_jv s = str_of(c, v);
    if (a->n == 3 && a->v[2].type == SD_JV_NONE)
        a->n = 2;
    return call_method(c, &s, "replace", a, line);
}

static sd_jv f_string(sd_jctx *c, const sd_jv *v, sd_jargs *a, int line)
{
    return str_of(c, v);
}

static sd_jv f_int(sd_jctx *c, const sd_jv *v, sd_jargs *a, int line)
{
    const sd_jv *dflt = sd__jargs_get(a, 0, "default");
    sd_jv fallback = dflt ? *dflt : sd__jv_int(0);
    if (v->type == SD_JV_INT)
        return *v;
    if (v->type == SD_JV_BOOL)
        return sd__jv_int(v->u.b);
    if (v->type == SD_JV_FLOAT)
        return isfinite(v->u.f) && fabs(v->u.f) < 9.2e18 ? sd__jv_int((int64_t)v->u.f) : fallback;
    if (v->type == SD_JV_STR) {
        char *t = sd__jinja_strdup(&c->a, v->u.s.p, v->u.s.n), *end;
        long long i = strtoll(t, &end, 10);
        while (*end == ' ' || *end == '\t' || *end == '\n')
            end++;
        if (end != t && *end == 0)
            return sd__jv_int(i);
        double f = strtod(t, &end);
        while (*end == ' ' || *end == '\t' || *end == '\n')
            end++;
        if (end != t && *end == 0 && isfinite(f) && fabs(f) < 9.2e18)
            return sd__jv_int((int64_t)f);
    }
    return fallback;
}

static sd_jv f_float(sd_jctx *c, const sd_jv *v, sd_jargs *a, int line)
{
    const sd_jv *dflt = sd__jargs_get(a, 0, "default");
    if (sd__jv_is_number(v))
        return sd__jv_float(sd__jv_as_double(v));
    if (v->type == SD_JV_STR) {
        char *t = sd__jinja_strdup(&c->a, v->u.s.p, v->u.s.n), *end;
        double f = strtod(t, &end);
        while (*end == ' ' || *end == '\t' || *end == '\n')
            end++;
        if (end != t && *end == 0)
            return sd__jv_float(f);
    }
    return dflt ? *dflt : sd__jv_float(0.0);
}

static sd_jv f_list(sd_jctx *c, const sd_jv *v, sd_jargs *a, int line)
{
    if (v->type == SD_JV_LIST) {
        sd_jv l = *v;
        l.flags = 0;
        return l;
    }
    return sd__jinja_iterate(c, v, line);
}

static sd_jv f_first(sd_jctx *c, const sd_jv *v, sd_jargs *a, int line)
{
    sd_jv items = sd__jinja_iterate(c, v, line);
    if (items.u.l->n == 0)
        return sd__jinja_undef_fmt(c, "No first item, sequence was empty.");
    return items.u.l->v[0];
}

static sd_jv f_last(sd_jctx *c, const sd_jv *v, sd_jargs *a, int line)
{
    sd_jv items = sd__jinja_iterate(c, v, line);
    if (items.u.l->n == 0)
        return sd__jinja_undef_fmt(c, "No last item, sequence was empty.");
    return items.u.l->v[items.u.l->n - 1];
}

static sd_jv f_reverse(sd_jctx *c, const sd_jv *v, sd_jargs *a, int line)
{
    sd_jv none = sd__jv_none(), minus1 = sd__jv_int(-1);
    if (v->type == SD_JV_STR)
        return sd__jinja_slice(c, v, &none, &none, &minus1, line);
    sd_jv items = sd__jinja_iterate(c, v, line);
    return sd__jinja_slice(c, &items, &none, &none, &minus1, line);
}

static sd_jv f_items(sd_jctx *c, const sd_jv *v, sd_jargs *a, int line)
{
    if (v->type == SD_JV_UNDEF)
        return sd__jv_list_new(&c->a, 0);
    if (v->type != SD_JV_DICT)
        sd__jinja_rt_fail(c, line, "Can only get item pairs from a mapping.");
    return call_method(c, v, "items", a, line);
}

static sd_jv f_safe(sd_jctx *c, const sd_jv *v, sd_jargs *a, int line)
{
    return *v;
}

static sd_jv f_escape(sd_jctx *c, const sd_jv *v, sd_jargs *a, int line)
{
    sd_jv s = str_of(c, v);
    sd_jbuf b = {.a = &c->a, .limit = c->lim.max_output};
    for (size_t k = 0; k < s.u.s.n; k++) {
        char ch = s.u.s.p[k];
        const char *e = ch == '&'    ? "&amp;"
                        : ch == '<'  ? "&lt;"
                        : ch == '>'  ? "&gt;"
                        : ch == '"'  ? "&#34;"
                        : ch == '\'' ? "&#39;"
                                     : NULL;
        if (e)
            sd__jbuf_puts(&b, e);
        else
            sd__jbuf_putc(&b, ch);
    }
    return sd__jbuf_value(&b);
}

static sd_jv f_abs(sd_jctx *c, const sd_jv *v, sd_jargs *a, int line)
{
    if (v->type == SD_JV_FLOAT)
        return sd__jv_float(fabs(v->u.f));
    int64_t i = sd__jinja_want_int(c, v, "abs() argument", line);
    if (i == INT64_MIN)
        sd__jinja_rt_fail(c, line, "integer overflow");
    return sd__jv_int(i < 0 ? -i : i);
}

static sd_jv f_round(sd_jctx *c, const sd_jv *v, sd_jargs *a, int line)
{
    static const char *const kws[] = {"precision", "method", NULL};
    sd__jargs_check(c, a, 2, kws, "round", line);
    const sd_jv *p = sd__jargs_get(a, 0, "precision");
    const sd_jv *m = sd__jargs_get(a, 1, "method");
    int64_t prec = p ? sd__jinja_want_int(c, p, "precision", line) : 0;
    if (!sd__jv_is_number(v))
        sd__jinja_rt_fail(c, line, "round() needs a number");
    double x = sd__jv_as_double(v), scale = pow(10.0, (double)prec);
    const char *method = m ? sd__jinja_want_str(c, m, "method", line).u.s.p : "common";
    double r;
    if (!strncmp(method, "floor", 5))
        r = floor(x * scale) / scale;
    else if (!strncmp(method, "ceil", 4))
        r = ceil(x * scale) / scale;
    else if (prec == 0)
        r = nearbyint(x); /* Python's round(): ties to even */
    else if (prec > 0 && prec < 300) {
        /* correctly rounded decimal, as Python's round(x, n) */
        char buf[400];
        snprintf(buf, sizeof buf, "%.*f", (int)prec, x);
        r = strtod(buf, NULL);
    } else
        r = nearbyint(x * scale) / scale;
    return sd__jv_float(r);
}

static sd_jv f_indent(sd_jctx *c, const sd_jv *v, sd_jargs *a, int line)
{
    static const char *const kws[] = {"width", "first", "blank", NULL};
    sd__jargs_check(c, a, 3, kws, "indent", line);
    const sd_jv *w = sd__jargs_get(a, 0, "width");
    const sd_jv *first = sd__jargs_get(a, 1, "first");
    const sd_jv *blank = sd__jargs_get(a, 2, "blank");
    sd_jbuf ind = {.a = &c->a};
    if (w && w->type == SD_JV_STR) {
        sd__jbuf_put(&ind, w->u.s.p, w->u.s.n);
    } else {
        int64_t n = w ? sd__jinja_want_int(c, w, "width", line) : 4;
        for (int64_t k = 0; k < n && k < 1024; k++)
            sd__jbuf_putc(&ind, ' ');
    }
    /* jinja2 appends "\n" then splits lines, so a trailing newline is dropped */
    sd_jbuf src = {.a = &c->a};
    sd_jv s = str_of(c, v);
    sd__jbuf_put(&src, s.u.s.p, s.u.s.n);
    sd__jbuf_putc(&src, '\n');
    sd_jv full = sd__jbuf_value(&src);
    sd_jargs none = no_args();
    sd_jv lines = call_method(c, &full, "splitlines", &none, line);
    sd_jbuf b = {.a = &c->a, .limit = c->lim.max_output};
    if (first && sd__jv_truthy(first))
        sd__jbuf_put(&b, ind.p, ind.n);
    for (size_t k = 0; k < lines.u.l->n; k++) {
        const sd_jv *ln = &lines.u.l->v[k];
        if (k) {
            sd__jbuf_putc(&b, '\n');
            if (ln->u.s.n || (blank && sd__jv_truthy(blank)))
                sd__jbuf_put(&b, ind.p, ind.n);
        }
        sd__jbuf_put(&b, ln->u.s.p, ln->u.s.n);
    }
    return sd__jbuf_value(&b);
}

/* select/reject/selectattr/rejectattr: keep items whose test (or truthiness) matches. */
static sd_jv select_impl(sd_jctx *c, const sd_jv *v, sd_jargs *a, int line, int by_attr, int keep)
{
    sd_jv items = sd__jinja_iterate(c, v, line);
    size_t skip = by_attr ? 1 : 0;
    if (by_attr && a->n < 1)
        sd__jinja_rt_fail(c, line, "missing attribute argument");
    const sd_jv *test = a->n > skip ? &a->v[skip] : NULL;
    if (test)
        sd__jinja_want_str(c, test, "test name", line);
    char *tname = test ? sd__jinja_strdup(&c->a, test->u.s.p, test->u.s.n) : NULL;
    if (tname && !sd__jinja_has_test(tname))
        sd__jinja_rt_fail(c, line, "No test named '%s'.", tname);
    sd_jargs targs = {.n = a->n > skip + 1 ? a->n - skip - 1 : 0, .v = a->v + skip + 1};
    sd_jv out = sd__jv_list_new(&c->a, items.u.l->n);
    size_t n = 0;
    for (size_t k = 0; k < items.u.l->n; k++) {
        sd_jv it = by_attr ? attr_path(c, &items.u.l->v[k], &a->v[0], line) : items.u.l->v[k];
        int r = tname ? sd__jinja_test(c, tname, &it, &targs, line) : sd__jv_truthy(&it);
        if (r == keep)
            out.u.l->v[n++] = items.u.l->v[k];
    }
    out.u.l->n = n;
    return out;
}

static sd_jv f_select(sd_jctx *c, const sd_jv *v, sd_jargs *a, int line)
{
    return select_impl(c, v, a, line, 0, 1);
}

static sd_jv f_reject(sd_jctx *c, const sd_jv *v, sd_jargs *a, int line)
{
    return select_impl(c, v, a, line, 0, 0);
}

static sd_jv f_selectattr(sd_jctx *c, const sd_jv *v, sd_jargs *a, int line)
{
    return select_impl(c, v, a, line, 1, 1);
}

static sd_jv f_rejectattr(sd_jctx *c, const sd_jv *v, sd_jargs *a, int line)
{
    return select_impl(c, v, a, line, 1, 0);
}

static sd_jv f_map(sd_jctx *c, const sd_jv *v, sd_jargs *a, int line)
{
    sd_jv items = sd__jinja_iterate(c, v, line);
    sd_jv out = sd__jv_list_new(&c->a, items.u.l->n);
    const sd_jv *attr = sd__jargs_get(a, a->n, "attribute");
    const sd_jv *dflt = sd__jargs_get(a, a->n, "default");
    const char *fname = NULL;
    sd_jargs fargs = {0};
    if (!attr) {
        if (a->n < 1)
            sd__jinja_rt_fail(c, line, "map requires a filter argument");
        sd_jv f = sd__jinja_want_str(c, &a->v[0], "filter name", line);
        fname = sd__jinja_strdup(&c->a, f.u.s.p, f.u.s.n);
        if (!sd__jinja_has_filter(fname))
            sd__jinja_rt_fail(c, line, "No filter named '%s'.", fname);
        fargs.n = a->n - 1;
        fargs.v = a->v + 1;
    }
    for (size_t k = 0; k < items.u.l->n; k++) {
        sd_jv r;
        if (attr) {
            r = attr_path(c, &items.u.l->v[k], attr, line);
            if (r.type == SD_JV_UNDEF && dflt)
                r = *dflt;
        } else {
            r = sd__jinja_filter(c, fname, &items.u.l->v[k], &fargs, line);
        }
        out.u.l->v[k] = r;
    }
    return out;
}

static sd_jv f_sum(sd_jctx *c, const sd_jv *v, sd_jargs *a, int line)
{
    const sd_jv *attr = sd__jargs_get(a, 0, "attribute");
    const sd_jv *start = sd__jargs_get(a, 1, "start");
    sd_jv items = sd__jinja_iterate(c, v, line);
    sd_jv acc = start ? *start : sd__jv_int(0);
    for (size_t k = 0; k < items.u.l->n; k++) {
        sd_jv it =
            attr && attr->type != SD_JV_NONE ? attr_path(c, &items.u.l->v[k], attr, line) : items.u.l->v[k];
        acc = sd__jinja_binop(c, SD_JOP_ADD, &acc, &it, line);
    }
    return acc;
}

/* sort key: the (attribute of the) item, lower-cased when not case sensitive */
static sd_jv sort_key(sd_jctx *c, const sd_jv *it, const sd_jv *attr, int cs, int line)
{
    sd_jv k = attr && attr->type != SD_JV_NONE ? attr_path(c, it, attr, line) : *it;
    if (!cs && k.type == SD_JV_STR) {
        sd_jargs none = no_args();
        k = call_method(c, &k, "lower", &none, line);
    }
    return k;
}

static sd_jv f_sort(sd_jctx *c, const sd_jv *v, sd_jargs *a, int line)
{
    static const char *const kws[] = {"reverse", "case_sensitive", "attribute", NULL};
    sd__jargs_check(c, a, 3, kws, "sort", line);
    const sd_jv *rev = sd__jargs_get(a, 0, "reverse");
    const sd_jv *cs = sd__jargs_get(a, 1, "case_sensitive");
    const sd_jv *attr = sd__jargs_get(a, 2, "attribute");
    sd_jv items = sd__jinja_iterate(c, v, line);
    size_t n = items.u.l->n;
    sd_jv out = sd__jv_list_new(&c->a, n), keys = sd__jv_list_new(&c->a, n);
    int r = rev && sd__jv_truthy(rev);
    for (size_t k = 0; k < n; k++) {
        sd_jv it = items.u.l->v[k], key = sort_key(c, &it, attr, cs && sd__jv_truthy(cs), line);
        size_t j = k; /* stable insertion sort; Python's reverse sort is stable too */
        while (j > 0 && sd__jinja_compare(c, r ? SD_JOP_GT : SD_JOP_LT, &key, &keys.u.l->v[j - 1], line)) {
            out.u.l->v[j] = out.u.l->v[j - 1];
            keys.u.l->v[j] = keys.u.l->v[j - 1];
            j--;
        }
        out.u.l->v[j] = it;
        keys.u.l->v[j] = key;
    }
    return out;
}

static sd_jv f_dictsort(sd_jctx *c, const sd_jv *v, sd_jargs *a, int line)
{
    static const char *const kws[] = {"case_sensitive", "by", "reverse", NULL};
    sd__jargs_check(c, a, 3, kws, "dictsort", line);
    const sd_jv *cs = sd__jargs_get(a, 0, "case_sensitive");
    const sd_jv *by = sd__jargs_get(a, 1, "by");
    const sd_jv *rev = sd__jargs_get(a, 2, "reverse");
    if (v->type != SD_JV_DICT)
        sd__jinja_rt_fail(c, line, "You can only sort by either \"key\" or \"value\"");
    sd_jargs none = no_args();
    sd_jv pairs = call_method(c, v, "items", &none, line);
    sd_jv idx = sd__jv_int(by && by->type == SD_JV_STR && by->u.s.n == 5 ? 1 : 0);
    sd_jv args[3] = {rev ? *rev : sd__jv_bool(0), cs ? *cs : sd__jv_bool(0), idx};
    sd_jargs sa = {.n = 3, .v = args};
    return f_sort(c, &pairs, &sa, line);
}

static sd_jv f_minmax(sd_jctx *c, const sd_jv *v, sd_jargs *a, int line, int want_max)
{
    sd_jv items = sd__jinja_iterate(c, v, line);
    if (items.u.l->n == 0)
        return sd__jinja_undef_fmt(c, "No aggregated item, sequence was empty.");
    sd_jv best = items.u.l->v[0];
    for (size_t k = 1; k < items.u.l->n; k++)
        if (sd__jinja_compare(c, want_max ? SD_JOP_GT : SD_JOP_LT, &items.u.l->v[k], &best, line))
            best = items.u.l->v[k];
    return best;
}

static sd_jv f_min(sd_jctx *c, const sd_jv *v, sd_jargs *a, int line)
{
    return f_minmax(c, v, a, line, 0);
}

static sd_jv f_max(sd_jctx *c, const sd_jv *v, sd_jargs *a, int line)
{
    return f_minmax(c, v, a, line, 1);
}

static sd_jv f_unique(sd_jctx *c, const sd_jv *v, sd_jargs *a, int line)
{
    sd_jv items = sd__jinja_iterate(c, v, line);
    sd_jv out = sd__jv_list_new(&c->a, items.u.l->n);
    size_t n = 0;
    for (size_t k = 0; k < items.u.l->n; k++) {
        int seen = 0;
        for (size_t j = 0; j < n && !seen; j++)
            seen = sd__jv_equal(&out.u.l->v[j], &items.u.l->v[k]);
        if (!seen)
            out.u.l->v[n++] = items.u.l->v[k];
    }
    out.u.l->n = n;
    return out;
}

static sd_jv f_wordcount(sd_jctx *c, const sd_jv *v, sd_jargs *a, int line)
{
    sd_jv s = str_of(c, v);
    sd_jargs none = no_args();
    sd_jv words = call_method(c, &s, "split", &none, line);
    return sd__jv_int((int64_t)words.u.l->n);
}

static const struct {
    const char *name;
    filter_fn fn;
} filters[] = {
    {"length", f_length},
    {"count", f_length},
    {"trim", f_trim},
    {"tojson", f_tojson},
    {"join", f_join},
    {"default", f_default},
    {"d", f_default},
    {"upper", f_upper},
    {"lower", f_lower},
    {"capitalize", f_capitalize},
    {"title", f_title},
    {"replace", f_replace},
    {"string", f_string},
    {"int", f_int},
    {"float", f_float},
    {"list", f_list},
    {"first", f_first},
    {"last", f_last},
    {"reverse", f_reverse},
    {"items", f_items},
    {"safe", f_safe},
    {"escape", f_escape},
    {"e", f_escape},
    {"abs", f_abs},
    {"round", f_round},
    {"indent", f_indent},
    {"select", f_select},
    {"reject", f_reject},
    {"selectattr", f_selectattr},
    {"rejectattr", f_rejectattr},
    {"map", f_map},
    {"sum", f_sum},
    {"sort", f_sort},
    {"dictsort", f_dictsort},
    {"min", f_min},
    {"max", f_max},
    {"unique", f_unique},
    {"wordcount", f_wordcount},
};

static filter_fn find_filter(const char *name)
{
    for (size_t k = 0; k < sizeof filters / sizeof filters[0]; k++)
        if (!strcmp(filters[k].name, name))
            return filters[k].fn;
    return NULL;
}

int sd__jinja_has_filter(const char *name)
{
    return find_filter(name) != NULL;
}

sd_jv sd__jinja_filter(sd_jctx *c, const char *name, const sd_jv *val, sd_jargs *a, int line)
{
    filter_fn fn = find_filter(name);
    if (!fn)
        sd__jinja_rt_fail(c, line, "No filter named '%s'.", name);
    /* filters other than these treat an undefined input as an error, like jinja2 */
    if (val->type == SD_JV_UNDEF && fn != f_default && fn != f_length && fn != f_string && fn != f_join &&
        fn != f_list && fn != f_items && fn != f_trim && fn != f_upper && fn != f_lower && fn != f_safe &&
        fn != f_escape && fn != f_first && fn != f_last && fn != f_select && fn != f_reject &&
        fn != f_selectattr && fn != f_rejectattr && fn != f_map && fn != f_capitalize && fn != f_title &&
        fn != f_unique && fn != f_sort && fn != f_wordcount && fn != f_sum && fn != f_reverse &&
        fn != f_replace && fn != f_indent && fn != f_int && fn != f_float)
        sd__jinja_rt_fail(c, line, "%s", val->u.undef);
    return fn(c, val, a, line);
}
