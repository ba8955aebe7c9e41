/* CPU tests for kernels/nm_expand.h, the per-word expansion of the CUDA backend's bitmask-to-dense
 * kernel (engine/cuda_ops.cu). The kernel's own function runs here, word by word as its threads
 * run it, against the format's reference expansion (sd_nm_expand), for every pattern and for
 * words of 16 bits in any place; corrupt words stay inside the word's values and zeros. The GPU
 * runs the kernel itself in test_cuda_backend (2:4 prefills above the bitmask kernels' rows). */
#include "kernels/nm_expand.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/nm_format.h"
#include "tests/harness.h"
#include "tests/kernels/nm_test_util.h"

/* Expands a whole [rows, cols] matrix as the kernel's threads do: word k from values 16 k.. */
static void expand_by_words(const uint16_t *values, const uint32_t *mask, int64_t n_words, uint16_t *out)
{
    for (int64_t k = 0; k < n_words; k++) {
        uint32_t v[8], o[16];
        memcpy(v, values + 16 * k, sizeof v);
        sd_nm_expand_word(mask[k], v, o);
        memcpy(out + 32 * k, o, sizeof o);
    }
}

static void check_pattern(int n, int m, uint64_t seed)
{
    const int64_t rows = 37, cols = 256, words = rows * cols / 32;
    uint64_t s = seed;
    uint16_t *w = malloc((size_t)(rows * cols) * 2), *vals = malloc((size_t)(rows * cols / 2) * 2);
    uint16_t *want = malloc((size_t)(rows * cols) * 2), *got = malloc((size_t)(rows * cols) * 2);
    uint32_t *mask = malloc((size_t)words * 4);
    REQUIRE(w && vals && want && got && mask);
    nmt_fill_bf16(w, rows * cols, &s);
    REQUIRE(nmt_random_mask(mask, rows, cols, n, m, &s) == 0);
    REQUIRE(sd_nm_pack(w, mask, rows, cols, vals, mask, NULL) == 0);
    REQUIRE(sd_nm_expand(vals, mask, rows, cols, want) == 0);
    expand_by_words(vals, mask, words, got);
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < rows * cols; i++)
        if (got[i] != want[i] && bad++ == 0)
            first = i;
    CHECK_MSG(bad == 0, "%d:%d: %lld of %lld columns differ, first at %lld (%04x, want %04x)", n, m,
              (long long)bad, (long long)(rows * cols), (long long)first, first >= 0 ? got[first] : 0,
              first >= 0 ? want[first] : 0);
    free(w);
    free(vals);
    free(want);
    free(got);
    free(mask);
}

static void test_every_pattern(void)
{
    check_pattern(2, 4, 11);
    check_pattern(4, 8, 12);
    check_pattern(8, 16, 13);
    check_pattern(16, 32, 14);
}

/* Words of 16 bits in places no N:M pattern makes (all low, all high, alternating pairs, random):
 * the expansion does not rely on the groups. Values are 1..16 so that a misplaced one shows. */
static void test_any_sixteen_bits(void)
{
    uint32_t words[64] = {0x0000ffffu, 0xffff0000u, 0x33333333u, 0xccccccccu, 0x0f0f0f0fu,
                          0xf0f0f0f0u, 0x00ff00ffu, 0xff00ff00u, 0x5555aaaau, 0x96969696u};
    uint64_t s = 99;
    for (int i = 10; i < 64; i++) { /* random 16-bit words */
        uint32_t w = 0;
        while (__builtin_popcount(w) < 16)
            w |= 1u << (nmt_rand(&s) % 32);
        words[i] = w;
    }
    uint16_t vals[16], want[32], got[32];
    for (int j = 0; j < 16; j++)
        vals[j] = (uint16_t)(j + 1);
    for (int i = 0; i < 64; i++) {
        REQUIRE(sd_nm_expand(vals, &words[i], 1, 32, want) == 0);
        expand_by_words(vals, &words[i], 1, got);
        CHECK_MSG(memcmp(got, want, sizeof got) == 0, "word %08x expands wrong", words[i]);
    }
}

/* A corrupt word (not 16 bits) gives each set column one of the word's values or zero (past the
 * 16th value), each clear column zero: wrong numbers, never a value from elsewhere. */
static void test_corrupt_words(void)
{
    const uint32_t words[] = {0xffffffffu, 0x00000000u, 0x00000001u, 0x7fffffffu, 0xfffffffeu};
    uint16_t vals[16];
    for (int j = 0; j < 16; j++)
        vals[j] = (uint16_t)(0x100 + j);
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        uint16_t got[32];
        expand_by_words(vals, &words[i], 1, got);
        int placed = 0;
        for (int c = 0; c < 32; c++) {
            const int set = (words[i] >> c) & 1;
            const uint16_t g = got[c];
            CHECK_MSG(set ? (g == 0 || (g >= 0x100 && g < 0x110)) : g == 0, "word %08x col %d: %04x",
                      words[i], c, g);
            placed += g != 0;
        }
        const int bits = __builtin_popcount(words[i]);
        CHECK_MSG(placed == (bits < 16 ? bits : 16), "word %08x: %d values placed", words[i], placed);
    }
}

int main(void)
{
    RUN(test_every_pattern);
    RUN(test_any_sixteen_bits);
    RUN(test_corrupt_words);
    return sd_test_done();
}
