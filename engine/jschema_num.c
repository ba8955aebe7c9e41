/* jschema_num: numeric bounds of a JSON schema (minimum, maximum and their exclusive forms on
 * "integer" and "number"), compiled into a range of fixed-point values (10^-18 units, 128-bit)
 * and followed digit by digit: the validator takes a digit, a '.' or the number's end only where
 * some number that begins so can still end inside the range, so every prefix it accepts can be
 * completed (jschema_impl.h). Bounded numbers are written without an exponent and with at most
 * 19 digits, 18 of them after the point. */
#include "jschema_impl.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UNIT ((__int128)1000000000000000000LL) /* 10^18: one in fixed point */
#define MAX_DIGITS 19
#define BIG ((__int128)1 << 125) /* beyond any value written here (19 digits: < 10^37 units) */

static __int128 pow10i(int k)
{
    __int128 p = 1;
    while (k-- > 0)
        p *= 10;
    return p;
}

/* A bound as fixed point: integers exactly; reals through their shortest decimal form (0.1 is
 * 10^17 units, not the double's 0.1000000000000000055...), digits past 18 rounded outward so the
 * range never grows (up: toward +inf for a lower bound). -1 if v is not a number. */
static int fixed(const json_t *v, int lower, __int128 *out)
{
    if (json_is_integer(v)) {
        *out = (__int128)json_integer_value(v) * UNIT;
        return 0;
    }
    if (!json_is_real(v))
        return -1;
    double x = json_real_value(v);
    if (!isfinite(x))
        return -1;
    if (fabs(x) >= 1e19) {
        *out = x < 0 ? -BIG : BIG;
        return 0;
    }
    char buf[64];
    for (int prec = 15; prec <= 17; prec++) { /* the shortest form that reads back as x */
        snprintf(buf, sizeof buf, "%.*e", prec - 1, x);
        if (strtod(buf, NULL) == x)
            break;
    }
    /* d.ddddde[+-]XX: the digits and the exponent */
    int neg = buf[0] == '-';
    const char *p = buf + neg;
    __int128 m = 0;
    int nd = 0;
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9')
            m = m * 10 + (*p - '0'), nd++;
    int e = *p == 'e' ? atoi(p + 1) : 0;
    int shift = 18 + e - (nd - 1); /* value = m * 10^(e - (nd - 1)); units: * 10^18 */
    __int128 r;
    if (shift >= 0) {
        r = m * pow10i(shift);
    } else {
        __int128 d = pow10i(-shift), q = m / d;
        int rest = m % d != 0;
        /* magnitude q (+1 when something was cut); outward for the bound's side */
        int up = rest && (lower ? !neg : neg);
        r = q + up;
    }
    *out = neg ? -r : r;
    return 0;
}

int sd__jschema_num_bounds(const json_t *sch, uint8_t types, struct sd__js_node *n, char *why, size_t cap)
{
    static const char *const kw[4] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
    const int ints = !(types & SD__JS_T_NUM); /* only integers: the range shrinks to whole ones */
    __int128 lo = -BIG, hi = BIG;
    int any = 0;
    for (int k = 0; k < 4; k++) {
        const json_t *v = json_object_get(sch, kw[k]);
        if (!v)
            continue;
        if (!(types & (SD__JS_T_NUM | SD__JS_T_INT))) {
            snprintf(why, cap, "'%s' needs \"type\" \"integer\" or \"number\"", kw[k]);
            return -1;
        }
        int lower = k < 2, excl = k & 1;
        __int128 x;
        if (fixed(v, lower, &x) < 0) {
            snprintf(why, cap, "'%s' must be a finite number", kw[k]);
            return -1;
        }
        if (ints) { /* the nearest whole number inside */
            __int128 w = x / UNIT * UNIT;
            if (lower && w < x)
                w += UNIT;
            if (!lower && w > x)
                w -= UNIT;
            x = w + (excl && w == x ? (lower ? UNIT : -UNIT) : 0);
        } else if (excl) {
            x += lower ? 1 : -1;
        }
        if (lower && x > lo)
            lo = x;
        if (!lower && x < hi)
            hi = x;
        any = 1;
    }
    if (any && lo > hi) {
        snprintf(why, cap, "no number lies within the bounds");
        return -1;
    }
    n->has_num = (uint8_t)any;
    n->num_lo = lo;
    n->num_hi = hi;
    return 0;
}

static int meets(__int128 a, __int128 b, const struct sd__js_node *n)
{
    return a <= n->num_hi && b >= n->num_lo;
}

/* [a, b] for the sign: a negative number's magnitudes mirror. */
static int meets_signed(int neg, __int128 a, __int128 b, const struct sd__js_node *n)
{
    return neg ? meets(-b, -a, n) : meets(a, b, n);
}

static int digits_of(uint64_t d)
{
    int k = 1;
    while (d >= 10)
        d /= 10, k++;
    return k;
}

int sd__jschema_num_open(const struct sd__js_node *n, const struct sd__js_numpos *p)
{
    const int fracs = (n->types & SD__JS_T_NUM) != 0;
    const __int128 d = (__int128)p->digits;
    switch (p->at) {
    case SD__JS_NUM_SIGN: /* "-": some negative number, or "-0" */
        return meets(-BIG, 0, n);
    case SD__JS_NUM_ZERO: /* "0": 0 itself, or 0.xxx */
        return meets_signed(p->neg, 0, fracs ? UNIT - 1 : 0, n);
    case SD__JS_NUM_DOT: /* "I.": I.xxx */
        return meets_signed(p->neg, d * UNIT, d * UNIT + UNIT - 1, n);
    case SD__JS_NUM_FRAC: { /* the digits so far, nfrac after the point */
        if (p->nfrac >= 18 || digits_of(p->digits) >= MAX_DIGITS)
            return meets_signed(p->neg, d * pow10i(18 - p->nfrac), d * pow10i(18 - p->nfrac), n);
        __int128 s = pow10i(18 - p->nfrac);
        return meets_signed(p->neg, d * s, d * s + s - 1, n);
    }
    default: { /* SD__JS_NUM_INT: integer digits; more of them, or a fraction */
        int room = MAX_DIGITS - digits_of(p->digits);
        __int128 k10 = 1;
        for (int k = 0; k <= room; k++, k10 *= 10) {
            __int128 a = d * k10 * UNIT;
            /* with a fraction after k more digits: up to just below (d + 1) * 10^k; without: the
             * whole numbers up to (d + 1) * 10^k - 1; a full 19 digits leave no fraction */
            __int128 b = fracs && k < room ? (d + 1) * k10 * UNIT - 1 : ((d + 1) * k10 - 1) * UNIT;
            if (meets_signed(p->neg, a, b, n))
                return 1;
        }
        return 0;
    }
    }
}

int sd__jschema_num_in(const struct sd__js_node *n, int neg, uint64_t digits, int nfrac)
{
    __int128 v = (__int128)digits * pow10i(18 - nfrac);
    v = neg ? -v : v;
    return v >= n->num_lo && v <= n->num_hi;
}
