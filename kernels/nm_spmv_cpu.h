/* nm_spmv_cpu: CPU reference (and CPU-backend) matrix-vector products on bitmask N:M weights,
 * with fp32 and fp64 accumulation, and their dense bf16 GEMV twins. Single-threaded: callers
 * split rows across threads (each call writes only its own rows of y). */
#ifndef SD_NM_SPMV_CPU_H
#define SD_NM_SPMV_CPU_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* y[b*ldy + r] = sum_c W[r,c] * x[b*ldx + c] for r < rows, b < B; W in bitmask form
 * (values bf16 [rows, cols/2], mask u32 [rows, cols/32]); N:M or unstructured rows. fp32 accum.
 * cols % 32 == 0 and every row keeps at most cols/2 (sd_nm_validate checks this on load). */
void sd_nm_spmv_cpu(const uint16_t *values, const uint32_t *mask, int64_t rows, int64_t cols, const float *x,
                    int64_t ldx, int B, float *y, int64_t ldy);

/* The same without AVX2 (what CPUs without it run; sd_nm_spmv_cpu picks AVX2 where the CPU has
 * it): the same bits, which the tests check. */
void sd_nm_spmv_cpu_portable(const uint16_t *values, const uint32_t *mask, int64_t rows, int64_t cols,
                             const float *x, int64_t ldx, int B, float *y, int64_t ldy);

/* The same with fp64 accumulation and fp64 output: the reference the tests compare against. */
void sd_nm_spmv_cpu_f64(const uint16_t *values, const uint32_t *mask, int64_t rows, int64_t cols,
                        const float *x, int64_t ldx, int B, double *y, int64_t ldy);

/* Dense twin: y[b*ldy + r] = sum_c W[r,c] * x[b*ldx + c], W bf16 [rows, cols] row-major. */
void sd_gemv_bf16_cpu(const uint16_t *w, int64_t rows, int64_t cols, const float *x, int64_t ldx, int B,
                      float *y, int64_t ldy);
void sd_gemv_bf16_cpu_f64(const uint16_t *w, int64_t rows, int64_t cols, const float *x, int64_t ldx, int B,
                          double *y, int64_t ldy);

#ifdef __cplusplus
}
#endif
#endif
