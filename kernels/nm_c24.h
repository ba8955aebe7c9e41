/* nm_c24: how the batch-1 2:4 SpMV (c24_spmv_kernel in nm_spmv_c24.cu) meets a mask word's 16
 * stored values with their x without a bit scan or a per-value gather. Host and device code: the
 * kernel calls these functions, and tests/kernels/test_nm_c24.c runs the same functions on the
 * CPU against the reference SpMV, so a wrong selector constant shows up without a GPU.
 *
 * Under 2:4 nibble g of a mask word (columns 4g..4g+3) keeps exactly two columns a < b, and the
 * row stores their values side by side: u32 g of the word's 16 values (value of column a in the
 * low half). The nibble's x are two bf16 pairs, x[4g], x[4g+1] and x[4g+2], x[4g+3]. One byte
 * permute of those two pairs yields x[4g+a] (low half) and x[4g+b] (high half), beside the
 * values. Its selector comes from the nibble by two more permutes on constants: nibble & 7 tells
 * the six two-bit nibbles apart (3 5 6 1 2 4), byte (nibble & 7) of an 8-byte table holds
 * a | b << 4, and a permute of 0x76543210 by that byte turns a and b into byte selectors
 * (2a) | (2a+1) << 4 and (2b) | (2b+1) << 4. A corrupt nibble picks some of the nibble's x:
 * wrong numbers, never an out-of-range access. */
#ifndef SD_NM_C24_H
#define SD_NM_C24_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define SD_C24_FN __host__ __device__ __forceinline__
#else
#define SD_C24_FN static inline
#endif

/* Byte n of the result is byte (s >> 4n) & 7 of the 8 bytes b:a (a = bytes 0..3): prmt.b32 in
 * its default mode for selectors whose nibbles all have bit 3 clear (set, it would ask for sign
 * replication); every selector here keeps it clear. */
SD_C24_FN uint32_t sd_c24_prmt(uint32_t a, uint32_t b, uint32_t s)
{
#ifdef __CUDA_ARCH__
    uint32_t r;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(s));
    return r;
#else
    uint64_t v = (uint64_t)b << 32 | a;
    uint32_t r = 0;
    for (int n = 0; n < 4; n++)
        r |= (uint32_t)((v >> (8 * ((s >> (4 * n)) & 7))) & 0xff) << (8 * n);
    return r;
#endif
}

/* Byte k of the 8-byte table (SD_C24_POS_HI:SD_C24_POS_LO) is a | b << 4 for the 2:4 nibble n
 * with n & 7 == k: 3 -> 0x10, 5 -> 0x20, 6 -> 0x21, 9 -> 0x30, 10 -> 0x31, 12 -> 0x32; k = 0 and
 * 7 (no valid nibble) hold 0x10. */
#define SD_C24_POS_LO 0x10313010u
#define SD_C24_POS_HI 0x10212032u
/* Byte i is the selector pair of a nibble's column i: (2i) | (2i+1) << 4. */
#define SD_C24_PAIR_SEL 0x76543210u

/* The permute selector that picks x[4g+a] | x[4g+b] << 16 out of nibble g's two x pairs: b7 =
 * the mask word & 0x77777777. It depends on the mask only, so a batch shares it. */
SD_C24_FN uint32_t sd_c24_sel(uint32_t b7, int g)
{
    const uint32_t pos = sd_c24_prmt(SD_C24_POS_LO, SD_C24_POS_HI, b7 >> (4 * g)); /* byte 0: a | b << 4 */
    return sd_c24_prmt(SD_C24_PAIR_SEL, 0u, pos); /* low half: x[a]'s bytes, x[b]'s */
}

/* x[4g+a] | x[4g+b] << 16 for nibble g of a word: x01 / x23 = the nibble's two x pairs. */
SD_C24_FN uint32_t sd_c24_pick(uint32_t b7, int g, uint32_t x01, uint32_t x23)
{
    return sd_c24_prmt(x01, x23, sd_c24_sel(b7, g));
}

SD_C24_FN float sd_c24_lo(uint32_t u)
{
#ifdef __CUDA_ARCH__
    return __uint_as_float(u << 16);
#else
    float f;
    uint32_t w = u << 16;
    memcpy(&f, &w, 4);
    return f;
#endif
}
SD_C24_FN float sd_c24_hi(uint32_t u)
{
#ifdef __CUDA_ARCH__
    return __uint_as_float(u & 0xffff0000u);
#else
    float f;
    uint32_t w = u & 0xffff0000u;
    memcpy(&f, &w, 4);
    return f;
#endif
}

/* Two partial sums: the first value of each stored pair, and the second (two chains of 8 FMAs a
 * word instead of one of 16). Passed and returned by value, so that they stay in registers. */
typedef struct sd_c24_acc {
    float a, b;
} sd_c24_acc;

/* A stored pair u (two values) times the picked x pair xp, added to acc. */
SD_C24_FN sd_c24_acc sd_c24_fma(uint32_t u, uint32_t xp, sd_c24_acc acc)
{
    acc.a = fmaf(sd_c24_lo(u), sd_c24_lo(xp), acc.a);
    acc.b = fmaf(sd_c24_hi(u), sd_c24_hi(xp), acc.b);
    return acc;
}

/* One 2:4 mask word of one row: its 16 values as 8 u32 (u[g]: the values of nibble g) against
 * the word's x as 16 bf16 pairs (xv[h]: columns 2h, 2h+1), added to acc. */
SD_C24_FN sd_c24_acc sd_c24_word(uint32_t bits, const uint32_t *u, const uint32_t *xv, sd_c24_acc acc)
{
    const uint32_t b7 = bits & 0x77777777u; /* nibble & 7: bit 3 of every selector nibble clear */
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
    for (int g = 0; g < 8; g++)
        acc = sd_c24_fma(u[g], sd_c24_pick(b7, g, xv[2 * g], xv[2 * g + 1]), acc);
    return acc;
}

/* The same word against nb vectors (batched decode): xv[b] is vector b's x of the word, acc[b]
 * its sums. One selector per nibble serves every vector. */
SD_C24_FN void sd_c24_word_batch(uint32_t bits, const uint32_t *u, const uint32_t *const *xv, int nb,
                                 sd_c24_acc *acc)
{
    const uint32_t b7 = bits & 0x77777777u;
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
    for (int g = 0; g < 8; g++) {
        const uint32_t sel = sd_c24_sel(b7, g);
        for (int b = 0; b < nb; b++)
            acc[b] = sd_c24_fma(u[g], sd_c24_prmt(xv[b][2 * g], xv[b][2 * g + 1], sel), acc[b]);
    }
}

#endif
