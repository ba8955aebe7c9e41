/* nm_spmv_cpu: bitmask SpMV (AVX2, picked at run time, and a portable path) and dense GEMV on the
 * CPU, fp32 and fp64 accumulation. */
#include "kernels/nm_spmv_cpu.h"

#include <string.h>

#include "engine/dtype.h"

/* Columns expanded at a time: a 4 KB fp32 buffer, small enough for any thread's stack. */
#define NM_CPU_CHUNK 1024
/* Vectors accumulated per pass over a row's chunks. */
#define NM_CPU_BMAX 64

/* Expansion a mask byte (8 columns) at a time: lane j takes the byte's value number
 * popcount(byte & ((1 << j) - 1)) when bit j is set, +0.0 otherwise. Three ways, the same floats:
 * - AVX2 (nm_expand8_avx2, picked at run time): one byte shuffle of the 8 loaded values, copied
 *   into both 128-bit halves, by a 32-byte control from a 256-entry table (8 KB) that puts value
 *   p's two bytes at the top of lane j and zeros elsewhere: the bf16 -> fp32 conversion and the
 *   zeros of the pruned columns come with the shuffle (one broadcast load, one table load, one
 *   vpshufb a byte);
 * - GCC's vector extensions for the baseline build (x86-64-v2): a permute and an and-mask;
 * - scalar, near a row's end (the vector ways read 8 values) and in clang builds off AVX2. */
#define NM_IDX(b, j) ((int32_t)__builtin_popcount((unsigned)(b) & ((1u << (j)) - 1u)))
#define NM_ROW4(R, b) R(b), R(b + 1), R(b + 2), R(b + 3)
#define NM_ROW16(R, b) NM_ROW4(R, b), NM_ROW4(R, b + 4), NM_ROW4(R, b + 8), NM_ROW4(R, b + 12)
#define NM_ROW64(R, b) NM_ROW16(R, b), NM_ROW16(R, b + 16), NM_ROW16(R, b + 32), NM_ROW16(R, b + 48)
#define NM_TABLE(R)                                                                                          \
    {                                                                                                        \
        NM_ROW64(R, 0), NM_ROW64(R, 64), NM_ROW64(R, 128), NM_ROW64(R, 192)                                  \
    }

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define NM_AVX2 1
/* Lane j's 4 bytes of the shuffle control: bf16 value p in the high half, or all zero. */
#define NM_KEPT(b, j) (((b) >> (j)) & 1)
#define NM_CTL(b, j)                                                                                         \
    0x80, 0x80, NM_KEPT(b, j) ? 2 * NM_IDX(b, j) : 0x80, NM_KEPT(b, j) ? 2 * NM_IDX(b, j) + 1 : 0x80
#define NM_CTL_ROW(b)                                                                                        \
    {                                                                                                        \
        NM_CTL(b, 0), NM_CTL(b, 1), NM_CTL(b, 2), NM_CTL(b, 3), NM_CTL(b, 4), NM_CTL(b, 5), NM_CTL(b, 6),    \
            NM_CTL(b, 7)                                                                                     \
    }
static const uint8_t nm_shuffle_ctl[256][32] __attribute__((aligned(32))) = NM_TABLE(NM_CTL_ROW);

__attribute__((target("avx2"), always_inline)) static inline __m256 nm_expand8_avx2(unsigned byte,
                                                                                    const uint16_t *v)
{
    const __m256i src = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)v));
    const __m256i ctl = _mm256_load_si256((const __m256i *)nm_shuffle_ctl[byte]);
    return _mm256_castsi256_ps(_mm256_shuffle_epi8(src, ctl));
}
#else
#define NM_AVX2 0
#endif

#if defined(__GNUC__) && !defined(__clang__)
#define NM_VEC_EXPAND 1
typedef float v8f __attribute__((vector_size(32), aligned(4)));
typedef int32_t v8i __attribute__((vector_size(32), aligned(4)));
typedef uint16_t v8u16 __attribute__((vector_size(16), aligned(2)));

#define NM_LANE_ROW(b)                                                                                       \
    {                                                                                                        \
        NM_IDX(b, 0), NM_IDX(b, 1), NM_IDX(b, 2), NM_IDX(b, 3), NM_IDX(b, 4), NM_IDX(b, 5), NM_IDX(b, 6),    \
            NM_IDX(b, 7)                                                                                     \
    }
static const int32_t nm_lane_idx[256][8] = NM_TABLE(NM_LANE_ROW);

/* The 8 columns of mask byte `byte` from the values at v (8 readable). GCC's variable shuffle
 * (__builtin_shuffle) has no clang spelling outside intrinsics. */
static inline __attribute__((always_inline)) void nm_expand8_vec(unsigned byte, const uint16_t *v, float *out)
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
#endif

static inline __attribute__((always_inline)) void nm_expand8_scalar(unsigned byte, const uint16_t *v,
                                                                    float *out)
{
    memset(out, 0, 8 * sizeof *out);
    for (unsigned b = byte, j = 0; b; b &= b - 1, j++)
        out[__builtin_ctz(b)] = sd_bf16_to_f32(v[j]);
}
#if !defined(NM_VEC_EXPAND)
#define nm_expand8_vec nm_expand8_scalar /* clang: no variable shuffle without intrinsics */
#endif

/* Dense dot product with 8 partial sums, so the compiler vectorises it. n % 32 == 0. */
static inline __attribute__((always_inline)) float nm_dot(const float *a, const float *x, int64_t n)
{
    float acc[8] = {0};
    for (int64_t c = 0; c < n; c += 8)
        for (int i = 0; i < 8; i++)
            acc[i] += a[c + i] * x[c + i];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/* The baseline SpMV: a chunk of each row expanded to dense fp32 (zeros where pruned), then dense
 * dot products: faster on a CPU than gathering x at each kept column (no vector gathers in
 * x86-64-v2), and the expansion is shared by all B vectors. */
static void nm_spmv_base(const uint16_t *values, const uint32_t *mask, int64_t rows, int64_t cols,
                         const float *x, int64_t ldx, int B, float *y, int64_t ldy)
{
    const int64_t words = cols / 32;
    float wbuf[NM_CPU_CHUNK] __attribute__((aligned(32)));
    float acc[NM_CPU_BMAX];
    for (int64_t r = 0; r < rows; r++) {
        const uint32_t *mr = mask + r * words;
        for (int b0 = 0; b0 < B; b0 += NM_CPU_BMAX) {
            const int nb = B - b0 < NM_CPU_BMAX ? B - b0 : NM_CPU_BMAX;
            const uint16_t *v = values + r * (cols / 2), *v_end = v + cols / 2;
            for (int b = 0; b < nb; b++)
                acc[b] = 0.0f;
            for (int64_t w0 = 0; w0 < words; w0 += NM_CPU_CHUNK / 32) {
                const int64_t nw = words - w0 < NM_CPU_CHUNK / 32 ? words - w0 : NM_CPU_CHUNK / 32;
                for (int64_t i = 0; i < 4 * nw; i++) {
                    const unsigned byte = (mr[w0 + i / 4] >> (8 * (i % 4))) & 0xffu;
                    if (v + 8 <= v_end)
                        nm_expand8_vec(byte, v, wbuf + 8 * i);
                    else
                        nm_expand8_scalar(byte, v, wbuf + 8 * i);
                    v += __builtin_popcount(byte);
                }
                for (int b = 0; b < nb; b++)
                    acc[b] += nm_dot(wbuf, x + (int64_t)(b0 + b) * ldx + 32 * w0, nw * 32);
            }
            for (int b = 0; b < nb; b++)
                y[(int64_t)(b0 + b) * ldy + r] = acc[b];
        }
    }
}

#if NM_AVX2
/* The AVX2 SpMV, NM_GROUP vectors at a time: each byte's 8 expanded columns go straight into every
 * vector's 8 partial sums, kept in registers, instead of through a buffer (a store a byte and a
 * load a byte and vector fewer; the expansion, now three instructions, is redone a group). Faster
 * than the buffer at every count measured, 1 to 64 vectors (results/2026-12-05-s32/cpu). The same
 * sums as nm_spmv_base's (nm_dot's lanes and order, a chunk at a time; mul and add apart, as
 * -std=c11 leaves them). G is a constant in each caller below. */
#define NM_GROUP 8
/* GCC leaves a loop of 3 to 8 rounds rolled, and the sums on the stack, unless told */
#define NM_UNROLL_GROUP _Pragma("GCC unroll 8")
__attribute__((target("avx2"), always_inline)) static inline void
nm_rows_avx2_group(const uint16_t *values, const uint32_t *mask, int64_t rows, int64_t cols, const float *x,
                   int64_t ldx, const int G, float *y, int64_t ldy)
{
    const int64_t words = cols / 32;
    for (int64_t r = 0; r < rows; r++) {
        const uint32_t *mr = mask + r * words;
        const uint16_t *v = values + r * (cols / 2), *v_end = v + cols / 2;
        float acc[NM_GROUP] = {0};
        for (int64_t w0 = 0; w0 < words; w0 += NM_CPU_CHUNK / 32) {
            const int64_t nw = words - w0 < NM_CPU_CHUNK / 32 ? words - w0 : NM_CPU_CHUNK / 32;
            __m256 part[NM_GROUP];
            NM_UNROLL_GROUP
            for (int g = 0; g < G; g++)
                part[g] = _mm256_setzero_ps();
            for (int64_t i = 0; i < 4 * nw; i++) {
                const unsigned byte = (mr[w0 + i / 4] >> (8 * (i % 4))) & 0xffu;
                __m256 e;
                if (v + 8 <= v_end) {
                    e = nm_expand8_avx2(byte, v);
                } else {
                    float tail[8];
                    nm_expand8_scalar(byte, v, tail);
                    e = _mm256_loadu_ps(tail);
                }
                const float *xc = x + 32 * w0 + 8 * i;
                NM_UNROLL_GROUP
                for (int g = 0; g < G; g++)
                    part[g] = _mm256_add_ps(part[g], _mm256_mul_ps(e, _mm256_loadu_ps(xc + g * ldx)));
                v += __builtin_popcount(byte);
            }
            NM_UNROLL_GROUP
            for (int g = 0; g < G; g++) {
                float p[8];
                _mm256_storeu_ps(p, part[g]);
                acc[g] += ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
            }
        }
        NM_UNROLL_GROUP
        for (int g = 0; g < G; g++)
            y[g * ldy + r] = acc[g];
    }
}

#define NM_DEFINE_GROUP(G)                                                                                   \
    __attribute__((target("avx2"))) static void nm_spmv_avx2_g##G(                                           \
        const uint16_t *values, const uint32_t *mask, int64_t rows, int64_t cols, const float *x,            \
        int64_t ldx, float *y, int64_t ldy)                                                                  \
    {                                                                                                        \
        nm_rows_avx2_group(values, mask, rows, cols, x, ldx, G, y, ldy);                                     \
    }
NM_DEFINE_GROUP(1)
NM_DEFINE_GROUP(2)
NM_DEFINE_GROUP(3)
NM_DEFINE_GROUP(4)
NM_DEFINE_GROUP(5)
NM_DEFINE_GROUP(6)
NM_DEFINE_GROUP(7)
NM_DEFINE_GROUP(8)

typedef void (*nm_group_fn)(const uint16_t *, const uint32_t *, int64_t, int64_t, const float *, int64_t,
                            float *, int64_t);
static const nm_group_fn nm_spmv_avx2_group[NM_GROUP + 1] = {NULL,
                                                             nm_spmv_avx2_g1,
                                                             nm_spmv_avx2_g2,
                                                             nm_spmv_avx2_g3,
                                                             nm_spmv_avx2_g4,
                                                             nm_spmv_avx2_g5,
                                                             nm_spmv_avx2_g6,
                                                             nm_spmv_avx2_g7,
                                                             nm_spmv_avx2_g8};

#endif

void sd_nm_spmv_cpu(const uint16_t *values, const uint32_t *mask, int64_t rows, int64_t cols, const float *x,
                    int64_t ldx, int B, float *y, int64_t ldy)
{
#if NM_AVX2
    if (__builtin_cpu_supports("avx2")) {
        /* as few groups as NM_GROUP allows, of even sizes: 9 and 10 vectors as 5 + 4 and 5 + 5
         * ran 1.16-1.26x faster than 8 + 1 and 8 + 2 (both stream the weights twice; a small
         * group hides less of a row's latency), 17 as 6 + 6 + 5 1.12-1.14x
         * (results/2026-12-06-s33/cpu/) */
        const int ng = (B + NM_GROUP - 1) / NM_GROUP;
        for (int b0 = 0, k = 0; k < ng; k++) {
            const int g = (B - b0 + (ng - k) - 1) / (ng - k);
            nm_spmv_avx2_group[g](values, mask, rows, cols, x + (int64_t)b0 * ldx, ldx, y + (int64_t)b0 * ldy,
                                  ldy);
            b0 += g;
        }
        return;
    }
#endif
    nm_spmv_base(values, mask, rows, cols, x, ldx, B, y, ldy);
}

void sd_nm_spmv_cpu_portable(const uint16_t *values, const uint32_t *mask, int64_t rows, int64_t cols,
                             const float *x, int64_t ldx, int B, float *y, int64_t ldy)
{
    nm_spmv_base(values, mask, rows, cols, x, ldx, B, y, ldy);
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
