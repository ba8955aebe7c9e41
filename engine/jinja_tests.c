/* jinja_tests: jinja2's builtin tests (`x is defined`, `x is string`, `x is divisibleby 3`...). */
#include "jinja_impl.h"

#include <string.h>

typedef int (*test_fn)(sd_jctx *c, const sd_jv *v, const sd_jv *arg, int line);

static const sd_jv *need_arg(sd_jctx *c, const sd_jv *arg, int line)
{
    if (!arg)
        sd__jinja_rt_fail(c, line, "test needs an argument");
    return arg;
}

static int t_defined(sd_jctx *c, const sd_jv *v, const sd_jv *arg, int line)
{
    return v->type != SD_JV_UNDEF;
}

static int t_undefined(sd_jctx *c, const sd_jv *v, const sd_jv *arg, int line)
{
    return v->type == SD_JV_UNDEF;
}

static int t_none(sd_jctx *c, const sd_jv *v, const sd_jv *arg, int line)
{
    return v->type == SD_JV_NONE;
}

static int t_boolean(sd_jctx *c, const sd_jv *v, const sd_jv *arg, int line)
{
    return v->type == SD_JV_BOOL;
}

static int t_true(sd_jctx *c, const sd_jv *v, const sd_jv *arg, int line)
{
    return v->type == SD_JV_BOOL && v->u.b;
}

static int t_false(sd_jctx *c, const sd_jv *v, const sd_jv *arg, int line)
{
    return v->type == SD_JV_BOOL && !v->u.b;
}

static int t_integer(sd_jctx *c, const sd_jv *v, const sd_jv *arg, int line)
{
    return v->type == SD_JV_INT;
}

static int t_float(sd_jctx *c, const sd_jv *v, const sd_jv *arg, int line)
{
    return v->type == SD_JV_FLOAT;
}

static int t_number(sd_jctx *c, const sd_jv *v, const sd_jv *arg, int line)
{
    return sd__jv_is_number(v); /* bool is a Number in Python */
}

static int t_string(sd_jctx *c, const sd_jv *v, const sd_jv *arg, int line)
{
    return v->type == SD_JV_STR;
}

static int t_mapping(sd_jctx *c, const sd_jv *v, const sd_jv *arg, int line)
{
    return v->type == SD_JV_DICT;
}

static int t_iterable(sd_jctx *c, const sd_jv *v, const sd_jv *arg, int line)
{
    return v->type == SD_JV_STR || v->type == SD_JV_LIST || v->type == SD_JV_DICT || v->type == SD_JV_UNDEF;
}

static int t_sequence(sd_jctx *c, const sd_jv *v, const sd_jv *arg, int line)
{
    return v->type == SD_JV_STR || v->type == SD_JV_LIST || v->type == SD_JV_DICT || v->type == SD_JV_UNDEF;
}

static int t_callable(sd_jctx *c, const sd_jv *v, const sd_jv *arg, int line)
{
    return v->type == SD_JV_FUNC;
}

static int t_eq(sd_jctx *c, const sd_jv *v, const sd_jv *arg, int line)
{
    return sd__jinja_compare(c, SD_JOP_EQ, v, need_arg(c, arg, line), line);
}

static int t_ne(sd_jctx *c, const sd_jv *v, const sd_jv *arg, int line)
{
    return sd__jinja_compare(c, SD_JOP_NE, v, need_arg(c, arg, line), line);
}

static int t_lt(sd_jctx *c, const sd_jv *v, const sd_jv *arg, int line)
{
    return sd__jinja_compare(c, SD_JOP_LT, v, need_arg(c, arg, line), line);
}

static int t_le(sd_jctx *c, const sd_jv *v, const sd_jv *arg, int line)
{
    return sd__jinja_compare(c, SD_JOP_LE, v, need_arg(c, arg, line), line);
}

static int t_gt(sd_jctx *c, const sd_jv *v, const sd_jv *arg, int line)
{
    return sd__jinja_compare(c, SD_JOP_GT, v, need_arg(c, arg, line), line);
}

static int t_ge(sd_jctx *c, const sd_jv *v, const sd_jv *arg, int line)
{
    return sd__jinja_compare(c, SD_JOP_GE, v, need_arg(c, arg, line), line);
}

static int t_in(sd_jctx *c, const sd_jv *v, const sd_jv *arg, int line)
{
    return sd__jinja_compare(c, SD_JOP_IN, v, need_arg(c, arg, line), line);
}

static int t_sameas(sd_jctx *c, const sd_jv *v, const sd_jv *arg, int line)
{
    arg = need_arg(c, arg, line);
    /* identity: singletons compare by value, containers by address */
    if (v->type != arg->type)
        return 0;
    switch (v->type) {
    case SD_JV_NONE:
    case SD_JV_UNDEF:
        return v->type == SD_JV_NONE;
    case SD_JV_BOOL:
        return v->u.b == arg->u.b;
    case SD_JV_LIST:
        return v->u.l == arg->u.l;
    case SD_JV_DICT:
    case SD_JV_NS:
        return v->u.d == arg->u.d;
    default:
        return sd__jv_equal(v, arg);
    }
}

static int64_t want_int(sd_jctx *c, const sd_jv *v, int line)
{
    return sd__jinja_want_int(c, v, "value", line);
}

static int t_odd(sd_jctx *c, const sd_jv *v, const sd_jv *arg, int line)
{
    return want_int(c, v, line) % 2 != 0;
}

static int t_even(sd_jctx *c, const sd_jv *v, const sd_jv *arg, int line)
{
    return want_int(c, v, line) % 2 == 0;
}

static int t_divisibleby(sd_jctx *c, const sd_jv *v, const sd_jv *arg, int line)
{
    int64_t d = want_int(c, need_arg(c, arg, line), line);
    if (d == 0)
        sd__jinja_rt_fail(c, line, "integer division or modulo by zero");
    return d == -1 || want_int(c, v, line) % d == 0;
}

static int t_case(sd_jctx *c, const sd_jv *v, int upper, int line)
{
    sd_jv s = sd__jv_to_str(&c->a, v);
    int found = 0;
    sd_jv m = sd__jinja_method(c, &s, upper ? "isupper" : "islower", &found);
    sd_jargs none = {0};
    sd_jv r = sd__jinja_call(c, &m, &none, line);
    return sd__jv_truthy(&r);
}

static int t_lower(sd_jctx *c, const sd_jv *v, const sd_jv *arg, int line)
{
    return t_case(c, v, 0, line);
}

static int t_upper(sd_jctx *c, const sd_jv *v, const sd_jv *arg, int line)
{
    return t_case(c, v, 1, line);
}

static const struct {
    const char *name;
    test_fn fn;
} tests[] = {
    {"defined", t_defined},
    {"undefined", t_undefined},
    {"none", t_none},
    {"boolean", t_boolean},
    {"true", t_true},
    {"false", t_false},
    {"integer", t_integer},
    {"float", t_float},
    {"number", t_number},
    {"string", t_string},
    {"mapping", t_mapping},
    {"iterable", t_iterable},
    {"sequence", t_sequence},
    {"callable", t_callable},
    {"eq", t_eq},
    {"equalto", t_eq},
    {"==", t_eq},
    {"ne", t_ne},
    {"!=", t_ne},
    {"lt", t_lt},
    {"lessthan", t_lt},
    {"<", t_lt},
    {"le", t_le},
    {"<=", t_le},
    {"gt", t_gt},
    {"greaterthan", t_gt},
    {">", t_gt},
    {"ge", t_ge},
    {">=", t_ge},
    {"in", t_in},
    {"sameas", t_sameas},
    {"odd", t_odd},
    {"even", t_even},
    {"divisibleby", t_divisibleby},
    {"lower", t_lower},
    {"upper", t_upper},
};

static test_fn find_test(const char *name)
{
    for (size_t k = 0; k < sizeof tests / sizeof tests[0]; k++)
        if (!strcmp(tests[k].name, name))
            return tests[k].fn;
    return NULL;
}

int sd__jinja_has_test(const char *name)
{
    return find_test(name) != NULL;
}

int sd__jinja_test(sd_jctx *c, const char *name, const sd_jv *val, sd_jargs *a, int line)
{
    test_fn fn = find_test(name);
    if (!fn)
        sd__jinja_rt_fail(c, line, "No test named '%s'.", name);
    if (a->n > 1 || a->nk > 0)
        sd__jinja_rt_fail(c, line, "test '%s' takes at most one positional argument", name);
    return fn(c, val, a->n ? &a->v[0] : NULL, line);
}
