/* jschema_int: integer bounds of a JSON schema (minimum, maximum and their exclusive forms on
 * "type": "integer"), compiled into an int64 range and followed digit by digit: the validator takes
 * a digit only where some integer that begins so can still end inside the range, so every prefix
 * it accepts can be completed (jschema_impl.h). */
#include "jschema_impl.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>

/* One bound keyword as an integer limit: the smallest integer >= (or > , exclusive) v for a lower
 * bound, the largest <= (<) v for an upper one, clamped to int64 (a bound beyond it bounds
 * nothing). -1 when v is not a number. */
static int limit(const json_t *v, int upper, int exclusive, int64_t *out)
{
    if (!json_is_number(v))
        return -1;
    if (json_is_integer(v)) {
        json_int_t x = json_integer_value(v);
        if (exclusive && (upper ? x == INT64_MIN : x == INT64_MAX))
            *out = upper ? INT64_MIN : INT64_MAX; /* nothing fits; the range check says so */
        else
            *out = exclusive ? (upper ? x - 1 : x + 1) : x;
        return 0;
    }
    double x = json_real_value(v), r = upper ? floor(x) : ceil(x);
    if (exclusive && r == x)
        r += upper ? -1 : 1;
    *out = r <= -9.2e18 ? INT64_MIN : r >= 9.2e18 ? INT64_MAX : (int64_t)r;
    return 0;
}

int sd__jschema_int_bounds(const json_t *sch, uint8_t types, struct sd__js_node *n, char *why, size_t cap)
{
    static const char *const kw[4] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
    int64_t lo = INT64_MIN, hi = INT64_MAX;
    int any = 0;
    for (int k = 0; k < 4; k++) {
        const json_t *v = json_object_get(sch, kw[k]);
        if (!v)
            continue;
        if (types != SD__JS_T_INT) {
            snprintf(why, cap, "'%s' is supported on \"type\": \"integer\" only", kw[k]);
            return -1;
        }
        int64_t x;
        if (limit(v, k >= 2, k & 1, &x) < 0) {
            snprintf(why, cap, "'%s' must be a number", kw[k]);
            return -1;
        }
        if (k < 2 && x > lo)
            lo = x;
        if (k >= 2 && x < hi)
            hi = x;
        any = 1;
    }
    if (any && lo > hi) {
        snprintf(why, cap, "no integer lies within the bounds");
        return -1;
    }
    n->has_int = (uint8_t)any;
    n->int_lo = lo;
    n->int_hi = hi;
    return 0;
}

/* Whether [a, b] meets [lo, hi] (128-bit: a magnitude times a power of ten passes int64). */
static int meets(__int128 a, __int128 b, int64_t lo, int64_t hi)
{
    return a <= hi && b >= lo;
}

int sd__jschema_int_open(const struct sd__js_node *n, int neg, uint64_t mag, int digits)
{
    if (!digits) /* "-" alone: some negative integer, or "-0" */
        return meets(-(__int128)UINT64_MAX, 0, n->int_lo, n->int_hi);
    if (mag == 0) /* "0", "-0": no digit may follow (JSON) */
        return meets(0, 0, n->int_lo, n->int_hi);
    __int128 p = 1, m = mag;
    for (int k = 0; k <= 20 && m * p <= (__int128)UINT64_MAX; k++, p *= 10) { /* k more digits */
        __int128 a = m * p, b = m * p + p - 1;
        if (neg ? meets(-b, -a, n->int_lo, n->int_hi) : meets(a, b, n->int_lo, n->int_hi))
            return 1;
    }
    return 0;
}

int sd__jschema_int_in(const struct sd__js_node *n, int neg, uint64_t mag)
{
    __int128 v = neg ? -(__int128)mag : (__int128)mag;
    return v >= n->int_lo && v <= n->int_hi;
}
