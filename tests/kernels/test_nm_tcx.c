/* CPU tests for kernels/nm_tcx.h, the 2:4, 4:8, 8:16 and 16:32 fragment expansion of the register-expanded
 * tensor-core SpMV (tcx_spmv_kernel and its wide twin in kernels/nm_spmv_tc.cu). The kernels' own
 * functions run here on the host; the warp is emulated lane by lane with the kernels' loops
 * (splits, warps, steps, pieces) and its mma.m16n8k16 calls are multiplied the way the PTX ISA
 * lays out the A, B and C fragments, so a wrong index, selector or K permutation shows up as a
 * wrong y without a GPU. The GPU test (test_spmv_gpu) runs the kernels themselves. */
#include "kernels/nm_tcx.h"

#include "kernels/nm_spmv_cpu.h"
#include "tests/harness.h"
#include "tests/kernels/nm_test_util.h"

static float lo(uint32_t u)
{
    return sd_bf16_to_f32((uint16_t)(u & 0xffff));
}
static float hi(uint32_t u)
{
    return sd_bf16_to_f32((uint16_t)(u >> 16));
}

/* The byte permute as the PTX ISA defines prmt (default mode): spot checks. */
static void test_perm(void)
{
    CHECK(sd_tcx_perm(0x33221100u, 0x77665544u, 0x3210) == 0x33221100u);
    CHECK(sd_tcx_perm(0x33221100u, 0x77665544u, 0x7654) == 0x77665544u);
    CHECK(sd_tcx_perm(0x33221100u, 0x77665544u, 0x4051) == 0x44005511u);
    CHECK(sd_tcx_perm(0x33221100u, 0, 0x4444) == 0);
    CHECK(sd_tcx_perm(0x33221100u, 0, 0x12345610) ==
          sd_tcx_perm(0x33221100u, 0, 0x5610)); /* high half unused */
}

/* Every valid 2:4 nibble places its two values in their columns and zeros elsewhere; a corrupt
 * nibble (0, 1, 3 or 4 bits) stays inside the group's two values and zeros. */
static void test_expand_every_nibble(void)
{
    uint32_t sel[16];
    for (uint32_t n = 0; n < 16; n++)
        sel[n] = sd_tcx_sel(n);
    const uint32_t vals = 0xbeef3f80u; /* value 0 = 1.0 (0x3f80), value 1 = 0xbeef */
    for (uint32_t n = 0; n < 16; n++) {
        /* the nibble repeated in all 4 groups, the same value u32 in each */
        uint32_t v[4] = {vals, vals, vals, vals}, a[8];
        sd_tcx_expand(v, n * 0x1111u, sel, a);
        for (int j = 0; j < 4; j++) {
            uint16_t col[4] = {(uint16_t)a[2 * j], (uint16_t)(a[2 * j] >> 16), (uint16_t)a[2 * j + 1],
                               (uint16_t)(a[2 * j + 1] >> 16)};
            int i = 0;
            for (int c = 0; c < 4; c++) {
                if (!((n >> c) & 1)) {
                    CHECK_MSG(col[c] == 0, "nibble %x col %d: %04x, want 0", n, c, col[c]);
                    continue;
                }
                const uint16_t want = i == 0 ? 0x3f80 : 0xbeef;
                if (__builtin_popcount(n) == 2)
                    CHECK_MSG(col[c] == want, "nibble %x col %d: %04x, want %04x", n, c, col[c], want);
                else
                    CHECK_MSG(col[c] == 0x3f80 || col[c] == 0xbeef, "corrupt nibble %x col %d: %04x", n, c,
                              col[c]);
                i++;
            }
        }
    }
}

/* One mma.m16n8k16.row.col bf16 -> f32 (D = A B + C) from the 32 lanes' registers, as the PTX
 * ISA lays them out: A reg 0 = (row g, k 2t..2t+1), 1 = (g+8, 2t..), 2 = (g, 2t+8..), 3 = (g+8,
 * 2t+8..); B reg 0 = (k 2t..2t+1, n g), 1 = (k 2t+8.., n g); C c0,c1 = (g, n 2t..2t+1), c2,c3 =
 * (g+8, n 2t..2t+1). Accumulates in double (the layout is under test, not the rounding). */
static void mma_emul(double D[16][8], const uint32_t A[32][4], const uint32_t Bf[32][2])
{
    float a[16][16], b[16][8];
    for (int lane = 0; lane < 32; lane++) {
        const int g = lane >> 2, t = lane & 3;
        for (int h = 0; h < 2; h++) { /* h: low / high element of a register */
            const int k0 = 2 * t + h, k1 = 2 * t + 8 + h;
            a[g][k0] = h ? hi(A[lane][0]) : lo(A[lane][0]);
            a[g + 8][k0] = h ? hi(A[lane][1]) : lo(A[lane][1]);
            a[g][k1] = h ? hi(A[lane][2]) : lo(A[lane][2]);
            a[g + 8][k1] = h ? hi(A[lane][3]) : lo(A[lane][3]);
            b[k0][g] = h ? hi(Bf[lane][0]) : lo(Bf[lane][0]);
            b[k1][g] = h ? hi(Bf[lane][1]) : lo(Bf[lane][1]);
        }
    }
    for (int r = 0; r < 16; r++)
        for (int n = 0; n < 8; n++)
            for (int k = 0; k < 16; k++)
                D[r][n] += (double)a[r][k] * b[k][n];
}

/* The kernels' expanders (Tcx24, Tcx48, Tcx816, Tcx1632 in nm_spmv_tc.cu) with the shared tables
 * they build (32 words; 48 for 16:32). */
typedef void (*expand_fn)(const uint32_t v[4], uint32_t m16, const uint32_t *tab, uint32_t a[8]);
static void table(int m, uint32_t tab[SD_TCX1632_TAB])
{
    for (int i = 0; i < SD_TCX1632_TAB; i++)
        tab[i] = m == 32   ? sd_tcx1632_entry((uint32_t)i / 3, i % 3)
                 : i >= 32 ? 0u
                 : m == 4  ? (i < 16 ? sd_tcx_sel((uint32_t)i) : 0u)
                 : m == 8  ? sd_tcx48_entry((uint32_t)i >> 1, i & 1)
                           : sd_tcx816_entry((uint32_t)i >> 1, i & 1);
}
static expand_fn expander(int m)
{
    return m == 4 ? sd_tcx_expand : m == 8 ? sd_tcx48_expand : sd_tcx816_expand;
}

/* 4:8: every byte of mask bits (8 columns, 0..8 set) over every value pair placement: column c
 * gets value popc(bits below c) of its group, or zero. All 256 bytes in both groups of a lane;
 * where a group holds more than its 4 values (not a 4:8 mask) only the absence of faults matters. */
static void test_expand48_every_byte(void)
{
    uint32_t tab[SD_TCX1632_TAB], a[8];
    table(8, tab);
    const uint16_t val[2][4] = {{0x3f80, 0x4000, 0x4040, 0x4080}, {0xbf80, 0xc000, 0xc040, 0xc080}};
    uint32_t v[4];
    for (int grp = 0; grp < 2; grp++)
        for (int i = 0; i < 2; i++)
            v[2 * grp + i] = (uint32_t)val[grp][2 * i] | (uint32_t)val[grp][2 * i + 1] << 16;
    for (uint32_t b0 = 0; b0 < 256; b0++) {
        const uint32_t b1 = (b0 * 37u + 11u) & 255u; /* the second group's byte: another one */
        sd_tcx48_expand(v, b0 | b1 << 8, tab, a);
        const uint32_t bytes[2] = {b0, b1};
        for (int grp = 0; grp < 2; grp++) {
            if (__builtin_popcount(bytes[grp]) > 4)
                continue;
            int i = 0;
            for (int c = 0; c < 8; c++) {
                const uint32_t u = a[4 * grp + c / 2];
                const uint16_t got = (uint16_t)(c & 1 ? u >> 16 : u);
                const uint16_t want = (bytes[grp] >> c) & 1 ? val[grp][i++] : 0;
                CHECK_MSG(got == want, "byte %02x group %d col %d: %04x, want %04x", bytes[grp], grp, c, got,
                          want);
            }
        }
    }
}

/* 8:16: every 16-bit mask of a lane's group: column c gets value popc(bits below c), or zero.
 * Where the group holds more than its 8 values (not an 8:16 mask) only the absence of faults
 * matters. */
static void test_expand816_every_mask(void)
{
    uint32_t tab[SD_TCX1632_TAB], a[8], v[4];
    table(16, tab);
    uint16_t val[8];
    for (int i = 0; i < 8; i++)
        val[i] = (uint16_t)(0x3f80 + 0x81 * i); /* distinct, recognisable */
    for (int i = 0; i < 4; i++)
        v[i] = (uint32_t)val[2 * i] | (uint32_t)val[2 * i + 1] << 16;
    int checked = 0;
    for (uint32_t m = 0; m < 65536; m++) {
        sd_tcx816_expand(v, m, tab, a);
        if (__builtin_popcount(m) > 8)
            continue;
        int i = 0, bad = 0;
        for (int c = 0; c < 16; c++) {
            const uint16_t got = (uint16_t)(c & 1 ? a[c / 2] >> 16 : a[c / 2]);
            const uint16_t want = (m >> c) & 1 ? val[i++] : 0;
            bad |= got != want;
        }
        CHECK_MSG(!bad, "mask %04x: wrong expansion", m);
        checked += __builtin_popcount(m) == 8;
    }
    CHECK(checked == 12870); /* every 8:16 group */
}

/* 16:32: for every low half (16 bits, c of them set) a high half of 16 - c bits (placed by a
 * hash), both pieces of the word: column c of the word gets value popc(bits below c), or zero.
 * Then words of more than 16 bits: no fault, whatever comes out. */
static void test_expand1632_every_half(void)
{
    uint32_t tab[SD_TCX1632_TAB], a[8], v[8];
    table(32, tab);
    uint16_t val[16];
    for (int i = 0; i < 16; i++)
        val[i] = (uint16_t)(0x3f80 + 0x81 * i);
    for (int i = 0; i < 8; i++)
        v[i] = (uint32_t)val[2 * i] | (uint32_t)val[2 * i + 1] << 16;
    int bad_words = 0;
    for (uint32_t lo = 0; lo < 65536; lo++) {
        const int need = 16 - __builtin_popcount(lo);
        uint32_t hi = 0;
        for (int c = (int)((lo * 2654435761u) >> 28), got = 0; got < need; c = (c + 7) & 15)
            if (!((hi >> c) & 1))
                hi |= 1u << c, got++;
        const uint32_t m32 = lo | hi << 16;
        int i = 0, bad = 0;
        for (int piece = 0; piece < 2; piece++) {
            sd_tcx1632_expand(v, m32, piece, tab, a);
            for (int c = 0; c < 16; c++) {
                const uint16_t got = (uint16_t)(c & 1 ? a[c / 2] >> 16 : a[c / 2]);
                const uint16_t want = (m32 >> (16 * piece + c)) & 1 ? val[i++] : 0;
                bad |= got != want;
            }
        }
        bad_words += bad;
        CHECK_MSG(!bad, "word %08x: wrong expansion", m32);
    }
    CHECK(bad_words == 0);
    for (uint32_t w = 0xffffffffu, k = 0; k < 64; k++, w = w * 1664525u + 1013904223u) /* corrupt words */
        for (int piece = 0; piece < 2; piece++)
            sd_tcx1632_expand(v, w | 0x00ff00ffu, piece, tab, a);
}

/* One warp of the kernel, emulated: rows r0..r0+15, the mask words from `start` by `stride`
 * within its split [w_begin, w_end), 2 pieces a step (a piece past the split's end loads an empty
 * mask), each lane's loads and expansion through nm_tcx.h, x as load_x16 reads it (the wide
 * kernel reads the same columns from its shared-memory copy), and the mma calls of mma_piece (the
 * 16-row kernel) and of tcxw_spmv_kernel's loop: NT n-tiles of 8 vectors. Adds the 16 x 8·NT tile
 * to D. */
static void emulate_warp(int m, const uint16_t *vals, const uint32_t *mask, int64_t rows, int64_t cols,
                         const uint16_t *x, int64_t ldx, int B, int64_t r0, int64_t start, int64_t stride,
                         int64_t w_begin, int64_t w_end, double D[8][16][8])
{
    uint32_t tab[SD_TCX1632_TAB];
    table(m, tab);
    const expand_fn expand = m == 32 ? NULL : expander(m);
    const int64_t words = cols / 32;
    const int NT = (B + 7) / 8;
    for (int64_t cw = start; cw < w_end; cw += stride)
        for (int s = 0; s < 2; s++) {
            static uint32_t ag[32][8], ag8[32][8], xr[32][8][8];
            for (int lane = 0; lane < 32; lane++) {
                const int g = lane >> 2, t = lane & 3;
                const int ok = cw + 2 * s < w_end;
                const int64_t c = ok ? cw : w_begin;
                const int ss = ok ? s : 0;
                for (int h = 0; h < 2; h++) {
                    int64_t r = r0 + g + 8 * h;
                    r = r < rows ? r : rows - 1;
                    if (m == 32) { /* the whole-word layout: lane t owns word cw + t */
                        const int wok = sd_tcx_w_word(cw, t) < w_end;
                        const int64_t word = wok ? sd_tcx_w_word(cw, t) : w_begin;
                        const uint32_t *vu =
                            (const uint32_t *)(vals + r * (cols / 2)) + 4 * sd_tcx_w_value_unit(word, 0);
                        const uint32_t v8[8] = {vu[0], vu[1], vu[2], vu[3], vu[4], vu[5], vu[6], vu[7]};
                        sd_tcx1632_expand(v8, wok ? mask[r * words + word] : 0u, s, tab,
                                          h ? ag8[lane] : ag[lane]);
                        continue;
                    }
                    const uint32_t *vu =
                        (const uint32_t *)(vals + r * (cols / 2)) + 4 * sd_tcx_value_unit(c, ss, t);
                    const uint32_t v[4] = {vu[0], vu[1], vu[2], vu[3]};
                    const uint32_t mw = ok ? mask[r * words + sd_tcx_mask_word(c, ss, t)] : 0u;
                    expand(v, (mw >> sd_tcx_mask_shift(t)) & 0xffffu, tab, h ? ag8[lane] : ag[lane]);
                }
                for (int n = 0; n < NT; n++) {
                    const int vec = 8 * n + g;
                    const int64_t col = m == 32 ? sd_tcx_w_col(cw, s, t) : cw * 32 + 64 * s + 16 * t;
                    for (int q = 0; q < 8; q++) {
                        uint32_t u = 0;
                        if (vec < B && col < cols)
                            u = (uint32_t)x[vec * ldx + col + 2 * q] |
                                (uint32_t)x[vec * ldx + col + 2 * q + 1] << 16;
                        xr[lane][n][q] = u;
                    }
                }
            }
            for (int j = 0; j < 4; j++)
                for (int n = 0; n < NT; n++) {
                    uint32_t A[32][4], Bf[32][2];
                    for (int lane = 0; lane < 32; lane++) {
                        A[lane][0] = ag[lane][2 * j], A[lane][1] = ag8[lane][2 * j];
                        A[lane][2] = ag[lane][2 * j + 1], A[lane][3] = ag8[lane][2 * j + 1];
                        Bf[lane][0] = xr[lane][n][2 * j], Bf[lane][1] = xr[lane][n][2 * j + 1];
                    }
                    mma_emul(D[n], A, Bf);
                }
        }
}

/* The whole launch, emulated: splits of words_per_split (rounded up to 4 words). The 16-row
 * kernel (wide = 0): a block per 16 rows, its 8 warps striding 4 words from 4·warp, partial tiles
 * summed. The wide kernel: a block per 128 rows, warp w owns rows 16w.., every warp over the
 * split's words 4 at a time. C fragments mapped back as store_frags / reduce_store do. */
static void emulate_launch(int m, const uint16_t *vals, const uint32_t *mask, int64_t rows, int64_t cols,
                           const uint16_t *x, int64_t ldx, int B, int split, int wide,
                           double *y /* [B, rows] */)
{
    const int64_t words = cols / 32;
    int64_t wps = (words + split - 1) / split;
    wps = (wps + 3) / 4 * 4;
    static double D[8][16][8];
    for (int64_t r0 = 0; r0 < rows; r0 += 16) {
        memset(D, 0, sizeof D);
        for (int64_t w_begin = 0; w_begin < words; w_begin += wps) {
            const int64_t w_end = w_begin + wps < words ? w_begin + wps : words;
            if (wide)
                emulate_warp(m, vals, mask, rows, cols, x, ldx, B, r0, w_begin, 4, w_begin, w_end, D);
            else
                for (int warp = 0; warp < 8; warp++)
                    emulate_warp(m, vals, mask, rows, cols, x, ldx, B, r0, w_begin + 4 * warp, 32, w_begin,
                                 w_end, D);
        }
        for (int r = 0; r < 16 && r0 + r < rows; r++)
            for (int b = 0; b < B; b++)
                y[b * rows + r0 + r] = D[b / 8][r][b % 8];
    }
}

/* y from the emulated kernels against the fp64 CPU twin: 2:4 through every expander (a 2:4 mask
 * is also a 4:8 and an 8:16 one), 4:8 through its own and 8:16's, 8:16 through its own; shapes with rows not
 * a multiple of 16, cols an odd number of 64-column pieces, more steps than warps; B up to 64 (the wide
 * kernel above 16); split 1..3. */
static void check_emulated(int n, int m, int em, uint64_t seed)
{
    static const int64_t shapes[][2] = {{16, 64}, {5, 128}, {37, 320}, {16, 1088}, {20, 4224}};
    uint64_t s = seed;
    for (int si = 0; si < 5; si++) {
        const int64_t rows = shapes[si][0], cols = shapes[si][1], ldx = cols + 8;
        uint16_t *w = malloc((size_t)(rows * cols) * 2), *vals = malloc((size_t)(rows * cols / 2) * 2);
        uint32_t *mask = malloc((size_t)(rows * cols / 32) * 4);
        uint16_t *x = malloc((size_t)(64 * ldx) * 2);
        float *xf = malloc((size_t)(64 * ldx) * 4);
        double *ref = malloc((size_t)(64 * rows) * 8), *y = malloc((size_t)(64 * rows) * 8);
        REQUIRE(w && vals && mask && x && xf && ref && y);
        nmt_fill_bf16(w, rows * cols, &s);
        nmt_fill_bf16(x, 64 * ldx, &s);
        for (int64_t i = 0; i < 64 * ldx; i++)
            xf[i] = sd_bf16_to_f32(x[i]);
        REQUIRE(nmt_random_mask(mask, rows, cols, n, m, &s) == 0);
        REQUIRE(sd_nm_pack(w, mask, rows, cols, vals, mask, NULL) == 0);
        const int Bs[] = {1, 3, 8, 9, 16, 17, 33, 64};
        for (int bi = 0; bi < 8; bi++) {
            const int B = Bs[bi];
            sd_nm_spmv_cpu_f64(vals, mask, rows, cols, xf, ldx, B, ref, rows);
            for (int wide = 0; wide < 2; wide++)
                for (int split = 1; split <= 3; split++) {
                    if (!wide && B > 16)
                        continue; /* the 16-row kernel takes B <= 16 */
                    for (int64_t i = 0; i < B * rows; i++)
                        y[i] = NAN;
                    emulate_launch(em, vals, mask, rows, cols, x, ldx, B, split, wide, y);
                    double num = 0, den = 0;
                    for (int64_t i = 0; i < B * rows; i++)
                        num += (y[i] - ref[i]) * (y[i] - ref[i]), den += ref[i] * ref[i];
                    const double e = sqrt(num / (den > 0 ? den : 1));
                    CHECK_MSG(e < 1e-9, "%d:%d (expander of %d) %lldx%lld B=%d split=%d wide=%d: rel L2 %g",
                              n, m, em, (long long)rows, (long long)cols, B, split, wide, e);
                }
        }
        free(w), free(vals), free(mask), free(x), free(xf), free(ref), free(y);
    }
}

static void test_emulated_kernel(void)
{
    check_emulated(2, 4, 4, 7);
    check_emulated(2, 4, 8, 8);
    check_emulated(4, 8, 8, 9);
    check_emulated(2, 4, 16, 10); /* a 2:4 or 4:8 mask is also an 8:16 one */
    check_emulated(4, 8, 16, 11);
    check_emulated(8, 16, 16, 12);
    check_emulated(16, 32, 32, 13);
    check_emulated(2, 4, 32, 14); /* every 50% N:M mask holds 16 values a word */
    check_emulated(8, 16, 32, 15);
}

int main(void)
{
    RUN(test_perm);
    RUN(test_expand_every_nibble);
    RUN(test_expand48_every_byte);
    RUN(test_expand816_every_mask);
    RUN(test_expand1632_every_half);
    RUN(test_emulated_kernel);
    return sd_test_done();
}
