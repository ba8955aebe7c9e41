/* nm_spmv_cpu: scalar bitmask SpMV and dense GEMV on the CPU (fp32 and fp64 accumulation). */
#include "kernels/nm_spmv_cpu.h"

#include "engine/dtype.h"

/* Batches are processed this many at a time so the decoded word stays in registers/L1. */
#define NM_CPU_BTILE 4

/* Decodes one mask word into column offsets and fp32 weights; returns the count. */
static inline int nm_word_decode(uint32_t bits, const uint16_t *v, int32_t *col, float *wt)
{
    int k = 0;
    for (; bits; bits &= bits - 1, k++) {
        col[k] = __builtin_ctz(bits);
        wt[k] = sd_bf16_to_f32(v[k]);
    }
    return k;
}

void sd_nm_spmv_cpu(const uint16_t *values, const uint32_t *mask, int64_t rows, int64_t cols, const float *x,
                    int64_t ldx, int B, float *y, int64_t ldy)
{
    int64_t words = cols / 32;
    for (int64_t r = 0; r < rows; r++) {
        const uint16_t *v = values + r * (cols / 2);
        const uint32_t *mr = mask + r * words;
        for (int b0 = 0; b0 < B; b0 += NM_CPU_BTILE) {
            int nb = B - b0 < NM_CPU_BTILE ? B - b0 : NM_CPU_BTILE;
            float acc[NM_CPU_BTILE] = {0};
            const uint16_t *vw = v;
            for (int64_t w = 0; w < words; w++) {
                int32_t col[32];
                float wt[32];
                int k = nm_word_decode(mr[w], vw, col, wt);
                vw += k;
                for (int b = 0; b < nb; b++) {
                    const float *xb = x + (int64_t)(b0 + b) * ldx + 32 * w;
                    float s = 0.0f;
                    for (int i = 0; i < k; i++)
                        s += wt[i] * xb[col[i]];
                    acc[b] += s;
                }
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
