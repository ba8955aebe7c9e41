/* cpu_ops: fp32 matmul, RMSNorm, RoPE and SwiGLU for the CPU backend. */
#include "engine/cpu_ops.h"

#include <math.h>
#include <string.h>

/* GCC/Clang generic vectors: SSE pairs on a baseline x86-64, one ymm under AVX2, NEON on
 * arm64. aligned(4) makes unaligned loads through memcpy legal and cheap. */
typedef float v8f __attribute__((vector_size(32), aligned(4)));

/* The helpers below are static and always inlined, so the ABI note about passing 32-byte vectors
 * without AVX does not concern any interface. Always: each must be compiled inside its caller's
 * target clone (SD_CPU_MULTIVERSION, cpu_ops.h). Left out of line, GCC built the kernels once for baseline
 * x86-64, two SSE halves a vector with the accumulators spilled to the stack, and the AVX2 clone of the
 * matmul called that: a step of 5 tokens of models/small took 2.4x a one-token step on 2 cores. */
#define SD_KERN static inline __attribute__((always_inline))
#pragma GCC diagnostic ignored "-Wpsabi"

SD_KERN v8f ld8(const float *p)
{
    v8f v;
    memcpy(&v, p, sizeof v);
    return v;
}

SD_KERN float hsum8(const v8f *p)
{
    v8f v = *p;
    return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
}

/* Every (t, r) dot product below sums lanes c = 8k + j per lane, reduces with hsum8, then
 * adds the scalar tail: kernel shape never changes the result. */
#define MM_TAIL(s, x, w)                                                                                     \
    for (int64_t c = c8; c < cols; c++)                                                                      \
        s += (x)[c] * (w)[c];

SD_KERN void kern_2x4(const float *x0, const float *x1, const float *w, int64_t cols, float *y0, float *y1)
{
    const float *w0 = w, *w1 = w + cols, *w2 = w + 2 * cols, *w3 = w + 3 * cols;
    v8f a00 = {0}, a01 = {0}, a02 = {0}, a03 = {0}, a10 = {0}, a11 = {0}, a12 = {0}, a13 = {0};
    int64_t c8 = cols & ~(int64_t)7;
    for (int64_t c = 0; c < c8; c += 8) {
        v8f p = ld8(x0 + c), q = ld8(x1 + c);
        v8f b0 = ld8(w0 + c), b1 = ld8(w1 + c), b2 = ld8(w2 + c), b3 = ld8(w3 + c);
        a00 += p * b0, a01 += p * b1, a02 += p * b2, a03 += p * b3;
        a10 += q * b0, a11 += q * b1, a12 += q * b2, a13 += q * b3;
    }
    float s[8] = {hsum8(&a00), hsum8(&a01), hsum8(&a02), hsum8(&a03),
                  hsum8(&a10), hsum8(&a11), hsum8(&a12), hsum8(&a13)};
    MM_TAIL(s[0], x0, w0) MM_TAIL(s[1], x0, w1) MM_TAIL(s[2], x0, w2) MM_TAIL(s[3], x0, w3);
    MM_TAIL(s[4], x1, w0) MM_TAIL(s[5], x1, w1) MM_TAIL(s[6], x1, w2) MM_TAIL(s[7], x1, w3);
    memcpy(y0, s, 4 * sizeof(float));
    memcpy(y1, s + 4, 4 * sizeof(float));
}

SD_KERN void kern_1x4(const float *x0, const float *w, int64_t cols, float *y0)
{
    const float *w0 = w, *w1 = w + cols, *w2 = w + 2 * cols, *w3 = w + 3 * cols;
    v8f a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
    int64_t c8 = cols & ~(int64_t)7;
    for (int64_t c = 0; c < c8; c += 8) {
        v8f p = ld8(x0 + c);
        a0 += p * ld8(w0 + c), a1 += p * ld8(w1 + c), a2 += p * ld8(w2 + c), a3 += p * ld8(w3 + c);
    }
    float s[4] = {hsum8(&a0), hsum8(&a1), hsum8(&a2), hsum8(&a3)};
    MM_TAIL(s[0], x0, w0) MM_TAIL(s[1], x0, w1) MM_TAIL(s[2], x0, w2) MM_TAIL(s[3], x0, w3);
    memcpy(y0, s, sizeof s);
}

SD_KERN float kern_1x1(const float *x0, const float *w0, int64_t cols)
{
    v8f a = {0};
    int64_t c8 = cols & ~(int64_t)7;
    for (int64_t c = 0; c < c8; c += 8)
        a += ld8(x0 + c) * ld8(w0 + c);
    float s = hsum8(&a);
    MM_TAIL(s, x0, w0);
    return s;
}

SD_CPU_MULTIVERSION
float sd_cpu_dot(const float *a, const float *b, int64_t n)
{
    return kern_1x1(a, b, n);
}

typedef struct mm_job {
    const float *X, *W, *bias;
    int64_t ldx, ldy, cols;
    int T;
    float *Y;
} mm_job;

/* Tokens per block: the block's activations (MM_TB * cols floats) stay in L2 while the
 * chunk's weight rows stream past them. */
#define MM_TB 16

SD_CPU_MULTIVERSION
static void mm_rows(void *ctx, int64_t r0, int64_t r1, int tid)
{
    const mm_job *j = ctx;
    int64_t cols = j->cols;
    float tmp[4];
    for (int tb = 0; tb < j->T; tb += MM_TB) {
        int te = tb + MM_TB < j->T ? tb + MM_TB : j->T;
        int64_t r = r0;
        for (; r + 4 <= r1; r += 4) {
            const float *w = j->W + r * cols;
            int t = tb;
            for (; t + 2 <= te; t += 2)
                kern_2x4(j->X + t * j->ldx, j->X + (t + 1) * j->ldx, w, cols, j->Y + t * j->ldy + r,
                         j->Y + (t + 1) * j->ldy + r);
            for (; t < te; t++) {
                kern_1x4(j->X + t * j->ldx, w, cols, tmp);
                memcpy(j->Y + t * j->ldy + r, tmp, sizeof tmp);
            }
        }
        for (; r < r1; r++)
            for (int t = tb; t < te; t++)
                j->Y[t * j->ldy + r] = kern_1x1(j->X + t * j->ldx, j->W + r * cols, cols);
    }
    if (j->bias)
        for (int t = 0; t < j->T; t++)
            for (int64_t rr = r0; rr < r1; rr++)
                j->Y[t * j->ldy + rr] += j->bias[rr];
}

void sd_cpu_matmul(sd_cpu_pool *pool, const float *X, int64_t ldx, int T, const float *W, int64_t rows,
                   int64_t cols, const float *bias, float *Y, int64_t ldy)
{
    mm_job j = {X, W, bias, ldx, ldy, cols, T, Y};
    /* chunks of a multiple of 4 rows, small enough to balance, large enough to amortise */
    int nt = sd_cpu_pool_threads(pool);
    int64_t grain = (rows / (4 * nt) + 3) & ~(int64_t)3;
    if (grain > 64)
        grain = 64;
    if (grain < 4)
        grain = 4;
    sd_cpu_pool_run(pool, rows, grain, mm_rows, &j);
}

void sd_cpu_rmsnorm(float *out, const float *x, const float *w, int64_t n, float eps)
{
    float ss = 0;
    for (int64_t i = 0; i < n; i++)
        ss += x[i] * x[i];
    float rs = 1.0f / sqrtf(ss / (float)n + eps);
    for (int64_t i = 0; i < n; i++)
        out[i] = w[i] * (x[i] * rs);
}

void sd_cpu_rope_inv_freq(const sd_model_config *cfg, float *inv_freq)
{
    int half = cfg->head_dim / 2;
    for (int i = 0; i < half; i++) {
        /* torch: 1.0 / (base ** (arange(0, dim, 2).float() / dim)), all in fp32 */
        float e = (float)(2 * i) / (float)cfg->head_dim;
        inv_freq[i] = 1.0f / (float)pow(cfg->rope_theta, (double)e);
    }
    if (cfg->rope_kind != SD_ROPE_LLAMA3)
        return;
    /* transformers' _compute_llama3_parameters */
    double factor = cfg->rope_factor, lo = cfg->rope_low_freq_factor, hi = cfg->rope_high_freq_factor;
    double old_ctx = cfg->rope_orig_max_pos;
    double low_wavelen = old_ctx / lo, high_wavelen = old_ctx / hi;
    for (int i = 0; i < half; i++) {
        double f = inv_freq[i], wavelen = 2 * M_PI / f;
        double scaled = wavelen > low_wavelen ? f / factor : f;
        if (!(wavelen < high_wavelen) && !(wavelen > low_wavelen)) {
            double smooth = (old_ctx / wavelen - lo) / (hi - lo);
            scaled = (1 - smooth) * scaled / factor + smooth * scaled;
        }
        inv_freq[i] = (float)scaled;
    }
}

void sd_cpu_rope(float *x, int head_dim, const float *inv_freq, int32_t pos)
{
    int half = head_dim / 2;
    for (int i = 0; i < half; i++) {
        float ang = inv_freq[i] * (float)pos; /* fp32 product, as HF's inv_freq @ position_ids */
        float c = cosf(ang), s = sinf(ang);
        float a = x[i], b = x[i + half];
        x[i] = a * c - b * s;
        x[i + half] = b * c + a * s;
    }
}

void sd_cpu_swiglu(float *gate, const float *up, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float g = gate[i];
        gate[i] = g / (1.0f + expf(-g)) * up[i];
    }
}
