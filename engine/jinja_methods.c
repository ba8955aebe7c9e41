/* jinja_methods: Python methods of template values (str, dict, list, loop) and the global
 * functions transformers' environment provides (range, namespace, dict, raise_exception,
 * strftime_now). */
#include "jinja_impl.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unicase.h>
#include <unictype.h>

#define SD_JINJA_MAX_RANGE 100000 /* jinja2's sandbox limit */

const sd_jv *sd__jargs_get(const sd_jargs *a, size_t pos, const char *kw)
{
    if (pos < a->n)
        return &a->v[pos];
    for (size_t k = 0; kw && k < a->nk; k++)
        if (!strcmp(a->kname[k], kw))
            return &a->kv[k];
    return NULL;
}

void sd__jargs_check(sd_jctx *c, const sd_jargs *a, size_t max_pos, const char *const *kws, const char *fname,
                     int line)
{
    if (a->n > max_pos)
        sd__jinja_rt_fail(c, line, "%s() takes at most %zu positional argument(s) (%zu given)", fname,
                          max_pos, a->n);
    for (size_t k = 0; k < a->nk; k++) {
        int ok = 0;
        for (size_t j = 0; kws && kws[j]; j++)
            ok |= !strcmp(kws[j], a->kname[k]);
        if (!ok)
            sd__jinja_rt_fail(c, line, "%s() got an unexpected keyword argument '%s'", fname, a->kname[k]);
    }
}

sd_jv sd__jinja_want_str(sd_jctx *c, const sd_jv *v, const char *what, int line)
{
    if (!v || v->type != SD_JV_STR)
        sd__jinja_rt_fail(c, line, "%s must be str, not %s", what, v ? sd__jv_type_name(v) : "nothing");
    return *v;
}

int64_t sd__jinja_want_int(sd_jctx *c, const sd_jv *v, const char *what, int line)
{
    if (!v || (v->type != SD_JV_INT && v->type != SD_JV_BOOL))
        sd__jinja_rt_fail(c, line, "%s must be int, not %s", what, v ? sd__jv_type_name(v) : "nothing");
    return v->type == SD_JV_BOOL ? v->u.b : v->u.i;
}

/* ---- str ---- */

static int has_affix(const sd_jv *s, const sd_jv *affix, int at_end)
{
    size_t n = affix->u.s.n;
    if (n > s->u.s.n)
        return 0;
    return memcmp(s->u.s.p + (at_end ? s->u.s.n - n : 0), affix->u.s.p, n) == 0;
}

static sd_jv str_affix(sd_jctx *c, const sd_jv *self, sd_jargs *a, int line, int at_end)
{
    sd__jargs_check(c, a, 1, NULL, at_end ? "endswith" : "startswith", line);
    const sd_jv *p = sd__jargs_get(a, 0, NULL);
    if (p && p->type == SD_JV_LIST) {
        for (size_t k = 0; k < p->u.l->n; k++) {
            sd_jv x = sd__jinja_want_str(c, &p->u.l->v[k], "tuple item", line);
            if (has_affix(self, &x, at_end))
                return sd__jv_bool(1);
        }
        return sd__jv_bool(0);
    }
    sd_jv x = sd__jinja_want_str(c, p, "argument", line);
    return sd__jv_bool(has_affix(self, &x, at_end));
}

static sd_jv m_startswith(sd_jctx *c, const sd_jv *self, sd_jargs *a, int line)
{
    return str_affix(c, self, a, line, 0);
}

static sd_jv m_endswith(sd_jctx *c, const sd_jv *self, sd_jargs *a, int line)
{
    return str_affix(c, self, a, line, 1);
}

/* Strips code points in `chars` (NULL: Python whitespace) from the chosen ends. */
static sd_jv strip_impl(const sd_jv *s, const sd_jv *chars, int left, int right)
{
    const char *p = s->u.s.p;
    size_t n = s->u.s.n, a = 0, b = n;
    size_t pos = 0;
    /* scan code points; remember the first kept start and the last kept end */
    size_t first = n, last = 0;
    while (pos < n) {
        size_t start = pos;
        uint32_t cp = sd__utf8_next(p, n, &pos);
        int strip;
        if (!chars) {
            strip = sd__py_isspace(cp);
        } else {
            strip = 0;
            size_t q = 0;
            while (q < chars->u.s.n && !strip)
                strip = sd__utf8_next(chars->u.s.p, chars->u.s.n, &q) == cp;
        }
        if (!strip) {
            if (first == n)
                first = start;
            last = pos;
        }
    }
    if (first == n) /* all strippable: every variant leaves nothing */
        return sd__jv_str(p, 0);
    if (left)
        a = first;
    if (right)
        b = last;
    return sd__jv_str(p + a, b - a);
}

static sd_jv strip_method(sd_jctx *c, const sd_jv *self, sd_jargs *a, int line, int left, int right)
{
    sd__jargs_check(c, a, 1, NULL, "strip", line);
    const sd_jv *ch = sd__jargs_get(a, 0, NULL);
    if (ch && ch->type == SD_JV_NONE)
        ch = NULL;
    if (ch)
        sd__jinja_want_str(c, ch, "strip arg", line);
    return strip_impl(self, ch, left, right);
}

static sd_jv m_strip(sd_jctx *c, const sd_jv *self, sd_jargs *a, int line)
{
    return strip_method(c, self, a, line, 1, 1);
}

static sd_jv m_lstrip(sd_jctx *c, const sd_jv *self, sd_jargs *a, int line)
{
    return strip_method(c, self, a, line, 1, 0);
}

static sd_jv m_rstrip(sd_jctx *c, const sd_jv *self, sd_jargs *a, int line)
{
    return strip_method(c, self, a, line, 0, 1);
}

/* Grows a list value by one item (amortised in the arena). */
static void list_push(sd_jctx *c, sd_jv *l, size_t *cap, sd_jv item)
{
    if (l->u.l->n == *cap) {
        size_t nc = *cap ? *cap * 2 : 8;
        sd_jv *v = sd__jinja_alloc(&c->a, nc * sizeof *v);
        if (l->u.l->n)
            memcpy(v, l->u.l->v, l->u.l->n * sizeof *v);
        l->u.l->v = v;
        *cap = nc;
    }
    l->u.l->v[l->u.l->n++] = item;
}

static sd_jv split_ws(sd_jctx *c, const sd_jv *self, int64_t maxsplit)
{
    sd_jv l = sd__jv_list_new(&c->a, 0);
    size_t cap = 0, pos = 0, n = self->u.s.n;
    const char *p = self->u.s.p;
    while (pos < n) {
        size_t start = pos, q = pos;
        if (sd__py_isspace(sd__utf8_next(p, n, &q))) {
            pos = q;
            continue;
        }
        if (maxsplit >= 0 && (int64_t)l.u.l->n == maxsplit) {
            /* the rest, right-stripped, is the last item */
            sd_jv rest = sd__jv_str(p + start, n - start);
            list_push(c, &l, &cap, strip_impl(&rest, NULL, 0, 1));
            return l;
        }
        size_t end = start;
        q = start;
        while (q < n) {
            size_t r = q;
            if (sd__py_isspace(sd__utf8_next(p, n, &r)))
                break;
            q = r;
        }
        end = q;
        list_push(c, &l, &cap, sd__jv_str(p + start, end - start));
        pos = end;
    }
    return l;
}

static sd_jv m_split(sd_jctx *c, const sd_jv *self, sd_jargs *a, int line)
{
    static const char *const kws[] = {"sep", "maxsplit", NULL};
    sd__jargs_check(c, a, 2, kws, "split", line);
    const sd_jv *sep = sd__jargs_get(a, 0, "sep");
    const sd_jv *ms = sd__jargs_get(a, 1, "maxsplit");
    int64_t maxsplit = ms ? sd__jinja_want_int(c, ms, "maxsplit", line) : -1;
    if (!sep || sep->type == SD_JV_NONE)
        return split_ws(c, self, maxsplit);
    sd_jv s = sd__jinja_want_str(c, sep, "separator", line);
    if (s.u.s.n == 0)
        sd__jinja_rt_fail(c, line, "empty separator");
    sd_jv l = sd__jv_list_new(&c->a, 0);
    size_t cap = 0;
    const char *p = self->u.s.p, *end = p + self->u.s.n;
    while (maxsplit < 0 || (int64_t)l.u.l->n < maxsplit) {
        const char *hit = memmem(p, (size_t)(end - p), s.u.s.p, s.u.s.n);
        if (!hit)
            break;
        list_push(c, &l, &cap, sd__jv_str(p, (size_t)(hit - p)));
        p = hit + s.u.s.n;
    }
    list_push(c, &l, &cap, sd__jv_str(p, (size_t)(end - p)));
    return l;
}

static sd_jv m_replace(sd_jctx *c, const sd_jv *self, sd_jargs *a, int line)
{
    sd__jargs_check(c, a, 3, NULL, "replace", line);
    sd_jv old = sd__jinja_want_str(c, sd__jargs_get(a, 0, NULL), "replace old", line);
    sd_jv new = sd__jinja_want_str(c, sd__jargs_get(a, 1, NULL), "replace new", line);
    const sd_jv *cnt = sd__jargs_get(a, 2, NULL);
    int64_t count = cnt ? sd__jinja_want_int(c, cnt, "count", line) : -1;
    sd_jbuf b = {.a = &c->a, .limit = c->lim.max_output};
    const char *p = self->u.s.p, *end = p + self->u.s.n;
    int64_t done = 0;
    if (old.u.s.n == 0) { /* Python inserts `new` around every code point */
        size_t pos = 0;
        while ((count < 0 || done < count)) {
            sd__jbuf_put(&b, new.u.s.p, new.u.s.n);
            done++;
            if (pos >= self->u.s.n)
                break;
            size_t start = pos;
            sd__utf8_next(self->u.s.p, self->u.s.n, &pos);
            sd__jbuf_put(&b, self->u.s.p + start, pos - start);
        }
        sd__jbuf_put(&b, self->u.s.p + pos, self->u.s.n - pos);
        return sd__jbuf_value(&b);
    }
    while (count < 0 || done < count) {
        const char *hit = memmem(p, (size_t)(end - p), old.u.s.p, old.u.s.n);
        if (!hit)
            break;
        sd__jbuf_put(&b, p, (size_t)(hit - p));
        sd__jbuf_put(&b, new.u.s.p, new.u.s.n);
        p = hit + old.u.s.n;
        done++;
    }
    sd__jbuf_put(&b, p, (size_t)(end - p));
    return sd__jbuf_value(&b);
}

/* Case mapping through libunistring (full mappings, as Python's str.upper/lower). The result
 * goes straight into arena memory reserved beforehand, so that nothing malloc'd is held when
 * an arena limit unwinds. */
static sd_jv case_map(sd_jctx *c, const sd_jv *s, int upper, int line)
{
    size_t cap = 4 * s->u.s.n + 16; /* full case mappings grow a code point at most 3x */
    uint8_t *buf = sd__jinja_alloc(&c->a, cap);
    size_t len = cap;
    uint8_t *r = upper ? u8_toupper((const uint8_t *)s->u.s.p, s->u.s.n, NULL, NULL, buf, &len)
                       : u8_tolower((const uint8_t *)s->u.s.p, s->u.s.n, NULL, NULL, buf, &len);
    if (r && r != buf) { /* libunistring needed more room: copy what fits, or fail */
        int fits = len <= cap;
        if (fits)
            memcpy(buf, r, len);
        free(r);
        if (!fits)
            sd__jinja_rt_fail(c, line, "case mapping result too large");
        r = buf;
    }
    if (!r)
        sd__jinja_rt_fail(c, line, "case mapping failed (invalid UTF-8?)");
    return sd__jv_str((const char *)buf, len);
}

static sd_jv m_upper(sd_jctx *c, const sd_jv *self, sd_jargs *a, int line)
{
    sd__jargs_check(c, a, 0, NULL, "upper", line);
    return case_map(c, self, 1, line);
}

static sd_jv m_lower(sd_jctx *c, const sd_jv *self, sd_jargs *a, int line)
{
    sd__jargs_check(c, a, 0, NULL, "lower", line);
    return case_map(c, self, 0, line);
}

/* str.title / str.capitalize: case-map each code point by its position. */
static sd_jv title_impl(sd_jctx *c, const sd_jv *self, int capitalize, int line)
{
    sd_jbuf b = {.a = &c->a};
    size_t pos = 0;
    int prev_cased = 0, first = 1;
    while (pos < self->u.s.n) {
        size_t start = pos;
        uint32_t cp = sd__utf8_next(self->u.s.p, self->u.s.n, &pos);
        int up = capitalize ? first : !prev_cased;
        sd_jv one = sd__jv_str(self->u.s.p + start, pos - start);
        sd_jv m = case_map(c, &one, up, line);
        sd__jbuf_put(&b, m.u.s.p, m.u.s.n);
        prev_cased = uc_is_property_cased(cp);
        first = 0;
    }
    return sd__jbuf_value(&b);
}

static sd_jv m_title(sd_jctx *c, const sd_jv *self, sd_jargs *a, int line)
{
    sd__jargs_check(c, a, 0, NULL, "title", line);
    return title_impl(c, self, 0, line);
}

static sd_jv m_capitalize(sd_jctx *c, const sd_jv *self, sd_jargs *a, int line)
{
    sd__jargs_check(c, a, 0, NULL, "capitalize", line);
    return title_impl(c, self, 1, line);
}

/* find/rfind/count/index: byte search, results in code points. */
static sd_jv search(sd_jctx *c, const sd_jv *self, sd_jargs *a, int line, int mode)
{
    static const char *const names[] = {"find", "rfind", "count", "index"};
    sd__jargs_check(c, a, 1, NULL, names[mode], line);
    sd_jv sub = sd__jinja_want_str(c, sd__jargs_get(a, 0, NULL), "substring", line);
    const char *p = self->u.s.p, *end = p + self->u.s.n, *found = NULL;
    int64_t count = 0;
    for (const char *q = p; q <= end;) {
        const char *hit = memmem(q, (size_t)(end - q), sub.u.s.p, sub.u.s.n);
        if (!hit)
            break;
        count++;
        found = (mode == 1 || !found) ? hit : found;
        if (mode == 0 || mode == 3)
            break;
        q = hit + (sub.u.s.n ? sub.u.s.n : 1);
    }
    if (mode == 2)
        return sd__jv_int(count);
    if (!found) {
        if (mode == 3)
            sd__jinja_rt_fail(c, line, "substring not found");
        return sd__jv_int(-1);
    }
    return sd__jv_int((int64_t)sd__utf8_len(p, (size_t)(found - p)));
}

static sd_jv m_find(sd_jctx *c, const sd_jv *self, sd_jargs *a, int line)
{
    return search(c, self, a, line, 0);
}

static sd_jv m_rfind(sd_jctx *c, const sd_jv *self, sd_jargs *a, int line)
{
    return search(c, self, a, line, 1);
}

static sd_jv m_count(sd_jctx *c, const sd_jv *self, sd_jargs *a, int line)
{
    if (self->type == SD_JV_LIST) {
        const sd_jv *x = sd__jargs_get(a, 0, NULL);
        int64_t n = 0;
        for (size_t k = 0; x && k < self->u.l->n; k++)
            n += sd__jv_equal(x, &self->u.l->v[k]);
        return sd__jv_int(n);
    }
    return search(c, self, a, line, 2);
}

static sd_jv m_index(sd_jctx *c, const sd_jv *self, sd_jargs *a, int line)
{
    if (self->type == SD_JV_LIST) {
        const sd_jv *x = sd__jargs_get(a, 0, NULL);
        for (size_t k = 0; x && k < self->u.l->n; k++)
            if (sd__jv_equal(x, &self->u.l->v[k]))
                return sd__jv_int((int64_t)k);
        sd__jinja_rt_fail(c, line, "x not in list");
    }
    return search(c, self, a, line, 3);
}

static sd_jv m_join(sd_jctx *c, const sd_jv *self, sd_jargs *a, int line)
{
    sd__jargs_check(c, a, 1, NULL, "join", line);
    const sd_jv *it = sd__jargs_get(a, 0, NULL);
    if (!it)
        sd__jinja_rt_fail(c, line, "join() takes exactly one argument");
    sd_jv items = sd__jinja_iterate(c, it, line);
    sd_jbuf b = {.a = &c->a, .limit = c->lim.max_output};
    for (size_t k = 0; k < items.u.l->n; k++) {
        if (k)
            sd__jbuf_put(&b, self->u.s.p, self->u.s.n);
        sd_jv s = sd__jinja_want_str(c, &items.u.l->v[k], "sequence item", line);
        sd__jbuf_put(&b, s.u.s.p, s.u.s.n);
    }
    return sd__jbuf_value(&b);
}

static sd_jv m_splitlines(sd_jctx *c, const sd_jv *self, sd_jargs *a, int line)
{
    sd__jargs_check(c, a, 0, NULL, "splitlines", line);
    sd_jv l = sd__jv_list_new(&c->a, 0);
    size_t cap = 0, pos = 0, start = 0, n = self->u.s.n;
    while (pos < n) {
        size_t here = pos;
        uint32_t cp = sd__utf8_next(self->u.s.p, n, &pos);
        int brk = cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c || (cp >= 0x1c && cp <= 0x1e) ||
                  cp == 0x85 || cp == 0x2028 || cp == 0x2029;
        if (!brk)
            continue;
        list_push(c, &l, &cap, sd__jv_str(self->u.s.p + start, here - start));
        if (cp == '\r' && pos < n && self->u.s.p[pos] == '\n')
            pos++;
        start = pos;
    }
    if (start < n)
        list_push(c, &l, &cap, sd__jv_str(self->u.s.p + start, n - start));
    return l;
}

/* isdigit/isalpha/isalnum/isspace/isupper/islower */
static sd_jv str_class(const sd_jv *self, int kind)
{
    size_t pos = 0;
    int any_cased = 0;
    if (self->u.s.n == 0)
        return sd__jv_bool(0);
    while (pos < self->u.s.n) {
        uint32_t cp = sd__utf8_next(self->u.s.p, self->u.s.n, &pos);
        int ok;
        switch (kind) {
        case 0:
            ok = uc_is_property_numeric(cp) && uc_is_general_category(cp, UC_DECIMAL_DIGIT_NUMBER);
            ok = ok || (cp >= '0' && cp <= '9');
            break;
        case 1:
            ok = uc_is_alpha(cp);
            break;
        case 2:
            ok = uc_is_alnum(cp);
            break;
        case 3:
            ok = sd__py_isspace(cp);
            break;
        default:
            if (uc_is_lower(cp) || uc_is_upper(cp)) {
                any_cased = 1;
                ok = kind == 4 ? !uc_is_lower(cp) : !uc_is_upper(cp);
            } else {
                ok = 1;
            }
        }
        if (!ok)
            return sd__jv_bool(0);
    }
    return sd__jv_bool(kind < 4 || any_cased);
}

#define CLASS_METHOD(name, kind)                                                                             \
    static sd_jv name(sd_jctx *c, const sd_jv *self, sd_jargs *a, int line)                                  \
    {                                                                                                        \
        sd__jargs_check(c, a, 0, NULL, &(#name)[2], line);                                                   \
        return str_class(self, kind);                                                                        \
    }
CLASS_METHOD(m_isdigit, 0)
CLASS_METHOD(m_isalpha, 1)
CLASS_METHOD(m_isalnum, 2)
CLASS_METHOD(m_isspace, 3)
CLASS_METHOD(m_isupper, 4)
CLASS_METHOD(m_islower, 5)

/* ---- dict, list, loop ---- */

static sd_jv m_items(sd_jctx *c, const sd_jv *self, sd_jargs *a, int line)
{
    sd__jargs_check(c, a, 0, NULL, "items", line);
    sd_jv l = sd__jv_list_new(&c->a, self->u.d->n);
    for (size_t k = 0; k < self->u.d->n; k++) {
        sd_jv pair = sd__jv_list_new(&c->a, 2);
        pair.flags = SD_JV_TUPLE;
        pair.u.l->v[0] = self->u.d->k[k];
        pair.u.l->v[1] = self->u.d->v[k];
        l.u.l->v[k] = pair;
    }
    return l;
}

static sd_jv m_keys(sd_jctx *c, const sd_jv *self, sd_jargs *a, int line)
{
    sd__jargs_check(c, a, 0, NULL, "keys", line);
    return sd__jinja_iterate(c, self, line);
}

static sd_jv m_values(sd_jctx *c, const sd_jv *self, sd_jargs *a, int line)
{
    sd__jargs_check(c, a, 0, NULL, "values", line);
    sd_jv l = sd__jv_list_new(&c->a, self->u.d->n);
    memcpy(l.u.l->v, self->u.d->v, self->u.d->n * sizeof(sd_jv));
    return l;
}

static sd_jv m_get(sd_jctx *c, const sd_jv *self, sd_jargs *a, int line)
{
    sd__jargs_check(c, a, 2, NULL, "get", line);
    const sd_jv *k = sd__jargs_get(a, 0, NULL);
    const sd_jv *dflt = sd__jargs_get(a, 1, NULL);
    if (!k)
        sd__jinja_rt_fail(c, line, "get expected at least 1 argument, got 0");
    const sd_jv *v = sd__jv_dict_get(self->u.d, *k);
    return v ? *v : dflt ? *dflt : sd__jv_none();
}

static sd_jv m_cycle(sd_jctx *c, const sd_jv *self, sd_jargs *a, int line)
{
    if (a->n == 0)
        sd__jinja_rt_fail(c, line, "no items for cycling given");
    return a->v[self->u.loop->index0 % (int64_t)a->n];
}

typedef struct method {
    int type;
    const char *name;
    sd_jbuiltin fn;
} method;

static const method methods[] = {
    {SD_JV_STR, "startswith", m_startswith},
    {SD_JV_STR, "endswith", m_endswith},
    {SD_JV_STR, "strip", m_strip},
    {SD_JV_STR, "lstrip", m_lstrip},
    {SD_JV_STR, "rstrip", m_rstrip},
    {SD_JV_STR, "split", m_split},
    {SD_JV_STR, "replace", m_replace},
    {SD_JV_STR, "upper", m_upper},
    {SD_JV_STR, "lower", m_lower},
    {SD_JV_STR, "title", m_title},
    {SD_JV_STR, "capitalize", m_capitalize},
    {SD_JV_STR, "find", m_find},
    {SD_JV_STR, "rfind", m_rfind},
    {SD_JV_STR, "count", m_count},
    {SD_JV_STR, "index", m_index},
    {SD_JV_STR, "join", m_join},
    {SD_JV_STR, "splitlines", m_splitlines},
    {SD_JV_STR, "isdigit", m_isdigit},
    {SD_JV_STR, "isalpha", m_isalpha},
    {SD_JV_STR, "isalnum", m_isalnum},
    {SD_JV_STR, "isspace", m_isspace},
    {SD_JV_STR, "isupper", m_isupper},
    {SD_JV_STR, "islower", m_islower},
    {SD_JV_DICT, "items", m_items},
    {SD_JV_DICT, "keys", m_keys},
    {SD_JV_DICT, "values", m_values},
    {SD_JV_DICT, "get", m_get},
    {SD_JV_LIST, "count", m_count},
    {SD_JV_LIST, "index", m_index},
    {SD_JV_LOOP, "cycle", m_cycle},
};

static sd_jv make_func(sd_jctx *c, const char *name, sd_jbuiltin fn, const sd_jv *self)
{
    sd_jfunc *f = sd__jinja_alloc(&c->a, sizeof *f);
    f->name = name;
    f->fn = fn;
    if (self)
        f->self = *self;
    sd_jv v = {SD_JV_FUNC, 0, {.fn = f}};
    return v;
}

sd_jv sd__jinja_method(sd_jctx *c, const sd_jv *self, const char *name, int *found)
{
    for (size_t k = 0; k < sizeof methods / sizeof methods[0]; k++) {
        if (methods[k].type == self->type && !strcmp(methods[k].name, name)) {
            *found = 1;
            return make_func(c, methods[k].name, methods[k].fn, self);
        }
    }
    *found = 0;
    return sd__jv_none();
}

/* ---- globals ---- */

static sd_jv g_range(sd_jctx *c, const sd_jv *self, sd_jargs *a, int line)
{
    sd__jargs_check(c, a, 3, NULL, "range", line);
    if (a->n == 0)
        sd__jinja_rt_fail(c, line, "range expected at least 1 argument, got 0");
    int64_t start = 0, stop, step = 1;
    if (a->n == 1) {
        stop = sd__jinja_want_int(c, &a->v[0], "range argument", line);
    } else {
        start = sd__jinja_want_int(c, &a->v[0], "range argument", line);
        stop = sd__jinja_want_int(c, &a->v[1], "range argument", line);
        if (a->n == 3)
            step = sd__jinja_want_int(c, &a->v[2], "range argument", line);
    }
    if (step == 0)
        sd__jinja_rt_fail(c, line, "range() arg 3 must not be zero");
    __int128 span = step > 0 ? (__int128)stop - start : (__int128)start - stop;
    __int128 absstep = step > 0 ? step : -(__int128)step;
    __int128 n = span > 0 ? (span + absstep - 1) / absstep : 0;
    if (n > SD_JINJA_MAX_RANGE)
        sd__jinja_rt_fail(c, line, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (%d).",
                          SD_JINJA_MAX_RANGE);
    sd_jv l = sd__jv_list_new(&c->a, (size_t)n);
    for (size_t k = 0; k < (size_t)n; k++)
        l.u.l->v[k] = sd__jv_int(start + (int64_t)k * step);
    return l;
}

/* namespace(...) / dict(...): an optional mapping, then keyword arguments. */
static sd_jv build_mapping(sd_jctx *c, sd_jargs *a, int type, int line)
{
    sd_jv d = sd__jv_dict_new(&c->a, type);
    if (a->n > 1)
        sd__jinja_rt_fail(c, line, "expected at most 1 positional argument, got %zu", a->n);
    if (a->n == 1) {
        if (a->v[0].type != SD_JV_DICT && a->v[0].type != SD_JV_NS)
            sd__jinja_rt_fail(c, line, "cannot convert '%s' to a mapping", sd__jv_type_name(&a->v[0]));
        for (size_t k = 0; k < a->v[0].u.d->n; k++)
            sd__jv_dict_set(&c->a, d.u.d, a->v[0].u.d->k[k], a->v[0].u.d->v[k]);
    }
    for (size_t k = 0; k < a->nk; k++)
        sd__jv_dict_set(&c->a, d.u.d, sd__jv_str(a->kname[k], strlen(a->kname[k])), a->kv[k]);
    return d;
}

static sd_jv g_namespace(sd_jctx *c, const sd_jv *self, sd_jargs *a, int line)
{
    return build_mapping(c, a, SD_JV_NS, line);
}

static sd_jv g_dict(sd_jctx *c, const sd_jv *self, sd_jargs *a, int line)
{
    return build_mapping(c, a, SD_JV_DICT, line);
}

static sd_jv g_raise_exception(sd_jctx *c, const sd_jv *self, sd_jargs *a, int line)
{
    const sd_jv *m = sd__jargs_get(a, 0, "message");
    sd_jv s = m ? sd__jv_to_str(&c->a, m) : sd__jv_str("", 0);
    /* the template's own message, unprefixed: it is meant for the API client */
    sd__jinja_fail(&c->err, SD_EINVAL, 0, "%.*s", (int)(s.u.s.n < 400 ? s.u.s.n : 400), s.u.s.p);
}

static sd_jv g_strftime_now(sd_jctx *c, const sd_jv *self, sd_jargs *a, int line)
{
    sd__jargs_check(c, a, 1, NULL, "strftime_now", line);
    sd_jv f = sd__jinja_want_str(c, sd__jargs_get(a, 0, NULL), "format", line);
    char *fmt = sd__jinja_strdup(&c->a, f.u.s.p, f.u.s.n);
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    char out[512];
    size_t n = f.u.s.n ? strftime(out, sizeof out, fmt, &tm) : 0;
    return sd__jv_str(sd__jinja_strdup(&c->a, out, n), n);
}

sd_jv sd__jinja_global(sd_jctx *c, const char *name, int *found)
{
    static const struct {
        const char *name;
        sd_jbuiltin fn;
    } globals[] = {
        {"range", g_range},
        {"namespace", g_namespace},
        {"dict", g_dict},
        {"raise_exception", g_raise_exception},
        {"strftime_now", g_strftime_now},
    };
    for (size_t k = 0; k < sizeof globals / sizeof globals[0]; k++) {
        if (!strcmp(globals[k].name, name)) {
            *found = 1;
            return make_func(c, globals[k].name, globals[k].fn, NULL);
        }
    }
    *found = 0;
    return sd__jv_none();
}
