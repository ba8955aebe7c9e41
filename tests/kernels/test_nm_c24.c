/* CPU tests for kernels/nm_c24.h and nm_c48.h, the per-word math of the batch-1 2:4 and 4:8 SpMV
 * that compacts x beside the stored values (c24_spmv_kernel in kernels/nm_spmv_c24.cu). The kernel's own
 * functions run here on the host: the byte permute as the PTX ISA defines it, the selector
 * constants for every nibble, and whole rows against the fp64 reference SpMV. The GPU test
 * (test_spmv_gpu) runs the kernel itself. */
#include "kernels/nm_c24.h"
#include "kernels/nm_c48.h"

#include <math.h>

#include "kernels/nm_spmv_cpu.h"
#include "tests/harness.h"
#include "tests/kernels/nm_test_util.h"

/* prmt.b32, default mode, selectors with bit 3 of every nibble clear: spot checks. */
static void test_prmt(void)
{
    CHECK(sd_c24_prmt(0x33221100u, 0x77665544u, 0x3210) == 0x33221100u);
    CHECK(sd_c24_prmt(0x33221100u, 0x77665544u, 0x7654) == 0x77665544u);
    CHECK(sd_c24_prmt(0x33221100u, 0x77665544u, 0x4051) == 0x44005511u);
    CHECK(sd_c24_prmt(0x33221100u, 0x77665544u, 0x12345610) == 0x55661100u); /* only 4 nibbles count */
}

/* Every valid 2:4 nibble in every position of a word picks x[4g+a] (low half) and x[4g+b] (high
 * half) for its kept columns a < b; a corrupt nibble (not two bits) picks two of the nibble's own
 * four x values. */
static void test_pick_every_nibble(void)
{
    uint16_t x[32];
    uint32_t xv[16];
    for (int c = 0; c < 32; c++)
        x[c] = (uint16_t)(0x1000 + 0x101 * c); /* distinct, recognisable */
    for (int h = 0; h < 16; h++)
        xv[h] = x[2 * h] | (uint32_t)x[2 * h + 1] << 16;
    int valid = 0;
    for (uint32_t n = 0; n < 16; n++)
        for (int g = 0; g < 8; g++) {
            const uint32_t word = n << (4 * g) | (g ? 0x3u : 0xcu << 4); /* other nibbles: noise */
            const uint32_t got = sd_c24_pick(word & 0x77777777u, g, xv[2 * g], xv[2 * g + 1]);
            const uint16_t lo = (uint16_t)got, hi = (uint16_t)(got >> 16);
            if (__builtin_popcount(n) == 2) {
                const int a = __builtin_ctz(n), b = 31 - __builtin_clz(n);
                CHECK_MSG(lo == x[4 * g + a] && hi == x[4 * g + b], "nibble %x at %d: got %04x %04x", n, g,
                          lo, hi);
                valid += g == 0;
            } else {
                int lo_in = 0, hi_in = 0;
                for (int c = 0; c < 4; c++)
                    lo_in |= lo == x[4 * g + c], hi_in |= hi == x[4 * g + c];
                CHECK_MSG(lo_in && hi_in, "corrupt nibble %x at %d: got %04x %04x", n, g, lo, hi);
            }
        }
    CHECK(valid == 6);
}

/* The 4:8 selector table (nm_c48.h), as the kernel's copy holds it. */

static uint32_t c48_tab32[256]; /* the same in the 32-bit form */

static void c48_tab_init(void)
{
    for (int i = 0; i < 256; i++)
        c48_tab32[i] = sd_c48_entry32((uint32_t)i);
}

/* Random 2:4 and 4:8 rows (one to 128 words, fresh data per shape): the word function over a row,
 * as the kernel sums it, against the fp64 reference; fp32 accumulation, so within 1e-5 relative. */
static void test_rows_against_reference(void)
{
    static const int64_t cols_list[] = {32, 96, 1024, 4096};
    uint64_t s = 24;
    c48_tab_init();
    for (int pi = 0; pi < 2; pi++)
        for (int ci = 0; ci < 4; ci++) {
            const int n = pi ? 4 : 2, m = 2 * n;
            const int64_t rows = 33, cols = cols_list[ci], words = cols / 32;
            uint16_t *w = malloc((size_t)(rows * cols) * 2), *vals = malloc((size_t)(rows * cols / 2) * 2);
            uint16_t *xh = malloc((size_t)cols * 2);
            uint32_t *mask = malloc((size_t)(rows * words) * 4);
            float *xf = malloc((size_t)cols * 4);
            double *ref = malloc((size_t)rows * 8);
            REQUIRE(w && vals && xh && mask && xf && ref);
            nmt_fill_bf16(w, rows * cols, &s);
            nmt_fill_bf16(xh, cols, &s);
            for (int64_t c = 0; c < cols; c++)
                xf[c] = sd_bf16_to_f32(xh[c]);
            REQUIRE(nmt_random_mask(mask, rows, cols, n, m, &s) == 0);
            REQUIRE(sd_nm_pack(w, mask, rows, cols, vals, mask, NULL) == 0);
            sd_nm_spmv_cpu_f64(vals, mask, rows, cols, xf, cols, 1, ref, rows);
            double num = 0, den = 0;
            for (int64_t r = 0; r < rows; r++) {
                sd_c24_acc acc = {0.0f, 0.0f};
                for (int64_t k = 0; k < words; k++) {
                    uint32_t u[8], xv[16];
                    memcpy(u, vals + r * (cols / 2) + 16 * k, sizeof u); /* little-endian, as on the GPU */
                    memcpy(xv, xh + 32 * k, sizeof xv);
                    acc = m == 4 ? sd_c24_word(mask[r * words + k], u, xv, acc)
                                 : sd_c48_word(mask[r * words + k], u, xv, c48_tab32, acc);
                }
                const double got = (double)acc.a + acc.b;
                num += (got - ref[r]) * (got - ref[r]);
                den += ref[r] * ref[r];
            }
            const double err = sqrt(num / (den > 0 ? den : 1));
            CHECK_MSG(err < 1e-5, "%d:%d cols %lld: rel L2 %g", n, m, (long long)cols, err);
            free(w), free(vals), free(xh), free(mask), free(xf), free(ref);
        }
}

/* The batched word function (one selector per nibble for every vector) gives each vector exactly
 * the single-vector sums: random 2:4 words (one corrupt), 2..4 vectors, running sums carried. */
static void test_batch_matches_single(void)
{
    uint64_t s = 77;
    for (int nb = 2; nb <= 4; nb++)
        for (int it = 0; it < 64; it++) {
            uint32_t mask, u[8], xs[4][16];
            uint16_t w[32];
            nmt_fill_bf16(w, 32, &s);
            REQUIRE(nmt_random_mask(&mask, 1, 32, 2, 4, &s) == 0);
            if (it == 63)
                mask ^= 0x10u; /* a corrupt nibble: both must still agree */
            memcpy(u, w, sizeof u);
            for (int b = 0; b < nb; b++)
                nmt_fill_bf16((uint16_t *)xs[b], 32, &s);
            const uint32_t *xp[4] = {xs[0], xs[1], xs[2], xs[3]};
            sd_c24_acc acc[4], one[4];
            for (int b = 0; b < nb; b++)
                acc[b].a = one[b].a = 0.25f * (float)b, acc[b].b = one[b].b = -0.5f;
            sd_c24_word_batch(mask, u, xp, nb, acc);
            for (int b = 0; b < nb; b++) {
                one[b] = sd_c24_word(mask, u, xs[b], one[b]);
                CHECK_MSG(memcmp(&acc[b], &one[b], sizeof acc[b]) == 0,
                          "nb %d it %d vector %d: %g %g vs %g %g", nb, it, b, acc[b].a, acc[b].b, one[b].a,
                          one[b].b);
            }
        }
}

/* Every byte with four kept columns a < b < c < d, in every position of a word, picks x[a], x[b]
 * (the first pair) and x[c], x[d] (the second); every other byte picks x of its own 8 columns. */
static void test_c48_every_byte(void)
{
    uint16_t x[32];
    uint32_t xv[16];
    for (int c = 0; c < 32; c++)
        x[c] = (uint16_t)(0x2000 + 0x101 * c);
    for (int h = 0; h < 16; h++)
        xv[h] = x[2 * h] | (uint32_t)x[2 * h + 1] << 16;
    c48_tab_init();
    int valid = 0;
    for (uint32_t b = 0; b < 256; b++)
        for (int k = 0; k < 4; k++) {
            const uint32_t *X = xv + 4 * k;
            /* the selectors as the kernel gets them: the 32-bit entry, a permute of a constant */
            const uint32_t c0 = sd_c48_pick(sd_c48_sel(c48_tab32[b], 0), X[0], X[1], X[2]);
            const uint32_t c1 = sd_c48_pick(sd_c48_sel(c48_tab32[b], 1), X[2], X[3], X[1]);
            const uint16_t got[4] = {(uint16_t)c0, (uint16_t)(c0 >> 16), (uint16_t)c1, (uint16_t)(c1 >> 16)};
            if (__builtin_popcount(b) == 4) {
                int pos[4], n = 0;
                for (int c = 0; c < 8; c++)
                    if (b >> c & 1)
                        pos[n++] = c;
                for (int i = 0; i < 4; i++)
                    CHECK_MSG(got[i] == x[8 * k + pos[i]], "byte %02x at %d: value %d got %04x want %04x", b,
                              k, i, got[i], x[8 * k + pos[i]]);
                valid += k == 0;
            } else {
                for (int i = 0; i < 4; i++) {
                    int in = 0;
                    for (int c = 0; c < 8; c++)
                        in |= got[i] == x[8 * k + c];
                    CHECK_MSG(in, "corrupt byte %02x at %d: value %d got %04x", b, k, i, got[i]);
                }
            }
        }
    CHECK(valid == 70);
}

int main(void)
{
    RUN(test_prmt);
    RUN(test_pick_every_nibble);
    RUN(test_c48_every_byte);
    RUN(test_rows_against_reference);
    RUN(test_batch_matches_single);
    return sd_test_done();
}
