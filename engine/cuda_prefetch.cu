/* cuda_prefetch: L2 prefetch of the next linear's weights while latency-bound kernels run.
 *
 * At batch 1 a decode step is ~70% linears that stream weights at near the DRAM rate and ~30%
 * kernels that barely touch DRAM (RMSNorm, attention over a short context, SwiGLU) and the
 * ramp-up / tail of each linear. In those stretches the DRAM idles. A prefetch kernel placed
 * right after a linear in the step's chain issues `cp.async.bulk.prefetch.L2` for (a prefix of)
 * the next linear's weights, so their bytes stream into L2 while the small kernels run, and the
 * next linear reads them from L2.
 *
 * The kernel reads and writes nothing an earlier kernel writes, so it lets its dependant start
 * at once (pdl_trigger before pdl_wait, unlike the other step kernels); it still waits for its
 * predecessor before it exits, because the next kernel's pdl_wait only covers this grid. Mode
 * "after" issues the prefetches after that wait (they then overlap only the small kernels, not
 * the previous linear's tail). */
#include "engine/cuda_impl.cuh"
#include "kernels/pdl.cuh"

using sd_pdl::pdl_trigger;
using sd_pdl::pdl_wait;
using sd_pdl::sd_launch;

/* Each lane prefetches one chunk of each range: chunk bytes are multiples of 16, as the
 * instruction requires; a tail under 16 bytes is left out. */
static __device__ void prefetch_range(const char *p, size_t n, size_t chunk)
{
    size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * chunk;
    if (!p || i >= n)
        return;
    size_t len = n - i < chunk ? (n - i) & ~(size_t)15 : chunk;
    if (len)
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p + i), "r"((unsigned)len) : "memory");
}

static __global__ void l2_prefetch_kernel(const char *a, size_t na, const char *b, size_t nb, size_t ca,
                                          size_t cb, int after)
{
    if (!after) {
        prefetch_range(a, na, ca);
        prefetch_range(b, nb, cb);
    }
    pdl_trigger();
    pdl_wait();
    if (after) {
        prefetch_range(a, na, ca);
        prefetch_range(b, nb, cb);
    }
}

/* Bytes per lane so that `lanes` lanes cover n: a multiple of 256 (whole L2 sectors' lines). */
static size_t chunk_for(size_t n, size_t lanes)
{
    size_t c = (n + lanes - 1) / lanes;
    return (c + 255) & ~(size_t)255;
}

int sd__cu_l2_prefetch(const sd_cu_linear *L, size_t budget, int after, int sms, int pdl, cudaStream_t st,
                       sd_diag *d)
{
    if (!budget || !L)
        return 0;
    const char *a, *b = NULL;
    size_t na, nb = 0;
    if (L->bitmask) {
        a = (const char *)L->values;
        na = (size_t)L->rows * (size_t)(L->cols / 2) * 2;
        b = (const char *)L->mask;
        nb = (size_t)L->rows * (size_t)(L->cols / 32) * 4;
    } else {
        a = (const char *)L->w;
        na = (size_t)L->rows * (size_t)L->cols * 2;
    }
    if (na + nb > budget) { /* the same prefix share of each array: what the first blocks read */
        double f = (double)budget / (double)(na + nb);
        na = (size_t)(na * f) & ~(size_t)255;
        nb = (size_t)(nb * f) & ~(size_t)255;
    }
    int blocks = sms > 0 ? sms : 132;
    size_t lanes = (size_t)blocks * 32;
    SD_CU(d, sd_launch(l2_prefetch_kernel, dim3(blocks), dim3(32), 0, st, pdl, a, na, b, nb, chunk_for(na, lanes),
                       chunk_for(nb, lanes), after));
    return 0;
}
