/* CPU tests for kernels/nm_sp24.h, the bit work of the 2:4 kernels on the sparse tensor cores
 * (nm_spmv_sp.cu). The kernels' own functions run here on the host: a warp is emulated lane by lane
 * over random 64-column pieces of 16 rows and 8 vectors, and its two mma.sp m16n8k32 per piece are
 * multiplied the way the PTX ISA lays out the A, B and C fragments and metadata layout 1 (the one
 * the H200 implements: test_spmv_gpu checks it against the hardware), so a wrong index, metadata
 * bit or K permutation shows up as a wrong y without a GPU. */
#include "kernels/nm_sp24.h"

#include "kernels/nm_format.h"
#include "tests/harness.h"
#include "tests/kernels/nm_test_util.h"

/* The six 2:4 group masks and their metadata nibbles (first kept index in bits 1:0). */
static const uint32_t k_nib[6] = {0x3, 0x5, 0x6, 0x9, 0xa, 0xc};
static const uint32_t k_meta[6] = {0x4, 0x8, 0x9, 0xc, 0xd, 0xe};

/* Every group mask in every nibble position: the metadata nibble names the two kept columns in
 * order (never one of the invalid 0b0000, 0b0101, 0b1010, 0b1111); the dead mask is valid too. */
static void test_meta_nibbles(void)
{
    for (int pos = 0; pos < 8; pos++)
        for (int k = 0; k < 6; k++) {
            const uint32_t x = (0x33333333u & ~(0xfu << (4 * pos))) | k_nib[k] << (4 * pos);
            const uint32_t m = sd_sp24_meta_nibbles(x);
            CHECK_MSG((m >> (4 * pos) & 0xf) == k_meta[k], "nibble %x at %d: meta %x", k_nib[k], pos,
                      m >> (4 * pos) & 0xf);
        }
    CHECK(sd_sp24_meta_nibbles(SD_SP24_DEAD_MASK) == 0x44444444u);
    CHECK(sd_sp24_deinterleave(0x76543210u) == 0x75316420u);
}

/* Index i (0, 1) of group s of row r of a piece, from its 64 mask bits mk[r][0..1]. */
static int group_index(const uint32_t (*mk)[2], int r, int s_col_group, int i)
{
    const uint32_t nib = (mk[r][s_col_group / 8] >> (4 * (s_col_group % 8))) & 0xf;
    int seen = 0;
    for (int b = 0; b < 4; b++)
        if (nib >> b & 1) {
            if (seen == i)
                return b;
            seen++;
        }
    return -1;
}

/* The column group that mma j's K slot group s holds (nm_sp24.h): 4s + 2j, or 4(s - 4) + 2j + 1. */
static int slot_col_group(int j, int s)
{
    return s < 4 ? 4 * s + 2 * j : 4 * (s - 4) + 2 * j + 1;
}

/* sd_sp24_lane_meta against both layouts' contracts, group by group, on random masks. */
static void test_lane_meta(void)
{
    uint64_t seed = 11;
    uint32_t mk[16][2];
    for (int trial = 0; trial < 50; trial++) {
        REQUIRE(nmt_random_mask(&mk[0][0], 16, 64, 2, 4, &seed) == 0);
        for (int layout = 0; layout < 2; layout++)
            for (int lane = 0; lane < 32; lane++) {
                const int g = lane >> 2, t = lane & 3, j = t >> 1, h = t & 1;
                const uint32_t e =
                    sd_sp24_lane_meta(mk[g][0], mk[g][1], mk[g + 8][0], mk[g + 8][1], t, layout);
                for (int half = 0; half < 2; half++) /* the register's 16-bit halves */
                    for (int q = 0; q < 4; q++) {
                        /* layout 1: half = row g / g + 8, slots 16h + 4q; layout 0: row g + 8h, slots 16 half
                         */
                        const int r = layout ? g + 8 * half : g + 8 * h,
                                  s = layout ? 4 * h + q : 4 * half + q;
                        const uint32_t got = e >> (16 * half + 4 * q) & 0xf;
                        const int cg = slot_col_group(j, s);
                        const uint32_t want =
                            (uint32_t)group_index(mk, r, cg, 0) | (uint32_t)group_index(mk, r, cg, 1) << 2;
                        CHECK_MSG(got == want, "layout %d lane %d half %d group %d: %x, want %x", layout,
                                  lane, half, q, got, want);
                    }
            }
    }
}

/* One warp over `pieces` 64-column pieces of 16 rows and 8 vectors, as sp_piece runs it: per lane
 * its values, metadata and x runs, the pair swap with lane ^ 1, the fragments of both mma; then
 * each mma.sp multiplied as the PTX ISA lays it out. y[r][n] in fp64. */
static void emulate_warp(const uint16_t *vals, const uint32_t *mask, const uint16_t *x, int64_t cols,
                         int pieces, double (*y)[8])
{
    memset(y, 0, sizeof(double) * 16 * 8);
    const uint32_t *v32 = (const uint32_t *)vals, *x32 = (const uint32_t *)x;
    const int64_t vrow = cols / 4, xrow = cols / 2, words = cols / 32; /* u32 per row */
    for (int pc = 0; pc < pieces; pc++) {
        uint32_t e[32], send[32][2][2], u[32][2][4], a[2][32][4], b[2][32][4];
        for (int L = 0; L < 32; L++) {
            const int g = L >> 2, t = L & 3;
            const uint32_t *mg = mask + g * words + 2 * pc, *mg8 = mask + (g + 8) * words + 2 * pc;
            e[L] = sd_sp24_lane_meta(mg[0], mg[1], mg8[0], mg8[1], t, 1);
            for (int run = 0; run < 2; run++) { /* columns 16 (t >> 1) + 32 run + 8 (t & 1), 8 bf16 */
                const int64_t c = 64 * pc + 16 * (t >> 1) + 32 * run + 8 * (t & 1);
                memcpy(u[L][run], x32 + g * xrow + c / 2, 16);
                send[L][run][0] = sd_sp24_b_send(u[L][run], t, 0);
                send[L][run][1] = sd_sp24_b_send(u[L][run], t, 1);
            }
        }
        for (int L = 0; L < 32; L++) {
            const int g = L >> 2, t = L & 3;
            uint32_t xr[2][4];
            for (int run = 0; run < 2; run++)
                sd_sp24_b_merge(u[L][run], send[L ^ 1][run][0], send[L ^ 1][run][1], t, xr[run]);
            const uint32_t *vg = v32 + g * vrow + 16 * pc + 4 * t,
                           *vg8 = v32 + (g + 8) * vrow + 16 * pc + 4 * t;
            for (int j = 0; j < 2; j++)
                sd_sp24_frags(vg, vg8, xr[0], xr[1], j, a[j][L], b[j][L]);
        }
        for (int j = 0; j < 2; j++) /* mma.sp m16n8k32, sparsity selector j */
            for (int r = 0; r < 16; r++)
                for (int n = 0; n < 8; n++)
                    for (int cc = 0; cc < 16; cc++) { /* compressed column: group cc / 2, value cc % 2 */
                        const int La = 4 * (r % 8) + (cc % 8) / 2, ra = (r >= 8) + 2 * (cc >= 8);
                        const uint32_t av = a[j][La][ra] >> (16 * (cc % 2)) & 0xffff;
                        const int s = cc / 2, Lm = 4 * (r % 8) + 2 * j + (s >= 4);
                        const int k =
                            4 * s + (int)(e[Lm] >> (16 * (r >= 8) + 4 * (s % 4) + 2 * (cc % 2)) & 3);
                        const int Lb = 4 * n + (k % 8) / 2;
                        const uint32_t bv = b[j][Lb][k / 8] >> (16 * (k % 2)) & 0xffff;
                        y[r][n] += (double)sd_bf16_to_f32((uint16_t)av) * sd_bf16_to_f32((uint16_t)bv);
                    }
    }
}

/* Random 2:4 pieces: the emulated warp gives y = W x (fp64 both ways: only summation order
 * differs). */
static void test_warp_emulation(void)
{
    uint64_t seed = 21;
    const int pieces = 3;
    const int64_t cols = 64 * pieces;
    uint16_t w[16 * 192], vals[16 * 96], x[8 * 192];
    uint32_t mask[16 * 6];
    for (int trial = 0; trial < 20; trial++) {
        nmt_fill_bf16(w, 16 * cols, &seed);
        nmt_fill_bf16(x, 8 * cols, &seed);
        REQUIRE(nmt_random_mask(mask, 16, cols, 2, 4, &seed) == 0);
        REQUIRE(sd_nm_pack(w, mask, 16, cols, vals, mask, NULL) == 0);
        double y[16][8];
        emulate_warp(vals, mask, x, cols, pieces, y);
        double num = 0, den = 0;
        for (int r = 0; r < 16; r++)
            for (int n = 0; n < 8; n++) {
                double want = 0;
                for (int64_t c = 0; c < cols; c++)
                    if (mask[r * 6 + c / 32] >> (c % 32) & 1)
                        want += (double)sd_bf16_to_f32(w[r * cols + c]) * sd_bf16_to_f32(x[n * cols + c]);
                num += (y[r][n] - want) * (y[r][n] - want), den += want * want;
            }
        CHECK_MSG(sqrt(num / den) < 1e-12, "trial %d: rel L2 %g", trial, sqrt(num / den));
    }
}

int main(void)
{
    RUN(test_meta_nibbles);
    RUN(test_lane_meta);
    RUN(test_warp_emulation);
    return sd_test_done();
}
