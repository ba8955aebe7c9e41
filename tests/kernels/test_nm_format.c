/* Tests for kernels/nm_format.c: pattern names, mask from scores, pack/expand, validation. */
#include "kernels/nm_format.h"

#include "tests/harness.h"
#include "tests/kernels/nm_test_util.h"

static const int k_pat[][2] = {{2, 4}, {4, 8}, {8, 16}, {16, 32}, {0, 0}};
#define N_PAT (int)(sizeof k_pat / sizeof k_pat[0])

static int bit(const uint32_t *mask, int64_t cols, int64_t r, int64_t c)
{
    return (int)((mask[r * (cols / 32) + c / 32] >> (c % 32)) & 1u);
}

static void test_pattern_parse_format(void)
{
    const char *ok[] = {"2:4", "4:8", "8:16", "16:32", "unstructured"};
    for (int i = 0; i < 5; i++) {
        int n = -1, m = -1;
        char buf[32];
        CHECK_MSG(sd_nm_pattern_parse(ok[i], &n, &m, NULL) == 0, "%s", ok[i]);
        sd_nm_pattern_format(n, m, buf, sizeof buf);
        CHECK_MSG(strcmp(buf, ok[i]) == 0, "%s -> %d:%d -> %s", ok[i], n, m, buf);
    }
    const char *bad[] = {"1:4", "3:6", "2:3", "24:48", "2:4x", "abc", "", ":4", "2:", "0:0", "-2:4"};
    for (int i = 0; i < (int)(sizeof bad / sizeof bad[0]); i++) {
        int n = 7, m = 7;
        sd_diag d = {0};
        CHECK_MSG(sd_nm_pattern_parse(bad[i], &n, &m, &d) == SD_EINVAL, "'%s' accepted", bad[i]);
        CHECK_MSG(d.msg[0] != '\0', "'%s': no message", bad[i]);
        CHECK(n == 7 && m == 7);
    }
}

/* Mask from scores keeps the top-n per group: every kept score >= every dropped one in its group. */
static void test_mask_from_scores(void)
{
    uint64_t s = 11;
    const int64_t rows = 5, cols = 128;
    float sc[5 * 128];
    uint32_t mask[5 * 4];
    for (int p = 0; p < N_PAT; p++) {
        int n = k_pat[p][0], m = k_pat[p][1];
        nmt_fill_f32(sc, rows * cols, &s);
        REQUIRE(sd_nm_mask_from_scores(sc, rows, cols, n, m, mask, NULL) == 0);
        CHECK_MSG(sd_nm_validate(mask, rows, cols, n, m, NULL) == 0, "pattern %d:%d", n, m);
        int64_t glen = m ? m : cols;
        for (int64_t r = 0; r < rows; r++)
            for (int64_t g = 0; g < cols; g += glen) {
                float minkept = 2, maxdrop = -2;
                for (int64_t c = g; c < g + glen; c++) {
                    float v = sc[r * cols + c];
                    if (bit(mask, cols, r, c))
                        minkept = v < minkept ? v : minkept;
                    else
                        maxdrop = v > maxdrop ? v : maxdrop;
                }
                CHECK_MSG(minkept >= maxdrop, "%d:%d row %lld group %lld", n, m, (long long)r, (long long)g);
            }
    }
}

/* Reference for the mask contract: per group, sort columns by score (NaN lowest) descending,
 * ties to the lower column, keep the first n — the order the kernel must reproduce exactly. */
typedef struct ref_sc {
    float s;
    int c;
} ref_sc;

static int ref_cmp(const void *a, const void *b)
{
    const ref_sc *x = a, *y = b;
    if (x->s != y->s)
        return x->s > y->s ? -1 : 1;
    return x->c - y->c;
}

static void ref_mask(const float *sc, int64_t rows, int64_t cols, int n, int m, uint32_t *mask)
{
    int64_t glen = m ? m : cols, keep = m ? n : cols / 2;
    ref_sc *t = malloc((size_t)glen * sizeof *t);
    memset(mask, 0, (size_t)(rows * (cols / 32)) * sizeof *mask);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t g = 0; g < cols; g += glen) {
            for (int64_t i = 0; i < glen; i++) {
                float v = sc[r * cols + g + i];
                t[i] = (ref_sc){v != v ? -INFINITY : v, (int)(g + i)};
            }
            qsort(t, (size_t)glen, sizeof *t, ref_cmp);
            for (int64_t i = 0; i < keep; i++)
                mask[r * (cols / 32) + t[i].c / 32] |= 1u << (t[i].c % 32);
        }
    free(t);
}

/* Heavy ties (few distinct values), NaN, +-0 and +-inf: the mask equals the sorted reference bit
 * for bit (pruning output must not depend on how the top-n is found). */
static void test_mask_ties_match_sort(void)
{
    uint64_t s = 21;
    const int64_t rows = 9, cols = 256;
    static float sc[9 * 256];
    static uint32_t got[9 * 8], want[9 * 8];
    const float special[] = {0.0f, -0.0f, NAN, INFINITY, -INFINITY, 1.0f, -1.0f, 0.5f};
    for (int p = 0; p < N_PAT; p++)
        for (int trial = 0; trial < 4; trial++) {
            int n = k_pat[p][0], m = k_pat[p][1];
            for (int64_t i = 0; i < rows * cols; i++) {
                uint64_t x = nmt_rand(&s);
                sc[i] = trial == 0 ? nmt_uniform(&s) : trial == 1 ? special[x % 8] : (float)(x % 3);
                if (trial == 3 && x % 5 == 0)
                    sc[i] = NAN;
            }
            ref_mask(sc, rows, cols, n, m, want);
            REQUIRE(sd_nm_mask_from_scores(sc, rows, cols, n, m, got, NULL) == 0);
            CHECK_MSG(memcmp(got, want, sizeof got) == 0, "%d:%d trial %d", n, m, trial);
        }
}

/* pack then expand equals the dense matrix with the pruned entries zeroed, for every pattern. */
static void test_pack_expand_roundtrip(void)
{
    uint64_t s = 12;
    const int64_t rows = 7, cols = 96;
    uint16_t dense[7 * 96], back[7 * 96], vals[7 * 48];
    uint32_t keep[7 * 3], mask[7 * 3];
    for (int p = 0; p < N_PAT; p++) {
        int n = k_pat[p][0], m = k_pat[p][1];
        nmt_fill_bf16(dense, rows * cols, &s);
        REQUIRE(nmt_random_mask(keep, rows, cols, n, m, &s) == 0);
        REQUIRE(sd_nm_pack(dense, keep, rows, cols, vals, mask, NULL) == 0);
        CHECK(memcmp(mask, keep, sizeof mask) == 0);
        REQUIRE(sd_nm_expand(vals, mask, rows, cols, back) == 0);
        int bad = 0;
        for (int64_t r = 0; r < rows; r++) {
            int64_t k = 0;
            for (int64_t c = 0; c < cols; c++) {
                int kept = bit(keep, cols, r, c);
                uint16_t want = kept ? dense[r * cols + c] : 0;
                bad += back[r * cols + c] != want;
                /* values are the kept entries in increasing column order */
                if (kept)
                    bad += vals[r * (cols / 2) + k++] != dense[r * cols + c];
            }
        }
        CHECK_MSG(bad == 0, "%d:%d: %d mismatches", n, m, bad);
    }
}

static void test_validate_errors(void)
{
    uint64_t s = 13;
    const int64_t rows = 4, cols = 64;
    uint32_t mask[4 * 2];
    sd_diag d = {0};
    /* wrong popcount: one extra bit in row 2 word 1 */
    REQUIRE(nmt_random_mask(mask, rows, cols, 2, 4, &s) == 0);
    uint32_t w = mask[2 * 2 + 1];
    mask[2 * 2 + 1] = w | (~w & (0u - ~w)); /* set the lowest clear bit */
    CHECK(sd_nm_validate(mask, rows, cols, 2, 4, &d) == SD_EFORMAT);
    CHECK_MSG(strstr(d.msg, "row 2") && strstr(d.msg, "word 1"), "msg: %s", d.msg);
    CHECK(sd_nm_validate(mask, rows, cols, 0, 0, &d) == SD_EFORMAT);
    CHECK_MSG(strstr(d.msg, "row 2"), "msg: %s", d.msg);
    /* broken group, word still 16 bits: move a kept bit from group 0 into group 1 of row 1 word 0 */
    REQUIRE(nmt_random_mask(mask, rows, cols, 2, 4, &s) == 0);
    uint32_t x = mask[2];
    int from = __builtin_ctz(x & 0xfu), to = __builtin_ctz(~x & 0xf0u);
    mask[2] = (x & ~(1u << from)) | (1u << to);
    d.msg[0] = 0;
    CHECK(sd_nm_validate(mask, rows, cols, 2, 4, &d) == SD_EFORMAT);
    CHECK_MSG(strstr(d.msg, "row 1") && strstr(d.msg, "group 0"), "msg: %s", d.msg);
    CHECK(sd_nm_validate(mask, rows, cols, 8, 16, NULL) == 0); /* still a valid 8:16 word */
    CHECK(sd_nm_validate(mask, rows, cols, 0, 0, NULL) == 0);  /* and valid unstructured */
    /* shapes and patterns */
    d.msg[0] = 0;
    CHECK(sd_nm_validate(mask, rows, 48, 2, 4, &d) == SD_EINVAL);
    CHECK_MSG(strstr(d.msg, "multiple of 32"), "msg: %s", d.msg);
    CHECK(sd_nm_validate(mask, rows, cols, 3, 6, NULL) == SD_EINVAL);
    CHECK(sd_nm_validate(mask, rows, cols, 1, 4, NULL) == SD_EINVAL);
    CHECK(sd_nm_validate(mask, rows, cols, 2, 64, NULL) == SD_EINVAL);
}

static void test_pack_expand_errors(void)
{
    uint64_t s = 14;
    const int64_t rows = 3, cols = 64;
    uint16_t dense[3 * 64], vals[3 * 32], back[3 * 64];
    uint32_t keep[3 * 2], mask[3 * 2];
    nmt_fill_bf16(dense, rows * cols, &s);
    REQUIRE(nmt_random_mask(keep, rows, cols, 0, 0, &s) == 0);
    keep[1 * 2] &= keep[1 * 2] - 1; /* row 1 now keeps one too few */
    memset(vals, 0xab, sizeof vals);
    sd_diag d = {0};
    CHECK(sd_nm_pack(dense, keep, rows, cols, vals, mask, &d) == SD_EFORMAT);
    CHECK_MSG(strstr(d.msg, "row 1"), "msg: %s", d.msg);
    CHECK_MSG(vals[0] == 0xabab, "output touched on failure");
    CHECK(sd_nm_pack(dense, keep, rows, 40, vals, mask, NULL) == SD_EINVAL);
    /* expand refuses a row with more bits than values */
    REQUIRE(nmt_random_mask(keep, rows, cols, 0, 0, &s) == 0);
    keep[2 * 2 + 1] = 0xffffffffu;
    if (__builtin_popcount(keep[2 * 2]) + 32 > cols / 2)
        CHECK(sd_nm_expand(vals, keep, rows, cols, back) == SD_EFORMAT);
    CHECK(sd_nm_expand(vals, keep, rows, 40, back) == SD_EFORMAT);
}

int main(void)
{
    RUN(test_pattern_parse_format);
    RUN(test_mask_from_scores);
    RUN(test_mask_ties_match_sort);
    RUN(test_pack_expand_roundtrip);
    RUN(test_validate_errors);
    RUN(test_pack_expand_errors);
    return sd_test_done();
}
