/* nm_sp24: the bit work of the 2:4 kernels on the sparse tensor cores (nm_spmv_sp.cu, through
 * nm_sp24.cuh), host- and device-callable so that the CPU test (tests/kernels/test_nm_sp24.c)
 * emulates a warp's mma.sp with the kernels' own functions.
 *
 * K permutation: in each 64-column piece, lane (g, t) holds the 16 bytes of values of columns
 * [16t, 16t + 16) of rows g and g + 8, i.e. the groups of four columns 4t .. 4t + 3 (two values
 * each). mma j (0, 1) of the piece takes group 4t + 2j as its compressed columns {2t, 2t + 1} and
 * group 4t + 2j + 1 as {2t + 8, 2t + 9}, so its K slot group s holds column group 4s + 2j (s < 4)
 * or 4(s - 4) + 2j + 1 (s >= 4). x (the B operand) follows the same map: a lane's K slots lie in
 * two 16-column runs of the piece (from 16 (t >> 1) and 32 + 16 (t >> 1)), of which it needs every
 * other bf16 pair; it loads half of each run and swaps two pairs with lane ^ 1.
 *
 * Metadata (sparsity selector j: lanes 4g + 2j and 4g + 2j + 1 supply it). Layout 1, the one the
 * H200 implements (results/2026-12-02-s15/r1): lane 4g + 2j + h holds the indices of K slots
 * [16h, 16h + 16) of row g in its low half and of row g + 8 in its high half, group s of a half in
 * bits [4s, 4s + 4), the first value's index in the low two. Layout 0 (a lane holds all 32 slots
 * of row g, h = 0, or of row g + 8, h = 1) is kept for the test that tells them apart. */
#ifndef SD_NM_SP24_H
#define SD_NM_SP24_H

#include <stdint.h>

#include "kernels/nm_tcx.h" /* sd_tcx_perm, SD_TCX_FN */

/* Each nibble of x a 2:4 group's mask (two bits set) -> the group's metadata nibble: the lower set
 * bit's index in bits 1:0, the higher one's in bits 3:2. idx0 is 0 if b0, 1 if b1, else 2; idx1
 * is 3 if b3, 2 if b2, else 1; so bit 0 = ~b0 & b1, bit 1 = ~b0 & ~b1, bit 2 = b3 | ~b2, bit 3 =
 * b3 | b2, for eight groups at once. */
SD_TCX_FN uint32_t sd_sp24_meta_nibbles(uint32_t x)
{
    return (~x & (x >> 1) & 0x11111111u) | (~(x | (x << 1)) & 0x22222222u) | (((x >> 1) | ~x) & 0x44444444u) |
           ((x | (x << 1)) & 0x88888888u);
}

/* The 16 bits of nibbles 0, 2, 4, 6 of m (low half) and of nibbles 1, 3, 5, 7 (high half). */
SD_TCX_FN uint32_t sd_sp24_deinterleave(uint32_t m)
{
    uint32_t lo = m & 0x0f0f0f0fu, hi = (m >> 4) & 0x0f0f0f0fu;
    lo |= lo >> 4, hi |= hi >> 4;
    return sd_tcx_perm(lo, hi, 0x6420);
}

/* Lane t's metadata register (layout 0 or 1) for the piece whose row-g and row-(g + 8) masks are
 * g0:g1 and h0:h1 (64 bits each, columns 0-31 in the first word): for mma j = t >> 1, half t & 1.
 * Slot group s of mma j is column group 4s + 2j (s < 4), the low nibble of mask byte 2s + j, or
 * 4(s - 4) + 2j + 1, the high nibble of byte 2(s - 4) + j. */
SD_TCX_FN uint32_t sd_sp24_lane_meta(uint32_t g0, uint32_t g1, uint32_t h0, uint32_t h1, int t, int layout)
{
    const uint32_t sel = (t >> 1) ? 0x7531u : 0x6420u; /* bytes j, 2 + j, 4 + j, 6 + j */
    const uint32_t eg = sd_tcx_perm(g0, g1, sel), eg8 = sd_tcx_perm(h0, h1, sel);
    uint32_t x;
    if (layout == 1) { /* the lane's slot half of both rows, row g in the even nibbles */
        const int sh = 4 * (t & 1);
        x = ((eg >> sh) & 0x0f0f0f0fu) | (((eg8 >> sh) & 0x0f0f0f0fu) << 4);
    } else { /* all slots of one row: low nibbles slots 0-15, high nibbles 16-31 */
        x = (t & 1) ? eg8 : eg;
    }
    return sd_sp24_deinterleave(sd_sp24_meta_nibbles(x));
}

/* The B fragments of one 16-column run of a lane's vector. u: the run's bf16 pairs 4(t & 1) ..
 * 4(t & 1) + 3 as the lane loaded them; it needs pairs 2k + (t & 1), k = 0..3. It sends
 * sd_sp24_b_send(u, t, 0) and (.., 1) to lane ^ 1 and merges what it receives (r0, r1) into
 * e[k] = pair 2k + (t & 1). */
SD_TCX_FN uint32_t sd_sp24_b_send(const uint32_t *u, int t, int k)
{
    return (t & 1) ? u[2 * k] : u[2 * k + 1];
}
SD_TCX_FN void sd_sp24_b_merge(const uint32_t *u, uint32_t r0, uint32_t r1, int t, uint32_t *e)
{
    const int odd = t & 1;
    e[0] = odd ? r0 : u[0], e[1] = odd ? r1 : u[2];
    e[2] = odd ? u[1] : r0, e[3] = odd ? u[3] : r1;
}

/* The A and B registers of mma j (0, 1) of a piece: A from the lane's values of rows g (vg) and
 * g + 8 (vg8), 16 bytes each; B from its two runs' merged pairs x0, x1 (sd_sp24_b_merge). */
SD_TCX_FN void sd_sp24_frags(const uint32_t *vg, const uint32_t *vg8, const uint32_t *x0, const uint32_t *x1,
                             int j, uint32_t *a, uint32_t *b)
{
    a[0] = vg[2 * j], a[1] = vg8[2 * j], a[2] = vg[2 * j + 1], a[3] = vg8[2 * j + 1];
    b[0] = x0[2 * j], b[1] = x1[2 * j], b[2] = x0[2 * j + 1], b[3] = x1[2 * j + 1];
}

/* A piece past the end of the split: zero values, and a valid mask (0x3 in every group: the
 * metadata must name two distinct slots in order). */
#define SD_SP24_DEAD_MASK 0x33333333u

#endif
