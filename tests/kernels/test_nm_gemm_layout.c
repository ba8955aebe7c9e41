/* test_nm_gemm_layout: the N:M GEMM's shared-memory layout and fragment mapping
 * (kernels/nm_gemm_layout.h, the functions kernels/nm_gemm.cu calls) run on the CPU: a block's
 * stage is built as the kernel builds it (the raw values and masks copied unit by unit into the
 * stage, each thread's mask word read back from there and expanded by sd_nm_expand_word into the
 * swizzled weight tile, x's units into the x tile), every warp's ldmatrix.x4 and
 * mma.m16n8k16 emulated as the PTX ISA lays out their fragments, and the accumulators stored
 * where sd_gm_c_dst says; the result must be W x^T for every row and vector of the block, each
 * written once. Runs without a GPU; test_nm_gemm_gpu checks the kernel itself on one. */
#include "tests/harness.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/nm_expand.h"
#include "kernels/nm_gemm_layout.h"
#include "tests/kernels/nm_test_util.h"

enum { ROWS = 128, COLS = 64, TILE = ROWS * COLS * 2, MAXV = 128 };

/* ldmatrix.x4: lane l gives the address of row l % 8 of matrix l / 8; each lane receives, of every
 * matrix i, the bf16 pair at row lane / 4, columns 2 (lane % 4), + 1. */
static void ldsm_x4(const uint8_t *tile, const int addr[32], uint32_t r[32][4])
{
    for (int l = 0; l < 32; l++)
        for (int i = 0; i < 4; i++)
            memcpy(&r[l][i], tile + addr[8 * i + (l >> 2)] + 4 * (l & 3), 4);
}

static float lo(uint32_t w)
{
    return sd_bf16_to_f32((uint16_t)(w & 0xffff));
}

static float hi(uint32_t w)
{
    return sd_bf16_to_f32((uint16_t)(w >> 16));
}

/* mma.m16n8k16 (row, col), fp32 += bf16 x bf16: lane (g, t) = (l / 4, l % 4) holds A rows g, g + 8
 * at columns 2t, 2t + 1 (a0, a1) and 2t + 8, 2t + 9 (a2, a3); B (k x n) at k 2t, 2t + 1 (b0) and
 * 2t + 8, 2t + 9 (b1) of column g; C rows g (c0, c1) and g + 8 (c2, c3) at columns 2t, 2t + 1. */
static void mma(float c[32][4], const uint32_t a[32][4], const uint32_t b[32][2])
{
    float A[16][16], B[16][8];
    for (int l = 0; l < 32; l++) {
        const int g = l >> 2, t = l & 3;
        for (int h = 0; h < 2; h++) { /* h: the k half */
            A[g][2 * t + 8 * h] = lo(a[l][2 * h]), A[g][2 * t + 8 * h + 1] = hi(a[l][2 * h]);
            A[g + 8][2 * t + 8 * h] = lo(a[l][2 * h + 1]), A[g + 8][2 * t + 8 * h + 1] = hi(a[l][2 * h + 1]);
            B[2 * t + 8 * h][g] = lo(b[l][h]), B[2 * t + 8 * h + 1][g] = hi(b[l][h]);
        }
    }
    for (int l = 0; l < 32; l++) {
        const int g = l >> 2, t = l & 3;
        for (int k = 0; k < 4; k++) {
            const int row = g + 8 * (k >> 1), col = 2 * t + (k & 1);
            float s = 0;
            for (int j = 0; j < 16; j++)
                s += A[row][j] * B[j][col];
            c[l][k] += s;
        }
    }
}

/* One block stage of pattern n:m with 8 wn_tiles vectors a warp (wn_tiles 2 or 4). */
static void check_stage(int n, int m, int wn_tiles, uint64_t seed)
{
    const int nvec = 32 * wn_tiles;
    static uint16_t w[ROWS * COLS], vals[ROWS * COLS / 2], x[MAXV * COLS], wd[ROWS * COLS];
    static uint32_t mask[ROWS * COLS / 32];
    static uint8_t at[TILE], xt[MAXV * COLS * 2], raw[SD_GM_RAW_BYTES];
    static float out[ROWS][MAXV];
    static int written[ROWS][MAXV];
    uint64_t s = seed;
    nmt_fill_bf16(w, ROWS * COLS, &s);
    nmt_fill_bf16(x, nvec * COLS, &s);
    REQUIRE(nmt_random_mask(mask, ROWS, COLS, n, m, &s) == 0);
    REQUIRE(sd_nm_pack(w, mask, ROWS, COLS, vals, mask, NULL) == 0);
    REQUIRE(sd_nm_expand(vals, mask, ROWS, COLS, wd) == 0); /* the pruned weight: the reference's */
    memset(at, 0xff, sizeof at);
    memset(xt, 0xff, sizeof xt);
    memset(raw, 0xff, sizeof raw);
    for (int i = 0; i < 512; i++) { /* issue_w's copies: values unit by unit, then each row's mask */
        int r, u;
        sd_gm_raw_unit(i, &r, &u);
        memcpy(raw + sd_gm_raw_val_off(r, u), vals + r * (COLS / 2) + 8 * u, 16);
    }
    for (int r = 0; r < ROWS; r++)
        memcpy(raw + sd_gm_raw_mask_off(r), mask + r * (COLS / 32), 8);
    for (int t = 0; t < 256; t++) { /* the expansion: thread t's word, read back from the stage */
        int vo, mo;
        uint32_t v[8], o[16], mw;
        sd_gm_raw_word(t, &vo, &mo);
        memcpy(v, raw + vo, 32);
        memcpy(&mw, raw + mo, 4);
        sd_nm_expand_word(mw, v, o);
        for (int q = 0; q < 4; q++) {
            int r, u;
            sd_gm_w_unit(t, q, &r, &u);
            memcpy(at + sd_gm_unit_off(r, u), o + 4 * q, 16);
        }
    }
    for (int v = 0; v < nvec; v++) /* x's units, as the cp.async of issue_x place them */
        for (int u = 0; u < 8; u++)
            memcpy(xt + sd_gm_unit_off(v, u), x + v * COLS + 8 * u, 16);
    memset(written, 0, sizeof written);
    for (int warp = 0; warp < 8; warp++) {
        const int wm = warp & 1, v0 = 8 * wn_tiles * (warp >> 1);
        float c[4][4][32][4];
        memset(c, 0, sizeof c);
        for (int kk = 0; kk < 4; kk++)
            for (int mt = 0; mt < 4; mt++) {
                int addr[32];
                uint32_t a[32][4];
                for (int l = 0; l < 32; l++) {
                    int r, u;
                    sd_gm_a_src(wm, mt, kk, l, &r, &u);
                    addr[l] = sd_gm_unit_off(r, u);
                }
                ldsm_x4(at, addr, a);
                for (int np = 0; np < wn_tiles / 2; np++) {
                    uint32_t b4[32][4], b[32][2];
                    for (int l = 0; l < 32; l++) {
                        int v, u;
                        sd_gm_b_src(v0, np, kk, l, &v, &u);
                        addr[l] = sd_gm_unit_off(v, u);
                    }
                    ldsm_x4(xt, addr, b4);
                    for (int half = 0; half < 2; half++) {
                        for (int l = 0; l < 32; l++)
                            b[l][0] = b4[l][2 * half], b[l][1] = b4[l][2 * half + 1];
                        mma(c[mt][2 * np + half], a, b);
                    }
                }
            }
        for (int mt = 0; mt < 4; mt++)
            for (int nt = 0; nt < wn_tiles; nt++)
                for (int l = 0; l < 32; l++)
                    for (int k = 0; k < 4; k++) {
                        int row, vec;
                        sd_gm_c_dst(wm, v0, mt, nt, k, l, &row, &vec);
                        REQUIRE(row >= 0 && row < ROWS && vec >= 0 && vec < nvec);
                        out[row][vec] = c[mt][nt][l][k];
                        written[row][vec]++;
                    }
    }
    int bad = 0, twice = 0;
    for (int r = 0; r < ROWS; r++)
        for (int v = 0; v < nvec; v++) {
            double ref = 0, mag = 0;
            for (int k = 0; k < COLS; k++) {
                const double p = (double)sd_bf16_to_f32(wd[r * COLS + k]) * sd_bf16_to_f32(x[v * COLS + k]);
                ref += p;
                mag += fabs(p);
            }
            twice += written[r][v] != 1;
            bad += !(fabs(out[r][v] - ref) <= 1e-5 * mag + 1e-6);
        }
    CHECK_MSG(!bad && !twice, "%d:%d, %d vectors: %d outputs wrong, %d not written once", n, m, nvec, bad,
              twice);
}

static void test_stage_every_pattern(void)
{
    const int pats[4][2] = {{2, 4}, {4, 8}, {8, 16}, {16, 32}};
    for (int p = 0; p < 4; p++)
        for (int wn = 2; wn <= 4; wn += 2)
            check_stage(pats[p][0], pats[p][1], wn, 31u + 7u * (uint64_t)p + (uint64_t)wn);
}

/* The swizzle: the 8 rows of an ldmatrix phase (rows r0 .. r0 + 7 at one unit) and the 8 units of
 * an expansion store phase (threads 8 p .. 8 p + 7 at one q) land in 8 distinct bank groups. */
static void test_conflict_free(void)
{
    for (int r0 = 0; r0 < ROWS; r0 += 8)
        for (int u = 0; u < 8; u++) {
            int seen = 0;
            for (int i = 0; i < 8; i++)
                seen |= 1 << ((sd_gm_unit_off(r0 + i, u) / 16) & 7);
            CHECK_MSG(seen == 0xff, "ldmatrix rows %d.. unit %d: bank groups %#x", r0, u, seen);
        }
    for (int p = 0; p < 32; p++)
        for (int q = 0; q < 4; q++) {
            int seen = 0;
            for (int i = 0; i < 8; i++) {
                int r, u;
                sd_gm_w_unit(8 * p + i, q, &r, &u);
                seen |= 1 << ((sd_gm_unit_off(r, u) / 16) & 7);
            }
            CHECK_MSG(seen == 0xff, "expansion threads %d.. quarter %d: bank groups %#x", 8 * p, q, seen);
        }
}

int main(void)
{
    RUN(test_stage_every_pattern);
    RUN(test_conflict_free);
    return sd_test_done();
}
