/* jschema_re: a string's "pattern" (and the "format"s written as patterns) compiled into a DFA
 * over code points, which the validator walks one character at a time (jschema_impl.h).
 *
 * The regex subset: literal ASCII characters and escapes (\. \\ \- \n \t ...), '.', classes
 * [a-z_] and [^...] (ranges of ASCII), \d \w \s and \D \W \S, groups (...) and (?:...),
 * alternation, the quantifiers ? * + {n} {n,} {n,m} (m <= 64), '^' at the very start and '$' at
 * the very end. A pattern not anchored at an end may be extended there by anything (JSON
 * Schema's patterns search; they do not match whole). The alphabet is the 128 ASCII code points
 * and one symbol for every other character: '.', negated classes and \D \W \S match it, no
 * literal can name it. Parsed into a Thompson NFA, determinised by subsets; then every state
 * that cannot reach an accepting one is cut, so each prefix the DFA takes can still be
 * completed, and dist[] holds the fewest characters from a state to a match (for maxLength). */
#include "jschema_impl.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NFA 4096
#define MAX_DFA 1024
#define MAX_REP 64
#define WORDS 3 /* a symbol set: 129 bits */

typedef struct {
    uint64_t w[WORDS];
} symset;

struct nfa_state {
    int out, out2; /* -1: none; an epsilon state has both, a symbol state `out` only */
    int eps;
    symset set;
};

struct re {
    const char *p, *end;
    struct nfa_state *st;
    int n;
    char *why;
    size_t cap;
};

/* A fragment: its start state and the one state whose `out` (and, for epsilon states, out2)
 * still dangles: Thompson fragments made with a single dangling exit (an epsilon state). */
typedef struct {
    int start, exit;
} frag;

static int fail(struct re *r, const char *msg)
{
    if (r->why[0] == '\0')
        snprintf(r->why, r->cap, "'pattern': %s", msg);
    return -1;
}

static int add_state(struct re *r, int eps)
{
    if (r->n >= MAX_NFA)
        return fail(r, "too complex");
    struct nfa_state *s = &r->st[r->n];
    memset(s, 0, sizeof *s);
    s->out = s->out2 = -1;
    s->eps = eps;
    return r->n++;
}

static void set_add(symset *s, unsigned c)
{
    s->w[c >> 6] |= (uint64_t)1 << (c & 63);
}

static int set_has(const symset *s, unsigned c)
{
    return (s->w[c >> 6] >> (c & 63)) & 1;
}

static void set_range(symset *s, unsigned lo, unsigned hi)
{
    for (unsigned c = lo; c <= hi; c++)
        set_add(s, c);
}

static void set_invert(symset *s)
{
    for (int i = 0; i < WORDS; i++)
        s->w[i] = ~s->w[i];
    s->w[2] &= 1; /* symbols 128 (any other character) and above: only 128 exists */
}

static void set_union(symset *a, const symset *b)
{
    for (int i = 0; i < WORDS; i++)
        a->w[i] |= b->w[i];
}

/* A fragment matching one symbol of set: a symbol state, then an epsilon exit. */
static int frag_set(struct re *r, const symset *set, frag *f)
{
    int a = add_state(r, 0), x = add_state(r, 1);
    if (a < 0 || x < 0)
        return -1;
    r->st[a].set = *set;
    r->st[a].out = x;
    *f = (frag){a, x};
    return 0;
}

static int frag_empty(struct re *r, frag *f)
{
    int x = add_state(r, 1);
    if (x < 0)
        return -1;
    *f = (frag){x, x};
    return 0;
}

/* \d \w \s and their negations into set; 0, or -1 when c is not one of them. */
static int class_escape(unsigned c, symset *set)
{
    symset s = {{0}};
    switch (c | 0x20) {
    case 'd':
        set_range(&s, '0', '9');
        break;
    case 'w':
        set_range(&s, '0', '9'), set_range(&s, 'a', 'z'), set_range(&s, 'A', 'Z'), set_add(&s, '_');
        break;
    case 's':
        set_add(&s, ' '), set_range(&s, '\t', '\r');
        break;
    default:
        return -1;
    }
    if (c >= 'A' && c <= 'Z')
        set_invert(&s);
    *set = s;
    return 0;
}

/* The character an escape stands for (\n, \t, \. ...), or -1. */
static int char_escape(unsigned c)
{
    switch (c) {
    case 'n':
        return '\n';
    case 't':
        return '\t';
    case 'r':
        return '\r';
    case 'f':
        return '\f';
    case 'v':
        return '\v';
    default: /* punctuation stands for itself; other letters and digits are not supported */
        return c < 0x80 && !((c | 0x20) >= 'a' && (c | 0x20) <= 'z') && !(c >= '0' && c <= '9') ? (int)c : -1;
    }
}

/* One character of a class or of the pattern (an escape included): its set. */
static int one_char(struct re *r, symset *set, int *single)
{
    unsigned c = (unsigned char)*r->p++;
    *single = -1;
    memset(set, 0, sizeof *set);
    if (c >= 0x80)
        return fail(r, "non-ASCII characters are not supported");
    if (c != '\\') {
        set_add(set, c);
        *single = (int)c;
        return 0;
    }
    if (r->p >= r->end)
        return fail(r, "a trailing backslash");
    c = (unsigned char)*r->p++;
    if (class_escape(c, set) == 0)
        return 0;
    int e = char_escape(c);
    if (e < 0)
        return fail(r, "an unsupported escape (\\d \\w \\s, their capitals and escaped punctuation are)");
    set_add(set, (unsigned)e);
    *single = e;
    return 0;
}

static int parse_class(struct re *r, symset *set)
{
    int neg = r->p < r->end && *r->p == '^';
    r->p += neg;
    memset(set, 0, sizeof *set);
    int first = 1;
    while (r->p < r->end && (*r->p != ']' || first)) {
        symset one;
        int lo, hi;
        if (one_char(r, &one, &lo) < 0)
            return -1;
        if (lo >= 0 && r->p + 1 < r->end && r->p[0] == '-' && r->p[1] != ']') {
            r->p++;
            symset b;
            if (one_char(r, &b, &hi) < 0)
                return -1;
            if (hi < lo)
                return fail(r, "a class range out of order");
            set_range(&one, (unsigned)lo, (unsigned)hi);
        }
        set_union(set, &one);
        first = 0;
    }
    if (r->p >= r->end)
        return fail(r, "an unclosed '['");
    r->p++;
    if (neg)
        set_invert(set);
    return 0;
}

static int parse_alt(struct re *r, frag *f);

static int parse_atom(struct re *r, frag *f)
{
    symset set;
    int single;
    char c = *r->p;
    if (c == '(') {
        r->p++;
        if (r->end - r->p >= 2 && r->p[0] == '?') {
            if (r->p[1] != ':')
                return fail(r, "lookarounds and named groups are not supported");
            r->p += 2;
        }
        if (parse_alt(r, f) < 0)
            return -1;
        if (r->p >= r->end || *r->p != ')')
            return fail(r, "an unclosed '('");
        r->p++;
        return 0;
    }
    if (c == '[') {
        r->p++;
        if (parse_class(r, &set) < 0)
            return -1;
    } else if (c == '.') {
        r->p++;
        memset(&set, 0, sizeof set);
        set_invert(&set);
        set.w[0] &= ~((uint64_t)1 << '\n');
    } else if (c == '^' || c == '$') {
        return fail(r, "'^' and '$' only at the pattern's ends");
    } else if (c == ')' || c == '*' || c == '+' || c == '?' || c == '{' || c == '|') {
        return fail(r, "a quantifier or ')' with nothing before it");
    } else if (one_char(r, &set, &single) < 0) {
        return -1;
    }
    return frag_set(r, &set, f);
}

/* a then b: a's exit leads to b. */
static frag cat(struct re *r, frag a, frag b)
{
    r->st[a.exit].out = b.start;
    return (frag){a.start, b.exit};
}

/* a behind a new entry that may skip it: optional, or (loop) any number of times, its end
 * leading back to the entry. */
static int skippable(struct re *r, frag a, int loop, frag *f)
{
    int s = add_state(r, 1), x = add_state(r, 1);
    if (s < 0 || x < 0)
        return -1;
    r->st[s].out = a.start, r->st[s].out2 = x;
    r->st[a.exit].out = loop ? s : x;
    *f = (frag){s, x};
    return 0;
}

static int parse_int(struct re *r, int *v)
{
    if (r->p >= r->end || *r->p < '0' || *r->p > '9')
        return -1;
    *v = 0;
    while (r->p < r->end && *r->p >= '0' && *r->p <= '9' && *v <= MAX_REP)
        *v = *v * 10 + (*r->p++ - '0');
    return 0;
}

/* An atom and its quantifier; a bounded repeat parses the atom again for each copy. */
static int parse_repeat(struct re *r, frag *f)
{
    const char *at = r->p;
    if (parse_atom(r, f) < 0)
        return -1;
    if (r->p >= r->end)
        return 0;
    int lo, hi;
    char q = *r->p;
    if (q == '?' || q == '*' || q == '+') {
        r->p++;
        lo = q == '+', hi = q == '?' ? 1 : -1;
    } else if (q == '{') {
        r->p++;
        if (parse_int(r, &lo) < 0)
            return fail(r, "a '{' that is not a repeat count");
        hi = lo;
        if (r->p < r->end && *r->p == ',') {
            r->p++;
            hi = r->p < r->end && *r->p == '}' ? -1 : (parse_int(r, &hi) < 0 ? -2 : hi);
        }
        if (hi == -2 || r->p >= r->end || *r->p != '}')
            return fail(r, "a malformed repeat count");
        r->p++;
        if (lo > MAX_REP || hi > MAX_REP || (hi >= 0 && hi < lo))
            return fail(r, "repeat counts above 64, or out of order");
    } else {
        return 0;
    }
    if (r->p < r->end && (*r->p == '?' || *r->p == '+'))
        return fail(r, "lazy and possessive quantifiers are not supported");
    const char *after = r->p;
    frag out, piece, first = *f;
    int used = 0; /* the copy already parsed goes first; later ones parse the atom again */
    if (frag_empty(r, &out) < 0)
        return -1;
    int copies = hi < 0 ? lo + 1 : hi;
    for (int k = 0; k < copies; k++) {
        if (used) {
            r->p = at;
            if (parse_atom(r, &piece) < 0)
                return -1;
        } else {
            piece = first, used = 1;
        }
        if (k >= lo && skippable(r, piece, hi < 0, &piece) < 0)
            return -1;
        out = cat(r, out, piece);
    }
    r->p = after;
    *f = out;
    return 0;
}

static int parse_concat(struct re *r, frag *f)
{
    if (frag_empty(r, f) < 0)
        return -1;
    while (r->p < r->end && *r->p != '|' && *r->p != ')') {
        if (*r->p == '$' && r->p + 1 == r->end)
            break; /* the end anchor: the caller's */
        frag a;
        if (parse_repeat(r, &a) < 0)
            return -1;
        *f = cat(r, *f, a);
    }
    return 0;
}

static int parse_alt(struct re *r, frag *f)
{
    if (parse_concat(r, f) < 0)
        return -1;
    while (r->p < r->end && *r->p == '|') {
        r->p++;
        frag b;
        int s, x;
        if (parse_concat(r, &b) < 0 || (s = add_state(r, 1)) < 0 || (x = add_state(r, 1)) < 0)
            return -1;
        r->st[s].out = f->start, r->st[s].out2 = b.start;
        r->st[f->exit].out = x, r->st[b.exit].out = x;
        *f = (frag){s, x};
    }
    return 0;
}

/* ---- subsets ------------------------------------------------------------------------------- */

/* The epsilon closure of the states in set (a bitset over the NFA), in place. */
static void closure(const struct re *r, uint64_t *set, int *stack)
{
    int top = 0;
    for (int w = 0; w < (r->n + 63) / 64; w++) /* the members, by their words' set bits */
        for (uint64_t bits = set[w]; bits; bits &= bits - 1)
            stack[top++] = w * 64 + __builtin_ctzll(bits);
    while (top) {
        const struct nfa_state *s = &r->st[stack[--top]];
        if (!s->eps)
            continue;
        int outs[2] = {s->out, s->out2};
        for (int k = 0; k < 2; k++)
            if (outs[k] >= 0 && !((set[outs[k] >> 6] >> (outs[k] & 63)) & 1)) {
                set[outs[k] >> 6] |= (uint64_t)1 << (outs[k] & 63);
                stack[top++] = outs[k];
            }
    }
}

static uint64_t set_hash(const uint64_t *w, size_t words)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < words; i++)
        h = (h ^ w[i]) * 1099511628211ull;
    return h;
}

/* Subset construction. Per DFA state its symbol-reading NFA members are listed once, so a symbol
 * costs a pass over them, and a new subset is looked up by its hash before its bits: a pattern
 * at the limits compiles (or is refused) in milliseconds, not seconds. */
static int determinise(struct re *r, int start, int accept, struct sd__js_dfa *d)
{
    const size_t words = ((size_t)r->n + 63) / 64;
    uint64_t *sets = calloc((size_t)MAX_DFA * words, 8), *next = calloc(words, 8);
    uint64_t *hashes = malloc(sizeof *hashes * MAX_DFA);
    int *stack = malloc(sizeof *stack * (size_t)r->n + 8),
        *members = malloc(sizeof *members * (size_t)r->n + 8);
    uint16_t *tab = malloc(sizeof *tab * MAX_DFA * SD__JS_RE_SYMS);
    int n = 1, rc = 0;
    if (!sets || !next || !hashes || !stack || !members || !tab) {
        rc = fail(r, "out of memory");
        goto done;
    }
    sets[start >> 6] |= (uint64_t)1 << (start & 63);
    closure(r, sets, stack);
    hashes[0] = set_hash(sets, words);
    for (int i = 0; i < n && rc == 0; i++) {
        int m = 0;
        for (size_t w = 0; w < words; w++)
            for (uint64_t bits = sets[(size_t)i * words + w]; bits; bits &= bits - 1) {
                int k = (int)(w * 64) + __builtin_ctzll(bits);
                if (!r->st[k].eps)
                    members[m++] = k;
            }
        for (unsigned c = 0; c < SD__JS_RE_SYMS; c++) {
            memset(next, 0, words * 8);
            int any = 0;
            for (int q = 0; q < m; q++) {
                const struct nfa_state *st = &r->st[members[q]];
                if (set_has(&st->set, c)) {
                    next[st->out >> 6] |= (uint64_t)1 << (st->out & 63);
                    any = 1;
                }
            }
            if (!any) {
                tab[i * SD__JS_RE_SYMS + c] = SD__JS_NONE;
                continue;
            }
            closure(r, next, stack);
            uint64_t h = set_hash(next, words);
            int j = 0;
            while (j < n && (hashes[j] != h || memcmp(sets + (size_t)j * words, next, words * 8) != 0))
                j++;
            if (j == n) {
                if (n == MAX_DFA) {
                    rc = fail(r, "too complex (over 1024 states)");
                    break;
                }
                memcpy(sets + (size_t)n * words, next, words * 8);
                hashes[n++] = h;
            }
            tab[i * SD__JS_RE_SYMS + c] = (uint16_t)j;
        }
    }
    if (rc == 0) {
        d->n = (uint16_t)n;
        d->next = tab;
        d->accept = calloc((size_t)n, 1);
        d->dist = malloc(sizeof *d->dist * (size_t)n);
        if (!d->accept || !d->dist)
            rc = fail(r, "out of memory");
        for (int i = 0; rc == 0 && i < n; i++)
            d->accept[i] = (sets[(size_t)i * words + (size_t)(accept >> 6)] >> (accept & 63)) & 1;
        tab = NULL;
    }
done:
    free(sets);
    free(next);
    free(hashes);
    free(stack);
    free(members);
    free(tab);
    return rc;
}

/* dist[] by a breadth-first search backwards from the matches (over the reversed transitions);
 * transitions into states with no match ahead are cut. -1 when the start state has none: the
 * pattern matches nothing. */
static int prune(struct re *r, struct sd__js_dfa *d)
{
    const int n = d->n, e = n * SD__JS_RE_SYMS;
    int *head = malloc(sizeof *head * (size_t)n), *link = malloc(sizeof *link * (size_t)e);
    int *queue = malloc(sizeof *queue * (size_t)n);
    if (!head || !link || !queue) {
        free(head), free(link), free(queue);
        return fail(r, "out of memory");
    }
    for (int i = 0; i < n; i++)
        head[i] = -1;
    for (int x = 0; x < e; x++) { /* edge x = (source x / SYMS, symbol x % SYMS), listed by target */
        uint16_t t = d->next[x];
        if (t != SD__JS_NONE)
            link[x] = head[t], head[t] = x;
    }
    int qh = 0, qt = 0;
    for (int i = 0; i < n; i++) {
        d->dist[i] = d->accept[i] ? 0 : SD__JS_NONE;
        if (d->accept[i])
            queue[qt++] = i;
    }
    while (qh < qt) {
        int t = queue[qh++];
        for (int x = head[t]; x >= 0; x = link[x]) {
            int src = x / SD__JS_RE_SYMS;
            if (d->dist[src] == SD__JS_NONE) {
                d->dist[src] = (uint16_t)(d->dist[t] + 1);
                queue[qt++] = src;
            }
        }
    }
    free(head), free(link), free(queue);
    for (int x = 0; x < e; x++)
        if (d->next[x] != SD__JS_NONE && d->dist[d->next[x]] == SD__JS_NONE)
            d->next[x] = SD__JS_NONE;
    return d->dist[0] == SD__JS_NONE ? fail(r, "it matches no string") : 0;
}

/* Whether p[0, len) has a '|' outside every group and class: "^a|b$" anchors one alternative
 * at each end, which anchoring the whole would misread. */
static int top_level_bar(const char *p, size_t len)
{
    int depth = 0, cls = 0;
    for (size_t i = 0; i < len; i++) {
        if (p[i] == '\\') {
            i++;
            continue;
        }
        if (cls) {
            cls = p[i] != ']';
            continue;
        }
        depth += p[i] == '(' ? 1 : p[i] == ')' ? -1 : 0;
        cls = p[i] == '[';
        if (p[i] == '|' && depth == 0)
            return 1;
    }
    return 0;
}

int sd__jschema_re_compile(const char *pattern, size_t len, struct sd__js_dfa *d, char *why, size_t cap)
{
    memset(d, 0, sizeof *d);
    why[0] = '\0';
    struct re r = {pattern, pattern + len, malloc(sizeof(struct nfa_state) * MAX_NFA), 0, why, cap};
    if (!r.st)
        return fail(&r, "out of memory");
    int anchored_start = len > 0 && pattern[0] == '^';
    int anchored_end = len > 0 && pattern[len - 1] == '$' && (len < 2 || pattern[len - 2] != '\\');
    r.p += anchored_start;
    if ((anchored_start || anchored_end) && top_level_bar(pattern, len)) {
        free(r.st);
        return fail(&r, "anchors beside a top-level '|' are not supported (group the alternatives)");
    }
    frag body, pre, post;
    symset any = {{0}};
    set_invert(&any);
    int rc = frag_empty(&r, &pre) < 0 || parse_alt(&r, &body) < 0 ? -1 : 0;
    if (rc == 0 && r.p < r.end && !(anchored_end && r.p + 1 == r.end))
        rc = fail(&r, *r.p == ')' ? "an unmatched ')'" : "'^' and '$' only at the pattern's ends");
    if (rc == 0 && !anchored_start) { /* anything may come first */
        frag a;
        rc = frag_set(&r, &any, &a) < 0 || skippable(&r, a, 1, &pre) < 0 ? -1 : 0;
    }
    if (rc == 0)
        rc = frag_empty(&r, &post);
    if (rc == 0 && !anchored_end) {
        frag a;
        rc = frag_set(&r, &any, &a) < 0 || skippable(&r, a, 1, &post) < 0 ? -1 : 0;
    }
    int acc = rc == 0 ? add_state(&r, 0) : -1;
    if (acc >= 0) {
        frag all = cat(&r, cat(&r, pre, body), post);
        r.st[all.exit].out = acc;
        rc = determinise(&r, all.start, acc, d);
        if (rc == 0)
            rc = prune(&r, d);
    } else {
        rc = -1;
    }
    free(r.st);
    if (rc < 0)
        sd__jschema_dfa_free(d);
    return rc;
}

void sd__jschema_dfa_free(struct sd__js_dfa *d)
{
    free(d->next);
    free(d->accept);
    free(d->dist);
    memset(d, 0, sizeof *d);
}

/* The "format"s written as patterns; NULL for the others. */
const char *sd__jschema_format_pattern(const char *format)
{
    static const char *const formats[][2] = {
        {"date", "^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$"},
        {"time", "^([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-"
                 "5][0-9])$"},
        {"date-time",
         "^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)"
         "(\\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$"},
        {"uuid", "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"},
        {"email", "^[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(\\.[A-Za-z0-9-]{1,63}){1,8}$"},
        {"ipv4", "^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-"
                 "9]?[0-9])$"},
    };
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
        if (strcmp(format, formats[i][0]) == 0)
            return formats[i][1];
    return NULL;
}

int sd__jschema_string_re(sd_jschema *s, const struct json_t *sch_, uint8_t types, uint16_t min_len,
                          int lenient, int has_lits, uint16_t *re, char *why, size_t cap)
{
    const json_t *sch = (const json_t *)sch_, *pat = json_object_get(sch, "pattern");
    const json_t *fmt = json_object_get(sch, "format");
    *re = SD__JS_NONE;
    if (!pat && !fmt)
        return 0;
    const char *kw = pat ? "pattern" : "format", *text = NULL;
    if (pat && fmt)
        snprintf(why, cap, "'pattern' beside 'format' is not supported");
    else if (!json_is_string(pat ? pat : fmt))
        snprintf(why, cap, "'%s' must be a string", kw);
    else if (!(types & SD__JS_T_STR) || has_lits)
        snprintf(why, cap, "'%s' is supported on \"type\": \"string\" without enum or const", kw);
    else if (min_len > 0)
        snprintf(why, cap, "'%s' beside 'minLength' is not supported ('maxLength' is)", kw);
    else if (!(text = pat ? json_string_value(pat) : sd__jschema_format_pattern(json_string_value(fmt))))
        snprintf(why, cap, "'format': '%s' is not supported (date, time, date-time, uuid, email, ipv4 are)",
                 json_string_value(fmt));
    struct sd__js_dfa d;
    if (!text || sd__jschema_re_compile(text, strlen(text), &d, why, cap) < 0)
        return lenient ? 0 : -1; /* lenient: an assertion it cannot follow is left out */
    struct sd__js_dfa *v = s->n_dfas < SD__JS_NONE ? realloc(s->dfas, sizeof *v * (s->n_dfas + 1)) : NULL;
    if (!v) {
        sd__jschema_dfa_free(&d);
        snprintf(why, cap, "out of memory");
        return -1;
    }
    s->dfas = v;
    *re = (uint16_t)s->n_dfas;
    v[s->n_dfas++] = d;
    return 0;
}
