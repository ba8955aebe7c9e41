/* jinja_impl: internal types of the Jinja interpreter shared by its files: the arena, values,
 * tokens, AST nodes and the render context.
 *
 * Error handling: parse and render each run under a setjmp point; any error (syntax, type,
 * limit, allocation) records a message and longjmps back to sd_jinja_parse/sd_jinja_render.
 * Everything allocated meanwhile lives in an arena freed as a whole there, so unwinding
 * leaks nothing. Functions named sd__jinja_* may therefore not return on error. */
#ifndef SD_JINJA_IMPL_H
#define SD_JINJA_IMPL_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

#include "jinja.h"

/* ---- error unwinding ---- */

typedef struct sd_jerr {
    jmp_buf jb;
    int code;
    char msg[SD_DIAG_MSG_MAX];
} sd_jerr;

/* Records "line N: <msg>" (line 0: no prefix) and longjmps to the setjmp point. */
_Noreturn void sd__jinja_fail(sd_jerr *e, int code, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* ---- arena: bump allocator over a chunk list, with a byte cap ---- */

typedef struct sd_jchunk sd_jchunk;
typedef struct sd_jarena {
    sd_jchunk *head;
    size_t used, cap; /* bytes handed out so far, and the limit */
    sd_jerr *err;     /* where allocation failures unwind to */
} sd_jarena;

void *sd__jinja_alloc(sd_jarena *a, size_t n);                 /* zeroed, 16-aligned; unwinds on failure */
char *sd__jinja_strdup(sd_jarena *a, const char *s, size_t n); /* NUL-terminated copy */
void sd__jinja_arena_free(sd_jarena *a);

/* ---- values ---- */

enum {
    SD_JV_UNDEF, /* jinja2's default Undefined: prints empty, iterates empty, false */
    SD_JV_NONE,
    SD_JV_BOOL,
    SD_JV_INT,
    SD_JV_FLOAT,
    SD_JV_STR,
    SD_JV_LIST, /* list, or tuple when flags & SD_JV_TUPLE */
    SD_JV_DICT,
    SD_JV_NS,   /* namespace(): a mutable dict with attribute access */
    SD_JV_FUNC, /* builtin function, bound method or macro */
    SD_JV_LOOP, /* the `loop` variable of a for loop */
};
#define SD_JV_TUPLE 1

typedef struct sd_jlist sd_jlist;
typedef struct sd_jdict sd_jdict;
typedef struct sd_jfunc sd_jfunc;
typedef struct sd_jloop sd_jloop;

typedef struct sd_jv {
    int type;
    int flags;
    union {
        int b;
        int64_t i;
        double f;
        struct {
            const char *p; /* UTF-8, not NUL-terminated, immutable */
            size_t n;
        } s;
        sd_jlist *l;
        sd_jdict *d;
        sd_jfunc *fn;
        sd_jloop *loop;
        const char *undef; /* the error message using it would give (NUL-terminated) */
    } u;
} sd_jv;

struct sd_jlist {
    size_t n;
    sd_jv *v; /* [n] */
};

struct sd_jdict {
    size_t n, cap;
    sd_jv *k, *v; /* [cap] keys and values, insertion order */
};

/* Builtins: global functions, and methods bound to a `self` value. */
typedef struct sd_jctx sd_jctx;
typedef struct sd_jargs sd_jargs;
typedef sd_jv (*sd_jbuiltin)(sd_jctx *c, const sd_jv *self, sd_jargs *a, int line);

struct sd_jfunc {
    const char *name;
    sd_jbuiltin fn;          /* NULL for a macro */
    sd_jv self;              /* bound object of a method */
    const struct sd_jn *mac; /* macro definition node */
    struct sd_jframe *scope; /* a call block's caller(): the scope it sees; NULL: the root */
};

struct sd_jloop {
    int64_t index0, length;
    const sd_jlist *items;
};

static inline sd_jv sd__jv_undef(const char *what)
{
    sd_jv v = {SD_JV_UNDEF, 0, {.undef = what}};
    return v;
}
static inline sd_jv sd__jv_none(void)
{
    sd_jv v = {SD_JV_NONE, 0, {.i = 0}};
    return v;
}
static inline sd_jv sd__jv_bool(int b)
{
    sd_jv v = {SD_JV_BOOL, 0, {.b = !!b}};
    return v;
}
static inline sd_jv sd__jv_int(int64_t i)
{
    sd_jv v = {SD_JV_INT, 0, {.i = i}};
    return v;
}
static inline sd_jv sd__jv_float(double f)
{
    sd_jv v = {SD_JV_FLOAT, 0, {.f = f}};
    return v;
}
static inline sd_jv sd__jv_str(const char *p, size_t n)
{
    sd_jv v = {SD_JV_STR, 0, {.i = 0}};
    v.u.s.p = p;
    v.u.s.n = n;
    return v;
}

/* ---- string builder (arena-backed) ---- */

typedef struct sd_jbuf {
    sd_jarena *a;
    char *p;
    size_t n, cap;
    size_t limit; /* 0: none; exceeding it unwinds with SD_EFULL */
} sd_jbuf;

void sd__jbuf_put(sd_jbuf *b, const char *s, size_t n);
void sd__jbuf_puts(sd_jbuf *b, const char *s);
void sd__jbuf_putc(sd_jbuf *b, char ch);
sd_jv sd__jbuf_value(sd_jbuf *b); /* the text so far as a string value */

/* ---- value helpers (jinja_value.c) ---- */

sd_jv sd__jv_list_new(sd_jarena *a, size_t n); /* n items, all none */
sd_jv sd__jv_dict_new(sd_jarena *a, int type); /* SD_JV_DICT or SD_JV_NS */
void sd__jv_dict_set(sd_jarena *a, sd_jdict *d, sd_jv k, sd_jv v);
const sd_jv *sd__jv_dict_get(const sd_jdict *d, sd_jv k);
const sd_jv *sd__jv_dict_gets(const sd_jdict *d, const char *key, size_t n);
sd_jv sd__jv_from_json(sd_jarena *a, const json_t *j);
int sd__jv_truthy(const sd_jv *v);
int sd__jv_equal(const sd_jv *x, const sd_jv *y);
const char *sd__jv_type_name(const sd_jv *v); /* Python's name: 'str', 'dict', ... */
int sd__jv_is_number(const sd_jv *v);         /* int, float or bool */
double sd__jv_as_double(const sd_jv *v);
/* str(v) as Python prints it (None, True, 1.5, ['a'], {'k': 1}); undefined is empty. */
void sd__jv_str_append(sd_jbuf *b, const sd_jv *v);
void sd__jv_repr_append(sd_jbuf *b, const sd_jv *v);
sd_jv sd__jv_to_str(sd_jarena *a, const sd_jv *v);
void sd__jv_fmt_float(double f, char out[40]); /* Python repr(float) */
/* json.dumps(v, ensure_ascii=False, indent, sort_keys) as transformers' tojson; indent < 0
 * means None. Returns 0, or -1 when v holds something JSON cannot encode. */
int sd__jv_tojson(sd_jbuf *b, const sd_jv *v, int indent, int sort_keys, int depth);

/* UTF-8 helpers: code point count, decoding one code point (invalid bytes decode as one
 * code point each), and Python's str.isspace. */
size_t sd__utf8_len(const char *s, size_t n);
uint32_t sd__utf8_next(const char *s, size_t n, size_t *pos);
int sd__py_isspace(uint32_t cp);

/* ---- tokens ---- */

enum {
    SD_JT_EOF,
    SD_JT_DATA,        /* template text; str is the text */
    SD_JT_VAR_BEGIN,   /* {{ */
    SD_JT_VAR_END,     /* }} */
    SD_JT_BLOCK_BEGIN, /* {% */
    SD_JT_BLOCK_END,   /* %} */
    SD_JT_NAME,
    SD_JT_STRING, /* str is the unescaped value */
    SD_JT_INT,
    SD_JT_FLOAT,
    SD_JT_OP, /* str is the operator text */
};

typedef struct sd_jtok {
    int type;
    int line;
    const char *str; /* NUL-terminated, arena */
    size_t len;
    int64_t i;
    double f;
} sd_jtok;

/* Lexes NUL-terminated `src` into *ret_toks (ends with SD_JT_EOF). Unwinds on errors. */
void sd__jinja_lex(sd_jarena *a, const char *src, size_t len, const sd_jinja_opts *o, sd_jtok **ret_toks,
                   size_t *ret_n);

/* ---- AST ---- */

enum {
    /* expressions */
    SD_JN_LIT,     /* lit */
    SD_JN_NAME,    /* name */
    SD_JN_LIST,    /* v: items */
    SD_JN_TUPLE,   /* v: items */
    SD_JN_DICT,    /* v: key0, val0, key1, val1, ... */
    SD_JN_ATTR,    /* a.name */
    SD_JN_ITEM,    /* a[b] */
    SD_JN_SLICE,   /* a:b:c inside [], each may be NULL */
    SD_JN_CALL,    /* a(v...) ; keyword args are SD_JN_KWARG */
    SD_JN_KWARG,   /* name=a */
    SD_JN_FILTER,  /* a|name(v...) ; a NULL inside a filter block */
    SD_JN_TEST,    /* a is [not] name(v...) ; op = negated */
    SD_JN_BINOP,   /* a op b */
    SD_JN_UNARY,   /* op a */
    SD_JN_CONCAT,  /* v[0] ~ v[1] ~ ... */
    SD_JN_COMPARE, /* a, then v: SD_JN_CMPOP each (op, a) */
    SD_JN_CMPOP,
    SD_JN_COND, /* b if a else c (c may be NULL) */
    /* statements */
    SD_JN_OUTPUT,  /* literal text: lit */
    SD_JN_EMIT,    /* {{ a }} */
    SD_JN_IF,      /* if a: v else w */
    SD_JN_FOR,     /* for a in b [if c]: v else w */
    SD_JN_SET,     /* set a = b */
    SD_JN_SETBLK,  /* set a: body v, filter chain c (operand NULL) or NULL */
    SD_JN_MACRO,   /* macro name(w params: SD_JN_KWARG name=default|NULL): v */
    SD_JN_CALLBLK, /* call a(...) with body v as caller() */
    SD_JN_FILTBLK, /* filter c: body v */
    SD_JN_BREAK,
    SD_JN_CONTINUE,
    SD_JN_BODY, /* v: statements (template root, generation blocks) */
};

/* Operators, for SD_JN_BINOP / SD_JN_UNARY / SD_JN_CMPOP. */
enum {
    SD_JOP_ADD = 1,
    SD_JOP_SUB,
    SD_JOP_MUL,
    SD_JOP_DIV,
    SD_JOP_FLOORDIV,
    SD_JOP_MOD,
    SD_JOP_POW,
    SD_JOP_AND,
    SD_JOP_OR,
    SD_JOP_NOT,
    SD_JOP_NEG,
    SD_JOP_POS,
    SD_JOP_EQ,
    SD_JOP_NE,
    SD_JOP_LT,
    SD_JOP_LE,
    SD_JOP_GT,
    SD_JOP_GE,
    SD_JOP_IN,
    SD_JOP_NOTIN,
};

typedef struct sd_jn sd_jn;
struct sd_jn {
    int kind; /* SD_JN_* */
    int op;   /* SD_JOP_*, or a flag (negated test) */
    int line;
    const char *name; /* NUL-terminated identifier, arena */
    sd_jv lit;
    sd_jn *a, *b, *c;
    sd_jn **v; /* [nv] */
    size_t nv;
    sd_jn **w; /* [nw] */
    size_t nw;
};

/* Parses tokens into the root SD_JN_BODY. Unwinds on syntax errors. */
sd_jn *sd__jinja_parse_tokens(sd_jarena *a, const sd_jtok *toks, size_t n);

/* ---- render context ---- */

typedef struct sd_jframe sd_jframe;
struct sd_jframe {
    sd_jframe *parent;
    sd_jdict *vars;
};

struct sd_jargs {
    size_t n;
    const sd_jv *v; /* [n] positional */
    size_t nk;
    const char **kname; /* [nk] keyword names */
    const sd_jv *kv;    /* [nk] keyword values */
};

struct sd_jctx {
    sd_jarena a;
    sd_jerr err;
    sd_jinja_limits lim;
    uint64_t steps;
    int depth;
    sd_jframe *root;
    sd_jframe *frame;
    sd_jbuf *out;
    int ctl; /* pending break/continue of the innermost loop */
};

_Noreturn void sd__jinja_rt_fail(sd_jctx *c, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* jinja_eval.c */
sd_jv sd__jinja_eval(sd_jctx *c, const sd_jn *n);
void sd__jinja_exec_body(sd_jctx *c, sd_jn *const *v, size_t nv);
sd_jv sd__jinja_call(sd_jctx *c, const sd_jv *fn, sd_jargs *a, int line);

/* jinja_ops.c */
sd_jv sd__jinja_undef_fmt(sd_jctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
sd_jv sd__jinja_binop(sd_jctx *c, int op, const sd_jv *x, const sd_jv *y, int line);
int sd__jinja_compare(sd_jctx *c, int op, const sd_jv *x, const sd_jv *y, int line);
sd_jv sd__jinja_getattr(sd_jctx *c, const sd_jv *obj, const char *name, int line);
sd_jv sd__jinja_getitem(sd_jctx *c, const sd_jv *obj, const sd_jv *key, int line);
sd_jv sd__jinja_slice(sd_jctx *c, const sd_jv *obj, const sd_jv *start, const sd_jv *stop, const sd_jv *step,
                      int line);
/* The items a for loop visits: list/tuple items, dict keys, string characters. */
sd_jv sd__jinja_iterate(sd_jctx *c, const sd_jv *v, int line);

/* jinja_filters.c */
sd_jv sd__jinja_filter(sd_jctx *c, const char *name, const sd_jv *val, sd_jargs *a, int line);
int sd__jinja_test(sd_jctx *c, const char *name, const sd_jv *val, sd_jargs *a, int line);
int sd__jinja_has_filter(const char *name);
int sd__jinja_has_test(const char *name);

/* jinja_methods.c: methods of str/dict/list values and global functions; found = 0 when
 * the name is not one. */
sd_jv sd__jinja_method(sd_jctx *c, const sd_jv *self, const char *name, int *found);
sd_jv sd__jinja_global(sd_jctx *c, const char *name, int *found);

/* Argument access for builtins: positional index or keyword name, else NULL. */
const sd_jv *sd__jargs_get(const sd_jargs *a, size_t pos, const char *kw);
void sd__jargs_check(sd_jctx *c, const sd_jargs *a, size_t max_pos, const char *const *kws, const char *fname,
                     int line);
/* Requires a string; returns it. */
sd_jv sd__jinja_want_str(sd_jctx *c, const sd_jv *v, const char *what, int line);
int64_t sd__jinja_want_int(sd_jctx *c, const sd_jv *v, const char *what, int line);

#endif
