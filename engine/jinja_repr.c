/* jinja_repr: values as text the way Python writes them: str(), repr(), repr(float), and
 * json.dumps as transformers' tojson filter calls it (ensure_ascii=False). */
#include "jinja_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sd__jv_fmt_float(double f, char out[40])
{
    if (isnan(f)) {
        strcpy(out, "nan");
        return;
    }
    if (isinf(f)) {
        strcpy(out, f < 0 ? "-inf" : "inf");
        return;
    }
    /* the shortest %e form that reads back exactly, as Python's repr does */
    char e[40];
    int prec = 1;
    for (; prec <= 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec - 1, f);
        if (strtod(e, NULL) == f)
            break;
    }
    const char *ep = strchr(e, 'e');
    int exp10 = ep ? atoi(ep + 1) : 0;
    if (exp10 < -4 || exp10 >= 16) {
        strcpy(out, e); /* "1e+16", "1.5e-05": C and Python agree */
        return;
    }
    int decimals = prec - 1 - exp10;
    snprintf(out, 40, "%.*f", decimals > 0 ? decimals : 0, f);
    if (!strchr(out, '.'))
        strcat(out, ".0");
}

/* Python's str.isprintable, close enough for the characters chat text carries. */
static int py_printable(uint32_t cp)
{
    if (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0xa0) || cp == 0xad)
        return 0;
    if ((cp >= 0x200b && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2060 && cp <= 0x2064) ||
        cp == 0xfeff || (cp >= 0xd800 && cp <= 0xdfff) || (cp >= 0xe000 && cp <= 0xf8ff))
        return 0;
    return 1;
}

static void repr_str(sd_jbuf *b, const char *s, size_t n)
{
    int has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
    char q = (has_sq && !has_dq) ? '"' : '\'';
    sd__jbuf_putc(b, q);
    size_t pos = 0;
    while (pos < n) {
        size_t start = pos;
        uint32_t cp = sd__utf8_next(s, n, &pos);
        char tmp[16];
        if (cp == (uint32_t)q || cp == '\\') {
            sd__jbuf_putc(b, '\\');
            sd__jbuf_putc(b, (char)cp);
        } else if (cp == '\n') {
            sd__jbuf_puts(b, "\\n");
        } else if (cp == '\r') {
            sd__jbuf_puts(b, "\\r");
        } else if (cp == '\t') {
            sd__jbuf_puts(b, "\\t");
        } else if (!py_printable(cp)) {
            if (cp < 0x100)
                snprintf(tmp, sizeof tmp, "\\x%02x", cp);
            else if (cp < 0x10000)
                snprintf(tmp, sizeof tmp, "\\u%04x", cp);
            else
                snprintf(tmp, sizeof tmp, "\\U%08x", cp);
            sd__jbuf_puts(b, tmp);
        } else {
            sd__jbuf_put(b, s + start, pos - start);
        }
    }
    sd__jbuf_putc(b, q);
}

static void put_scalar(sd_jbuf *b, const sd_jv *v)
{
    char tmp[40];
    switch (v->type) {
    case SD_JV_NONE:
        sd__jbuf_puts(b, "None");
        break;
    case SD_JV_BOOL:
        sd__jbuf_puts(b, v->u.b ? "True" : "False");
        break;
    case SD_JV_INT:
        snprintf(tmp, sizeof tmp, "%lld", (long long)v->u.i);
        sd__jbuf_puts(b, tmp);
        break;
    case SD_JV_FLOAT:
        sd__jv_fmt_float(v->u.f, tmp);
        sd__jbuf_puts(b, tmp);
        break;
    default:
        break;
    }
}

static void repr_depth(sd_jbuf *b, const sd_jv *v, int depth)
{
    if (depth > 64) {
        sd__jbuf_puts(b, "...");
        return;
    }
    switch (v->type) {
    case SD_JV_UNDEF:
        sd__jbuf_puts(b, "Undefined");
        break;
    case SD_JV_STR:
        repr_str(b, v->u.s.p, v->u.s.n);
        break;
    case SD_JV_LIST: {
        int tuple = v->flags & SD_JV_TUPLE;
        sd__jbuf_putc(b, tuple ? '(' : '[');
        for (size_t i = 0; i < v->u.l->n; i++) {
            if (i)
                sd__jbuf_puts(b, ", ");
            repr_depth(b, &v->u.l->v[i], depth + 1);
        }
        if (tuple && v->u.l->n == 1)
            sd__jbuf_putc(b, ',');
        sd__jbuf_putc(b, tuple ? ')' : ']');
        break;
    }
    case SD_JV_NS:
    case SD_JV_DICT:
        if (v->type == SD_JV_NS)
            sd__jbuf_puts(b, "<Namespace ");
        sd__jbuf_putc(b, '{');
        for (size_t i = 0; i < v->u.d->n; i++) {
            if (i)
                sd__jbuf_puts(b, ", ");
            repr_depth(b, &v->u.d->k[i], depth + 1);
            sd__jbuf_puts(b, ": ");
            repr_depth(b, &v->u.d->v[i], depth + 1);
        }
        sd__jbuf_putc(b, '}');
        if (v->type == SD_JV_NS)
            sd__jbuf_putc(b, '>');
        break;
    case SD_JV_FUNC:
        sd__jbuf_puts(b, "<function ");
        sd__jbuf_puts(b, v->u.fn->name);
        sd__jbuf_putc(b, '>');
        break;
    case SD_JV_LOOP:
        sd__jbuf_puts(b, "<LoopContext>");
        break;
    default:
        put_scalar(b, v);
    }
}

void sd__jv_repr_append(sd_jbuf *b, const sd_jv *v)
{
    repr_depth(b, v, 0);
}

void sd__jv_str_append(sd_jbuf *b, const sd_jv *v)
{
    if (v->type == SD_JV_STR)
        sd__jbuf_put(b, v->u.s.p, v->u.s.n);
    else if (v->type != SD_JV_UNDEF)
        repr_depth(b, v, 0);
}

sd_jv sd__jv_to_str(sd_jarena *a, const sd_jv *v)
{
    if (v->type == SD_JV_STR)
        return *v;
    sd_jbuf b = {.a = a};
    sd__jv_str_append(&b, v);
    return sd__jbuf_value(&b);
}

/* ---- json.dumps ---- */

static void json_str(sd_jbuf *b, const char *s, size_t n)
{
    sd__jbuf_putc(b, '"');
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        const char *esc = NULL;
        char tmp[8];
        switch (ch) {
        case '"':
            esc = "\\\"";
            break;
        case '\\':
            esc = "\\\\";
            break;
        case '\n':
            esc = "\\n";
            break;
        case '\r':
            esc = "\\r";
            break;
        case '\t':
            esc = "\\t";
            break;
        case '\b':
            esc = "\\b";
            break;
        case '\f':
            esc = "\\f";
            break;
        default:
            if (ch < 0x20) {
                snprintf(tmp, sizeof tmp, "\\u%04x", ch);
                esc = tmp;
            }
        }
        if (esc) {
            sd__jbuf_put(b, s + run, i - run);
            sd__jbuf_puts(b, esc);
            run = i + 1;
        }
    }
    sd__jbuf_put(b, s + run, n - run);
    sd__jbuf_putc(b, '"');
}

static void json_newline(sd_jbuf *b, int indent, int level)
{
    sd__jbuf_putc(b, '\n');
    for (int i = 0; i < indent * level; i++)
        sd__jbuf_putc(b, ' ');
}

/* A dict key as json.dumps coerces it; -1 for keys it rejects. */
static int json_key(sd_jbuf *b, const sd_jv *k)
{
    char tmp[40];
    switch (k->type) {
    case SD_JV_STR:
        json_str(b, k->u.s.p, k->u.s.n);
        return 0;
    case SD_JV_NONE:
        sd__jbuf_puts(b, "\"null\"");
        return 0;
    case SD_JV_BOOL:
        sd__jbuf_puts(b, k->u.b ? "\"true\"" : "\"false\"");
        return 0;
    case SD_JV_INT:
        snprintf(tmp, sizeof tmp, "\"%lld\"", (long long)k->u.i);
        sd__jbuf_puts(b, tmp);
        return 0;
    default:
        return -1;
    }
}

static int key_cmp(const sd_jv *x, const sd_jv *y)
{
    size_t n = x->u.s.n < y->u.s.n ? x->u.s.n : y->u.s.n;
    int c = memcmp(x->u.s.p, y->u.s.p, n);
    if (c)
        return c;
    return x->u.s.n < y->u.s.n ? -1 : x->u.s.n > y->u.s.n;
}

static int json_dict(sd_jbuf *b, const sd_jdict *d, int indent, int sort_keys, int depth)
{
    size_t *ord = sd__jinja_alloc(b->a, (d->n + 1) * sizeof *ord);
    for (size_t i = 0; i < d->n; i++)
        ord[i] = i;
    if (sort_keys) {
        for (size_t i = 0; i < d->n; i++) /* insertion sort: stable, small dicts */
            if (d->k[i].type != SD_JV_STR)
                return -1;
        for (size_t i = 1; i < d->n; i++)
            for (size_t j = i; j > 0 && key_cmp(&d->k[ord[j - 1]], &d->k[ord[j]]) > 0; j--) {
                size_t t = ord[j];
                ord[j] = ord[j - 1];
                ord[j - 1] = t;
            }
    }
    sd__jbuf_putc(b, '{');
    for (size_t i = 0; i < d->n; i++) {
        if (i)
            sd__jbuf_puts(b, indent >= 0 ? "," : ", ");
        if (indent >= 0)
            json_newline(b, indent, depth + 1);
        if (json_key(b, &d->k[ord[i]]) < 0)
            return -1;
        sd__jbuf_puts(b, ": ");
        if (sd__jv_tojson(b, &d->v[ord[i]], indent, sort_keys, depth + 1) < 0)
            return -1;
    }
    if (indent >= 0 && d->n)
        json_newline(b, indent, depth);
    sd__jbuf_putc(b, '}');
    return 0;
}

int sd__jv_tojson(sd_jbuf *b, const sd_jv *v, int indent, int sort_keys, int depth)
{
    char tmp[40];
    if (depth > 200)
        return -1;
    switch (v->type) {
    case SD_JV_NONE:
        sd__jbuf_puts(b, "null");
        return 0;
    case SD_JV_BOOL:
        sd__jbuf_puts(b, v->u.b ? "true" : "false");
        return 0;
    case SD_JV_INT:
        put_scalar(b, v);
        return 0;
    case SD_JV_FLOAT:
        if (isnan(v->u.f))
            strcpy(tmp, "NaN");
        else if (isinf(v->u.f))
            strcpy(tmp, v->u.f < 0 ? "-Infinity" : "Infinity");
        else
            sd__jv_fmt_float(v->u.f, tmp);
        sd__jbuf_puts(b, tmp);
        return 0;
    case SD_JV_STR:
        json_str(b, v->u.s.p, v->u.s.n);
        return 0;
    case SD_JV_LIST:
        sd__jbuf_putc(b, '[');
        for (size_t i = 0; i < v->u.l->n; i++) {
            if (i)
                sd__jbuf_puts(b, indent >= 0 ? "," : ", ");
            if (indent >= 0)
                json_newline(b, indent, depth + 1);
            if (sd__jv_tojson(b, &v->u.l->v[i], indent, sort_keys, depth + 1) < 0)
                return -1;
        }
        if (indent >= 0 && v->u.l->n)
            json_newline(b, indent, depth);
        sd__jbuf_putc(b, ']');
        return 0;
    case SD_JV_DICT:
        return json_dict(b, v->u.d, indent, sort_keys, depth);
    default:
        return -1;
    }
}
