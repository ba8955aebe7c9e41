/* jschema: compiles a JSON Schema (parsed with jansson) into the flat arrays of sd_jschema that
 * the validator (jschema_step.c) reads: nodes, properties in schema order, enum literals as
 * sorted groups of JSON text; $ref and anyOf resolved into per-node first-byte tables. */
#include "jschema_impl.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cc {
    sd_jschema *s;
    json_t *root;
    sd_diag *d;
    struct sd__js_cnode *cn; /* [s->n_nodes] */
    uint16_t *alts;          /* anyOf alternatives */
    size_t n_alts;
    size_t cap_nodes, cap_cn, cap_props, cap_lits, cap_bytes, cap_alts;
    json_t *memo; /* each schema object's node (memo_get): each is compiled once */
    char path[512];
    size_t plen;
    int nest;    /* compile_at recursion */
    int lenient; /* SD_JSCHEMA_LENIENT */
};

#define MAX_ALTS 16
#define MAX_NEST 128

/* ---- plumbing: errors, paths, growth ------------------------------------------------------ */

#define MSG_ROOM (SD_DIAG_MSG_MAX - 32) /* a message's bytes at most: callers may prefix theirs */
#define PATH_ROOM 240                   /* a path's bytes at most in a message */

/* The longest prefix of s[0, n) (valid UTF-8 up to n) that does not end inside a character:
 * messages name properties and are cut to fit, and the server sends them in JSON strings. */
static size_t utf8_whole(const char *s, size_t n)
{
    size_t i = n;
    while (i > 0 && ((unsigned char)s[i - 1] & 0xC0) == 0x80)
        i--;
    if (i == 0)
        return 0;
    unsigned lead = (unsigned char)s[i - 1];
    size_t need = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    return n - (i - 1) >= need ? n : i - 1;
}

int sd__jschema_fail(sd_diag *d, const char *path, const char *fmt, ...)
{
    char msg[SD_DIAG_MSG_MAX], out[MSG_ROOM];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t pn = strlen(path), keep = pn > PATH_ROOM ? utf8_whole(path, PATH_ROOM) : pn;
    int n = snprintf(out, sizeof out, "%.*s%s: %s", (int)keep, path, keep < pn ? "..." : "", msg);
    size_t len = n < 0 ? 0 : (size_t)n < sizeof out ? (size_t)n : utf8_whole(out, sizeof out - 1);
    out[len] = '\0';
    return sd_diag_set(d, SD_EINVAL, "%s", out);
}

#define FAIL(c, ...) sd__jschema_fail((c)->d, (c)->path, __VA_ARGS__)

static int oom(struct cc *c)
{
    return sd_diag_set(c->d, SD_ENOMEM, "json schema: out of memory");
}

/* Makes room for need elements of elem bytes in *p (capacity *cap, doubled as needed). */
static int grow(struct cc *c, void *p, size_t *cap, size_t need, size_t elem)
{
    void **pp = p;
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap * 2 : 16;
    while (n < need)
        n *= 2;
    void *q = realloc(*pp, n * elem);
    if (!q)
        return oom(c);
    *pp = q;
    *cap = n;
    return 0;
}

/* Appends "/seg" (with ~ and / escaped as in JSON pointers) to the path; returns the length to
 * restore. A path too long for the buffer is cut (it only serves messages). */
static size_t path_push(struct cc *c, const char *seg)
{
    size_t old = c->plen, cap = sizeof c->path - 1;
    if (c->plen < cap)
        c->path[c->plen++] = '/';
    for (; *seg && c->plen < cap; seg++) {
        if ((*seg == '~' || *seg == '/') && c->plen + 1 < cap) {
            c->path[c->plen++] = '~';
            c->path[c->plen++] = *seg == '~' ? '0' : '1';
        } else {
            c->path[c->plen++] = *seg;
        }
    }
    c->plen = utf8_whole(c->path, c->plen);
    c->path[c->plen] = '\0';
    return old;
}

static void path_pop(struct cc *c, size_t old)
{
    c->plen = old;
    c->path[old] = '\0';
}

/* The memo: a jansson object from "%p" of a schema object to its node id. */
static int memo_get(const struct cc *c, const json_t *src)
{
    char key[32];
    snprintf(key, sizeof key, "%p", (const void *)src);
    const json_t *v = json_object_get(c->memo, key);
    return v ? (int)json_integer_value(v) : -1;
}

static int memo_set(struct cc *c, const json_t *src, uint16_t id)
{
    char key[32];
    snprintf(key, sizeof key, "%p", (const void *)src);
    return json_object_set_new(c->memo, key, json_integer(id)) ? oom(c) : 0;
}

/* A new node for schema object src at the current path. */
static int node_new(struct cc *c, json_t *src, uint16_t *ret)
{
    sd_jschema *s = c->s;
    if (s->n_nodes >= SD__JS_MAX_NODES)
        return FAIL(c, "the schema has more than %d nodes", SD__JS_MAX_NODES);
    SD_TRY(grow(c, &s->nodes, &c->cap_nodes, s->n_nodes + 1, sizeof *s->nodes));
    SD_TRY(grow(c, &c->cn, &c->cap_cn, s->n_nodes + 1, sizeof *c->cn));
    uint16_t id = (uint16_t)s->n_nodes;
    struct sd__js_node *n = &s->nodes[id];
    memset(n, 0, sizeof *n);
    for (int k = 0; k < SD__JS_N_CLASS; k++)
        n->alt[k] = SD__JS_NONE;
    n->items = n->max_items = n->max_len = n->re = SD__JS_NONE;
    c->cn[id] = (struct sd__js_cnode){.path = strdup(c->path)};
    s->n_nodes++; /* before any failure, so that cleanup frees the path */
    if (!c->cn[id].path)
        return oom(c);
    *ret = id;
    return memo_set(c, src, id);
}

/* Appends n bytes to s->bytes; *off gets where they start. */
static int bytes_add(struct cc *c, const char *b, size_t n, uint32_t *off)
{
    sd_jschema *s = c->s;
    if (s->n_bytes + n > UINT32_MAX)
        return FAIL(c, "the schema's names and values are too long");
    SD_TRY(grow(c, &s->bytes, &c->cap_bytes, s->n_bytes + n, 1));
    memcpy(s->bytes + s->n_bytes, b, n);
    *off = (uint32_t)s->n_bytes;
    s->n_bytes += n;
    return 0;
}

/* ---- literals (enum, const, true/false/null) ---------------------------------------------- */

struct text {
    char *p;
    size_t n;
};

static int text_cmp(const void *pa, const void *pb)
{
    const struct text *a = pa, *b = pb;
    int r = memcmp(a->p, b->p, a->n < b->n ? a->n : b->n);
    return r ? r : (a->n > b->n) - (a->n < b->n);
}

/* Appends texts as one literal group: sorted by bytes (so the texts sharing a prefix are a run)
 * without duplicates. The texts stay the caller's (sorted). */
static int group_add(struct cc *c, struct text *t, size_t n, uint16_t *lo, uint16_t *count)
{
    sd_jschema *s = c->s;
    qsort(t, n, sizeof *t, text_cmp);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        m += i == 0 || text_cmp(&t[i - 1], &t[i]) != 0;
    if (s->n_lits + m > UINT16_MAX)
        return FAIL(c, "the schema has more than %d enum values", UINT16_MAX);
    SD_TRY(grow(c, &s->lits, &c->cap_lits, s->n_lits + m, sizeof *s->lits));
    *lo = (uint16_t)s->n_lits;
    *count = (uint16_t)m;
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && text_cmp(&t[i - 1], &t[i]) == 0)
            continue;
        struct sd__js_lit *l = &s->lits[s->n_lits];
        if (t[i].n > UINT16_MAX)
            return FAIL(c, "an enum value is longer than %d bytes", UINT16_MAX);
        SD_TRY(bytes_add(c, t[i].p, t[i].n, &l->off));
        l->len = (uint16_t)t[i].n;
        l->end = (uint16_t)(*lo + m);
        s->n_lits++;
    }
    return 0;
}

static int builtin_groups(struct cc *c)
{
    struct text b[2] = {{(char *)"false", 5}, {(char *)"true", 4}}, z = {(char *)"null", 4};
    uint16_t n;
    SD_TRY(group_add(c, b, 2, &c->s->bool_lit, &n));
    return group_add(c, &z, 1, &c->s->null_lit, &n);
}

/* The "type" bits a value satisfies: a real is a number, never an integer. */
static int value_types(const json_t *v)
{
    static const uint8_t bits[] = {[JSON_STRING] = SD__JS_T_STR, [JSON_INTEGER] = SD__JS_T_INT | SD__JS_T_NUM,
                                   [JSON_REAL] = SD__JS_T_NUM,   [JSON_TRUE] = SD__JS_T_BOOL,
                                   [JSON_FALSE] = SD__JS_T_BOOL, [JSON_NULL] = SD__JS_T_NULL};
    return bits[json_typeof(v)]; /* objects and arrays: 0 */
}

/* The JSON text of a literal value (malloc'd): jansson's compact encoding, reals in their
 * shortest round-trip form (jansson writes 17 digits: 0.1 as 0.10000000000000001). */
static char *value_text(const json_t *v)
{
    if (!json_is_real(v))
        return json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    char buf[40];
    double x = json_real_value(v);
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf - 2, "%.*g", prec, x);
        if (strtod(buf, NULL) == x)
            break;
    }
    if (!strpbrk(buf, ".eE")) /* keep it a real: 2.0, not 2 */
        strcat(buf, ".0");
    return strdup(buf);
}

static size_t utf8_chars(const char *p, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += ((unsigned char)p[i] & 0xC0) != 0x80;
    return k;
}

/* Whether value v can be what node n accepts: its "type" (when typed) and string lengths. */
static int value_fits(const struct sd__js_node *n, int typed, const json_t *v)
{
    if (typed && !(value_types(v) & n->types))
        return 0;
    if (!json_is_string(v))
        return 1;
    size_t k = utf8_chars(json_string_value(v), json_string_length(v));
    return k >= n->min_len && (n->max_len == SD__JS_NONE || k <= n->max_len);
}

/* enum/const: the values that fit the node's type, as one literal group. With no "type", the
 * values' own types are the node's. */
static int compile_lits(struct cc *c, uint16_t id, const json_t *en, const json_t *cn)
{
    if (en && cn)
        return FAIL(c, "both 'enum' and 'const' are not supported");
    if (en && (!json_is_array(en) || json_array_size(en) == 0))
        return FAIL(c, "'enum' must be a non-empty array");
    size_t n = en ? json_array_size(en) : 1, m = 0;
    struct text *t = calloc(n, sizeof *t);
    if (!t)
        return oom(c);
    struct sd__js_node *node = &c->s->nodes[id];
    int typed = node->types != 0, rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        const json_t *v = en ? json_array_get(en, i) : cn;
        if (!value_types(v)) {
            rc = FAIL(c, "'%s' values that are objects or arrays are not supported", en ? "enum" : "const");
        } else if (value_fits(node, typed, v)) {
            node->types |= typed ? 0 : (uint8_t)value_types(v);
            t[m].p = value_text(v);
            rc = t[m].p ? 0 : oom(c);
            t[m].n = t[m].p ? strlen(t[m].p) : 0;
            m += t[m].p != NULL;
        }
    }
    if (!rc && m == 0)
        rc = FAIL(c, "no value of '%s' fits 'type' and the length limits", en ? "enum" : "const");
    if (!rc) {
        uint16_t lo, count;
        rc = group_add(c, t, m, &lo, &count);
        c->s->nodes[id].lit_lo = lo;
        c->s->nodes[id].lit_n = count;
    }
    for (size_t i = 0; i < m; i++)
        free(t[i].p);
    free(t);
    return rc;
}

/* ---- keywords ---------------------------------------------------------------------------- */

static int in_list(const char *k, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(k, *list) == 0)
            return 1;
    return 0;
}

static const char *const annotations[] = {"title",   "description", "default",  "examples", "deprecated",
                                          "$schema", "$id",         "$comment", NULL};
/* What a lenient compile leaves out: assertions on a value's contents that the validator cannot
 * follow byte by byte (patterns and formats outside its subset, multiples, counts of keys,
 * uniqueness), and numeric bounds on values that are no numbers. */
static const char *const loose_kw[] = {
    "pattern",     "format",        "multipleOf",        "minProperties",   "maxProperties",
    "uniqueItems", "propertyNames", "patternProperties", "contentEncoding", "contentMediaType",
    NULL};
/* clang-format off */
static const char *const value_kw[] = {
    "type", "enum", "const", "properties", "required", "additionalProperties", "items", "minItems",
    "maxItems", "minLength", "maxLength", "minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum",
    "pattern", "format", NULL};
/* clang-format on */

/* Every keyword is known, and $ref / anyOf / oneOf stand alone. *form gets "$ref", "anyOf",
 * "oneOf" or NULL (a value schema). */
static int check_keywords(struct cc *c, json_t *sch, const char **form)
{
    const char *k, *value = NULL;
    json_t *v;
    *form = NULL;
    json_object_foreach(sch, k, v)
    {
        if (strcmp(k, "$id") == 0 && sch != c->root)
            return FAIL(c, "'$id' below the root is not supported");
        if (in_list(k, annotations) || strcmp(k, "$defs") == 0 || strcmp(k, "definitions") == 0 ||
            (c->lenient && in_list(k, loose_kw)))
            continue;
        if (in_list(k, value_kw)) {
            value = value ? value : k;
            continue;
        }
        if (strcmp(k, "$ref") && strcmp(k, "anyOf") && strcmp(k, "oneOf"))
            return FAIL(c, "'%s' is not supported", k);
        if (*form)
            return FAIL(c, "'%s' beside '%s' is not supported", k, *form);
        *form = k;
    }
    if (*form && value)
        return FAIL(c, "'%s' beside '%s' is not supported", value, *form);
    return 0;
}

static int type_bits(struct cc *c, const json_t *t, uint8_t *bits)
{
    static const char *const names[] = {"object", "array", "string", "number", "integer", "boolean", "null"};
    static const uint8_t masks[] = {SD__JS_T_OBJ, SD__JS_T_ARR,  SD__JS_T_STR, SD__JS_T_NUM,
                                    SD__JS_T_INT, SD__JS_T_BOOL, SD__JS_T_NULL};
    size_t n = json_is_array(t) ? json_array_size(t) : 1;
    if (json_is_array(t) && n == 0)
        return FAIL(c, "'type' must not be an empty array");
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_is_array(t) ? json_array_get(t, i) : t;
        size_t k = 0;
        while (k < 7 && !(json_is_string(e) && strcmp(json_string_value(e), names[k]) == 0))
            k++;
        if (k == 7)
            return FAIL(c, "'type' must be one of object, array, string, number, integer, boolean, null "
                           "or an array of them");
        *bits |= masks[k];
    }
    return 0;
}

/* An optional count keyword: absent leaves *out as it is. */
static int count_kw(struct cc *c, const json_t *sch, const char *key, unsigned max, uint16_t *out)
{
    const json_t *v = json_object_get(sch, key);
    if (!v)
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > (json_int_t)max)
        return FAIL(c, "'%s' must be an integer from 0 to %u", key, max);
    *out = (uint16_t)json_integer_value(v);
    return 0;
}

/* ---- schema nodes ------------------------------------------------------------------------ */

static int compile(struct cc *c, json_t *sch, uint16_t *ret);

/* Compiles sch at path kw[/seg] below the current one; schemas nest at most MAX_NEST deep (the
 * recursion's stack). */
static int compile_at(struct cc *c, json_t *sch, const char *kw, const char *seg, uint16_t *ret)
{
    size_t old = path_push(c, kw);
    if (seg)
        path_push(c, seg);
    int rc = ++c->nest > MAX_NEST ? FAIL(c, "schemas nested deeper than %d levels", MAX_NEST)
                                  : compile(c, sch, ret);
    c->nest--;
    path_pop(c, old);
    return rc;
}

/* $defs / definitions: compiled even when unused, so that every schema in the text is checked. */
static int compile_defs(struct cc *c, json_t *sch)
{
    static const char *const keys[] = {"$defs", "definitions"};
    for (int i = 0; i < 2; i++) {
        json_t *defs = json_object_get(sch, keys[i]), *v;
        const char *k;
        uint16_t id;
        if (defs && !json_is_object(defs))
            return FAIL(c, "'%s' must be an object", keys[i]);
        json_object_foreach(defs, k, v)
        {
            SD_TRY(compile_at(c, v, keys[i], k, &id));
        }
    }
    return 0;
}

/* The object a local reference ("#", "#/a/b~1c") points to, NULL if none. */
static json_t *resolve_pointer(json_t *root, const char *ref)
{
    json_t *at = root;
    const char *p = ref + 1;
    char seg[256];
    while (at && *p == '/') {
        size_t n = 0;
        for (p++; *p && *p != '/'; p++) {
            if (n + 1 >= sizeof seg)
                return NULL;
            if (*p == '~' && (p[1] == '0' || p[1] == '1'))
                seg[n++] = *++p == '0' ? '~' : '/';
            else
                seg[n++] = *p;
        }
        seg[n] = '\0';
        if (json_is_array(at)) {
            char *end;
            unsigned long i = strtoul(seg, &end, 10);
            at = n && !*end && seg[0] != '-' ? json_array_get(at, i) : NULL;
        } else {
            at = json_object_get(at, seg);
        }
    }
    return *p ? NULL : at;
}

static int compile_ref(struct cc *c, uint16_t id, const json_t *ref)
{
    const char *r = json_string_value(ref);
    if (!r || r[0] != '#' || (r[1] && r[1] != '/') || strchr(r, '%'))
        return FAIL(c, "'$ref' must be a local JSON pointer (\"#\", \"#/$defs/Name\")");
    json_t *target = resolve_pointer(c->root, r);
    if (!target)
        return FAIL(c, "'$ref' target %s not found", r);
    char saved[sizeof c->path];
    size_t saved_len = c->plen;
    memcpy(saved, c->path, sizeof saved);
    c->plen = (size_t)snprintf(c->path, sizeof c->path, "schema%s", r + 1);
    c->plen = utf8_whole(c->path, c->plen < sizeof c->path ? c->plen : sizeof c->path - 1);
    c->path[c->plen] = '\0';
    uint16_t to;
    int rc =
        ++c->nest > MAX_NEST ? FAIL(c, "'$ref' chains deeper than %d", MAX_NEST) : compile(c, target, &to);
    c->nest--;
    memcpy(c->path, saved, sizeof saved);
    c->plen = saved_len;
    if (rc)
        return rc;
    c->cn[id].kind = SD__JS_K_REF;
    c->cn[id].ref = to;
    return 0;
}

static int compile_any(struct cc *c, uint16_t id, const json_t *list, const char *kw)
{
    uint16_t alt[MAX_ALTS];
    size_t n = json_is_array(list) ? json_array_size(list) : 0;
    if (n == 0 || n > MAX_ALTS)
        return FAIL(c, "'%s' must be an array of 1 to %d schemas", kw, MAX_ALTS);
    for (size_t i = 0; i < n; i++) {
        char seg[24];
        snprintf(seg, sizeof seg, "%zu", i);
        SD_TRY(compile_at(c, json_array_get(list, i), kw, seg, &alt[i]));
    }
    SD_TRY(grow(c, &c->alts, &c->cap_alts, c->n_alts + n, sizeof *c->alts));
    memcpy(c->alts + c->n_alts, alt, n * sizeof *alt);
    c->cn[id].kind = SD__JS_K_ANY;
    c->cn[id].one = kw[0] == 'o';
    c->cn[id].alt_lo = (uint32_t)c->n_alts;
    c->cn[id].n_alt = (uint32_t)n;
    c->n_alts += n;
    return 0;
}

/* A property name is matched byte for byte in its plain form, so it must need no escaping. */
static int name_ok(const char *k, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)k[i] < 0x20 || k[i] == '"' || k[i] == '\\')
            return 0;
    return n + 1 <= UINT16_MAX;
}

/* Marks required[i] for each name in "required"; every one must be a property (extra keys are
 * never generated, so another could never be satisfied). */
static int required_marks(struct cc *c, const json_t *req, const json_t *props, uint8_t *required)
{
    if (!req)
        return 0;
    if (!json_is_array(req))
        return FAIL(c, "'required' must be an array of property names");
    /* names are unique (JSON Schema), so no more than the properties: each costs a scan of them */
    if (json_array_size(req) > json_object_size(props))
        return FAIL(c, "'required' lists more names than 'properties' has");
    for (size_t i = 0; i < json_array_size(req); i++) {
        const char *name = json_string_value(json_array_get(req, i)), *k;
        json_t *v;
        size_t j = 0;
        if (!name)
            return FAIL(c, "'required' must be an array of property names");
        json_object_foreach((json_t *)props, k, v)
        {
            if (strcmp(k, name) == 0)
                break;
            j++;
        }
        if (!k)
            return FAIL(c, "required property '%s' is not in 'properties'", name);
        required[j] = 1;
    }
    return 0;
}

/* properties (in their order), required, additionalProperties (never more keys: see
 * jschema.h). */
static int compile_object(struct cc *c, uint16_t id, json_t *sch)
{
    json_t *props = json_object_get(sch, "properties"), *v;
    const json_t *ap = json_object_get(sch, "additionalProperties");
    uint16_t child[256];
    uint8_t required[256] = {0};
    const char *k;
    size_t n = props ? json_object_size(props) : 0, i = 0;
    if (ap && !json_is_boolean(ap) && !c->lenient) /* lenient: a schema there never applies either */
        return FAIL(c, "'additionalProperties' other than true/false is not supported (extra keys are "
                       "never generated)");
    if (props && !json_is_object(props))
        return FAIL(c, "'properties' must be an object");
    if (n > 255)
        return FAIL(c, "more than 255 properties are not supported");
    json_object_foreach(props, k, v)
    {
        if (!name_ok(k, strlen(k)))
            return FAIL(c, "property name '%s' needs escaping: not supported", k);
        SD_TRY(compile_at(c, v, "properties", k, &child[i++]));
    }
    SD_TRY(required_marks(c, json_object_get(sch, "required"), props, required));
    sd_jschema *s = c->s;
    if (s->n_props + n > UINT16_MAX)
        return FAIL(c, "the schema has more than %d properties", UINT16_MAX);
    SD_TRY(grow(c, &s->props, &c->cap_props, s->n_props + n, sizeof *s->props));
    struct sd__js_node *node = &s->nodes[id];
    node->prop_lo = (uint16_t)s->n_props;
    node->n_props = (uint8_t)n;
    i = 0;
    json_object_foreach(props, k, v)
    {
        struct sd__js_prop *p = &s->props[s->n_props + i];
        size_t len = strlen(k);
        SD_TRY(bytes_add(c, k, len, &p->name));
        SD_TRY(bytes_add(c, "\"", 1, &(uint32_t){0}));
        p->name_len = (uint16_t)(len + 1);
        p->req = required[i];
        p->child = child[i++];
    }
    /* backwards: the last candidate after each key, and where '}' becomes possible */
    for (size_t j = n, last = n ? n - 1 : 0; j-- > 0;) {
        last = required[j] ? j : last;
        s->props[s->n_props + j].last = (uint8_t)last;
        if (required[j] && !node->req_end)
            node->req_end = (uint8_t)(j + 1);
    }
    s->n_props += (uint32_t)n;
    return 0;
}

static int compile_array(struct cc *c, uint16_t id, json_t *sch)
{
    json_t *items = json_object_get(sch, "items");
    uint16_t min = 0, max = SD__JS_NONE, it = SD__JS_NONE;
    SD_TRY(count_kw(c, sch, "minItems", 255, &min));
    SD_TRY(count_kw(c, sch, "maxItems", 255, &max));
    if (max != SD__JS_NONE && min > max)
        return FAIL(c, "'minItems' is above 'maxItems'");
    if (json_is_array(items))
        return FAIL(c, "'items' as an array (tuples) is not supported");
    if (items)
        SD_TRY(compile_at(c, items, "items", NULL, &it));
    else if (c->s->nodes[id].types & SD__JS_T_ARR)
        return FAIL(c, "'items' is required for arrays (any element is not supported)");
    struct sd__js_node *n = &c->s->nodes[id];
    n->items = it;
    n->min_items = (uint8_t)min;
    n->max_items = max;
    n->item_cap = (uint8_t)(max != SD__JS_NONE ? max : min);
    return 0;
}

/* A schema with "type" and/or "enum"/"const" and the keywords of its types. */
static int compile_value(struct cc *c, uint16_t id, json_t *sch)
{
    const json_t *t = json_object_get(sch, "type"), *en = json_object_get(sch, "enum");
    const json_t *cn = json_object_get(sch, "const");
    uint8_t types = 0;
    uint16_t min_len = 0, max_len = SD__JS_NONE;
    if (t)
        SD_TRY(type_bits(c, t, &types));
    else if (!en && !cn)
        return FAIL(
            c, "no 'type', 'enum', 'const', '$ref' or 'anyOf' (an unconstrained value is not supported)");
    SD_TRY(count_kw(c, sch, "minLength", SD__JS_MAX_LEN, &min_len));
    SD_TRY(count_kw(c, sch, "maxLength", SD__JS_MAX_LEN, &max_len));
    if (max_len != SD__JS_NONE && min_len > max_len)
        return FAIL(c, "'minLength' is above 'maxLength'");
    struct sd__js_node *n = &c->s->nodes[id];
    n->types = types;
    n->min_len = min_len;
    n->max_len = max_len;
    n->len_cap = max_len != SD__JS_NONE ? max_len : min_len;
    n->has_len = min_len > 0 || max_len != SD__JS_NONE;
    char why[128];
    int numeric = (types & (SD__JS_T_NUM | SD__JS_T_INT)) != 0; /* lenient: bounds elsewhere left out */
    if ((numeric || !c->lenient) && sd__jschema_num_bounds(sch, types, n, why, sizeof why) < 0)
        return FAIL(c, "%s", why);
    if (n->has_num && (en || cn))
        return FAIL(c, "bounds beside '%s' are not supported", en ? "enum" : "const");
    if (sd__jschema_string_re(c->s, sch, types, min_len, c->lenient, en || cn, &n->re, why, sizeof why) < 0)
        return FAIL(c, "%s", why);
    if (en || cn)
        SD_TRY(compile_lits(c, id, en, cn));
    SD_TRY(compile_object(c, id, sch));
    return compile_array(c, id, sch);
}

static int compile(struct cc *c, json_t *sch, uint16_t *ret)
{
    int m = memo_get(c, sch);
    if (m >= 0) {
        *ret = (uint16_t)m;
        return 0;
    }
    if (!json_is_object(sch))
        return FAIL(c, "a schema must be an object%s",
                    json_is_boolean(sch) ? " (true/false schemas are not supported)" : "");
    const char *form;
    uint16_t id = 0;
    SD_TRY(check_keywords(c, sch, &form));
    SD_TRY(node_new(c, sch, &id));
    SD_TRY(compile_defs(c, sch));
    *ret = id;
    if (!form)
        return compile_value(c, id, sch);
    if (strcmp(form, "$ref") == 0)
        return compile_ref(c, id, json_object_get(sch, form));
    return compile_any(c, id, json_object_get(sch, form), form);
}

/* ---- the public face ---------------------------------------------------------------------- */

static void cc_free(struct cc *c)
{
    for (uint32_t i = 0; c->s && i < c->s->n_nodes; i++)
        free(c->cn[i].path);
    free(c->cn);
    free(c->alts);
    json_decref(c->memo);
    json_decref(c->root);
}

int sd_jschema_compile(sd_jschema **ret, const char *json, size_t len, sd_diag *d)
{
    return sd_jschema_compile_opts(ret, json, len, 0, d);
}

int sd_jschema_compile_opts(sd_jschema **ret, const char *json, size_t len, unsigned flags, sd_diag *d)
{
    struct cc c = {.d = d, .path = "schema", .plen = 6, .lenient = !!(flags & SD_JSCHEMA_LENIENT)};
    json_error_t err;
    c.root = json_loadb(json, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &err);
    if (!c.root)
        return sd_diag_set(d, SD_EINVAL, "schema: invalid JSON at line %d column %d: %s", err.line,
                           err.column, err.text);
    c.s = calloc(1, sizeof *c.s);
    c.memo = json_object();
    int rc = c.s && c.memo ? builtin_groups(&c) : oom(&c);
    if (!rc)
        rc = compile(&c, c.root, &c.s->root);
    if (!rc)
        rc = sd__jschema_link(c.s, c.cn, c.alts, d);
    cc_free(&c);
    if (rc) {
        sd_jschema_free(c.s);
        return rc;
    }
    *ret = c.s;
    return 0;
}

void sd_jschema_free(sd_jschema *s)
{
    if (!s)
        return;
    for (uint32_t i = 0; i < s->n_dfas; i++)
        sd__jschema_dfa_free(&s->dfas[i]);
    free(s->dfas);
    free(s->nodes);
    free(s->props);
    free(s->lits);
    free(s->bytes);
    free(s);
}

void sd_jschema_set_max_ws(sd_jschema *s, unsigned n)
{
    if (s)
        s->max_ws = (uint8_t)(n < SD_JSCHEMA_MAX_WS ? n : SD_JSCHEMA_MAX_WS);
}
