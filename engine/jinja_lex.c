/* jinja_lex: splits template source into tokens the way jinja2's lexer does, including its
 * whitespace rules (-/+ markers, trim_blocks, lstrip_blocks), comments and raw blocks. */
#include "jinja_impl.h"

#include <stdlib.h>
#include <string.h>

typedef struct lexer {
    sd_jarena *a;
    const sd_jinja_opts *o;
    const char *s; /* normalised source, NUL-terminated */
    size_t n, pos;
    int line;
    int line_starting; /* the last match ended with a newline (lstrip_blocks applies) */
    sd_jtok *toks;
    size_t nt, cap;
} lexer;

static sd_jtok *push(lexer *L, int type, const char *str, size_t len, int line)
{
    if (L->nt == L->cap) {
        size_t cap = L->cap ? L->cap * 2 : 256;
        sd_jtok *t = sd__jinja_alloc(L->a, cap * sizeof *t);
        if (L->nt)
            memcpy(t, L->toks, L->nt * sizeof *t);
        L->toks = t;
        L->cap = cap;
    }
    sd_jtok *t = &L->toks[L->nt++];
    t->type = type;
    t->line = line;
    t->str = sd__jinja_strdup(L->a, str, len);
    t->len = len;
    return t;
}

static int count_nl(const char *s, size_t n)
{
    int c = 0;
    for (size_t i = 0; i < n; i++)
        c += s[i] == '\n';
    return c;
}

/* Length of the Python-whitespace run starting at s[pos]. */
static size_t ws_run(const char *s, size_t n, size_t pos)
{
    size_t p = pos;
    while (p < n) {
        size_t q = p;
        if (!sd__py_isspace(sd__utf8_next(s, n, &q)))
            break;
        p = q;
    }
    return p - pos;
}

/* Byte length of `s[0..n)` without trailing Python whitespace (str.rstrip()). */
static size_t rstrip_len(const char *s, size_t n)
{
    size_t keep = 0, pos = 0;
    while (pos < n) {
        uint32_t cp = sd__utf8_next(s, n, &pos);
        if (!sd__py_isspace(cp))
            keep = pos;
    }
    return keep;
}

/* Emits template text before a tag, applying '-' / lstrip_blocks as jinja2's OptionalLStrip. */
static void emit_text(lexer *L, const char *text, size_t len, char sign, int is_var)
{
    int line = L->line;
    L->line += count_nl(text, len);
    if (sign == '-') {
        len = rstrip_len(text, len);
    } else if (sign != '+' && L->o->lstrip_blocks && !is_var) {
        size_t l_pos = len;
        while (l_pos > 0 && text[l_pos - 1] != '\n')
            l_pos--;
        if ((l_pos > 0 || L->line_starting) && l_pos < len && ws_run(text, len, l_pos) == len - l_pos)
            len = l_pos;
    }
    if (len)
        push(L, SD_JT_DATA, text, len, line);
}

static int starts(const lexer *L, size_t pos, const char *lit)
{
    size_t k = strlen(lit);
    return pos + k <= L->n && memcmp(L->s + pos, lit, k) == 0;
}

/* Matches a tag end ("%}" or "}}" in `end`) at pos with its -/+ forms; returns the byte
 * length consumed (including stripped whitespace / trimmed newline) or 0. */
static size_t match_end(const lexer *L, size_t pos, const char *end, int allow_plus, int trim)
{
    if (allow_plus && L->s[pos] == '+' && starts(L, pos + 1, end))
        return 1 + strlen(end);
    if (L->s[pos] == '-' && starts(L, pos + 1, end)) {
        size_t e = pos + 1 + strlen(end);
        return e - pos + ws_run(L->s, L->n, e);
    }
    if (starts(L, pos, end)) {
        size_t e = pos + strlen(end);
        if (trim && L->o->trim_blocks && L->s[e] == '\n')
            e++;
        return e - pos;
    }
    return 0;
}

static void fail(lexer *L, const char *msg)
{
    sd__jinja_fail(L->a->err, SD_EFORMAT, L->line, "%s", msg);
}

/* {# ... #}: dropped, but its end still trims like a block's. */
static void lex_comment(lexer *L)
{
    for (size_t p = L->pos; p < L->n; p++) {
        size_t m = match_end(L, p, "#}", 1, 1);
        if (m) {
            L->line += count_nl(L->s + L->pos, p + m - L->pos);
            L->pos = p + m;
            L->line_starting = L->s[L->pos - 1] == '\n';
            return;
        }
    }
    fail(L, "Missing end of comment tag");
}

/* {% raw %}...{% endraw %}: the body is text; returns 0 when the tag at pos is no raw tag. */
static int lex_raw(lexer *L, size_t tag)
{
    size_t p = tag + 2;
    if (L->s[p] == '-' || L->s[p] == '+')
        p++;
    p += ws_run(L->s, L->n, p);
    if (!starts(L, p, "raw"))
        return 0;
    p += 3;
    p += ws_run(L->s, L->n, p);
    size_t m = match_end(L, p, "%}", 0, 0);
    if (!m)
        return 0;
    /* the raw begin's own text before it was emitted by the caller */
    L->line += count_nl(L->s + tag, p + m - tag);
    size_t body = p + m;
    for (size_t q = body; q < L->n; q++) {
        if (L->s[q] != '{' || L->s[q + 1] != '%')
            continue;
        size_t r = q + 2;
        char sign = (L->s[r] == '-' || L->s[r] == '+') ? L->s[r++] : 0;
        r += ws_run(L->s, L->n, r);
        if (!starts(L, r, "endraw"))
            continue;
        r += 6;
        r += ws_run(L->s, L->n, r);
        size_t e = match_end(L, r, "%}", 1, 1);
        if (!e)
            continue;
        L->line_starting = 0;
        emit_text(L, L->s + body, q - body, sign, 0);
        L->line += count_nl(L->s + q, r + e - q);
        L->pos = r + e;
        L->line_starting = L->s[L->pos - 1] == '\n';
        return 1;
    }
    fail(L, "Missing end of raw directive");
    return 1;
}

static int is_digit(char ch)
{
    return ch >= '0' && ch <= '9';
}

static int is_name_start(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_';
}

/* Digits with single underscores between them ("1_000"); returns the end. */
static size_t digits(const char *s, size_t p)
{
    if (!is_digit(s[p]))
        return p;
    while (is_digit(s[p]) || (s[p] == '_' && is_digit(s[p + 1])))
        p++;
    return p;
}

static void put_utf8(char *out, size_t *k, uint32_t cp)
{
    if (cp < 0x80) {
        out[(*k)++] = (char)cp;
    } else if (cp < 0x800) {
        out[(*k)++] = (char)(0xc0 | (cp >> 6));
        out[(*k)++] = (char)(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        out[(*k)++] = (char)(0xe0 | (cp >> 12));
        out[(*k)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[(*k)++] = (char)(0x80 | (cp & 0x3f));
    } else {
        out[(*k)++] = (char)(0xf0 | (cp >> 18));
        out[(*k)++] = (char)(0x80 | ((cp >> 12) & 0x3f));
        out[(*k)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[(*k)++] = (char)(0x80 | (cp & 0x3f));
    }
}

static int hexval(char ch)
{
    if (is_digit(ch))
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* Python's unicode-escape decoding of a string literal body. */
static void lex_string(lexer *L, size_t start, size_t end, int line)
{
    const char *s = L->s;
    char *out = sd__jinja_alloc(L->a, end - start + 1);
    size_t k = 0;
    for (size_t p = start; p < end; p++) {
        if (s[p] != '\\' || p + 1 >= end) {
            out[k++] = s[p];
            continue;
        }
        char e = s[++p];
        const char *simple = strchr("\\'\"abfnrtv", e);
        if (e == '\n')
            continue;
        if (simple) {
            static const char map[] = "\\'\"\a\b\f\n\r\t\v";
            out[k++] = map[simple - "\\'\"abfnrtv"];
        } else if (e >= '0' && e <= '7') {
            uint32_t cp = 0;
            for (int i = 0; i < 3 && p < end && s[p] >= '0' && s[p] <= '7'; i++, p++)
                cp = cp * 8 + (uint32_t)(s[p] - '0');
            p--;
            put_utf8(out, &k, cp);
        } else if (e == 'x' || e == 'u' || e == 'U') {
            int nd = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            uint32_t cp = 0;
            for (int i = 0; i < nd; i++) {
                int h = p + 1 < end ? hexval(s[p + 1]) : -1;
                if (h < 0)
                    sd__jinja_fail(L->a->err, SD_EFORMAT, line, "truncated \\%c escape in string", e);
                cp = cp * 16 + (uint32_t)h;
                p++;
            }
            if (cp > 0x10ffff)
                sd__jinja_fail(L->a->err, SD_EFORMAT, line, "illegal Unicode character in string");
            put_utf8(out, &k, cp);
        } else {
            out[k++] = '\\'; /* unknown escapes stay as written */
            out[k++] = e;
        }
    }
    sd_jtok *t = push(L, SD_JT_STRING, "", 0, line);
    out[k] = 0;
    t->str = out;
    t->len = k;
}

static const char *const ops[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[",
                                  "]",  "(",  ")",  "{",  "}",  ">",  "<", "=", ".", ":", "|", ",", ";"};

/* One token inside a tag; returns 0 at the tag's end. */
static int lex_tag_token(lexer *L, int is_var, char *stack, int *depth)
{
    const char *s = L->s;
    size_t ws = ws_run(s, L->n, L->pos);
    L->line += count_nl(s + L->pos, ws);
    L->pos += ws;
    size_t p = L->pos;
    if (p >= L->n)
        fail(L, is_var ? "unexpected end of template, expected '}}'"
                       : "unexpected end of template, expected '%}'");
    if (*depth == 0) {
        size_t m = is_var ? match_end(L, p, "}}", 0, 0) : match_end(L, p, "%}", 1, 1);
        if (m) {
            push(L, is_var ? SD_JT_VAR_END : SD_JT_BLOCK_END, "", 0, L->line);
            L->line += count_nl(s + p, m);
            L->pos = p + m;
            L->line_starting = s[L->pos - 1] == '\n';
            return 0;
        }
    }
    if (is_digit(s[p])) {
        size_t e = digits(s, p);
        int is_float = 0;
        if (p == 0 || s[p - 1] != '.') {
            size_t f = e;
            if (s[f] == '.' && is_digit(s[f + 1]))
                f = digits(s, f + 1);
            if ((s[f] == 'e' || s[f] == 'E')) {
                size_t x = f + 1 + (s[f + 1] == '+' || s[f + 1] == '-');
                if (is_digit(s[x]))
                    f = digits(s, x);
            }
            is_float = f != e;
            e = f;
        }
        char *txt = sd__jinja_alloc(L->a, e - p + 1);
        size_t k = 0;
        for (size_t i = p; i < e; i++)
            if (s[i] != '_')
                txt[k++] = s[i];
        sd_jtok *t = push(L, is_float ? SD_JT_FLOAT : SD_JT_INT, txt, k, L->line);
        if (is_float)
            t->f = strtod(txt, NULL);
        else if (k > 19 || (k == 19 && strcmp(txt, "9223372036854775807") > 0))
            sd__jinja_fail(L->a->err, SD_EFORMAT, L->line, "integer literal too large");
        else
            t->i = strtoll(txt, NULL, 10);
        L->pos = e;
        return 1;
    }
    if (is_name_start(s[p])) {
        size_t e = p;
        while (is_name_start(s[e]) || is_digit(s[e]))
            e++;
        push(L, SD_JT_NAME, s + p, e - p, L->line);
        L->pos = e;
        return 1;
    }
    if (s[p] == '\'' || s[p] == '"') {
        size_t e = p + 1;
        while (e < L->n && s[e] != s[p])
            e += s[e] == '\\' ? 2 : 1;
        if (e >= L->n)
            fail(L, "unexpected end of string");
        int line = L->line;
        lex_string(L, p + 1, e, line);
        L->line += count_nl(s + p, e - p);
        L->pos = e + 1;
        return 1;
    }
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        if (!starts(L, p, ops[i]))
            continue;
        char ch = ops[i][0];
        if (ops[i][1] == 0 && (ch == '(' || ch == '[' || ch == '{')) {
            if (*depth >= 200)
                fail(L, "brackets nested too deeply");
            stack[(*depth)++] = ch == '(' ? ')' : ch == '[' ? ']' : '}';
        } else if (ops[i][1] == 0 && (ch == ')' || ch == ']' || ch == '}')) {
            if (*depth == 0 || stack[*depth - 1] != ch) {
                sd__jinja_fail(L->a->err, SD_EFORMAT, L->line, "unexpected '%c'", ch);
            }
            (*depth)--;
        }
        push(L, SD_JT_OP, ops[i], strlen(ops[i]), L->line);
        L->pos = p + strlen(ops[i]);
        return 1;
    }
    sd__jinja_fail(L->a->err, SD_EFORMAT, L->line, "unexpected char '%c'", s[p]);
}

/* Normalises newlines (\r\n and \r to \n) and drops one trailing newline unless kept. */
static char *normalise(sd_jarena *a, const char *src, size_t len, const sd_jinja_opts *o, size_t *ret_n)
{
    char *s = sd__jinja_alloc(a, len + 4);
    size_t k = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[k++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n')
                i++;
        } else {
            s[k++] = src[i];
        }
    }
    if (!o->keep_trailing_newline && k > 0 && s[k - 1] == '\n')
        k--;
    s[k] = 0;
    *ret_n = k;
    return s;
}

void sd__jinja_lex(sd_jarena *a, const char *src, size_t len, const sd_jinja_opts *o, sd_jtok **ret_toks,
                   size_t *ret_n)
{
    lexer L = {.a = a, .o = o, .line = 1, .line_starting = 1};
    L.s = normalise(a, src, len, o, &L.n);
    char stack[200];
    while (L.pos < L.n) {
        const char *q = L.s + L.pos;
        const char *tag = NULL;
        while ((q = memchr(q, '{', (size_t)(L.s + L.n - q))) != NULL) {
            if (q[1] == '%' || q[1] == '{' || q[1] == '#') {
                tag = q;
                break;
            }
            q++;
        }
        if (!tag) {
            emit_text(&L, L.s + L.pos, L.n - L.pos, 0, 1);
            break;
        }
        size_t tp = (size_t)(tag - L.s);
        char kind = tag[1];
        char sign = (tag[2] == '-' || tag[2] == '+') ? tag[2] : 0;
        emit_text(&L, L.s + L.pos, tp - L.pos, sign, kind == '{');
        L.line_starting = 0;
        if (kind == '%' && lex_raw(&L, tp))
            continue;
        L.pos = tp + 2 + (sign ? 1 : 0);
        if (kind == '#') {
            lex_comment(&L);
            continue;
        }
        int is_var = kind == '{';
        int depth = 0;
        push(&L, is_var ? SD_JT_VAR_BEGIN : SD_JT_BLOCK_BEGIN, "", 0, L.line);
        while (lex_tag_token(&L, is_var, stack, &depth))
            ;
    }
    push(&L, SD_JT_EOF, "", 0, L.line);
    *ret_toks = L.toks;
    *ret_n = L.nt;
}
