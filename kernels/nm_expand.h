/* nm_expand: one bitmask word's dense columns from its values, for the expansion of an N:M linear
 * into a dense bf16 scratch before a cuBLAS GEMM (engine/cuda_ops.cu, prefill chunks above what the
 * bitmask kernels take). Host and device code: the kernel calls this function and
 * tests/kernels/test_nm_expand.c runs it on the CPU against sd_nm_expand, so its bit arithmetic is
 * checked without a GPU.
 *
 * Why not a bit scan: the first kernel read each kept value with its own 2-byte load at an index
 * found by scanning the word (32 predicated loads a word, lanes 32 bytes apart), by estimate ~110 us of the
 * ~240 us that an 8B gate_up (28672 x 4096) spent in expansion plus GEMM at 64 rows
 * (results/2026-12-03-s20/r5/decode.log), from its count of loads (kernels/NOTES.md v29). Here the
 * 16 values arrive in two 16-byte loads and are placed in registers: output pair k (columns 2k,
 * 2k + 1) takes 0, 1 or 2 values off the front of a 256-bit queue, which then moves up by what it
 * gave. */
#ifndef SD_NM_EXPAND_H
#define SD_NM_EXPAND_H

#include <stdint.h>

#include "kernels/nm_tcx.h" /* SD_TCX_FN, sd_tcx_perm */

/* (hi:lo) >> s, low 32 bits, for s = 0..32 (the clamping funnel shift: one SHF on the GPU). */
SD_TCX_FN uint32_t sd_nm_fshr(uint32_t lo, uint32_t hi, uint32_t s)
{
#ifdef __CUDA_ARCH__
    return __funnelshift_rc(lo, hi, s);
#else
    return (uint32_t)((((uint64_t)hi << 32) | lo) >> s);
#endif
}

/* Word m's 32 columns as 16 bf16 pairs (out[k]: column 2k in the low half, 2k + 1 in the high)
 * from its 16 values v (8 u32, first kept column in the low half of v[0]). Any word of 16 set bits
 * (every N:M pattern with M | 32). A corrupt word gives wrong numbers, never a read outside v: past
 * the 16th value the queue holds zeros. No branches (lanes hold different words): pair k's two
 * mask bits b pick a byte permute of the queue's front word (b = 1: its first value in the low
 * half; 2: in the high half; 3: both values; 0: zeros, selector byte 4 being the zero source), and
 * the queue moves up by popcount(b) values, 16 bits each, one funnel shift a word. */
SD_TCX_FN void sd_nm_expand_word(uint32_t m, const uint32_t v[8], uint32_t out[16])
{
    const uint64_t sel = 0x3210104444104444ull; /* the selector of b in bits [16 b, 16 b + 16) */
    uint32_t q[8];
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
    for (int i = 0; i < 8; i++)
        q[i] = v[i];
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
    for (int k = 0; k < 16; k++) {
        const uint32_t b = (m >> (2 * k)) & 3u, sh = 16u * ((b & 1u) + (b >> 1));
        out[k] = sd_tcx_perm(q[0], 0, (uint32_t)(sel >> (16 * b)) & 0xffffu);
        /* The 15 - k pairs still to come take at most 15 - k words of the queue: the words past
         * those stay as they are. */
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
        for (int i = 0; i < 8 && i < 15 - k; i++)
            q[i] = sd_nm_fshr(q[i], i < 7 ? q[i + 1] : 0u, sh);
    }
}

#endif
