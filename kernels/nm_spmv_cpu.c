/* nm_spmv_cpu: scalar bitmask SpMV and dense GEMV on the CPU (fp32 and fp64 accumulation). */
#include "kernels/nm_spmv_cpu.h"

#include <string.h>

#include "engine/dtype.h"

/* Columns expanded at a time: a 4 KB fp32 buffer, small enough for any thread's stack. */
#define NM_CPU_CHUNK 1024
/* Vectors accumulated per pass over a row's chunks. */
#define NM_CPU_BMAX 64

/* Expands words [w0, w0 + nw) of a row into dense fp32 (zeros where pruned); returns the
 * number of values consumed. */
static int64_t nm_expand_chunk(const uint32_t *mr, int64_t w0, int64_t nw, const uint16_t *v, float *wbuf)
{
    memset(wbuf, 0, (size_t)nw * 32 * sizeof *wbuf);
    int64_t k = 0;
    for (int64_t w = 0; w < nw; w++)
        for (uint32_t bits = mr[w0 + w]; bits; bits &= bits - 1)
            wbuf[32 * w + __builtin_ctz(bits)] = sd_bf16_to_f32(v[k++]);
    return k;
}

/* Dense dot product with 8 partial sums, so the compiler vectorises it. n % 32 == 0. */
static float nm_dot(const float *a, const float *x, int64_t n)
{
    float acc[8] = {0};
    for (int64_t c = 0; c < n; c += 8)
        for (int i = 0; i < 8; i++)
            acc[i] += a[c + i] * x[c + i];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/* Expanding a chunk of the row to dense fp32 and taking dense dot products is faster on a CPU
 * than gathering x at each kept column (no vector gathers in x86-64-v2), and the expansion is
 * shared by all B vectors. */
void sd_nm_spmv_cpu(const uint16_t *values, const uint32_t *mask, int64_t rows, int64_t cols, const float *x,
                    int64_t ldx, int B, float *y, int64_t ldy)
{
    int64_t words = cols / 32;
    float wbuf[NM_CPU_CHUNK];
    float acc[NM_CPU_BMAX];
    for (int64_t r = 0; r < rows; r++) {
        const uint32_t *mr = mask + r * words;
        for (int b0 = 0; b0 < B; b0 += NM_CPU_BMAX) {
            int nb = B - b0 < NM_CPU_BMAX ? B - b0 : NM_CPU_BMAX;
            const uint16_t *v = values + r * (cols / 2);
            for (int b = 0; b < nb; b++)
                acc[b] = 0.0f;
            for (int64_t w0 = 0; w0 < words; w0 += NM_CPU_CHUNK / 32) {
                int64_t nw = words - w0 < NM_CPU_CHUNK / 32 ? words - w0 : NM_CPU_CHUNK / 32;
                v += nm_expand_chunk(mr, w0, nw, v, wbuf);
                for (int b = 0; b < nb; b++)
                    acc[b] += nm_dot(wbuf, x + (int64_t)(b0 + b) * ldx + 32 * w0, nw * 32);
            }
            for (int b = 0; b < nb; b++)
                y[(int64_t)(b0 + b) * ldy + r] = acc[b];
        }
    }
}

void sd_nm_spmv_cpu_f64(const uint16_t *values, const uint32_t *mask, int64_t rows, int64_t cols,
                        const float *x, int64_t ldx, int B, double *y, int64_t ldy)
{
    int64_t words = cols / 32;
    for (int64_t r = 0; r < rows; r++) {
        for (int b = 0; b < B; b++) {
            const uint16_t *v = values + r * (cols / 2);
            const float *xb = x + (int64_t)b * ldx;
            double acc = 0.0;
            for (int64_t w = 0; w < words; w++)
                for (uint32_t bits = mask[r * words + w]; bits; bits &= bits - 1)
                    acc += (double)sd_bf16_to_f32(*v++) * (double)xb[32 * w + __builtin_ctz(bits)];
            y[(int64_t)b * ldy + r] = acc;
        }
    }
}

void sd_gemv_bf16_cpu(const uint16_t *w, int64_t rows, int64_t cols, const float *x, int64_t ldx, int B,
                      float *y, int64_t ldy)
{
    for (int64_t r = 0; r < rows; r++) {
        const uint16_t *wr = w + r * cols;
        for (int b = 0; b < B; b++) {
            const float *xb = x + (int64_t)b * ldx;
            float acc[8] = {0}; /* 8 partial sums let the compiler vectorise */
            int64_t c = 0;
            for (; c + 8 <= cols; c += 8)
                for (int i = 0; i < 8; i++)
                    acc[i] += sd_bf16_to_f32(wr[c + i]) * xb[c + i];
            for (; c < cols; c++)
                acc[0] += sd_bf16_to_f32(wr[c]) * xb[c];
            y[(int64_t)b * ldy + r] =
                ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
        }
    }
}

void sd_gemv_bf16_cpu_f64(const uint16_t *w, int64_t rows, int64_t cols, const float *x, int64_t ldx, int B,
                          double *y, int64_t ldy)
{
    for (int64_t r = 0; r < rows; r++)
        for (int b = 0; b < B; b++) {
            double acc = 0.0;
            for (int64_t c = 0; c < cols; c++)
                acc += (double)sd_bf16_to_f32(w[r * cols + c]) * (double)x[(int64_t)b * ldx + c];
            y[(int64_t)b * ldy + r] = acc;
        }
}
