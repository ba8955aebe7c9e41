// nm_chain: one persistent kernel for a chain of batch-1 linears (nm_chain.h says why).
//
// A block per SM, 8 consumer warps and one producer warp. Link l's rows are cut into tiles of
// sd_chain_tile_rows rows (as many as fit a 40 KB slot, at most 8); block b owns tiles
// [T b / nb, T (b + 1) / nb). The producer's one thread walks the block's tiles of every link in
// order and bulk-copies each tile's values, then its mask words, into the next free slot of a
// 4-slot ring; `full[s]` completes when a slot's bytes have landed, `empty[s]` when the
// consumers are done with it. The producer never looks at the links' inputs, so it runs ahead
// by up to the ring (160 KB a block, ~21 MB on 132 SMs: ~5 µs of DRAM at 4.4 TB/s) across every
// boundary.
//
// The consumers take a link's tiles only after its input is complete: thread 0 spins on the
// counter of the link it waits for until every block has counted itself done there (acquire),
// then all 256 stage x from L2 into shared memory (the 2:4 tile in the compacting kernel's
// lane-major layout, nm_spmv_c24.cu) and, tile by tile, warp w takes row w / (8 / rows) and one
// (8 / rows)-th of its words; partial sums meet in shared memory and one thread per row writes
// y. After a link's last tile every consumer fences its stores and the block counts itself done
// (release). A block with no tile of a link only counts itself.
//
// The 2:4 arithmetic is sd_c24_word (nm_c24.h): per nibble one byte permute picks the two x
// values beside the two stored ones. Dense: a lane takes 8 weights and their 8 x at a time.
#include "kernels/nm_chain.h"

#include "kernels/nm_c24.h"

#include <stdlib.h>
#include <string.h>

namespace
{

constexpr int kConsumerWarps = 8;
constexpr int kConsumers = kConsumerWarps * 32;
constexpr int kThreads = kConsumers + 32;
// The ring; -DSD_CHAIN_SLOTS / -DSD_CHAIN_SLOT_KB build variants for measuring (5 x 38 KB fills
// the 227 KB a block may have). A slot holds 8 rows of 2:4 at 4096 columns (36 KB).
#ifndef SD_CHAIN_SLOTS
#define SD_CHAIN_SLOTS 4
#endif
#ifndef SD_CHAIN_SLOT_KB
#define SD_CHAIN_SLOT_KB 40
#endif
constexpr int kSlots = SD_CHAIN_SLOTS;
constexpr int kSlotBytes = SD_CHAIN_SLOT_KB * 1024;
constexpr int kXBytes = 36 * 1024; // 2:4: cols * 2.5 bytes (5 units a word); dense: cols * 2
constexpr int kUnitsPerWord = 5;   // the compacting kernel's staged x: one word per 5 uint4 units
constexpr int kSmem = kSlots * kSlotBytes + kXBytes + 2 * kConsumerWarps * 4 + 2 * kSlots * 8;

struct Link {
    const uint8_t *values, *mask;
    const uint16_t *x;
    float *y;
    int64_t rows, cols, tiles;
    int dense, accumulate, wait, tile_rows;
};

__device__ __forceinline__ uint32_t saddr(const void *p)
{
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint64_t *bar, uint32_t count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(saddr(bar)), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_expect_tx(uint64_t *bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(saddr(bar)), "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t *bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(saddr(bar)) : "memory");
}

__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity)
{
    asm volatile("{\n\t.reg .pred done;\n"
                 "chain_wait:\n\t"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n\t"
                 "@!done bra chain_wait;\n}" ::"r"(saddr(bar)),
                 "r"(parity)
                 : "memory");
}

// bytes (a multiple of 16) from global src to shared dst, counted on bar when they land.
__device__ __forceinline__ void bulk_copy(void *dst, const void *src, uint32_t bytes, uint64_t *bar)
{
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
            saddr(dst)),
        "l"(src), "r"(bytes), "r"(saddr(bar))
        : "memory");
}

__device__ __forceinline__ int ld_acquire(const int *p)
{
    int v;
    asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void red_release(int *p)
{
    asm volatile("red.release.gpu.global.add.s32 [%0], 1;" ::"l"(p) : "memory");
}

// The 256 consumer threads only (the producer warp never joins).
__device__ __forceinline__ void consumers_sync()
{
    asm volatile("bar.sync 1, %0;" ::"n"(kConsumers) : "memory");
}

__device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ void tile_range(const Link &L, int64_t *t0, int64_t *t1)
{
    *t0 = L.tiles * blockIdx.x / gridDim.x;
    *t1 = L.tiles * (blockIdx.x + 1) / gridDim.x;
}

__device__ __forceinline__ int64_t row_value_bytes(const Link &L)
{
    return L.dense ? L.cols * 2 : L.cols;
}

__device__ void produce(const Link *links, int n_links, uint8_t *ring, uint64_t *full, uint64_t *empty)
{
    uint32_t it = 0;
    for (int l = 0; l < n_links; l++) {
        const Link L = links[l];
        const int64_t rv = row_value_bytes(L), rm = L.dense ? 0 : L.cols / 8;
        int64_t t0, t1;
        tile_range(L, &t0, &t1);
        for (int64_t t = t0; t < t1; t++, it++) {
            const int s = it % kSlots;
            if (it >= (uint32_t)kSlots) /* the slot's previous tile consumed */
                mbar_wait(&empty[s], (it / kSlots - 1) & 1);
            const int64_t r0 = t * L.tile_rows;
            const int64_t nr = min((int64_t)L.tile_rows, L.rows - r0);
            const uint32_t vb = (uint32_t)(nr * rv), mb = (uint32_t)(nr * rm);
            uint8_t *dst = ring + (size_t)s * kSlotBytes;
            mbar_expect_tx(&full[s], vb + mb);
            bulk_copy(dst, L.values + r0 * rv, vb, &full[s]);
            if (mb)
                bulk_copy(dst + vb, L.mask + r0 * rm, mb, &full[s]);
        }
    }
}

// x of the link into shared memory, through L2 (another block may have written it in this launch).
__device__ void stage_x(uint4 *xs, const Link &L)
{
    const uint4 *src = reinterpret_cast<const uint4 *>(L.x);
    const int units = (int)(L.cols / 8);
    for (int i = threadIdx.x; i < units; i += kConsumers) {
        const int at = L.dense ? i : (i >> 2) * kUnitsPerWord + (i & 3);
        xs[at] = __ldcg(src + i);
    }
}

__device__ __forceinline__ float bf_lo(uint32_t u)
{
    return __uint_as_float(u << 16);
}

__device__ __forceinline__ float bf_hi(uint32_t u)
{
    return __uint_as_float(u & 0xffff0000u);
}

// This warp's share (words [w0, w1) of row `row`) of a 2:4 tile's dot product.
__device__ float dot_24(const uint8_t *slot, const uint4 *xs, const Link &L, int nr, int row, int64_t w0,
                        int64_t w1)
{
    const int lane = threadIdx.x & 31;
    const int64_t W = L.cols / 32;
    const uint8_t *vrow = slot + row * L.cols;
    const uint32_t *mrow = reinterpret_cast<const uint32_t *>(slot + nr * L.cols) + row * W;
    sd_c24_acc acc = {0.f, 0.f};
#pragma unroll 2
    for (int64_t w = w0 + lane; w < w1; w += 32) {
        const uint4 v0 = *reinterpret_cast<const uint4 *>(vrow + w * 32);
        const uint4 v1 = *reinterpret_cast<const uint4 *>(vrow + w * 32 + 16);
        const uint32_t u[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
        uint32_t xv[16];
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const uint4 q = xs[w * kUnitsPerWord + k];
            xv[4 * k] = q.x, xv[4 * k + 1] = q.y, xv[4 * k + 2] = q.z, xv[4 * k + 3] = q.w;
        }
        acc = sd_c24_word(mrow[w], u, xv, acc);
    }
    return acc.a + acc.b;
}

// The same for a dense tile: 16-byte units [c0, c1) of row `row`.
__device__ float dot_dense(const uint8_t *slot, const uint4 *xs, const Link &L, int row, int64_t c0,
                           int64_t c1)
{
    const int lane = threadIdx.x & 31;
    const uint4 *wrow = reinterpret_cast<const uint4 *>(slot + row * L.cols * 2);
    float a = 0.f, b = 0.f;
#pragma unroll 4
    for (int64_t c = c0 + lane; c < c1; c += 32) {
        const uint4 w = wrow[c], x = xs[c];
        a = fmaf(bf_lo(w.x), bf_lo(x.x), a), b = fmaf(bf_hi(w.x), bf_hi(x.x), b);
        a = fmaf(bf_lo(w.y), bf_lo(x.y), a), b = fmaf(bf_hi(w.y), bf_hi(x.y), b);
        a = fmaf(bf_lo(w.z), bf_lo(x.z), a), b = fmaf(bf_hi(w.z), bf_hi(x.z), b);
        a = fmaf(bf_lo(w.w), bf_lo(x.w), a), b = fmaf(bf_hi(w.w), bf_hi(x.w), b);
    }
    return a + b;
}

// One tile: every warp its share, the shares summed in warp order by one thread per row.
__device__ void consume_tile(const uint8_t *slot, const uint4 *xs, float *part, const Link &L, int64_t r0,
                             int nr)
{
    const int warp = threadIdx.x >> 5, wpr = kConsumerWarps / L.tile_rows;
    const int row = warp / wpr, seg = warp % wpr;
    const int64_t units = L.dense ? L.cols / 8 : L.cols / 32; /* what a lane takes at a time */
    const int64_t u0 = units * seg / wpr, u1 = units * (seg + 1) / wpr;
    float s = 0.f;
    if (row < nr)
        s = L.dense ? dot_dense(slot, xs, L, row, u0, u1) : dot_24(slot, xs, L, nr, row, u0, u1);
    s = warp_sum(s);
    if ((threadIdx.x & 31) == 0)
        part[warp] = s;
    consumers_sync();
    if (threadIdx.x < nr) {
        float t = 0.f;
        for (int k = 0; k < wpr; k++)
            t += part[threadIdx.x * wpr + k];
        float *y = L.y + r0 + threadIdx.x;
        *y = L.accumulate ? *y + t : t;
    }
}

__device__ void consume(const Link *links, int n_links, int *counters, const uint8_t *ring, uint4 *xs,
                        float *part, uint64_t *full, uint64_t *empty)
{
    uint32_t it = 0;
    for (int l = 0; l < n_links; l++) {
        const Link L = links[l];
        int64_t t0, t1;
        tile_range(L, &t0, &t1);
        if (t1 > t0) {
            if (L.wait >= 0) {
                if (threadIdx.x == 0)
                    while (ld_acquire(&counters[L.wait]) < (int)gridDim.x)
                        __nanosleep(32);
                consumers_sync();
            }
            stage_x(xs, L);
            consumers_sync();
            for (int64_t t = t0; t < t1; t++, it++) {
                const int s = it % kSlots;
                mbar_wait(&full[s], (it / kSlots) & 1);
                const int64_t r0 = t * L.tile_rows;
                const int nr = (int)min((int64_t)L.tile_rows, L.rows - r0);
                consume_tile(ring + (size_t)s * kSlotBytes, xs, part + (it & 1) * kConsumerWarps, L, r0, nr);
                if (threadIdx.x == 0) /* every warp is past its reads of the slot (consumers_sync) */
                    mbar_arrive(&empty[s]);
            }
        }
        __threadfence(); /* this thread's y stores, before the block counts itself done */
        consumers_sync();
        if (threadIdx.x == 0)
            red_release(&counters[l]);
    }
}

__global__ void __launch_bounds__(kThreads, 1) chain_kernel(const Link *links, int n_links, int *counters)
{
    extern __shared__ __align__(128) uint8_t smem[];
    uint8_t *ring = smem;
    uint4 *xs = reinterpret_cast<uint4 *>(smem + kSlots * kSlotBytes);
    float *part = reinterpret_cast<float *>(smem + kSlots * kSlotBytes + kXBytes);
    uint64_t *full = reinterpret_cast<uint64_t *>(part + 2 * kConsumerWarps), *empty = full + kSlots;
    if (threadIdx.x == 0) {
        for (int s = 0; s < kSlots; s++)
            mbar_init(&full[s], 1), mbar_init(&empty[s], 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    if (threadIdx.x >= kConsumers) {
        if (threadIdx.x == kConsumers)
            produce(links, n_links, ring, full, empty);
        return;
    }
    consume(links, n_links, counters, ring, xs, part, full, empty);
}

} // namespace

struct sd_chain {
    Link *d_links;
    int *d_counters;
    int n, blocks;
};

extern "C" int sd_chain_tile_rows(const sd_chain_link *k)
{
    const int64_t row = k->dense ? k->cols * 2 : k->cols + k->cols / 8;
    int tr = 8;
    while (tr > 1 && tr * row > kSlotBytes)
        tr /= 2;
    return tr * row <= kSlotBytes ? tr : 0;
}

static int aligned16(const void *p)
{
    return ((uintptr_t)p & 15) == 0;
}

extern "C" int sd_chain_check(const sd_chain_link *links, int n, sd_diag *d)
{
    if (!links || n < 1 || n > SD_CHAIN_MAX_LINKS)
        return sd_diag_set(d, SD_EINVAL, "chain: %d links (1..%d)", n, SD_CHAIN_MAX_LINKS);
    for (int i = 0; i < n; i++) {
        const sd_chain_link *k = &links[i];
        const int64_t max_cols = k->dense ? SD_CHAIN_MAX_COLS_DENSE : SD_CHAIN_MAX_COLS_24;
        if (k->rows < 1 || k->cols < 128 || k->cols % 128 || k->cols > max_cols)
            return sd_diag_set(d, SD_EINVAL,
                               "chain link %d: %lld x %lld (cols a multiple of 128, at most %lld)", i,
                               (long long)k->rows, (long long)k->cols, (long long)max_cols);
        if (!k->values || !k->x || !k->y || (!k->dense && !k->mask))
            return sd_diag_set(d, SD_EINVAL, "chain link %d: a NULL buffer", i);
        if (!aligned16(k->values) || !aligned16(k->x) || (!k->dense && !aligned16(k->mask)))
            return sd_diag_set(d, SD_EINVAL, "chain link %d: values, mask and x must be 16-byte aligned", i);
        if (k->wait < -1 || k->wait >= i)
            return sd_diag_set(d, SD_EINVAL, "chain link %d: waits for link %d (an earlier one, or -1)", i,
                               k->wait);
    }
    return 0;
}

static int chain_cuda(sd_diag *d, cudaError_t e, const char *what)
{
    return e == cudaSuccess ? 0 : sd_diag_set(d, SD_ECUDA, "chain: %s: %s", what, cudaGetErrorString(e));
}

extern "C" int sd_chain_init(sd_chain **ret, const sd_chain_link *links, int n, sd_diag *d)
{
    *ret = NULL;
    int rc = sd_chain_check(links, n, d);
    if (rc)
        return rc;
    int dev = 0, sms = 0, coop = 0, optin = 0;
    if ((rc = chain_cuda(d, cudaGetDevice(&dev), "cudaGetDevice")) ||
        (rc = chain_cuda(d, cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "SM count")) ||
        (rc = chain_cuda(d, cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev), "attribute")) ||
        (rc = chain_cuda(d, cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev),
                         "attribute")))
        return rc;
    if (!coop || optin < kSmem)
        return sd_diag_set(d, SD_ENOTSUP,
                           "chain: needs cooperative launch and %d bytes of shared memory a block", kSmem);
    if ((rc = chain_cuda(
             d, cudaFuncSetAttribute(chain_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem),
             "shared memory limit")))
        return rc;
    Link *h = static_cast<Link *>(calloc((size_t)n, sizeof *h));
    sd_chain *c = static_cast<sd_chain *>(calloc(1, sizeof *c));
    if (!h || !c) {
        free(h), free(c);
        return sd_diag_set(d, SD_ENOMEM, "chain: out of memory");
    }
    for (int i = 0; i < n; i++) {
        const sd_chain_link *k = &links[i];
        Link *L = &h[i];
        L->values = reinterpret_cast<const uint8_t *>(k->values);
        L->mask = reinterpret_cast<const uint8_t *>(k->mask);
        L->x = k->x, L->y = k->y, L->rows = k->rows, L->cols = k->cols;
        L->dense = k->dense != 0, L->accumulate = k->accumulate != 0, L->wait = k->wait;
        L->tile_rows = sd_chain_tile_rows(k);
        L->tiles = (k->rows + L->tile_rows - 1) / L->tile_rows;
    }
    c->n = n, c->blocks = sms;
    rc = chain_cuda(d, cudaMalloc((void **)&c->d_links, (size_t)n * sizeof *h), "cudaMalloc");
    if (!rc)
        rc = chain_cuda(d, cudaMalloc((void **)&c->d_counters, (size_t)n * sizeof(int)), "cudaMalloc");
    if (!rc)
        rc = chain_cuda(d, cudaMemcpy(c->d_links, h, (size_t)n * sizeof *h, cudaMemcpyHostToDevice), "copy");
    free(h);
    if (rc) {
        sd_chain_free(c);
        return rc;
    }
    *ret = c;
    return 0;
}

extern "C" void sd_chain_free(sd_chain *c)
{
    if (!c)
        return;
    cudaFree(c->d_links);
    cudaFree(c->d_counters);
    free(c);
}

extern "C" int sd_chain_blocks(const sd_chain *c)
{
    return c->blocks;
}

extern "C" int sd_chain_launch(sd_chain *c, cudaStream_t s)
{
    if (cudaMemsetAsync(c->d_counters, 0, (size_t)c->n * sizeof(int), s) != cudaSuccess)
        return SD_ECUDA;
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeCooperative;
    at[0].val.cooperative = 1;
    cfg.gridDim = dim3((unsigned)c->blocks);
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = kSmem;
    cfg.stream = s;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    const Link *links = c->d_links;
    return cudaLaunchKernelEx(&cfg, chain_kernel, links, c->n, c->d_counters) == cudaSuccess ? 0 : SD_ECUDA;
}
