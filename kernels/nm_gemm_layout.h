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

/* The block's shared memory and its pipeline (gm_kernel in nm_gemm.cu). Two dense tiles (128 rows
 * x 64 columns, bf16), then SD_GM_STAGES slots of [raw weights | x] (x: nvec vectors x 64 columns).
 * Stage s (columns 64 s .. + 63) is copied into slot s % SD_GM_STAGES, one commit group a stage,
 * and expanded into tile s & 1. The prologue issues stages 0 .. SD_GM_STAGES - 2, waits until at
 * most SD_GM_WAIT + 1 groups are pending (stage 0 landed), syncs and expands stage 0. Iteration k
 * waits until at most SD_GM_WAIT are pending (stage k + 1 landed), syncs, issues stage
 * sd_gm_issue_stage(k) (an empty group past the last stage), expands stage k + 1 and multiplies
 * stage k. tests/kernels/test_nm_gemm_layout.c runs that schedule with a race check. */
#define SD_GM_STAGES 4
#define SD_GM_WAIT (SD_GM_STAGES - 3)
#define SD_GM_TILE_BYTES (128 * 64 * 2)
#define SD_GM_STAGE_BYTES(nvec) (SD_GM_RAW_BYTES + (nvec)*64 * 2)
#define SD_GM_SMEM_BYTES(nvec) (2 * SD_GM_TILE_BYTES + SD_GM_STAGES * SD_GM_STAGE_BYTES(nvec))

SD_TCX_FN int sd_gm_issue_stage(int k)
{
    return k + SD_GM_STAGES - 1;
}

/* Byte offsets in the block's shared memory of stage s's dense tile and of its slot. */
SD_TCX_FN int sd_gm_tile_off(int s)
{
    return (s & 1) * SD_GM_TILE_BYTES;
}

SD_TCX_FN int sd_gm_slot_off(int s, int nvec)
{
    return 2 * SD_GM_TILE_BYTES + (s % SD_GM_STAGES) * SD_GM_STAGE_BYTES(nvec);
}

/* Where stage s's copies come from, in elements: unit u (0..3, 8 values) of a row's values, the
 * row's two mask words, unit u (0..7, 8 columns) of a vector of x. With cols % 64 == 0 every
 * source is 16-byte (values, x: ldx % 8 == 0 too) or 8-byte (masks) aligned when the base is:
 * what cp.async's 16- and 8-byte copies need (sd_gm_shape_ok). */
SD_TCX_FN int64_t sd_gm_val_src(int64_t row, int64_t cols, int s, int u)
{
    return row * (cols >> 1) + (int64_t)s * 32 + 8 * u;
}

SD_TCX_FN int64_t sd_gm_mask_src(int64_t row, int64_t cols, int s)
{
    return row * (cols >> 5) + 2 * (int64_t)s;
}

SD_TCX_FN int64_t sd_gm_x_src(int64_t vec, int64_t ldx, int s, int u)
{
    return vec * ldx + (int64_t)s * 64 + 8 * u;
}

/* x copy j (0 .. nvec / 32 - 1) of thread t: vector *v of the block, unit *u. */
SD_TCX_FN void sd_gm_x_unit(int t, int j, int *v, int *u)
{
    *v = (t >> 3) + 32 * j;
    *u = t & 7;
}

/* The shapes the kernel takes (sd_nm_gemm_supported adds the rest): an N:M pattern (every mask
 * word holds exactly 16 values: word w's values start at 16 w), whole 64-column stages, x rows on
 * 16 bytes. cols = 4128 (64 k + 32) is refused: its value rows would still be 16-byte aligned, but
 * its mask rows (516 bytes) not 8-byte aligned, and its last stage would be half a stage. */
SD_TCX_FN int sd_gm_shape_ok(int n, int m, int64_t cols, int64_t ldx)
{
    return n > 0 && 2 * n == m && 32 % m == 0 && cols > 0 && cols % 64 == 0 && ldx >= cols && ldx % 8 == 0;
}

/* Accumulator k (0..3) of n8 tile n of 16-row tile m, in `lane`: its weight row (of the block) and
 * vector (of the block; v0 the warp's first): c0, c1 row g, vectors 2t, 2t + 1; c2, c3 row g + 8. */
SD_TCX_FN void sd_gm_c_dst(int wm, int v0, int m, int n, int k, int lane, int *row, int *vec)
{
    *row = 64 * wm + 16 * m + (lane >> 2) + 8 * (k >> 1);
    *vec = v0 + 8 * n + 2 * (lane & 3) + (k & 1);
}

#endif
