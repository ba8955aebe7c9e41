/* cuda_cslt: the 2:4 linears of prompt chunks on the sparse tensor cores, through NVIDIA cuSPARSELt.
 *
 * Why: a step of many rows (a prompt chunk) is bound by the tensor cores, not the bytes, and the
 * sparse tensor cores run 2:4 at up to twice the dense rate; the bitmask kernels stop at 64-256 rows
 * and above that the engine expands each bitmask linear for a dense cuBLAS GEMM (kernels/NOTES.md
 * v29). cuSPARSELt keeps its own compressed layout, which it does not document, so each 2:4 linear
 * gets a second copy in that layout (about 1.125 bytes a weight), made once at load time from the
 * bitmask expanded into a dense scratch; the bitmask stays for decode.
 *
 * The library is loaded at run time (dlopen), so sparsed builds and runs without it: it comes with
 * PyTorch's CUDA wheels (the PyPI package nvidia-cusparselt-cu13). The build compiles this module
 * when it finds cusparseLt.h there (Makefile CSLT_DIR); the library file is $SD_CUSPARSELT_LIB, else
 * the one beside the header the build used, else libcusparseLt.so.0 on the loader's path. It must
 * be the major.minor version the build saw (the library's enums and opaque sizes change between
 * versions). */
#ifndef SD_CUDA_CSLT_H
#define SD_CUDA_CSLT_H

#include <stddef.h>
#include <stdint.h>

#include "engine/diag.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sd_cslt sd_cslt;

/* 1 if this build compiled the module (cusparseLt.h was found), else 0. */
int sd_cslt_built(void);

/* Loads the library without touching a GPU and writes "0.8.0 (path)" into version[n]. SD_ENOTSUP
 * when the build has no cuSPARSELt; SD_ENOTFOUND when no library loads or one lacks a symbol;
 * SD_ENOTSUP when its version is not the build's. */
int sd_cslt_probe(char *version, size_t n, sd_diag *d);

/* Loads the library and creates its handle on the current CUDA device. search: at each plan's first
 * use, cusparseLtMatmulSearch times the library's algorithm configs and keeps the fastest (slower
 * first uses); 0: the default config. */
int sd_cslt_open(sd_cslt **ret, int search, sd_diag *d);
void sd_cslt_free(sd_cslt *c);

/* Rows the operands of sd_cslt_matmul must hold for T rows: T rounded up to a multiple of
 * SD_CSLT_ROW_STEP. A plan serves one row count, so rows are padded to few counts. */
#define SD_CSLT_ROW_STEP 64
int sd_cslt_pad_rows(int T);

/* Compresses the dense bf16 weight w [rows, cols] (device memory, row-major, at most 2 of every 4
 * consecutive columns non-zero) into cuSPARSELt's layout and files it under `key` (the caller's
 * handle for this linear; one copy per key). Checks the 2:4 structure on the GPU first: a dense
 * matrix that breaks it is an SD_EINVAL. rows, cols: multiples of 64. Synchronises st. */
int sd_cslt_add(sd_cslt *c, const void *key, const void *w, int64_t rows, int64_t cols, void *stream,
                sd_diag *d);
/* 1 if `key` has a compressed copy. */
int sd_cslt_has(const sd_cslt *c, const void *key);
/* "0.8.0 (path)": the version and file of the library c loaded. */
const char *sd_cslt_version(const sd_cslt *c);
/* Device bytes the compressed copies take, and how many there are. */
size_t sd_cslt_bytes(const sd_cslt *c, int *count);

/* 1 if sd_cslt_matmul of T rows for key can run inside a graph capture: an eager call of as many
 * padded rows has made (and, with search, searched) its plan and sized the buffers it uses. */
int sd_cslt_ready(const sd_cslt *c, const void *key, int T);

/* y [T, rows] fp32 = x [T, cols] bf16 (row-major, ld cols) times W^T for the weight filed under key;
 * with acc, y += x W^T. cuSPARSELt gives bf16 inputs a bf16 product only, so the product is rounded
 * to bf16 (as a bf16 model's linear outputs are) and a pass of ours writes or adds it into y. x must
 * hold sd_cslt_pad_rows(T) rows (the rows past T are multiplied too, into a buffer of the module's,
 * and dropped); x and y 16-byte aligned. The first use of a (shape, padded rows) creates its plan
 * (host work and, where the workspace or the product buffer grows, a device allocation): inside a
 * graph capture only what sd_cslt_ready allows runs (else SD_EINVAL). Buffers a captured graph uses
 * stay allocated until sd_cslt_free. */
int sd_cslt_matmul(sd_cslt *c, const void *key, const void *x, float *y, int T, int acc, void *stream,
                   sd_diag *d);

#ifdef __cplusplus
}
#endif

#endif
