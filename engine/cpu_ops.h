/* cpu_ops: the CPU backend's fp32 math — blocked multithreaded matmul against row-major
 * weights, RMSNorm, RoPE (default and llama3 frequencies, rotate-half layout), SiLU-gating
 * and the dot products attention needs. Same inputs give bit-identical outputs whatever the
 * batch shape or thread count (fixed summation order), which the batching tests rely on. */
#ifndef SD_CPU_OPS_H
#define SD_CPU_OPS_H

#include <stdint.h>

#include "cpu_clone.h"
#include "cpu_pool.h"
#include "model_config.h"

/* Y[t*ldy + r] = sum_c X[t*ldx + c] * W[r*cols + c] (+ bias[r]) for t < T, r < rows.
 * W: [rows, cols] fp32; bias: [rows] or NULL. Parallel over rows. */
void sd_cpu_matmul(sd_cpu_pool *pool, const float *X, int64_t ldx, int T, const float *W, int64_t rows,
                   int64_t cols, const float *bias, float *Y, int64_t ldy);

/* Dot product with the matmul's summation order. */
float sd_cpu_dot(const float *a, const float *b, int64_t n);

/* out[i] = x[i] * rsqrt(mean(x^2) + eps) * w[i] (HF LlamaRMSNorm in fp32); out may be x. */
void sd_cpu_rmsnorm(float *out, const float *x, const float *w, int64_t n, float eps);

/* inv_freq[head_dim/2] as transformers computes it for the config's rope type. */
void sd_cpu_rope_inv_freq(const sd_model_config *cfg, float *inv_freq);

/* Rotates one head vector x[head_dim] in place for position pos (HF rotate_half). */
void sd_cpu_rope(float *x, int head_dim, const float *inv_freq, int32_t pos);

/* gate[i] = silu(gate[i]) * up[i] */
void sd_cpu_swiglu(float *gate, const float *up, int64_t n);

#endif
