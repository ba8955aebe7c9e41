/* nm_c48: the 4:8 twin of nm_c24. The batch-1 compacting SpMV (c24_spmv_kernel in
 * nm_spmv_c24.cu, instantiated for 4:8) meets each 4:8 group's four stored values with their x
 * by byte permutes instead of a bit scan and a gather per value. Host and device code: the kernel
 * calls these functions, and tests/kernels/test_nm_c24.c runs them on the CPU.
 *
 * Under 4:8 byte k of a mask word (columns 8k..8k+7) keeps exactly four columns a < b < c < d,
 * stored in column order as two u32: values a, b in u[2k], c, d in u[2k+1]. The byte's x are four
 * bf16 pairs X0..X3 (columns 0-1, 2-3, 4-5, 6-7). a <= 4 and b <= 5, so x[a], x[b] lie in
 * X0..X2; c >= 2, so x[c], x[d] lie in X1..X3. Two permutes pick each pair: C0 = prmt(prmt(X0,
 * X1, s), X2, s') (the first places what X0, X1 hold, the second takes the rest from X2), C1 =
 * prmt(prmt(X2, X3, s), X1, s'). The four selectors depend on the byte only: a 256-entry table
 * (each selector as its two bf16 pair indices, 32 bits an entry; sd_c48_entry32), built at compile
 * time (constexpr) and copied into shared memory by every block; two permutes of a constant turn
 * an entry back into the four selectors. A corrupt byte (not four bits)
 * picks some of the byte's own x: wrong numbers, never an out-of-range access.
 *
 * Cost per byte (four values): byte extract and table address, one LDS.32, three shifts, six
 * permutes, eight unpacks and four FMAs, ~24 instructions against 2:4's ~20 per two nibbles. */
#ifndef SD_NM_C48_H
#define SD_NM_C48_H

#include "kernels/nm_c24.h"

#if defined(__cplusplus)
#define SD_C48_CONSTEXPR constexpr
#else
#define SD_C48_CONSTEXPR
#endif
#ifdef __CUDACC__
#define SD_C48_FN __host__ __device__ __forceinline__ SD_C48_CONSTEXPR
#else
#define SD_C48_FN static inline SD_C48_CONSTEXPR
#endif

/* The two permute selectors (low half: the first, high half: the second) that pick x of kept
 * columns p0 (low bf16) and p1 (high bf16) of a byte. word 0 (C0): the first permute reads X0:X1
 * (columns 0-3), the second t:X2 (columns 4, 5 as bytes 4-7); word 1 (C1): X2:X3 (columns 4-7),
 * then t:X1 (columns 2, 3 as bytes 4-7). Positions outside a word's range are clamped into it. */
SD_C48_FN uint32_t sd_c48_pair_sel(int word, int p0, int p1)
{
    uint32_t first = 0, second = 0;
    for (int h = 0; h < 2; h++) {
        int p = h ? p1 : p0;
        const uint32_t keep = (uint32_t)(2 * h) | (uint32_t)(2 * h + 1) << 4; /* t's own bytes */
        uint32_t f = 0, s = keep;
        if (word == 0) {
            p = p > 5 ? 5 : p;
            if (p < 4)
                f = (uint32_t)(2 * p) | (uint32_t)(2 * p + 1) << 4;
            else
                s = (uint32_t)(2 * p - 4) | (uint32_t)(2 * p - 3) << 4; /* X2 = bytes 4-7 */
        } else {
            p = p < 2 ? 2 : p;
            if (p >= 4)
                f = (uint32_t)(2 * p - 8) | (uint32_t)(2 * p - 7) << 4;
            else
                s = (uint32_t)(2 * p) | (uint32_t)(2 * p + 1) << 4; /* X1 = bytes 4-7: column 2 -> 4 */
        }
        first |= f << (8 * h);
        second |= s << (8 * h);
    }
    return first | second << 16;
}

/* The two selectors of C0 (word 0) or C1 (word 1) for mask byte b, as one u32 (low half first). */
SD_C48_FN uint32_t sd_c48_entry(uint32_t b, int word)
{
    int pos[4] = {0, 0, 0, 0};
    int n = 0;
    for (int c = 0; c < 8; c++)
        if (((b >> c) & 1u) && n < 4)
            pos[n++] = c;
    return sd_c48_pair_sel(word, pos[2 * word], pos[2 * word + 1]);
}

/* Byte b's table entry as the kernel holds it, 32 bits (a table of 1 KB, one LDS.32 a byte: ~3.5
 * shared-memory wavefronts a warp load against ~6 for the four 16-bit selectors as 8 bytes, which
 * measured 1-6% slower, kernels/NOTES.md v19): each 16-bit selector of sd_c48_entry has
 * nibbles 2q0, 2q0 + 1, 2q1, 2q1 + 1 (two bf16 of a permute's 8 source bytes), so q0, q1 suffice;
 * nibbles 0-3 hold C0's two selectors' q's, nibbles 4-7 C1's. One permute of SD_C24_PAIR_SEL by
 * four such nibbles gives back two 16-bit selectors (low half the first), as sd_c24_sel does. */
SD_C48_FN uint32_t sd_c48_entry32(uint32_t b)
{
    uint32_t r = 0;
    for (int w = 0; w < 2; w++) {
        const uint32_t e = sd_c48_entry(b, w);
        for (int j = 0; j < 2; j++) { /* selector j: nibbles 0 and 2 of its 16 bits hold 2q0, 2q1 */
            const uint32_t sel = e >> (16 * j);
            const uint32_t q = ((sel & 0xfu) >> 1) | (((sel >> 8) & 0xfu) >> 1) << 4;
            r |= q << (16 * w + 8 * j);
        }
    }
    return r;
}

/* The two 16-bit selectors of C0 (word 0) or C1 (word 1), low half first, from a 32-bit entry
 * (sd_c48_entry32): the picks of sd_c48_entry(b, word) (which leaves the halves a permute does not
 * use at zero; these select something there too). */
SD_C24_FN uint32_t sd_c48_sel(uint32_t e32, int word)
{
    return sd_c24_prmt(SD_C24_PAIR_SEL, 0u, e32 >> (16 * word));
}

/* C = the x pair of a byte's two kept columns, from its selectors e (sd_c48_entry) and three of
 * the byte's x pairs in the order the entry's word expects (C0: X0, X1, X2; C1: X2, X3, X1). */
SD_C24_FN uint32_t sd_c48_pick(uint32_t e, uint32_t xa, uint32_t xb, uint32_t xc)
{
    return sd_c24_prmt(sd_c24_prmt(xa, xb, e), xc, e >> 16);
}

/* One 4:8 mask word of one row: its 16 values as 8 u32 (u[2k], u[2k+1]: byte k's), the word's x
 * as 16 bf16 pairs, tab = the 256-word table of sd_c48_entry32, added to acc. */
SD_C24_FN sd_c24_acc sd_c48_word(uint32_t bits, const uint32_t *u, const uint32_t *xv, const uint32_t *tab,
                                 sd_c24_acc acc)
{
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
    for (int k = 0; k < 4; k++) {
        const uint32_t e = tab[(bits >> (8 * k)) & 0xffu];
        const uint32_t e0 = sd_c48_sel(e, 0), e1 = sd_c48_sel(e, 1);
        const uint32_t *X = xv + 4 * k;
        acc = sd_c24_fma(u[2 * k], sd_c48_pick(e0, X[0], X[1], X[2]), acc);
        acc = sd_c24_fma(u[2 * k + 1], sd_c48_pick(e1, X[2], X[3], X[1]), acc);
    }
    return acc;
}

#endif
