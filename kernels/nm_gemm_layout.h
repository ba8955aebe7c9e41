/* nm_gemm_layout: where the N:M GEMM (nm_gemm.cu) puts and finds each 16-byte unit of its shared
 * tiles and each output, host- and device-callable so that tests/kernels/test_nm_gemm_layout.c
 * runs the same arithmetic on the CPU through an emulation of ldmatrix and mma.m16n8k16 (the
 * kernel itself runs only on a GPU).
 *
 * A tile row (a weight row of the dense tile, or a vector of the x stage) holds 64 bf16 columns in
 * 8 units; unit u of row r sits at u ^ (r & 7). A block's 8 warps split 128 weight rows 2 ways
 * (wm: 64 rows each) and its 8 WN-tile vectors 4 ways (wn: 8 WN vectors each). */
#ifndef SD_NM_GEMM_LAYOUT_H
#define SD_NM_GEMM_LAYOUT_H

#include "kernels/nm_tcx.h" /* SD_TCX_FN */

/* Byte offset of unit u (0..7) of row r in a tile. */
SD_TCX_FN int sd_gm_unit_off(int r, int u)
{
    return 16 * (r * 8 + (u ^ (r & 7)));
}

/* A stage's raw weights, staged by cp.async before the expansion: 128 rows of 64 bytes of values
 * (32 kept values: two mask words' 16 each) and, after them, 128 rows of 8 bytes of mask (the two
 * words). Copy i (0..511) of the values is row i / 4, unit i % 4. */
#define SD_GM_RAW_MASKS (128 * 64)
#define SD_GM_RAW_BYTES (128 * 64 + 128 * 8)

SD_TCX_FN void sd_gm_raw_unit(int i, int *row, int *u)
{
    *row = i >> 2;
    *u = i & 3;
}

SD_TCX_FN int sd_gm_raw_val_off(int row, int u)
{
    return row * 64 + 16 * u;
}

SD_TCX_FN int sd_gm_raw_mask_off(int row)
{
    return SD_GM_RAW_MASKS + 8 * row;
}

/* The expansion's reads: thread t's word is word t % 2 of row t / 2, its 16 values the 32 bytes at
 * *vals, its mask the 4 at *mask (byte offsets in the stage). */
SD_TCX_FN void sd_gm_raw_word(int t, int *vals, int *mask)
{
    *vals = sd_gm_raw_val_off(t >> 1, 2 * (t & 1));
    *mask = sd_gm_raw_mask_off(t >> 1) + 4 * (t & 1);
}

/* The expansion: thread t (0..255) writes its word's four units q = 0..3 as row t / 2, units
 * 4 (t % 2) + q (the word's 32 columns). */
SD_TCX_FN void sd_gm_w_unit(int t, int q, int *r, int *u)
{
    *r = t >> 1;
    *u = 4 * (t & 1) + q;
}

/* The A operand of k16 step kk (0..3), 16-row tile m (0..3) of warp row wm: the row and unit whose
 * address `lane` gives ldmatrix.x4 (matrices: rows 0-7 / 8-15 x columns 0-7, then 8-15). */
SD_TCX_FN void sd_gm_a_src(int wm, int m, int kk, int lane, int *r, int *u)
{
    const int mi = lane >> 3;
    *r = 64 * wm + 16 * m + (lane & 7) + 8 * (mi & 1);
    *u = 2 * kk + (mi >> 1);
}

/* The B operand of k16 step kk, vectors v0 + 16 np .. + 15 (v0 = 8 WN wn, the warp's first): the
 * vector and unit whose address `lane` gives ldmatrix.x4 (matrices: vectors 0-7 x columns 0-7 /
 * 8-15, then vectors 8-15: b0, b1 of n8 tile 2 np, then of 2 np + 1). */
SD_TCX_FN void sd_gm_b_src(int v0, int np, int kk, int lane, int *v, int *u)
{
    const int mi = lane >> 3;
    *v = v0 + 16 * np + (lane & 7) + 8 * (mi >> 1);
    *u = 2 * kk + (mi & 1);
}

/* Accumulator k (0..3) of n8 tile n of 16-row tile m, in `lane`: its weight row (of the block) and
 * vector (of the block; v0 the warp's first): c0, c1 row g, vectors 2t, 2t + 1; c2, c3 row g + 8. */
SD_TCX_FN void sd_gm_c_dst(int wm, int v0, int m, int n, int k, int lane, int *row, int *vec)
{
    *row = 64 * wm + 16 * m + (lane >> 2) + 8 * (k >> 1);
    *vec = v0 + 8 * n + 2 * (lane & 3) + (k & 1);
}

#endif
