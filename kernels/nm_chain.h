/* nm_chain: a chain of batch-1 linears (dense bf16, or 2:4 bitmask) run by one persistent kernel
 * that keeps the weights streaming across the links' boundaries (kernels/NOTES.md v40).
 *
 * Why: the batch-1 decode step spends ~0.67 ms (H200, 8B) beyond the time of its bytes at kernel
 * boundaries, where each linear ramps up and drains and DRAM idles between them. Here one block
 * per SM owns a fixed share of every link's rows; one thread of it streams those rows, link after
 * link, into a ring of shared-memory slots with bulk copies (cp.async.bulk, completing on
 * mbarriers), whether or not the link's input is ready yet, while the block's other warps wait
 * for the input (a counter the link it depends on raises, one count per block), stage it, and
 * consume the slots. So a boundary costs the counter's round trip, and DRAM keeps filling the
 * ring through it.
 *
 * A measuring instrument first (tools/gpu/chain_bench.c times it against the tuned kernels in a
 * graph): the engine does not use it. Needs compute capability 9.0 and a cooperative launch (all
 * blocks resident). Usable from C; SD_HAVE_CUDA builds only. */
#ifndef SD_NM_CHAIN_H
#define SD_NM_CHAIN_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "engine/diag.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sd_chain_link {
    int dense;              /* 1: values is W, bf16 [rows, cols]; 0: 2:4 bitmask values + mask */
    int64_t rows, cols;     /* cols % 128 == 0, cols <= SD_CHAIN_MAX_COLS_24 (2:4) / _DENSE */
    const uint16_t *values; /* bf16 [rows, cols/2] (dense: [rows, cols]); 16-byte aligned */
    const uint32_t *mask;   /* u32 [rows, cols/32], valid 2:4 words; 16-byte aligned; dense: unused */
    const void *packed;     /* optional: the weights as sd_chain_pack lays them out (each tile's rows
                               contiguous: one bulk copy for the values, one for the mask words,
                               instead of one per row each); values and mask are then not read */
    const uint16_t *x;      /* bf16 [cols], 16-byte aligned */
    float *y;               /* fp32 [rows] */
    int accumulate;         /* 1: y += W x; 0: y = W x */
    int wait;               /* x is complete once link `wait` (< this link) is: this link reads x
                               only after every block finished that link; -1: x is ready at launch */
} sd_chain_link;

#define SD_CHAIN_MAX_COLS_24 14720
#define SD_CHAIN_MAX_COLS_DENSE 18432
#define SD_CHAIN_MAX_LINKS 4096

typedef struct sd_chain sd_chain;

/* Checks the links (SD_EINVAL with the first fault in d: a link's shape, alignment or wait);
 * needs no GPU. */
int sd_chain_check(const sd_chain_link *links, int n, sd_diag *d);
/* Bytes of a link's weights in the packed layout, and the kernel that writes it from values and
 * mask (on s; dst 16-byte aligned). 0, SD_EINVAL or SD_ECUDA. */
int64_t sd_chain_packed_bytes(const sd_chain_link *link);
int sd_chain_pack(const sd_chain_link *link, void *dst, cudaStream_t s);

/* How a link's rows are shared among the blocks: evenly (the default; a block's first and last
 * tiles may hold fewer than 8 rows), or SD_CHAIN_GROUP_SPLIT: whole 8-row groups (r1-r2's way). */
#define SD_CHAIN_GROUP_SPLIT 1
/* Or claimed as the blocks go: each block's producer takes the next 8-row group from a counter
 * of the link while any is left, so that a block that streams faster takes more; an accumulating
 * link of several chunks a row is claimed a tile (8 rows by a chunk) at a time, its sums added
 * into y with atomics (so in no fixed order). */
#define SD_CHAIN_CLAIM 4
/* For measuring only: no weights copied (the consumers compute on whatever the ring holds, and
 * the outputs are garbage): how fast the consumers alone are. */
#define SD_CHAIN_NO_COPY 2
/* Checks, then copies the links' table to the device for the current device's SMs. SD_EINVAL,
 * SD_ENOMEM, SD_ENOTSUP (no cooperative launch or too little shared memory), SD_ECUDA. */
int sd_chain_init(sd_chain **ret, const sd_chain_link *links, int n, int flags, sd_diag *d);
void sd_chain_free(sd_chain *c);
/* Zeroes the chain's counters and launches it on s (capturable in a graph). 0 or SD_ECUDA. */
int sd_chain_launch(sd_chain *c, cudaStream_t s);
/* Blocks of a launch (the device's SMs), and the columns of a link's tile (a tile: 8 rows). */
int sd_chain_blocks(const sd_chain *c);
int sd_chain_tile_cols(const sd_chain_link *link);

#ifdef __cplusplus
}
#endif

#endif
