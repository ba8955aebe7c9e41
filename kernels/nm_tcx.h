/* nm_tcx: how the register-expanded tensor-core SpMV (tcx_spmv_kernel and its wide twin in
 * nm_spmv_tc.cu) turns 2:4, 4:8 and 8:16 (and 16:32, in a layout of its own: below) bitmask
 * weights into mma.m16n8k16 A fragments without a shared-memory tile. Host and device code: the kernels call
 * these functions, and tests/kernels/test_nm_tcx.c runs the same functions on the CPU and multiplies the
 * fragments the way the PTX fragment layout says, so the index arithmetic is checked without a GPU.
 *
 * Layout. A block owns 16 rows; a warp step covers 128 columns (4 mask words) as two 64-column
 * pieces. Lane (g = lane / 4, t = lane % 4) holds, of each piece, columns [16t, 16t + 16) of
 * rows g and g + 8 (the K permutation of nm_spmv_tc.cu: mma j takes columns 16t + 4j + {0,1} as
 * its k-slots {2t, 2t+1} and 16t + 4j + {2,3} as {2t+8, 2t+9}). Under 2:4, 4:8 and 8:16 those 16
 * columns hold exactly 8 values, stored contiguously: one aligned 16-byte load per row and
 * piece. Their 16 mask bits are one half of a mask word.
 *
 * Expansion (2:4; 4:8 below). Each 4-column group (one mask nibble) has its 2 values in one
 * u32; a byte permute (prmt, __byte_perm) with the value u32 and zero as sources places them in
 * the two dense u32 (columns 0,1 and 2,3) with zeros where the mask is clear. The two selectors
 * of a nibble come from a 16-entry table (one u32 per nibble: low half columns 0,1, high half
 * columns 2,3), built once per block in shared memory: the 6 valid nibbles sit in 6 distinct
 * banks, so a warp's lookups never conflict. Cost per 4 dense columns: nibble extract, one LDS, two PRMT, one
 * shift; no bit scan, no shared tile, no __syncwarp. A corrupt nibble (not 2 bits) yields wrong
 * numbers, never an out-of-range access. */
#ifndef SD_NM_TCX_H
#define SD_NM_TCX_H

#include <stdint.h>

#ifdef __CUDACC__
#define SD_TCX_FN __host__ __device__ __forceinline__
#else
#define SD_TCX_FN static inline
#endif

/* Byte n of the result is byte ((s >> 4n) & 7) of the 8 bytes y:x (x = bytes 0..3). */
SD_TCX_FN uint32_t sd_tcx_perm(uint32_t x, uint32_t y, uint32_t s)
{
#ifdef __CUDA_ARCH__
    return __byte_perm(x, y, s);
#else
    uint64_t b = (uint64_t)y << 32 | x;
    uint32_t r = 0;
    for (int n = 0; n < 4; n++)
        r |= (uint32_t)((b >> (8 * ((s >> (4 * n)) & 7))) & 0xff) << (8 * n);
    return r;
#endif
}

/* The selector pair of one nibble: value i of the group is bytes 2i, 2i+1 of its u32 (first
 * kept column first); byte 4 is a zero of the second source. Column c's two bytes take bits
 * [8c, 8c + 8): columns 0,1 the low half (the first dense u32), 2,3 the high half. */
SD_TCX_FN uint32_t sd_tcx_sel(uint32_t nib)
{
    uint32_t r = 0;
    int i = 0;
    for (int c = 0; c < 4; c++) {
        uint32_t s = 0x44;
        if ((nib >> c) & 1) {
            const int v = i < 1 ? i : 1; /* a corrupt nibble's third value: reuse value 1 */
            s = (uint32_t)(2 * v) | (uint32_t)(2 * v + 1) << 4;
            i++;
        }
        r |= s << (8 * c);
    }
    return r;
}

/* Lane t's 16 columns of one row and piece: v = its 8 values (4 u32, column order), m16 = their
 * mask bits (bit c = column 16t + c). a[k] = dense columns 2k, 2k+1 (bf16 pairs), the order the
 * tensor-core kernels' mma_piece takes. */
SD_TCX_FN void sd_tcx_expand(const uint32_t v[4], uint32_t m16, const uint32_t *sel, uint32_t a[8])
{
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
    for (int j = 0; j < 4; j++) {
        const uint32_t e = sel[(m16 >> (4 * j)) & 15];
        a[2 * j] = sd_tcx_perm(v[j], 0, e);
        a[2 * j + 1] = sd_tcx_perm(v[j], 0, e >> 16);
    }
}

/* 4:8. A lane's 16 columns are two 8-column groups of exactly 4 values (v[0..1], v[2..3]), but a
 * nibble may hold 0..4 of them, so one permute with a zero source cannot place them. Two do:
 * the first gathers the (at most 2) values a dense u32 needs, starting at value p of its group,
 * from the group's 8 bytes (selector 0x3210 + 0x2222·p: bytes 2p..2p+3); the second places them
 * with zeros (one of 4 selectors, by the u32's 2 mask bits). A 2-word table entry per nibble:
 * word 0 = the two placing selectors (columns 0,1 low, 2,3 high), word 1 = what the nibble adds
 * to p before its high u32 (low half) and after it (high half), pre-multiplied by 0x2222. 32
 * words: the 16 entries fill the 32 banks, conflict-free. A corrupt group (p past 4) permutes
 * garbage bytes, never reads outside its registers. */
SD_TCX_FN int sd_tcx_popc(uint32_t x)
{
#ifdef __CUDA_ARCH__
    return __popc(x);
#else
    return __builtin_popcount(x);
#endif
}

/* Entry i of a table of 2-word entries (word 0 in *w0, word 1 in *w1): on the GPU one 8-byte
 * shared-memory load, not two (the kernels' tables are 8-byte aligned): 4:8 and 8:16 look up one
 * entry per nibble, 16-32 a step and lane. */
SD_TCX_FN void sd_tcx_entry2(const uint32_t *tab, uint32_t i, uint32_t *w0, uint32_t *w1)
{
#ifdef __CUDA_ARCH__
    const uint2 e = reinterpret_cast<const uint2 *>(tab)[i];
    *w0 = e.x, *w1 = e.y;
#else
    *w0 = tab[2 * i], *w1 = tab[2 * i + 1];
#endif
}

/* Placing selector for one dense u32 from its 2 mask bits: w's first value is bytes 0,1, its
 * second 2,3; byte 4 is a zero of the second source. */
SD_TCX_FN uint32_t sd_tcx48_place(uint32_t b2)
{
    return b2 == 3 ? 0x3210u : b2 == 1 ? 0x4410u : b2 == 2 ? 0x1044u : 0x4444u;
}

/* Word `word` (0, 1) of nibble nib's table entry. */
SD_TCX_FN uint32_t sd_tcx48_entry(uint32_t nib, int word)
{
    if (word == 0)
        return sd_tcx48_place(nib & 3) | sd_tcx48_place((nib >> 2) & 3) << 16;
    return 0x2222u * (uint32_t)sd_tcx_popc(nib & 3) | (0x2222u * (uint32_t)sd_tcx_popc(nib & 15)) << 16;
}

/* As sd_tcx_expand, for 4:8 (and any mask whose 8-column groups hold 4 values each). tab: the
 * 32-word table of sd_tcx48_entry (word w of nibble n at 2n + w). */
SD_TCX_FN void sd_tcx48_expand(const uint32_t v[4], uint32_t m16, const uint32_t *tab, uint32_t a[8])
{
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
    for (int grp = 0; grp < 2; grp++) {
        const uint32_t va = v[2 * grp], vb = v[2 * grp + 1];
        uint32_t base = 0x3210u; /* gathers from value 0 of the group */
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
        for (int h = 0; h < 2; h++) {
            const uint32_t nib = (m16 >> (8 * grp + 4 * h)) & 15;
            uint32_t e1, e2;
            sd_tcx_entry2(tab, nib, &e1, &e2);
            const int k = 4 * grp + 2 * h;
            a[k] = sd_tcx_perm(sd_tcx_perm(va, vb, base), 0, e1);
            a[k + 1] = sd_tcx_perm(sd_tcx_perm(va, vb, base + (e2 & 0xffffu)), 0, e1 >> 16);
            base += e2 >> 16;
        }
    }
}

/* 8:16. A lane's 16 columns are one 8:16 group: 8 values (v[0..3], column order), but a dense
 * u32 may need any two consecutive ones, anywhere in the four registers. So the group's 128 bits
 * are a queue: the next dense u32's values are always the low 32 bits of register 0, one permute
 * with a zero source places them (the 4:8 placing selectors), and then the queue shifts right by
 * 16 bits per value that u32 took (funnel shifts in clamp mode: 32 bits moves a whole register).
 * Registers that no later u32 can reach are not shifted: after u32 k the other 7 - k need at most
 * 7 - k registers. Table entry of a nibble: word 0 = the two placing selectors (as 4:8), word 1 =
 * the shifts after its low u32 (low half) and its high u32 (high half). A corrupt group (more
 * than 8 values) shifts zeros in, never reads outside its registers. */
SD_TCX_FN uint32_t sd_tcx_shr(uint32_t lo, uint32_t hi, uint32_t n)
{
#ifdef __CUDA_ARCH__
    return __funnelshift_rc(lo, hi, n);
#else
    return (uint32_t)(((uint64_t)hi << 32 | lo) >> (n < 32 ? n : 32));
#endif
}

SD_TCX_FN uint32_t sd_tcx816_entry(uint32_t nib, int word)
{
    if (word == 0)
        return sd_tcx48_entry(nib, 0);
    return 16u * (uint32_t)sd_tcx_popc(nib & 3) | (16u * (uint32_t)sd_tcx_popc((nib >> 2) & 3)) << 16;
}

/* As sd_tcx_expand, for 8:16 (and any mask whose 16-column groups hold 8 values each). tab: the
 * 32-word table of sd_tcx816_entry. */
SD_TCX_FN void sd_tcx816_expand(const uint32_t v[4], uint32_t m16, const uint32_t *tab, uint32_t a[8])
{
    uint32_t q[4] = {v[0], v[1], v[2], v[3]};
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
    for (int k = 0; k < 8; k++) {
        const uint32_t nib = (m16 >> (4 * (k >> 1))) & 15;
        const int h = 16 * (k & 1);
        uint32_t e1, e2;
        sd_tcx_entry2(tab, nib, &e1, &e2);
        a[k] = sd_tcx_perm(q[0], 0, e1 >> h);
        const uint32_t n = (e2 >> h) & 0xffffu;
        const int live = 7 - k < 4 ? 7 - k : 4;
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
        for (int r = 0; r < live; r++)
            q[r] = sd_tcx_shr(q[r], r + 1 < 4 ? q[r + 1] : 0u, n);
    }
}

/* 16:32. A lane's 16 columns are half a 16:32 group, holding 0-16 of its values, so the layout
 * above cannot load them at a fixed place. Instead lane t owns a whole mask word (cw + t) across
 * the step's two pieces (the K permutation is free as long as A and x share it): piece 0 takes
 * the word's low 16 columns, piece 1 its high 16, and the lane loads the word's 16 values (two
 * 16-byte units, 8 u32) once. The low half's c values are the word's first c, the high half's its
 * last 16 - c: piece 0 consumes the 8-register queue from the front (as 8:16: place from the low
 * 32 bits of q[0], shift right), piece 1 from the back (place from the high 32 bits of q[7],
 * shift left, its columns last first), each on its own copy, so neither moves the other's
 * values: after u32 k at most 7 - k registers can hold what is left (28 funnel shifts a piece).
 * Table: 3 words a nibble (front placing selectors, shifts as 8:16; back placing selectors: a
 * u32's two values are the queue's last two, in column order), 48 words, conflict-free. Any
 * 50% N:M mask with M | 32 holds 16 values a word, so 2:4 to 8:16 masks expand here too. A
 * corrupt word shifts zeros in, never reads outside its registers. */
SD_TCX_FN uint32_t sd_tcx_shl(uint32_t lo, uint32_t hi, uint32_t n)
{
#ifdef __CUDA_ARCH__
    return __funnelshift_lc(lo, hi, n);
#else
    return (uint32_t)((((uint64_t)hi << 32 | lo) << (n < 32 ? n : 32)) >> 32);
#endif
}

/* Back placing selector of one dense u32 from its 2 mask bits: its values are the queue's last
 * (high half of q[7]) and, with both bits, the one before (low half); byte 4 is a zero. */
SD_TCX_FN uint32_t sd_tcx1632_back(uint32_t b2)
{
    return b2 == 3 ? 0x3210u : b2 == 2 ? 0x3244u : b2 == 1 ? 0x4432u : 0x4444u;
}

#define SD_TCX1632_TAB 48 /* words of the 16:32 table: entry word w of nibble n at 3n + w */

SD_TCX_FN uint32_t sd_tcx1632_entry(uint32_t nib, int word)
{
    if (word < 2)
        return sd_tcx816_entry(nib, word);
    return sd_tcx1632_back(nib & 3) | sd_tcx1632_back((nib >> 2) & 3) << 16;
}

/* Piece `piece` (0: the low 16 columns, 1: the high 16) of a lane's word: v = the word's 16 values
 * (8 u32, column order), m32 = its mask, tab = the 48-word table; a[k] = the piece's dense columns
 * 2k, 2k+1, the order mma_piece takes. */
SD_TCX_FN void sd_tcx1632_expand(const uint32_t v[8], uint32_t m32, int piece, const uint32_t *tab,
                                 uint32_t a[8])
{
    uint32_t q[8] = {v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]};
    const uint32_t m16 = piece ? m32 >> 16 : m32 & 0xffffu;
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
    for (int j = 0; j < 8; j++) {
        const int k = piece ? 7 - j : j; /* the back walks its columns last first */
        const uint32_t nib = (m16 >> (4 * (k >> 1))) & 15;
        const int h = 16 * (k & 1);
        const uint32_t n = (tab[3 * nib + 1] >> h) & 0xffffu;
        if (!piece) {
            a[k] = sd_tcx_perm(q[0], 0, tab[3 * nib] >> h);
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
            for (int r = 0; r < 7 - j; r++)
                q[r] = sd_tcx_shr(q[r], q[r + 1], n);
        } else {
            a[k] = sd_tcx_perm(q[7], 0, tab[3 * nib + 2] >> h);
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
            for (int r = 7; r > j; r--)
                q[r] = sd_tcx_shl(q[r - 1], q[r], n);
        }
    }
}

/* The whole-word layout (16:32): lane t's word, its two 16-byte value units (piece s: unit s of
 * the word) and the first x column of its piece s. */
SD_TCX_FN int64_t sd_tcx_w_word(int64_t cw, int t)
{
    return cw + t;
}
SD_TCX_FN int64_t sd_tcx_w_value_unit(int64_t word, int s)
{
    return 2 * word + s;
}
SD_TCX_FN int64_t sd_tcx_w_col(int64_t cw, int s, int t)
{
    return 32 * (cw + t) + 16 * s;
}

/* Where lane t finds its data for piece s (0, 1) of the warp step starting at mask word cw:
 * the index of its 16-byte value load in the row's values (8 bf16 per unit), the mask word, and
 * the shift of its 16 bits in that word. */
SD_TCX_FN int64_t sd_tcx_value_unit(int64_t cw, int s, int t)
{
    return 2 * cw + 4 * s + t;
}
SD_TCX_FN int64_t sd_tcx_mask_word(int64_t cw, int s, int t)
{
    return cw + 2 * s + (t >> 1);
}
SD_TCX_FN int sd_tcx_mask_shift(int t)
{
    return 16 * (t & 1);
}

#endif
