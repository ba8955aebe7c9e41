/* sample_radix: the pieces of the radix-select sampler shared by the CUDA kernel
 * (engine/cuda_sample.cu) and its CPU twin (engine/sample_req.c), so both order, weigh and
 * choose alike.
 *
 * Method. sd_sample sorts the candidates (logit descending, id ascending) and walks the sorted
 * prefix: top-k keeps the first k, top-p the shortest prefix whose mass reaches top_p, min-p a
 * prefix too, and the draw the first element whose cumulative mass exceeds u * sum. Each of
 * these asks for "the first element, in sorted order, at which a running sum (of 1 or of p)
 * crosses a target". A radix descent answers that without sorting: every element gets a key
 * whose ascending order is the sorted order — (~orderable(logit) << idbits) | id — and each
 * pass histograms the elements that share the key prefix fixed so far by their next 8 key
 * bits, summing the weight per bucket; the bucket in which the running sum crosses the
 * target fixes 8 more bits (target minus the buckets before it). A bucket with one element
 * ends the descent. At most keybits/8 passes over the row (7 for 152K), usually 2-4.
 * Masses are fixed point (p * 2^sbits, p <= 1, summed exactly in 64-bit integers), so the
 * result does not depend on the order of the additions; the CPU sums floats in double in
 * sorted order, so the two can differ only when u * sum (or top_p * sum) lies within
 * ~vocab * 2^-sbits of a cumulative boundary. */
#ifndef SD_SAMPLE_RADIX_H
#define SD_SAMPLE_RADIX_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define SD_SR_FN static __host__ __device__ __forceinline__
#else
#define SD_SR_FN static inline
#endif

/* A float product rounded on its own: nvcc would otherwise fuse it with a following
 * subtraction into an FMA and round differently from the CPU. */
#ifdef __CUDA_ARCH__
#define SD_SR_MUL(a, b) __fmul_rn((a), (b))
#define SD_SR_SUB(a, b) __fsub_rn((a), (b))
#else
#define SD_SR_MUL(a, b) ((a) * (b))
#define SD_SR_SUB(a, b) ((a) - (b))
#endif

/* Candidates more than this below the best scaled logit are dropped, as sd_sample does. */
#define SD_SR_WINDOW 40.0f
#define SD_SR_DIGIT 8
#define SD_SR_BUCKETS 256

/* Ascending in -x: larger logits get smaller keys. NaN is never asked for. */
SD_SR_FN uint32_t sd_sr_desc(float x)
{
    if (x == 0)
        x = 0.0f; /* -0 == +0 for the sort: the id decides, as on the CPU */
    uint32_t u;
    memcpy(&u, &x, 4);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u); /* ascending in x */
    return ~u;
}

/* Bits for an id below vocab (at least 1). */
SD_SR_FN int sd_sr_idbits(int32_t vocab)
{
    int b = 1;
    while (b < 31 && ((int64_t)1 << b) < (int64_t)vocab)
        b++;
    return b;
}

/* Key width rounded up to whole digits. */
SD_SR_FN int sd_sr_keybits(int idbits)
{
    return (32 + idbits + SD_SR_DIGIT - 1) / SD_SR_DIGIT * SD_SR_DIGIT;
}

/* Fixed-point bits of one probability: vocab * 2^sbits stays below 2^62. */
SD_SR_FN int sd_sr_sbits(int idbits)
{
    int s = 62 - idbits;
    return s > 44 ? 44 : s;
}

SD_SR_FN uint64_t sd_sr_key(float x, int32_t id, int idbits)
{
    return ((uint64_t)sd_sr_desc(x) << idbits) | (uint64_t)(uint32_t)id;
}

/* p in [0, 1] to fixed point (NaN and negatives weigh nothing). */
SD_SR_FN uint64_t sd_sr_weight(float p, int sbits)
{
    if (!(p > 0))
        return 0;
    double w = (double)p * (double)((uint64_t)1 << sbits) + 0.5;
    return (uint64_t)w;
}

/* The target of "running sum >= frac * total" (ge) or "> frac * total" (gt), clamped so that
 * the last element always crosses when total > 0. */
SD_SR_FN uint64_t sd_sr_target(double frac, uint64_t total, int ge)
{
    double t = frac * (double)total;
    if (ge) {
        t = ceil(t);
        return t <= 0 ? 0 : t >= (double)total ? total : (uint64_t)t;
    }
    t = floor(t);
    uint64_t r = t <= 0 ? 0 : t >= (double)total ? total : (uint64_t)t;
    return total > 0 && r >= total ? total - 1 : r;
}

/* Whether a running sum reaching `sum` crosses `target`. */
SD_SR_FN int sd_sr_crosses(uint64_t sum, uint64_t target, int ge)
{
    return ge ? sum >= target : sum > target;
}

/* The first non-empty bucket (ascending) in which the running sum crosses target; *before gets
 * the sum of the buckets ahead of it. -1 when none does. */
SD_SR_FN int sd_sr_pick_bucket(const uint32_t *cnt, const unsigned long long *w, uint64_t target, int ge,
                               uint64_t *before)
{
    uint64_t cum = 0;
    for (int b = 0; b < SD_SR_BUCKETS; b++) {
        if (!cnt[b])
            continue;
        if (sd_sr_crosses(cum + w[b], target, ge)) {
            *before = cum;
            return b;
        }
        cum += w[b];
    }
    return -1;
}

/* Which elements a descent runs over: x = row[i] * scale (raw logits: scale 1, floor -inf),
 * x >= floor (never NaN), key <= limit, and, with minp_on, expf(x - top) >= min_p. */
typedef struct sd_sr_set {
    float scale, floor, top, min_p;
    int minp_on;
    uint64_t limit;
    int idbits, keybits, sbits;
} sd_sr_set;

/* Whether element (x, id) is in the set; *key and *p (expf(x - top), when wanted) are set. */
SD_SR_FN int sd_sr_member(const sd_sr_set *s, float raw, int32_t id, int want_p, float *x_out, uint64_t *key,
                          float *p)
{
    float x = SD_SR_MUL(raw, s->scale);
    *x_out = x;
    if (!(x >= s->floor))
        return 0;
    *key = sd_sr_key(x, id, s->idbits);
    if (*key > s->limit)
        return 0;
    if (want_p || s->minp_on)
        *p = expf(SD_SR_SUB(x, s->top));
    return !s->minp_on || *p >= s->min_p;
}

#endif
