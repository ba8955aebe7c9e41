/* jschema_ref: what the JSON Schema tests share — a seeded generator, the test schemas (written
 * with ' for ", swapped by q()), feeding helpers, random documents from the test's own reading of
 * a schema, and an independent checker (jansson's parse against the schema, recursively). Used
 * by test_jschema and test_jschema_gen. */
#ifndef SD_TEST_JSCHEMA_REF_H
#define SD_TEST_JSCHEMA_REF_H

#include <jansson.h>
#include <stdint.h>

#include "engine/jschema_impl.h" /* white-box: the zero-padding check reads the state layout */
#include "tests/engine/text_util.h"
#include "tests/harness.h"

/* A state buffer: aligned and typed like the library's own (its header, then frame bytes). */
typedef union {
    struct sd__js_state h;
    uint64_t w[SD_JSCHEMA_STATE_MAX / 8];
} tstate;

/* ---- the schemas --------------------------------------------------------------------------- */

/* Nested objects, required and optional keys, a nullable type, an enum array with bounds, a
 * length limit, integer and number, annotations. */
static const char person[] =
    "{'type':'object','title':'P','properties':{"
    "'name':{'type':'string','description':'who'},"
    "'age':{'type':'integer'},"
    "'email':{'type':['string','null']},"
    "'tags':{'type':'array','items':{'type':'string','enum':['a','b','ab']},"
    "'minItems':1,'maxItems':3},"
    "'address':{'type':'object','properties':{'city':{'type':'string','maxLength':5},"
    "'zip':{'type':'string'}},'required':['city'],'additionalProperties':false},"
    "'score':{'type':'number'},"
    "'ok':{'type':'boolean'}},"
    "'required':['name','age','tags'],'additionalProperties':false}";

/* Recursion through $ref: a tree node. */
static const char tree[] = "{'$ref':'#/$defs/node','$defs':{'node':{'type':'object','properties':{"
                           "'value':{'type':'integer'},"
                           "'children':{'type':'array','items':{'$ref':'#/$defs/node'}}},"
                           "'required':['value','children']}}}";

/* anyOf by first byte, a top-level array, a string with a minimum length, a const tag. */
static const char anyof[] = "{'type':'array','maxItems':4,'items':{'anyOf':["
                            "{'type':'object','properties':{'kind':{'const':'pt'},"
                            "'x':{'type':'number'},'y':{'type':'number'}},'required':['kind','x']},"
                            "{'type':'null'},{'$ref':'#/$defs/word'}]},"
                            "'$defs':{'word':{'type':'string','minLength':2}}}";

/* A top-level enum of every literal kind; numbers that extend one another. */
static const char lits[] = "{'enum':[1,12,-3.5,0.1,'x','x\\'y',true,null,2.0]}";

/* A top-level string counted in code points. */
static const char str13[] = "{'type':'string','minLength':1,'maxLength':3}";

/* Unbounded arrays of numbers (the count saturates at minItems). */
static const char nums[] = "{'type':'array','items':{'type':'number'},'minItems':2}";

/* Keys that are prefixes of one another, a required one between optional ones, UTF-8 names;
 * number enums inside a container. */
static const char keys[] = "{'type':'object','properties':{'a':{'type':'null'},'ab':{'type':'null'},"
                           "'abc':{'type':'null'},'req':{'type':'array','items':{'enum':[1,12,-3]}},"
                           "'\xc3\xa9t\xc3\xa9':{'type':['integer','boolean']},'':{'type':'null'}},"
                           "'required':['req']}";

static const char *const all_schemas[] = {person, tree, anyof, lits, str13, nums, keys};
#define N_SCHEMAS (sizeof all_schemas / sizeof *all_schemas)

static inline sd_jschema *compile_ok(const char *schema)
{
    sd_jschema *s = NULL;
    sd_diag d = {0};
    const char *json = q(schema);
    int rc = sd_jschema_compile(&s, json, strlen(json), &d);
    CHECK_MSG(rc == 0 && s, "%s: %s", json, sd_diag_str(&d, rc));
    return rc ? NULL : s;
}

/* st fed t (q'd) from the start; 0 or -1 as sd_jschema_feed. */
static inline int feed_from_start(const sd_jschema *s, tstate *st, const char *t)
{
    memset(st, 0xA5, sizeof *st); /* init must zero what it does not use */
    sd_jschema_init(s, st);
    t = q(t);
    return sd_jschema_feed(s, st, t, strlen(t));
}

/* Whole text accepted as one document: every piece taken, complete only at the end, and the end
 * allowed there (complete or can_end). max_piece 0: one feed. */
static inline int accepts(const sd_jschema *s, const char *t, size_t n, uint64_t *rng, int max_piece)
{
    tstate st;
    sd_jschema_init(s, &st);
    for (size_t i = 0; i < n;) {
        size_t k = max_piece ? 1 + rnd(rng, (unsigned)max_piece) : n;
        k = k > n - i ? n - i : k;
        if (sd_jschema_complete(s, &st) || sd_jschema_feed(s, &st, t + i, k))
            return 0;
        i += k;
    }
    return sd_jschema_can_end(s, &st);
}

/* Index of the first byte rejected when fed one at a time, -1 if none; checks that a rejected
 * feed leaves the state as it was. */
static inline long reject_at(const sd_jschema *s, const char *t)
{
    tstate st, before;
    sd_jschema_init(s, &st);
    for (size_t i = 0; t[i]; i++) {
        before = st;
        if (sd_jschema_feed(s, &st, t + i, 1)) {
            CHECK_MSG(memcmp(&st, &before, sd_jschema_state_size(s)) == 0,
                      "a rejected feed changed the state");
            return (long)i;
        }
    }
    return -1;
}

/* ---- random documents from the test's own reading of a schema --------------------------------- */

struct gen {
    char b[1 << 16];
    size_t n;
    uint64_t rng;
    json_t *root;
};

static inline void put(struct gen *g, const char *s)
{
    size_t n = strlen(s);
    if (g->n + n < sizeof g->b)
        memcpy(g->b + g->n, s, n), g->n += n;
}

static inline void put_ws(struct gen *g)
{
    for (unsigned k = rnd(&g->rng, 8) == 0 ? 1 + rnd(&g->rng, 4) : 0; k > 0; k--)
        put(g, (const char *[]){" ", "\n", "\t", "\r"}[rnd(&g->rng, 4)]);
}

/* The schema behind a chain of local "#/a/b" references (the test's need no ~ escapes). */
static inline json_t *t_deref(json_t *root, json_t *sch)
{
    const char *r;
    while ((r = json_string_value(json_object_get(sch, "$ref")))) {
        char seg[128];
        json_t *at = root;
        for (const char *p = r + 1; *p == '/'; p += strlen(seg) + 1) {
            snprintf(seg, sizeof seg, "%.*s", (int)strcspn(p + 1, "/"), p + 1);
            at = json_object_get(at, seg);
        }
        sch = at;
    }
    return sch;
}

static inline unsigned count_kw(json_t *sch, const char *key, unsigned dflt)
{
    json_t *v = json_object_get(sch, key);
    return v ? (unsigned)json_integer_value(v) : dflt;
}

static inline void gen_string(struct gen *g, json_t *sch)
{
    static const char *const chars[] = {"a",
                                        "Z",
                                        " ",
                                        "~",
                                        "\\n",
                                        "\\\"",
                                        "\\\\",
                                        "\\/",
                                        "\\u00e9",
                                        "\\ud83d\\ude00",
                                        "\xc3\xa9",
                                        "\xe2\x82\xac",
                                        "\xf0\x9f\x98\x80",
                                        "\x7f",
                                        "{",
                                        "'"};
    unsigned lo = count_kw(sch, "minLength", 0), hi = count_kw(sch, "maxLength", lo + 8);
    put(g, "\"");
    for (unsigned n = lo + rnd(&g->rng, hi - lo + 1); n > 0; n--)
        put(g, chars[rnd(&g->rng, sizeof chars / sizeof *chars)]);
    put(g, "\"");
}

static inline void gen_number(struct gen *g, int integer)
{
    char buf[64];
    size_t n = rnd(&g->rng, 3) == 0 ? (size_t)sprintf(buf, "-") : 0;
    if (rnd(&g->rng, 4) == 0)
        buf[n++] = '0';
    else
        for (unsigned k = 1 + rnd(&g->rng, 6), first = 1; k--; first = 0)
            buf[n++] = (char)((first ? '1' : '0') + rnd(&g->rng, first ? 9 : 10));
    if (!integer && rnd(&g->rng, 2))
        n += (size_t)sprintf(buf + n, ".%u", rnd(&g->rng, 1000));
    if (!integer && rnd(&g->rng, 3) == 0)
        n += (size_t)sprintf(buf + n, "%s%u", (const char *[]){"e", "E", "e+", "E-"}[rnd(&g->rng, 4)],
                             rnd(&g->rng, 40));
    buf[n] = '\0';
    put(g, buf);
}

static inline void gen_value(struct gen *g, json_t *sch, int depth);

/* Keys in schema order: the required ones, and optional ones at random (none when deep). */
static inline void gen_object(struct gen *g, json_t *sch, int depth)
{
    json_t *req = json_object_get(sch, "required"), *v;
    const char *k;
    int first = 1;
    put(g, "{");
    json_object_foreach(json_object_get(sch, "properties"), k, v)
    {
        int required = 0;
        for (size_t i = 0; i < json_array_size(req); i++)
            required |= strcmp(json_string_value(json_array_get(req, i)), k) == 0;
        if (!required && (depth > 6 || rnd(&g->rng, 2)))
            continue;
        put(g, first ? "" : ",");
        put_ws(g);
        put(g, "\"");
        put(g, k);
        put(g, "\"");
        put_ws(g);
        put(g, ":");
        put_ws(g);
        gen_value(g, v, depth + 1);
        put_ws(g);
        first = 0;
    }
    put(g, "}");
}

static inline void gen_array(struct gen *g, json_t *sch, int depth)
{
    unsigned lo = count_kw(sch, "minItems", 0), hi = count_kw(sch, "maxItems", lo + 4);
    unsigned n = depth > 6 ? lo : lo + rnd(&g->rng, hi - lo + 1);
    put(g, "[");
    for (unsigned i = 0; i < n; i++) {
        put(g, i ? "," : "");
        put_ws(g);
        gen_value(g, json_object_get(sch, "items"), depth + 1);
        put_ws(g);
    }
    put(g, "]");
}

static inline void gen_value(struct gen *g, json_t *sch, int depth)
{
    sch = t_deref(g->root, sch);
    json_t *any = json_object_get(sch, "anyOf"), *en = json_object_get(sch, "enum"),
           *t = json_object_get(sch, "type");
    if (any)
        return gen_value(g, json_array_get(any, rnd(&g->rng, (unsigned)json_array_size(any))), depth);
    json_t *lit =
        en ? json_array_get(en, rnd(&g->rng, (unsigned)json_array_size(en))) : json_object_get(sch, "const");
    if (lit) {
        char *txt = json_dumps(lit, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(3));
        put(g, txt);
        free(txt);
        return;
    }
    if (json_is_array(t))
        t = json_array_get(t, rnd(&g->rng, (unsigned)json_array_size(t)));
    const char *type = json_string_value(t);
    if (strcmp(type, "object") == 0)
        gen_object(g, sch, depth);
    else if (strcmp(type, "array") == 0)
        gen_array(g, sch, depth);
    else if (strcmp(type, "string") == 0)
        gen_string(g, sch);
    else if (strcmp(type, "number") == 0 || strcmp(type, "integer") == 0)
        gen_number(g, type[0] == 'i');
    else
        put(g, strcmp(type, "null") == 0 ? "null" : rnd(&g->rng, 2) ? "true" : "false");
}

static inline size_t gen_doc(struct gen *g, uint64_t seed)
{
    g->rng = seed * 0x9E3779B97F4A7C15ull + 1;
    g->n = 0;
    put_ws(g);
    gen_value(g, g->root, 0);
    return g->n;
}

/* ---- an independent checker: jansson's parse against the schema, recursively ----------------- */

static inline int type_ok(const char *type, const json_t *v)
{
    static const char *const names[] = {"object", "array", "string", "integer", "number", "boolean", "null"};
    static const int types[] = {JSON_OBJECT, JSON_ARRAY, JSON_STRING, JSON_INTEGER,
                                JSON_REAL,   JSON_TRUE,  JSON_NULL};
    for (int k = 0; k < 7; k++)
        if (strcmp(type, names[k]) == 0)
            return (int)json_typeof(v) == types[k] || (k == 4 && json_is_integer(v)) ||
                   (k == 5 && json_is_false(v));
    return 0;
}

static inline int ref_check(json_t *root, json_t *sch, const json_t *v);

/* Required keys present; every key a property (no additional properties, whatever the schema
 * says: jschema.h) with a valid value. */
static inline int ref_check_object(json_t *root, json_t *sch, const json_t *v)
{
    json_t *props = json_object_get(sch, "properties"), *req = json_object_get(sch, "required"), *x;
    const char *k;
    for (size_t i = 0; i < json_array_size(req); i++)
        if (!json_object_get(v, json_string_value(json_array_get(req, i))))
            return 0;
    json_object_foreach((json_t *)v, k, x) if (!json_object_get(props, k) ||
                                               !ref_check(root, json_object_get(props, k), x)) return 0;
    return 1;
}

static inline int in_range(json_t *sch, const char *min, const char *max, size_t n)
{
    return n >= count_kw(sch, min, 0) && n <= count_kw(sch, max, UINT32_MAX);
}

static inline int ref_check(json_t *root, json_t *sch, const json_t *v)
{
    sch = t_deref(root, sch);
    json_t *any = json_object_get(sch, "anyOf"), *t = json_object_get(sch, "type");
    json_t *en = json_object_get(sch, "enum"), *cst = json_object_get(sch, "const");
    int n_ok = 0;
    for (size_t i = 0; i < json_array_size(any); i++)
        n_ok += ref_check(root, json_array_get(any, i), v);
    if (any)
        return n_ok > 0;
    for (size_t i = 0; t && i < (json_is_array(t) ? json_array_size(t) : 1); i++)
        n_ok += type_ok(json_string_value(json_is_array(t) ? json_array_get(t, i) : t), v);
    if ((t && !n_ok) || (cst && !json_equal(cst, (json_t *)v)))
        return 0;
    for (size_t i = 0, hit = 0; en; i++) {
        if (i == json_array_size(en))
            return (int)hit;
        hit |= json_equal(json_array_get(en, i), (json_t *)v);
    }
    if (json_is_object(v))
        return ref_check_object(root, sch, v);
    if (json_is_array(v) && !in_range(sch, "minItems", "maxItems", json_array_size(v)))
        return 0;
    for (size_t i = 0; json_is_array(v) && i < json_array_size(v); i++)
        if (!ref_check(root, json_object_get(sch, "items"), json_array_get(v, i)))
            return 0;
    size_t cp = 0; /* code points */
    for (size_t i = 0; json_is_string(v) && i < json_string_length(v); i++)
        cp += (json_string_value(v)[i] & 0xC0) != 0x80;
    return !json_is_string(v) || in_range(sch, "minLength", "maxLength", cp);
}

/* Parses the text with jansson (any value, no duplicate keys) and checks it against the schema:
 * 1 valid, 0 not, -1 valid JSON that jansson cannot hold (a number beyond double or int64). */
static inline int ref_valid(json_t *root, const char *text, size_t n)
{
    json_error_t err;
    json_t *v = json_loadb(text, n, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &err);
    if (!v && (strstr(err.text, "overflow") || strstr(err.text, "too big")))
        return -1;
    int ok = v && ref_check(root, root, v);
    json_decref(v);
    return ok;
}

#endif
