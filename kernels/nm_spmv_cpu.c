/* nm_spmv_cpu: scalar bitmask SpMV and dense GEMV on the CPU (fp32 and fp64 accumulation). */
#include "kernels/nm_spmv_cpu.h"

#include <string.h>

#include "engine/cpu_clone.h"
#include "engine/dtype.h"

/* Columns expanded at a time: a 4 KB fp32 buffer, small enough for any thread's stack. */
#define NM_CPU_CHUNK 1024
/* Vectors accumulated per pass over a row's chunks. */
#define NM_CPU_BMAX 64

/* Expansion a mask byte (8 columns) at a time: lane j takes the byte's value number
 * popcount(byte & ((1 << j) - 1)) when bit j is set, +0.0 otherwise (the and-mask below). Vector
 * extensions: one permute and one and under AVX2 (the AVX2 clone of sd_nm_spmv_cpu), a few SSE
 * operations in the baseline one; either writes the same floats as the scalar scatter. GCC's
 * variable shuffle (__builtin_shuffle) has no clang spelling outside intrinsics: clang builds (the
 * fuzzing build) take the scalar path for every byte, with the same results. */
#if defined(__GNUC__) && !defined(__clang__)
#define NM_VEC_EXPAND 1
typedef float v8f __attribute__((vector_size(32), aligned(4)));
typedef int32_t v8i __attribute__((vector_size(32), aligned(4)));
typedef uint16_t v8u16 __attribute__((vector_size(16), aligned(2)));

#define NM_IDX(b, j) ((int32_t)__builtin_popcount((unsigned)(b) & ((1u << (j)) - 1u)))
#define NM_ROW(b)                                                                                            \
    {                                                                                                        \
        NM_IDX(b, 0), NM_IDX(b, 1), NM_IDX(b, 2), NM_IDX(b, 3), NM_IDX(b, 4), NM_IDX(b, 5), NM_IDX(b, 6),    \
            NM_IDX(b, 7)                                                                                     \
    }
#define NM_ROW4(b) NM_ROW(b), NM_ROW(b + 1), NM_ROW(b + 2), NM_ROW(b + 3)
#define NM_ROW16(b) NM_ROW4(b), NM_ROW4(b + 4), NM_ROW4(b + 8), NM_ROW4(b + 12)
#define NM_ROW64(b) NM_ROW16(b), NM_ROW16(b + 16), NM_ROW16(b + 32), NM_ROW16(b + 48)
static const int32_t nm_lane_idx[256][8] = {NM_ROW64(0), NM_ROW64(64), NM_ROW64(128), NM_ROW64(192)};

/* The 8 columns of mask byte `byte` from the values at v (8 readable: the vector path). */
static inline __attribute__((always_inline)) void nm_expand8(unsigned byte, const uint16_t *v, float *out)
{
    v8u16 h;
    v8i idx;
    memcpy(&h, v, sizeof h);
    memcpy(&idx, nm_lane_idx[byte], sizeof idx);
    const v8i bits = __builtin_convertvector(h, v8i) << 16; /* bf16 -> fp32 bits */
    v8f w;
    memcpy(&w, &bits, sizeof w);
    const v8f e = __builtin_shuffle(w, idx);
    const v8i lane = {1, 2, 4, 8, 16, 32, 64, 128};
    v8i eb;
    memcpy(&eb, &e, sizeof eb);
    eb &= (((v8i){0} + (int32_t)byte) & lane) != 0; /* -1 where the column is kept */
    memcpy(out, &eb, sizeof eb);
}
#else
#define NM_VEC_EXPAND 0
#endif

/* Expands words [w0, w0 + nw) of a row into dense fp32 (zeros where pruned); returns the
 * number of values consumed. v_end: the end of the row's values (the vector path reads 8 values
 * a byte, so the row's last bytes go the scalar way). */
static inline __attribute__((always_inline)) int64_t nm_expand_chunk(const uint32_t *mr, int64_t w0,
                                                                     int64_t nw, const uint16_t *v,
                                                                     const uint16_t *v_end, float *wbuf)
{
    int64_t k = 0;
    for (int64_t w = 0; w < nw; w++) {
        const uint32_t bits = mr[w0 + w];
        for (int q = 0; q < 4; q++) {
            const unsigned byte = (bits >> (8 * q)) & 0xffu;
            float *out = wbuf + 32 * w + 8 * q;
            if (NM_VEC_EXPAND && v + k + 8 <= v_end) {
#if NM_VEC_EXPAND
                nm_expand8(byte, v + k, out);
#endif
            } else {
                memset(out, 0, 8 * sizeof *out);
                for (unsigned b = byte, j = 0; b; b &= b - 1, j++)
                    out[__builtin_ctz(b)] = sd_bf16_to_f32(v[k + j]);
            }
            k += __builtin_popcount(byte);
        }
    }
    return k;
}

/* Dense dot product with 8 partial sums, so the compiler vectorises it. n % 32 == 0. */
static inline __attribute__((always_inline)) float nm_dot(const float *a, const float *x, int64_t n)
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
SD_CPU_MULTIVERSION
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
            const uint16_t *v = values + r * (cols / 2), *v_end = v + cols / 2;
            for (int b = 0; b < nb; b++)
                acc[b] = 0.0f;
            for (int64_t w0 = 0; w0 < words; w0 += NM_CPU_CHUNK / 32) {
                int64_t nw = words - w0 < NM_CPU_CHUNK / 32 ? words - w0 : NM_CPU_CHUNK / 32;
                v += nm_expand_chunk(mr, w0, nw, v, v_end, wbuf);
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
