/* nm_format: pattern names, validation, mask-from-scores, pack and expand of bitmask weights. */
#include "kernels/nm_format.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sd_nm_pattern_check(int n, int m, sd_diag *d)
{
    if (n == 0 && m == 0)
        return 0;
    if (m <= 1 || m > 32 || 32 % m != 0)
        return sd_diag_set(d, SD_EINVAL, "N:M pattern %d:%d: M must divide 32 (2, 4, 8, 16, 32)", n, m);
    if (n * 2 != m)
        return sd_diag_set(d, SD_EINVAL, "N:M pattern %d:%d: only 50%% sparsity is supported (N = M/2)", n,
                           m);
    return 0;
}

int sd_nm_pattern_parse(const char *s, int *ret_n, int *ret_m, sd_diag *d)
{
    if (!s)
        return sd_diag_set(d, SD_EINVAL, "N:M pattern: missing");
    if (strcmp(s, "unstructured") == 0) {
        *ret_n = *ret_m = 0;
        return 0;
    }
    char *end;
    long n = strtol(s, &end, 10);
    if (end == s || *end != ':')
        return sd_diag_set(d, SD_EINVAL, "N:M pattern '%s': expected N:M (e.g. 2:4) or 'unstructured'", s);
    const char *ms = end + 1;
    long m = strtol(ms, &end, 10);
    if (end == ms || *end != '\0' || n <= 0 || m <= 0 || n > 64 || m > 64)
        return sd_diag_set(d, SD_EINVAL, "N:M pattern '%s': expected N:M (e.g. 2:4) or 'unstructured'", s);
    int rc = sd_nm_pattern_check((int)n, (int)m, d);
    if (rc)
        return rc;
    *ret_n = (int)n;
    *ret_m = (int)m;
    return 0;
}

int sd_nm_pattern_format(int n, int m, char *buf, size_t cap)
{
    if (n == 0 && m == 0)
        return snprintf(buf, cap, "unstructured");
    return snprintf(buf, cap, "%d:%d", n, m);
}

static int nm_shape_check(int64_t rows, int64_t cols, sd_diag *d)
{
    if (rows < 0 || cols <= 0)
        return sd_diag_set(d, SD_EINVAL, "bitmask tensor: bad shape [%lld, %lld]", (long long)rows,
                           (long long)cols);
    if (cols % 32 != 0)
        return sd_diag_set(d, SD_EINVAL, "bitmask tensor: cols = %lld is not a multiple of 32",
                           (long long)cols);
    return 0;
}

int sd_nm_validate(const uint32_t *mask, int64_t rows, int64_t cols, int n, int m, sd_diag *d)
{
    int rc = nm_shape_check(rows, cols, d);
    if (rc || (rc = sd_nm_pattern_check(n, m, d)))
        return rc;
    int64_t words = cols / 32;
    uint32_t gmask = m == 32 ? 0xffffffffu : ((1u << (m ? m : 1)) - 1);
    for (int64_t r = 0; r < rows; r++) {
        const uint32_t *mr = mask + r * words;
        int64_t kept = 0;
        for (int64_t w = 0; w < words; w++) {
            uint32_t x = mr[w];
            kept += __builtin_popcount(x);
            for (int g = 0; m && g < 32; g += m) {
                int c = __builtin_popcount((x >> g) & gmask);
                if (c != n)
                    return sd_diag_set(d, SD_EFORMAT,
                                       "bitmask: row %lld word %lld group %d (columns %lld..%lld) keeps %d, "
                                       "the %d:%d pattern needs %d",
                                       (long long)r, (long long)w, g / m, (long long)(32 * w + g),
                                       (long long)(32 * w + g + m - 1), c, n, m, n);
            }
        }
        if (kept != cols / 2)
            return sd_diag_set(d, SD_EFORMAT,
                               "bitmask: row %lld keeps %lld of %lld columns, expected %lld (50%%)",
                               (long long)r, (long long)kept, (long long)cols, (long long)(cols / 2));
    }
    return 0;
}

typedef struct nm_scored {
    float s;
    int32_t c;
} nm_scored;

/* Higher score first, then lower column: a total order, so the choice is deterministic. */
static int nm_scored_cmp(const void *a, const void *b)
{
    const nm_scored *x = a, *y = b;
    if (x->s != y->s)
        return x->s > y->s ? -1 : 1;
    return (x->c > y->c) - (x->c < y->c);
}

/* Sets in mask row mr the top `keep` columns of [c0, c0+len) by score (NaN counts lowest). */
static void nm_top_k(const float *sr, int64_t c0, int64_t len, int64_t keep, nm_scored *tmp, uint32_t *mr)
{
    for (int64_t i = 0; i < len; i++) {
        float s = sr[c0 + i];
        tmp[i].s = s != s ? -__builtin_inff() : s;
        tmp[i].c = (int32_t)(c0 + i);
    }
    qsort(tmp, (size_t)len, sizeof *tmp, nm_scored_cmp);
    for (int64_t i = 0; i < keep; i++)
        mr[tmp[i].c / 32] |= 1u << (tmp[i].c % 32);
}

/* Sets in mask word *mw the top n of each group of m columns of the 32 scores at sr: column i
 * is kept iff fewer than n columns of its group beat it (a higher score, or an equal score and a
 * lower column) — the first n of the order nm_scored_cmp sorts by, without a sort per group. */
static uint32_t nm_word_top(const float *sr, int n, int m)
{
    float v[32];
    for (int i = 0; i < 32; i++)
        v[i] = sr[i] != sr[i] ? -__builtin_inff() : sr[i];
    uint32_t word = 0;
    if (m == 4) { /* 2:4, the common case: the 6 pairs of each group once, no branch */
        for (int g = 0; g < 32; g += 4) {
            const float *x = v + g;
            int b01 = x[1] > x[0], b02 = x[2] > x[0], b03 = x[3] > x[0];
            int b12 = x[2] > x[1], b13 = x[3] > x[1], b23 = x[3] > x[2];
            int c0 = b01 + b02 + b03, c1 = !b01 + b12 + b13, c2 = !b02 + !b12 + b23, c3 = !b03 + !b13 + !b23;
            word |= (uint32_t)((c0 < n) | (c1 < n) << 1 | (c2 < n) << 2 | (c3 < n) << 3) << g;
        }
        return word;
    }
    for (int g = 0; g < 32; g += m)
        for (int i = g; i < g + m; i++) {
            int beaten = 0;
            for (int k = g; k < i; k++)
                beaten += v[k] >= v[i];
            for (int k = i + 1; k < g + m; k++)
                beaten += v[k] > v[i];
            word |= (uint32_t)(beaten < n) << i;
        }
    return word;
}

int sd_nm_mask_from_scores(const float *scores, int64_t rows, int64_t cols, int n, int m, uint32_t *mask_out,
                           sd_diag *d)
{
    int rc = nm_shape_check(rows, cols, d);
    if (rc || (rc = sd_nm_pattern_check(n, m, d)))
        return rc;
    int64_t words = cols / 32, glen = m ? m : cols;
    if (m) {
        for (int64_t r = 0; r < rows; r++)
            for (int64_t w = 0; w < words; w++)
                mask_out[r * words + w] = nm_word_top(scores + r * cols + 32 * w, n, m);
        return 0;
    }
    nm_scored *tmp = malloc((size_t)glen * sizeof *tmp);
    if (!tmp)
        return sd_diag_set(d, SD_ENOMEM, "mask from scores: out of memory");
    memset(mask_out, 0, (size_t)(rows * words) * sizeof *mask_out);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c0 = 0; c0 < cols; c0 += glen)
            nm_top_k(scores + r * cols, c0, glen, m ? n : cols / 2, tmp, mask_out + r * words);
    free(tmp);
    return 0;
}

int sd_nm_pack(const uint16_t *dense, const uint32_t *keep, int64_t rows, int64_t cols, uint16_t *values,
               uint32_t *mask, sd_diag *d)
{
    int rc = nm_shape_check(rows, cols, d);
    if (rc)
        return rc;
    int64_t words = cols / 32;
    /* Count first so that outputs stay untouched on failure. */
    for (int64_t r = 0; r < rows; r++) {
        int64_t kept = 0;
        for (int64_t w = 0; w < words; w++)
            kept += __builtin_popcount(keep[r * words + w]);
        if (kept != cols / 2)
            return sd_diag_set(d, SD_EFORMAT,
                               "pack: row %lld keeps %lld of %lld columns, expected %lld (50%%)",
                               (long long)r, (long long)kept, (long long)cols, (long long)(cols / 2));
    }
    for (int64_t r = 0; r < rows; r++) {
        const uint16_t *dr = dense + r * cols;
        uint16_t *vr = values + r * (cols / 2);
        for (int64_t w = 0; w < words; w++) {
            uint32_t x = keep[r * words + w];
            mask[r * words + w] = x;
            for (; x; x &= x - 1)
                *vr++ = dr[32 * w + __builtin_ctz(x)];
        }
    }
    return 0;
}

int sd_nm_expand(const uint16_t *values, const uint32_t *mask, int64_t rows, int64_t cols,
                 uint16_t *dense_out)
{
    if (nm_shape_check(rows, cols, NULL))
        return SD_EFORMAT;
    int64_t words = cols / 32;
    for (int64_t r = 0; r < rows; r++) {
        int64_t kept = 0;
        for (int64_t w = 0; w < words; w++)
            kept += __builtin_popcount(mask[r * words + w]);
        if (kept > cols / 2)
            return SD_EFORMAT;
    }
    for (int64_t r = 0; r < rows; r++) {
        const uint16_t *vr = values + r * (cols / 2);
        uint16_t *dr = dense_out + r * cols;
        memset(dr, 0, (size_t)cols * sizeof *dr);
        for (int64_t w = 0; w < words; w++)
            for (uint32_t x = mask[r * words + w]; x; x &= x - 1)
                dr[32 * w + __builtin_ctz(x)] = *vr++;
    }
    return 0;
}
