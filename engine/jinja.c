/* jinja: the public entry points of the Jinja interpreter: parse once, render many times,
 * each run under its own error-unwinding point and arena. */
#include "jinja.h"
#include "jinja_impl.h"

#include <stdlib.h>
#include <string.h>

struct sd_jinja_tmpl {
    sd_jarena a; /* owns the tokens, the AST and its literals */
    sd_jerr err;
    sd_jn *root;
};

sd_jinja_limits sd_jinja_limits_default(void)
{
    sd_jinja_limits l = {
        .max_output = 16u << 20,
        .max_memory = 256u << 20,
        .max_steps = 20000000,
        .max_depth = 64,
    };
    return l;
}

int sd_jinja_parse(sd_jinja_tmpl **ret, const char *src, size_t len, const sd_jinja_opts *opts, sd_diag *d)
{
    static const sd_jinja_opts hf = {.trim_blocks = 1, .lstrip_blocks = 1, .keep_trailing_newline = 0};
    if (!ret || (!src && len))
        return sd_diag_set(d, SD_EINVAL, "jinja: no template source");
    sd_jinja_tmpl *t = calloc(1, sizeof *t);
    if (!t)
        return sd_diag_set(d, SD_ENOMEM, "jinja: out of memory");
    t->a.err = &t->err;
    t->a.cap = 64u << 20;
    if (setjmp(t->err.jb)) {
        int code = t->err.code;
        sd_diag_set(d, code, "template syntax error: %s", t->err.msg);
        sd_jinja_free(t);
        return code;
    }
    sd_jtok *toks;
    size_t nt;
    sd__jinja_lex(&t->a, src ? src : "", len, opts ? opts : &hf, &toks, &nt);
    t->root = sd__jinja_parse_tokens(&t->a, toks, nt);
    *ret = t;
    return 0;
}

void sd_jinja_free(sd_jinja_tmpl *t)
{
    if (!t)
        return;
    sd__jinja_arena_free(&t->a);
    free(t);
}

int sd_jinja_render(const sd_jinja_tmpl *t, const json_t *vars, const sd_jinja_limits *lim, char **ret,
                    size_t *ret_len, sd_diag *d)
{
    if (!t || !ret)
        return sd_diag_set(d, SD_EINVAL, "jinja: no template");
    if (vars && !json_is_object(vars))
        return sd_diag_set(d, SD_EINVAL, "jinja: template variables must be a JSON object");
    /* heap context: its fields change after setjmp and are read after longjmp */
    sd_jctx *c = calloc(1, sizeof *c);
    if (!c)
        return sd_diag_set(d, SD_ENOMEM, "jinja: out of memory");
    c->lim = lim ? *lim : sd_jinja_limits_default();
    c->a.err = &c->err;
    c->a.cap = c->lim.max_memory;
    int rc = 0;
    if (setjmp(c->err.jb)) {
        rc = c->err.code;
        sd_diag_set(d, rc, "%s", c->err.msg);
        goto cleanup;
    }
    c->root = sd__jinja_alloc(&c->a, sizeof *c->root);
    c->root->vars = sd__jv_dict_new(&c->a, SD_JV_DICT).u.d;
    if (vars) {
        sd_jv v = sd__jv_from_json(&c->a, vars);
        c->root->vars = v.u.d;
    }
    c->frame = c->root;
    sd_jbuf *out = sd__jinja_alloc(&c->a, sizeof *out);
    out->a = &c->a;
    out->limit = c->lim.max_output;
    c->out = out;
    sd__jinja_exec_body(c, t->root->v, t->root->nv);
    char *text = malloc(out->n + 1);
    if (!text) {
        rc = sd_diag_set(d, SD_ENOMEM, "jinja: out of memory");
        goto cleanup;
    }
    if (out->n)
        memcpy(text, out->p, out->n);
    text[out->n] = 0;
    *ret = text;
    if (ret_len)
        *ret_len = out->n;
cleanup:
    sd__jinja_arena_free(&c->a);
    free(c);
    return rc;
}
