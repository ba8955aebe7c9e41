/* bench_util: device-side helpers for the kernel benchmark — random bf16 fill, random valid N:M
 * masks, and the read-only stream kernel that measures the bandwidth ceiling. */
#ifndef SD_BENCH_UTIL_H
#define SD_BENCH_UTIL_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* p[i] = bf16 uniform in [-1, 1) from a counter hash of (seed, i). 0 or SD_ECUDA. */
int sd_bench_fill_bf16(uint16_t *p, int64_t n, uint64_t seed, cudaStream_t s);
/* words[i]: a random valid m/2:m mask word (16 bits, every group of m keeps m/2). */
int sd_bench_fill_nm_mask(uint32_t *words, int64_t n, int m, uint64_t seed, cudaStream_t s);
/* Reads n16 16-byte vectors once (all SMs, non-coherent streamed loads) and writes one float per
 * block into sink (>= 65536 floats) so nothing is optimised away. */
int sd_bench_read_launch(const void *p, int64_t n16, float *sink, cudaStream_t s);

#ifdef __cplusplus
}
#endif
#endif
