/* jinja_value: the Jinja interpreter's arena, string builder, error unwinding and the value
 * model (construction from JSON, truthiness, equality, UTF-8 helpers). */
#include "jinja_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Noreturn void sd__jinja_fail(sd_jerr *e, int code, int line, const char *fmt, ...)
{
    va_list ap;
    int off = 0;
    if (line > 0)
        off = snprintf(e->msg, sizeof e->msg, "line %d: ", line);
    if (off < 0 || (size_t)off >= sizeof e->msg)
        off = 0;
    va_start(ap, fmt);
    vsnprintf(e->msg + off, sizeof e->msg - (size_t)off, fmt, ap);
    va_end(ap);
    e->code = code;
    longjmp(e->jb, 1);
}

/* ---- arena ---- */

struct sd_jchunk {
    sd_jchunk *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
};

#define SD_JCHUNK_MIN (64 * 1024)

void *sd__jinja_alloc(sd_jarena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (n == 0)
        n = 16;
    if (a->cap && (n > a->cap || a->used > a->cap - n))
        sd__jinja_fail(a->err, SD_EFULL, 0, "template memory limit (%zu bytes) exceeded", a->cap);
    sd_jchunk *h = a->head;
    if (!h || h->size - h->used < n) {
        size_t sz = n > SD_JCHUNK_MIN ? n : SD_JCHUNK_MIN;
        h = malloc(sizeof *h + sz);
        if (!h)
            sd__jinja_fail(a->err, SD_ENOMEM, 0, "out of memory rendering template");
        h->size = sz;
        h->used = 0;
        h->next = a->head;
        a->head = h;
    }
    void *p = h->data + h->used;
    h->used += n;
    a->used += n;
    memset(p, 0, n);
    return p;
}

char *sd__jinja_strdup(sd_jarena *a, const char *s, size_t n)
{
    char *p = sd__jinja_alloc(a, n + 1);
    if (n)
        memcpy(p, s, n);
    p[n] = 0;
    return p;
}

void sd__jinja_arena_free(sd_jarena *a)
{
    sd_jchunk *h = a->head;
    while (h) {
        sd_jchunk *next = h->next;
        free(h);
        h = next;
    }
    a->head = NULL;
    a->used = 0;
}

/* ---- string builder ---- */

void sd__jbuf_put(sd_jbuf *b, const char *s, size_t n)
{
    if (b->limit && (n > b->limit || b->n > b->limit - n))
        sd__jinja_fail(b->a->err, SD_EFULL, 0, "template output limit (%zu bytes) exceeded", b->limit);
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *p = sd__jinja_alloc(b->a, cap);
        if (b->n)
            memcpy(p, b->p, b->n);
        b->p = p;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void sd__jbuf_puts(sd_jbuf *b, const char *s)
{
    sd__jbuf_put(b, s, strlen(s));
}

void sd__jbuf_putc(sd_jbuf *b, char ch)
{
    sd__jbuf_put(b, &ch, 1);
}

sd_jv sd__jbuf_value(sd_jbuf *b)
{
    return sd__jv_str(b->p ? b->p : "", b->n);
}

/* ---- containers ---- */

sd_jv sd__jv_list_new(sd_jarena *a, size_t n)
{
    sd_jv v = {SD_JV_LIST, 0, {.i = 0}};
    v.u.l = sd__jinja_alloc(a, sizeof *v.u.l);
    if (n > (size_t)1 << 40)
        sd__jinja_fail(a->err, SD_EFULL, 0, "list too long");
    v.u.l->n = n;
    v.u.l->v = sd__jinja_alloc(a, n * sizeof(sd_jv));
    for (size_t i = 0; i < n; i++)
        v.u.l->v[i] = sd__jv_none();
    return v;
}

sd_jv sd__jv_dict_new(sd_jarena *a, int type)
{
    sd_jv v = {type, 0, {.i = 0}};
    v.u.d = sd__jinja_alloc(a, sizeof *v.u.d);
    return v;
}

const sd_jv *sd__jv_dict_get(const sd_jdict *d, sd_jv k)
{
    for (size_t i = 0; i < d->n; i++)
        if (sd__jv_equal(&d->k[i], &k))
            return &d->v[i];
    return NULL;
}

const sd_jv *sd__jv_dict_gets(const sd_jdict *d, const char *key, size_t n)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].type == SD_JV_STR && d->k[i].u.s.n == n && memcmp(d->k[i].u.s.p, key, n) == 0)
            return &d->v[i];
    return NULL;
}

void sd__jv_dict_set(sd_jarena *a, sd_jdict *d, sd_jv k, sd_jv v)
{
    for (size_t i = 0; i < d->n; i++) {
        if (sd__jv_equal(&d->k[i], &k)) {
            d->v[i] = v;
            return;
        }
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 8;
        sd_jv *nk = sd__jinja_alloc(a, cap * sizeof *nk);
        sd_jv *nv = sd__jinja_alloc(a, cap * sizeof *nv);
        if (d->n) {
            memcpy(nk, d->k, d->n * sizeof *nk);
            memcpy(nv, d->v, d->n * sizeof *nv);
        }
        d->k = nk;
        d->v = nv;
        d->cap = cap;
    }
    d->k[d->n] = k;
    d->v[d->n] = v;
    d->n++;
}

sd_jv sd__jv_from_json(sd_jarena *a, const json_t *j)
{
    if (!j)
        return sd__jv_none();
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        sd_jv d = sd__jv_dict_new(a, SD_JV_DICT);
        const char *k;
        json_t *val;
        /* jansson keeps insertion order, as Python's json.loads does */
        json_object_foreach((json_t *)j, k, val)
        {
            sd_jv key = sd__jv_str(sd__jinja_strdup(a, k, strlen(k)), strlen(k));
            sd__jv_dict_set(a, d.u.d, key, sd__jv_from_json(a, val));
        }
        return d;
    }
    case JSON_ARRAY: {
        sd_jv l = sd__jv_list_new(a, json_array_size(j));
        for (size_t i = 0; i < l.u.l->n; i++)
            l.u.l->v[i] = sd__jv_from_json(a, json_array_get(j, i));
        return l;
    }
    case JSON_STRING:
        return sd__jv_str(sd__jinja_strdup(a, json_string_value(j), json_string_length(j)),
                          json_string_length(j));
    case JSON_INTEGER:
        return sd__jv_int((int64_t)json_integer_value(j));
    case JSON_REAL:
        return sd__jv_float(json_real_value(j));
    case JSON_TRUE:
        return sd__jv_bool(1);
    case JSON_FALSE:
        return sd__jv_bool(0);
    default:
        return sd__jv_none();
    }
}

/* ---- semantics ---- */

int sd__jv_truthy(const sd_jv *v)
{
    switch (v->type) {
    case SD_JV_UNDEF:
    case SD_JV_NONE:
        return 0;
    case SD_JV_BOOL:
        return v->u.b;
    case SD_JV_INT:
        return v->u.i != 0;
    case SD_JV_FLOAT:
        return v->u.f != 0.0;
    case SD_JV_STR:
        return v->u.s.n != 0;
    case SD_JV_LIST:
        return v->u.l->n != 0;
    case SD_JV_DICT:
        return v->u.d->n != 0;
    default:
        return 1;
    }
}

int sd__jv_is_number(const sd_jv *v)
{
    return v->type == SD_JV_INT || v->type == SD_JV_FLOAT || v->type == SD_JV_BOOL;
}

double sd__jv_as_double(const sd_jv *v)
{
    if (v->type == SD_JV_FLOAT)
        return v->u.f;
    if (v->type == SD_JV_INT)
        return (double)v->u.i;
    if (v->type == SD_JV_BOOL)
        return v->u.b;
    return 0;
}

int sd__jv_equal(const sd_jv *x, const sd_jv *y)
{
    if (sd__jv_is_number(x) && sd__jv_is_number(y)) {
        if (x->type != SD_JV_FLOAT && y->type != SD_JV_FLOAT) {
            int64_t a = x->type == SD_JV_BOOL ? x->u.b : x->u.i;
            int64_t b = y->type == SD_JV_BOOL ? y->u.b : y->u.i;
            return a == b;
        }
        return sd__jv_as_double(x) == sd__jv_as_double(y);
    }
    if (x->type != y->type)
        return 0;
    switch (x->type) {
    case SD_JV_UNDEF:
    case SD_JV_NONE:
        return 1;
    case SD_JV_STR:
        return x->u.s.n == y->u.s.n && memcmp(x->u.s.p, y->u.s.p, x->u.s.n) == 0;
    case SD_JV_LIST:
        /* a tuple never equals a list in Python */
        if ((x->flags & SD_JV_TUPLE) != (y->flags & SD_JV_TUPLE) || x->u.l->n != y->u.l->n)
            return 0;
        for (size_t i = 0; i < x->u.l->n; i++)
            if (!sd__jv_equal(&x->u.l->v[i], &y->u.l->v[i]))
                return 0;
        return 1;
    case SD_JV_DICT:
        if (x->u.d->n != y->u.d->n)
            return 0;
        for (size_t i = 0; i < x->u.d->n; i++) {
            const sd_jv *o = sd__jv_dict_get(y->u.d, x->u.d->k[i]);
            if (!o || !sd__jv_equal(&x->u.d->v[i], o))
                return 0;
        }
        return 1;
    case SD_JV_NS:
        return x->u.d == y->u.d;
    case SD_JV_FUNC:
        return x->u.fn == y->u.fn;
    case SD_JV_LOOP:
        return x->u.loop == y->u.loop;
    default:
        return 0;
    }
}

const char *sd__jv_type_name(const sd_jv *v)
{
    switch (v->type) {
    case SD_JV_UNDEF:
        return "Undefined";
    case SD_JV_NONE:
        return "NoneType";
    case SD_JV_BOOL:
        return "bool";
    case SD_JV_INT:
        return "int";
    case SD_JV_FLOAT:
        return "float";
    case SD_JV_STR:
        return "str";
    case SD_JV_LIST:
        return (v->flags & SD_JV_TUPLE) ? "tuple" : "list";
    case SD_JV_DICT:
        return "dict";
    case SD_JV_NS:
        return "Namespace";
    case SD_JV_FUNC:
        return "function";
    default:
        return "LoopContext";
    }
}

/* ---- UTF-8 ---- */

uint32_t sd__utf8_next(const char *s, size_t n, size_t *pos)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = *pos;
    uint32_t c = u[i];
    int extra = c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : c >= 0xc0 ? 1 : 0;
    *pos = i + 1; /* ASCII, stray or truncated bytes: one unit each */
    if (c < 0x80 || extra == 0 || i + (size_t)extra >= n)
        return c;
    uint32_t cp = c & (uint32_t)(0x3f >> extra);
    for (int k = 1; k <= extra; k++) {
        if ((u[i + (size_t)k] & 0xc0) != 0x80)
            return c;
        cp = (cp << 6) | (u[i + (size_t)k] & 0x3f);
    }
    *pos = i + (size_t)extra + 1;
    return cp;
}

size_t sd__utf8_len(const char *s, size_t n)
{
    size_t pos = 0, count = 0;
    while (pos < n) {
        sd__utf8_next(s, n, &pos);
        count++;
    }
    return count;
}

int sd__py_isspace(uint32_t cp)
{
    if (cp == ' ' || (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x1f))
        return 1;
    if (cp < 0x80)
        return 0;
    return cp == 0x85 || cp == 0xa0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 ||
           cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000;
}
