// nm_chain: one persistent kernel for a chain of batch-1 linears (nm_chain.h says why).
//
// A block per SM, 8 consumer warps and one producer warp. Link l's rows are cut into groups of 8
// (a row per consumer warp) and its columns into chunks of sd_chain_tile_cols (as wide as 8 rows
// fit a 40 KB slot); a tile is a piece of a group (its rows in this block) by one chunk. A block
// takes an even share of every link's rows (or whole groups: SD_CHAIN_GROUP_SPLIT), or claims
// groups from a counter of the link while any are left (SD_CHAIN_CLAIM).
//
// The producer's one thread walks the block's tiles of every link in order and bulk-copies each
// tile's values, then its mask words (one copy each from packed weights, one a row otherwise),
// into the next free slot of a 4-slot ring, says in the slot's SlotInfo what it holds, and ends
// each link with a marker; `full[s]` completes when a slot's bytes have landed, `empty[s]` when
// every consumer warp is done with it. The producer never looks at the links' inputs, so it runs
// ahead by up to the ring (160 KB a block, ~21 MB on 132 SMs: ~5 µs of DRAM at 4.4 TB/s) across
// every boundary.
//
// The consumers take a link's tiles only after its input is complete: thread 0 spins on the
// counter of the link it waits for until every block has counted itself done there (acquire),
// then all 256 stage x from L2 into shared memory (the 2:4 tile in the compacting kernel's
// lane-major layout, nm_spmv_c24.cu). Warp w owns row w of every tile, sums its chunks in its
// lanes and writes y after a piece's last chunk: no barrier between the warps inside a link.
// After a link's marker every consumer fences its stores and the block counts itself done
// (release).
//
// The 2:4 arithmetic is sd_c24_word (nm_c24.h): per nibble one byte permute picks the two x
// values beside the two stored ones. Dense: a lane takes 8 weights and their 8 x at a time.
#include "kernels/nm_chain.h"

#include "kernels/nm_c24.h"

#include <stdlib.h>
#include <string.h>

namespace
{

#ifndef SD_CHAIN_WARPS
#define SD_CHAIN_WARPS 8
#endif
constexpr int kConsumerWarps = SD_CHAIN_WARPS;
// Warps a row (-DSD_CHAIN_WPR=2: each takes half of every chunk's words; more warps an SM for the
// same 8-row tiles). Rows a tile: one per kWpr warps.
#ifndef SD_CHAIN_WPR
#define SD_CHAIN_WPR 1
#endif
constexpr int kWpr = SD_CHAIN_WPR;
// Words a 2:4 lane keeps in flight (-DSD_CHAIN_UNROLL=4: more loads ahead of the permutes).
#ifndef SD_CHAIN_UNROLL
#define SD_CHAIN_UNROLL 2
#endif
constexpr int kUnroll = SD_CHAIN_UNROLL;
// Words a 2:4 lane keeps in flight (-DSD_CHAIN_UNROLL=4: more loads ahead of the permutes).
#ifndef SD_CHAIN_UNROLL
#define SD_CHAIN_UNROLL 2
#endif
constexpr int kTileRows = kConsumerWarps / kWpr;
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
constexpr int kSmem = kSlots * kSlotBytes + kXBytes + 2 * kSlots * 8 + 2 * kConsumerWarps * 4 + kSlots * 24;

struct Link {
    const uint8_t *values, *mask, *packed;
    const uint16_t *x;
    float *y;
    int64_t rows, cols, groups; /* groups: of kTileRows rows */
    int dense, accumulate, wait;
    int kc, nc; /* chunks: nc of kc columns (the last one what is left) */
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

// This block's rows of the link: an even share of the rows, or (SD_CHAIN_GROUP_SPLIT) of the groups.
__device__ __forceinline__ void row_range(const Link &L, int group_split, int64_t *rb, int64_t *re)
{
    if (group_split) {
        *rb = kTileRows * (L.groups * blockIdx.x / gridDim.x);
        *re = min(L.rows, kTileRows * (L.groups * (blockIdx.x + 1) / gridDim.x));
    } else {
        *rb = L.rows * blockIdx.x / gridDim.x;
        *re = L.rows * (blockIdx.x + 1) / gridDim.x;
    }
}

// A piece: rows [r, r + n) of the group that holds row r (rows [r0, r0 + gn)), within [r, re).
struct Piece {
    int64_t r, r0;
    int n, gn;
};

__device__ __forceinline__ Piece piece_at(const Link &L, int64_t r, int64_t re)
{
    Piece p;
    p.r = r, p.r0 = r / kTileRows * kTileRows;
    p.gn = (int)min((int64_t)kTileRows, L.rows - p.r0);
    p.n = (int)(min(re, p.r0 + p.gn) - r);
    return p;
}

// Bytes of values a column takes (2:4: half a bf16).
__host__ __device__ __forceinline__ int value_bytes(int dense)
{
    return dense ? 2 : 1;
}

// Bytes a row's first `cols` columns take, values and mask words.
__host__ __device__ __forceinline__ int64_t col_bytes(int dense, int64_t cols)
{
    return dense ? 2 * cols : cols + cols / 8;
}

// Where the packed layout (sd_chain_pack) keeps chunk c0 of the group of row r0 (gn rows): the
// group's rows whole, chunk after chunk, each chunk its rows' values then their mask words.
__host__ __device__ __forceinline__ int64_t packed_tile(int dense, int64_t cols, int64_t r0, int gn,
                                                        int64_t c0)
{
    return r0 * col_bytes(dense, cols) + gn * col_bytes(dense, c0);
}

// Rows [p.r, p.r + p.n) of chunk c into a slot: their values, then their mask words.
__device__ __forceinline__ void copy_piece(const Link &L, const Piece &p, int c, uint8_t *dst, uint64_t *bar)
{
    const int vb = value_bytes(L.dense);
    const int64_t c0 = (int64_t)c * L.kc;
    const int cw = (int)min((int64_t)L.kc, L.cols - c0);
    const uint32_t rv = (uint32_t)cw * vb, rm = L.dense ? 0 : (uint32_t)cw / 8;
    mbar_expect_tx(bar, p.n * (rv + rm));
    if (L.packed) { /* two copies: the rows are contiguous in the tile */
        const uint8_t *t = L.packed + packed_tile(L.dense, L.cols, p.r0, p.gn, c0);
        const int i0 = (int)(p.r - p.r0);
        bulk_copy(dst, t + i0 * rv, p.n * rv, bar);
        if (rm)
            bulk_copy(dst + p.n * rv, t + p.gn * rv + i0 * rm, p.n * rm, bar);
        return;
    }
    for (int k = 0; k < p.n; k++) {
        bulk_copy(dst + k * rv, L.values + ((p.r + k) * L.cols + c0) * vb, rv, bar);
        if (rm)
            bulk_copy(dst + p.n * rv + k * rm, L.mask + ((p.r + k) * L.cols + c0) / 8, rm, bar);
    }
}

// What a slot holds, for the consumers: chunk c of rows [r, r + n), or (n == 0) the end of this
// block's share of the link. Written before the slot's arrival (release), read after its wait.
struct SlotInfo {
    long long r;
    int n, c;
    int alone; /* the piece's only chunk in this block: its sums go into y with atomics */
};

// Fills the next slot: waits until the consumers freed it, says what it holds, and copies it (or,
// for an end marker or SD_CHAIN_NO_COPY, only arrives).
__device__ __forceinline__ void emit(const Link &L, const Piece *p, int c, int alone, int flags, uint32_t *it,
                                     uint8_t *ring, SlotInfo *info, uint64_t *full, uint64_t *empty)
{
    const int s = *it % kSlots;
    if (*it >= (uint32_t)kSlots) /* the slot's previous tile consumed */
        mbar_wait(&empty[s], (*it / kSlots - 1) & 1);
    info[s].r = p ? p->r : 0, info[s].n = p ? p->n : 0, info[s].c = c, info[s].alone = alone;
    if (!p || (flags & SD_CHAIN_NO_COPY))
        mbar_arrive(&full[s]);
    else
        copy_piece(L, *p, c, ring + (size_t)s * kSlotBytes, &full[s]);
    (*it)++;
}

// The block's pieces of every link, chunk by chunk, then an end marker per link: its fixed share
// of the rows, or (SD_CHAIN_CLAIM) the 8-row groups it claims from the link's claim counter as long
// as any are left, so that the blocks that stream faster take more of them.
__device__ void produce(const Link *links, int n_links, int flags, int *claims, uint8_t *ring, SlotInfo *info,
                        uint64_t *full, uint64_t *empty)
{
    uint32_t it = 0;
    for (int l = 0; l < n_links; l++) {
        const Link L = links[l];
        if (flags & SD_CHAIN_CLAIM) {
            /* an accumulating link's tiles one by one (their sums meet in y by atomics: the tail
               of a wide link is one tile, not a group's whole row), the others' groups whole */
            const int alone = L.accumulate && L.nc > 1;
            const int64_t units = alone ? L.groups * L.nc : L.groups;
            for (int64_t u; (u = atomicAdd(&claims[l], 1)) < units;) {
                const int64_t g = alone ? u / L.nc : u;
                const Piece p = piece_at(L, g * kTileRows, L.rows);
                if (alone)
                    emit(L, &p, (int)(u % L.nc), 1, flags, &it, ring, info, full, empty);
                else
                    for (int c = 0; c < L.nc; c++)
                        emit(L, &p, c, 0, flags, &it, ring, info, full, empty);
            }
        } else {
            int64_t rb, re;
            row_range(L, flags & SD_CHAIN_GROUP_SPLIT, &rb, &re);
            for (int64_t r = rb; r < re;) {
                const Piece p = piece_at(L, r, re);
                for (int c = 0; c < L.nc; c++)
                    emit(L, &p, c, 0, flags, &it, ring, info, full, empty);
                r += p.n;
            }
        }
        emit(L, NULL, 0, 0, flags, &it, ring, info, full, empty);
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

// Row `row` of a 2:4 tile of cw columns from column c0, against staged x: this lane's share of
// the words of part `seg` (of kWpr).
__device__ float dot_24(const uint8_t *slot, const uint4 *xs, int nr, int row, int seg, int64_t c0, int cw)
{
    const int words = cw / 32, w1 = words * (seg + 1) / kWpr;
    const uint8_t *vrow = slot + row * cw;
    const uint32_t *mrow = reinterpret_cast<const uint32_t *>(slot + nr * cw) + row * words;
    const uint4 *xw = xs + (c0 / 32) * kUnitsPerWord;
    sd_c24_acc acc = {0.f, 0.f};
#pragma unroll kUnroll
    for (int w = words * seg / kWpr + (threadIdx.x & 31); w < w1; w += 32) {
        /* words 4-7 of each 8 read their halves in the other order: a quarter warp's 16-byte loads
           (8 consecutive words) then cover the 32 banks once (in order, words 0 and 4 would share
           banks 0-3) */
        const int sw = (w >> 2) & 1;
        const uint4 *vw = reinterpret_cast<const uint4 *>(vrow + w * 32);
        const uint4 a = vw[sw], b = vw[sw ^ 1];
        const uint4 v0 = sw ? b : a, v1 = sw ? a : b;
        const uint32_t u[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
        uint32_t xv[16];
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const uint4 q = xw[w * kUnitsPerWord + k];
            xv[4 * k] = q.x, xv[4 * k + 1] = q.y, xv[4 * k + 2] = q.z, xv[4 * k + 3] = q.w;
        }
        acc = sd_c24_word(mrow[w], u, xv, acc);
    }
    return acc.a + acc.b;
}

// The same for a dense tile: 16-byte units of 8 weights.
__device__ float dot_dense(const uint8_t *slot, const uint4 *xs, int row, int seg, int64_t c0, int cw)
{
    const int units = cw / 8, u1 = units * (seg + 1) / kWpr;
    const uint4 *wrow = reinterpret_cast<const uint4 *>(slot + row * cw * 2);
    const uint4 *xu = xs + c0 / 8;
    float a = 0.f, b = 0.f;
#pragma unroll 4
    for (int c = units * seg / kWpr + (threadIdx.x & 31); c < u1; c += 32) {
        const uint4 w = wrow[c], x = xu[c];
        a = fmaf(bf_lo(w.x), bf_lo(x.x), a), b = fmaf(bf_hi(w.x), bf_hi(x.x), b);
        a = fmaf(bf_lo(w.y), bf_lo(x.y), a), b = fmaf(bf_hi(w.y), bf_hi(x.y), b);
        a = fmaf(bf_lo(w.z), bf_lo(x.z), a), b = fmaf(bf_hi(w.z), bf_hi(x.z), b);
        a = fmaf(bf_lo(w.w), bf_lo(x.w), a), b = fmaf(bf_hi(w.w), bf_hi(x.w), b);
    }
    return a + b;
}

// One link's pieces on this block, as the producer sends them (slot by slot, up to its end
// marker): row i of a piece is the kWpr warps from kWpr i's, each summing its part of the row over
// the chunks; each warp frees a slot as soon as it is done with it. The parts meet in shared
// memory (`part`, two pieces' worth).
__device__ void consume_link(const Link &L, const uint8_t *ring, const uint4 *xs, const SlotInfo *info,
                             uint64_t *full, uint64_t *empty, float *part, uint32_t *it)
{
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, row = warp / kWpr, seg = warp % kWpr;
    int pn = 0; /* the piece's parity: part's half */
    float s = 0.f;
    for (;; (*it)++) {
        const int slot = *it % kSlots;
        mbar_wait(&full[slot], (*it / kSlots) & 1);
        const SlotInfo in = info[slot];
        if (in.n > 0) {
            const int64_t c0 = (int64_t)in.c * L.kc;
            const int cw = (int)min((int64_t)L.kc, L.cols - c0);
            const uint8_t *p = ring + (size_t)slot * kSlotBytes;
            if (row < in.n)
                s += L.dense ? dot_dense(p, xs, row, seg, c0, cw) : dot_24(p, xs, in.n, row, seg, c0, cw);
        }
        __syncwarp();
        if (lane == 0)
            mbar_arrive(&empty[slot]);
        if (in.n == 0) { /* the end marker */
            (*it)++;
            return;
        }
        if (in.c < L.nc - 1 && !in.alone)
            continue;
        s = warp_sum(s); /* the piece's last chunk: its rows are done */
        if (kWpr > 1) {  /* the row's warps: part of each, then the first sums them in order */
            if (lane == 0)
                part[pn * kConsumerWarps + warp] = s;
            asm volatile("bar.sync %0, %1;" ::"r"(2 + row), "n"(32 * kWpr) : "memory");
            s = 0.f;
            for (int k = 0; k < kWpr; k++)
                s += part[pn * kConsumerWarps + row * kWpr + k];
            pn ^= 1;
        }
        if (row < in.n && seg == 0 && lane == 0) {
            float *y = L.y + in.r + row;
            if (in.alone)
                atomicAdd(y, s);
            else
                *y = L.accumulate ? *y + s : s;
        }
        s = 0.f;
    }
}

__device__ void consume(const Link *links, int n_links, int *counters, const uint8_t *ring, uint4 *xs,
                        const SlotInfo *info, uint64_t *full, uint64_t *empty, float *part)
{
    uint32_t it = 0;
    for (int l = 0; l < n_links; l++) {
        const Link L = links[l];
        if (L.wait >= 0) {
            if (threadIdx.x == 0)
                while (ld_acquire(&counters[L.wait]) < (int)gridDim.x)
                    __nanosleep(32);
            consumers_sync();
        }
        stage_x(xs, L);
        consumers_sync();
        consume_link(L, ring, xs, info, full, empty, part, &it);
        __threadfence();  /* this thread's y stores, before the block counts itself done */
        consumers_sync(); /* also: every warp is done with xs before the next link stages it */
        if (threadIdx.x == 0)
            red_release(&counters[l]);
    }
}

__global__ void __launch_bounds__(kThreads, 1)
    chain_kernel(const Link *links, int n_links, int flags, int *counters, int *claims)
{
    extern __shared__ __align__(128) uint8_t smem[];
    uint8_t *ring = smem;
    uint4 *xs = reinterpret_cast<uint4 *>(smem + kSlots * kSlotBytes);
    uint64_t *full = reinterpret_cast<uint64_t *>(smem + kSlots * kSlotBytes + kXBytes),
             *empty = full + kSlots;
    float *part = reinterpret_cast<float *>(empty + kSlots);
    SlotInfo *info = reinterpret_cast<SlotInfo *>(part + 2 * kConsumerWarps);
    if (threadIdx.x == 0) {
        for (int s = 0; s < kSlots; s++)
            mbar_init(&full[s], 1), mbar_init(&empty[s], kConsumerWarps);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    if (threadIdx.x >= kConsumers) {
        if (threadIdx.x == kConsumers)
            produce(links, n_links, flags, claims, ring, info, full, empty);
        return;
    }
    consume(links, n_links, counters, ring, xs, info, full, empty, part);
}

// sd_chain_pack: a block per row copies each chunk's values and mask words to their place in the
// packed layout (packed_tile), 16 bytes a thread.
__global__ void pack_kernel(const uint4 *values, const uint4 *mask, uint8_t *dst, int64_t rows, int64_t cols,
                            int dense, int kc)
{
    const int64_t r = blockIdx.x, r0 = r / kTileRows * kTileRows;
    const int gn = (int)min((int64_t)kTileRows, rows - r0), i = (int)(r - r0), vb = value_bytes(dense);
    for (int64_t c0 = 0; c0 < cols; c0 += kc) {
        const int cw = (int)min((int64_t)kc, cols - c0);
        const int rv = cw * vb, rm = dense ? 0 : cw / 8;
        uint4 *t = reinterpret_cast<uint4 *>(dst + packed_tile(dense, cols, r0, gn, c0) + i * rv);
        const uint4 *v = values + (r * cols + c0) * vb / 16;
        for (int k = threadIdx.x; k < rv / 16; k += blockDim.x)
            t[k] = v[k];
        uint4 *tm = reinterpret_cast<uint4 *>(dst + packed_tile(dense, cols, r0, gn, c0) + gn * rv + i * rm);
        const uint4 *m = mask + (r * cols + c0) / 8 / 16;
        for (int k = threadIdx.x; k < rm / 16; k += blockDim.x)
            tm[k] = m[k];
    }
}

} // namespace

struct sd_chain {
    Link *d_links;
    int *d_counters;
    int n, blocks, flags;
};

/* The widest multiple of 128 columns whose kTileRows rows (values and mask) fit a slot,
 * evened out over the chunks the row needs. */
extern "C" int sd_chain_tile_cols(const sd_chain_link *k)
{
    const int64_t per_128 = kTileRows * (k->dense ? 256 : 128 + 16); /* bytes of 128 columns */
    const int64_t max = kSlotBytes / per_128 * 128;
    const int64_t nc = (k->cols + max - 1) / max;
    return (int)(((k->cols + nc - 1) / nc + 127) / 128 * 128);
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
        if ((!k->packed && (!k->values || (!k->dense && !k->mask))) || !k->x || !k->y)
            return sd_diag_set(d, SD_EINVAL, "chain link %d: a NULL buffer", i);
        if (!aligned16(k->values) || !aligned16(k->x) || (!k->dense && !aligned16(k->mask)) ||
            !aligned16(k->packed))
            return sd_diag_set(d, SD_EINVAL,
                               "chain link %d: values, mask, packed and x must be 16-byte aligned", i);
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

extern "C" int64_t sd_chain_packed_bytes(const sd_chain_link *k)
{
    return k->rows * col_bytes(k->dense, k->cols);
}

extern "C" int sd_chain_pack(const sd_chain_link *k, void *dst, cudaStream_t s)
{
    if (!k->values || (!k->dense && !k->mask) || !dst || !aligned16(dst) || !aligned16(k->values) ||
        !aligned16(k->mask) || k->rows < 1 || k->rows > INT32_MAX || k->cols < 128 || k->cols % 128)
        return SD_EINVAL;
    pack_kernel<<<(unsigned)k->rows, 128, 0, s>>>(
        reinterpret_cast<const uint4 *>(k->values), reinterpret_cast<const uint4 *>(k->mask),
        static_cast<uint8_t *>(dst), k->rows, k->cols, k->dense != 0, sd_chain_tile_cols(k));
    return cudaGetLastError() == cudaSuccess ? 0 : SD_ECUDA;
}

extern "C" int sd_chain_init(sd_chain **ret, const sd_chain_link *links, int n, int flags, sd_diag *d)
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
        L->packed = reinterpret_cast<const uint8_t *>(k->packed);
        L->x = k->x, L->y = k->y, L->rows = k->rows, L->cols = k->cols;
        L->dense = k->dense != 0, L->accumulate = k->accumulate != 0, L->wait = k->wait;
        L->kc = sd_chain_tile_cols(k);
        L->nc = (int)((k->cols + L->kc - 1) / L->kc);
        L->groups = (k->rows + kTileRows - 1) / kTileRows;
        if ((int64_t)(L->nc - 1) * L->kc >= k->cols) { /* an empty last chunk: not for any shape checked */
            free(h), free(c);
            return sd_diag_set(d, SD_EINVAL, "chain link %d: %lld columns do not chunk", i,
                               (long long)k->cols);
        }
    }
    c->n = n, c->blocks = sms, c->flags = flags;
    rc = chain_cuda(d, cudaMalloc((void **)&c->d_links, (size_t)n * sizeof *h), "cudaMalloc");
    if (!rc)
        rc = chain_cuda(d, cudaMalloc((void **)&c->d_counters, 2 * (size_t)n * sizeof(int)), "cudaMalloc");
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
    if (cudaMemsetAsync(c->d_counters, 0, 2 * (size_t)c->n * sizeof(int), s) != cudaSuccess) /* and claims */
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
    return cudaLaunchKernelEx(&cfg, chain_kernel, links, c->n, c->flags, c->d_counters,
                              c->d_counters + c->n) == cudaSuccess
               ? 0
               : SD_ECUDA;
}
