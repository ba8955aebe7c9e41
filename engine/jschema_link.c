/* jschema_link: the link step of compiling a JSON schema, which turns the node graph (jschema.c)
 * into the tables the validator (jschema_step.c) dispatches on: $ref chains followed, each
 * anyOf's first-byte alternatives, the nesting each value needs, and the state's size. */
#include "jschema_impl.h"

#include <string.h>

/* ---- linking: $ref chains, anyOf first-byte tables, nesting depth ------------------------ */

/* What link works on: the compiled nodes and what compile knew of them. */
struct lk {
    sd_jschema *s;
    struct sd__js_cnode *cn; /* [s->n_nodes] */
    uint16_t *alts;          /* anyOf alternatives */
    sd_diag *d;
};

#define DEPTH_INF (SD_JSCHEMA_MAX_DEPTH + 1)
#define DEPTH_UNSET 0xFF

/* The node a chain of $refs ends at (link_refs has pointed each $ref at its chain's end). */
static uint16_t deref(const struct sd__js_cnode *cn, uint16_t id)
{
    while (id != SD__JS_NONE && cn[id].kind == SD__JS_K_REF)
        id = cn[id].ref;
    return id;
}

/* Rejects $ref loops that never reach a schema, then points every reference past the $refs.
 * Each chain is walked once (following it from every node on it would cost its length squared:
 * a second for 30000 chained $defs): its $refs are marked 1 on the way and 2 once pointed at its
 * end; a walk that meets a 1 has looped. */
static int link_refs(struct lk *c)
{
    sd_jschema *s = c->s;
    struct sd__js_cnode *cn = c->cn;
    for (uint32_t i = 0; i < s->n_nodes; i++) {
        uint16_t id = (uint16_t)i, end;
        for (; cn[id].kind == SD__JS_K_REF && cn[id].mark == 0; id = cn[id].ref)
            cn[id].mark = 1;
        if (cn[id].kind == SD__JS_K_REF && cn[id].mark == 1)
            return sd__jschema_fail(c->d, cn[i].path, "'$ref' loops without reaching a schema");
        end = cn[id].kind == SD__JS_K_REF ? cn[id].ref : id; /* a 2 points at its end already */
        for (id = (uint16_t)i; cn[id].kind == SD__JS_K_REF && cn[id].mark == 1;) {
            uint16_t next = cn[id].ref;
            cn[id].mark = 2;
            cn[id].ref = end;
            id = next;
        }
    }
    for (uint32_t i = 0; i < s->n_nodes; i++)
        cn[i].mark = 0; /* any_alts' scratch next */
    for (uint32_t i = 0; i < s->n_nodes; i++) {
        s->nodes[i].items = deref(c->cn, s->nodes[i].items);
        for (uint32_t k = 0; c->cn[i].kind == SD__JS_K_ANY && k < c->cn[i].n_alt; k++)
            c->alts[c->cn[i].alt_lo + k] = deref(c->cn, c->alts[c->cn[i].alt_lo + k]);
    }
    for (uint32_t i = 0; i < s->n_props; i++)
        s->props[i].child = deref(c->cn, s->props[i].child);
    s->root = deref(c->cn, s->root);
    return 0;
}

/* A value node accepts the first bytes of its literals, else those of its types. */
static void value_alts(sd_jschema *s, uint16_t id)
{
    struct sd__js_node *n = &s->nodes[id];
    static const uint8_t type_class[7] = {SD__JS_C_OBJ, SD__JS_C_ARR,  SD__JS_C_STR, SD__JS_C_NUM,
                                          SD__JS_C_NUM, SD__JS_C_BOOL, SD__JS_C_NULL};
    for (uint32_t k = 0; k < n->lit_n; k++)
        n->alt[sd__jschema_class((unsigned char)s->bytes[s->lits[n->lit_lo + k].off])] = id;
    for (int b = 0; b < 7 && !n->lit_n; b++)
        if (n->types & (1 << b))
            n->alt[type_class[b]] = id;
}

/* An anyOf's table: each class from the one alternative that accepts it. */
static int any_alts(struct lk *c, uint16_t id)
{
    static const char *const names[SD__JS_N_CLASS] = {"'{'",        "'['", "'\"'", "a digit or '-'",
                                                      "'t' or 'f'", "'n'"};
    struct sd__js_cnode *cn = &c->cn[id];
    if (cn->mark == 2)
        return 0;
    if (cn->mark == 1)
        return sd__jschema_fail(c->d, cn->path, "'anyOf' contains itself without a value in between");
    cn->mark = 1;
    for (uint32_t i = 0; i < cn->n_alt; i++) {
        uint16_t a = c->alts[cn->alt_lo + i];
        if (c->cn[a].kind == SD__JS_K_ANY)
            SD_TRY(any_alts(c, a));
        for (int k = 0; k < SD__JS_N_CLASS; k++) {
            uint16_t v = c->s->nodes[a].alt[k], *mine = &c->s->nodes[id].alt[k];
            if (v == SD__JS_NONE)
                continue;
            if (*mine != SD__JS_NONE && (*mine != v || cn->one))
                return sd__jschema_fail(
                    c->d, cn->path,
                    "alternatives overlap: two accept a value starting with %s (they must "
                    "differ in type: object, array, string, number, boolean, null)",
                    names[k]);
            *mine = v;
        }
    }
    cn->mark = 2;
    return 0;
}

/* The deepest nesting of each node's values (cn[].omax, amax, emax), level by level: a value
 * settles once all it may contain has, at the latest in the round of its depth; values on a
 * cycle (recursion) never do, nor do those deeper than the limit: both count as DEPTH_INF.
 * Iterative, so $defs chained thousands deep need no deep stack. */
static unsigned link_max_depth(struct lk *c)
{
    sd_jschema *s = c->s;
    struct sd__js_cnode *cn = c->cn;
    for (uint32_t i = 0; i < s->n_nodes; i++)
        cn[i].omax = cn[i].amax = cn[i].emax = DEPTH_UNSET;
    for (unsigned round = 0; round <= SD_JSCHEMA_MAX_DEPTH; round++) {
        for (uint32_t i = 0; i < s->n_nodes; i++) {
            const struct sd__js_node *n = &s->nodes[i];
            unsigned d = 0, ok = n->alt[SD__JS_C_OBJ] == i && cn[i].omax == DEPTH_UNSET;
            for (uint32_t k = 0; ok && k < n->n_props; k++) {
                unsigned x = cn[s->props[n->prop_lo + k].child].emax;
                ok = x != DEPTH_UNSET;
                d = x > d ? x : d;
            }
            if (ok)
                cn[i].omax = (uint8_t)(d + 1 < DEPTH_INF ? d + 1 : DEPTH_INF);
            if (n->alt[SD__JS_C_ARR] == i && cn[i].amax == DEPTH_UNSET && cn[n->items].emax != DEPTH_UNSET)
                cn[i].amax = (uint8_t)(cn[n->items].emax + 1 < DEPTH_INF ? cn[n->items].emax + 1 : DEPTH_INF);
        }
        for (uint32_t i = 0; i < s->n_nodes; i++) {
            const struct sd__js_node *n = &s->nodes[i];
            uint16_t o = n->alt[SD__JS_C_OBJ], a = n->alt[SD__JS_C_ARR];
            unsigned x = o == SD__JS_NONE ? 0 : cn[o].omax, y = a == SD__JS_NONE ? 0 : cn[a].amax;
            if (cn[i].emax == DEPTH_UNSET && x != DEPTH_UNSET && y != DEPTH_UNSET)
                cn[i].emax = (uint8_t)(x > y ? x : y); /* scalars nest nothing */
        }
    }
    unsigned root = cn[s->root].emax;
    return root == DEPTH_UNSET ? DEPTH_INF : root;
}

/* obj_min, arr_min and min_depth (jschema_impl.h), level by level: an object needs lv
 * containers once each required key's value needs fewer, an array once its elements do (or none
 * are required). What needs fewer than lv is settled before level lv, so one pass per level
 * suffices, recursion included; what no level up to the limit settles stays SD__JS_MIN_INF. */
static void link_min_depth(sd_jschema *s)
{
    for (uint32_t i = 0; i < s->n_nodes; i++) {
        struct sd__js_node *n = &s->nodes[i];
        n->obj_min = n->arr_min = n->min_depth = SD__JS_MIN_INF;
        for (int k = SD__JS_C_STR; k < SD__JS_N_CLASS; k++)
            n->min_depth = n->alt[k] != SD__JS_NONE ? 0 : n->min_depth; /* a scalar needs none */
    }
    for (unsigned lv = 1; lv <= SD_JSCHEMA_MAX_DEPTH; lv++) {
        for (uint32_t i = 0; i < s->n_nodes; i++) {
            struct sd__js_node *n = &s->nodes[i];
            int ok = n->alt[SD__JS_C_OBJ] == i && n->obj_min == SD__JS_MIN_INF;
            for (uint32_t k = 0; ok && k < n->n_props; k++) {
                const struct sd__js_prop *p = &s->props[n->prop_lo + k];
                ok = !p->req || s->nodes[p->child].min_depth < lv;
            }
            n->obj_min = ok ? (uint8_t)lv : n->obj_min;
            if (n->alt[SD__JS_C_ARR] == i && n->arr_min == SD__JS_MIN_INF &&
                (n->min_items == 0 || s->nodes[n->items].min_depth < lv))
                n->arr_min = (uint8_t)lv;
        }
        for (uint32_t i = 0; i < s->n_nodes; i++) {
            struct sd__js_node *n = &s->nodes[i];
            uint16_t o = n->alt[SD__JS_C_OBJ], a = n->alt[SD__JS_C_ARR];
            if (o != SD__JS_NONE && s->nodes[o].obj_min < n->min_depth)
                n->min_depth = s->nodes[o].obj_min;
            if (a != SD__JS_NONE && s->nodes[a].arr_min < n->min_depth)
                n->min_depth = s->nodes[a].arr_min;
        }
    }
}

int sd__jschema_link(sd_jschema *s, struct sd__js_cnode *cn, uint16_t *alts, sd_diag *d)
{
    struct lk c = {s, cn, alts, d};
    SD_TRY(link_refs(&c));
    for (uint32_t i = 0; i < s->n_nodes; i++)
        if (cn[i].kind == SD__JS_K_VALUE)
            value_alts(s, (uint16_t)i);
    for (uint32_t i = 0; i < s->n_nodes; i++)
        if (cn[i].kind == SD__JS_K_ANY)
            SD_TRY(any_alts(&c, (uint16_t)i));
    link_min_depth(s);
    if (s->nodes[s->root].min_depth == SD__JS_MIN_INF) /* e.g. a required key whose value is the object */
        return sd__jschema_fail(d, cn[s->root].path,
                                "no document nests fewer than %d containers (required properties or items "
                                "recurse without end)",
                                SD_JSCHEMA_MAX_DEPTH + 1);
    unsigned depth = link_max_depth(&c);
    s->depth = (uint8_t)(depth < SD_JSCHEMA_MAX_DEPTH ? depth : SD_JSCHEMA_MAX_DEPTH);
    s->max_ws = SD_JSCHEMA_MAX_WS;
    s->state_size = (uint32_t)((sizeof(struct sd__js_state) + 3u * s->depth + 7) & ~(size_t)7);
    return 0;
}
