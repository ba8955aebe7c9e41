/* nm_format: the N:M bitmask weight format (DESIGN.md §3) — pattern names, mask from scores,
 * pack dense -> (values, mask), expand back, and validation with errors naming row/word/group.
 *
 * values: bf16 [rows, cols/2], the kept weights of each row in increasing column order;
 * mask:   u32  [rows, cols/32], bit j of word w set <=> column 32*w + j kept.
 * N:M patterns are always 50% with M | 32 (2:4, 4:8, 8:16, 16:32), so every word holds 16 bits.
 * Unstructured 50% (n = m = 0): each row keeps cols/2 columns, words hold any count. */
#ifndef SD_NM_FORMAT_H
#define SD_NM_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "engine/diag.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Parses "2:4", "4:8", "8:16", "16:32" into (n, m), or "unstructured" into (0, 0).
 * SD_EINVAL (with a message) for anything else, M not dividing 32 or N != M/2. */
int sd_nm_pattern_parse(const char *s, int *ret_n, int *ret_m, sd_diag *d);

/* Writes "n:m" (or "unstructured" for 0:0) into buf; returns the length snprintf gives. */
int sd_nm_pattern_format(int n, int m, char *buf, size_t cap);

/* SD_EINVAL unless (n, m) is a supported pattern (50%, M | 32) or (0, 0) = unstructured. */
int sd_nm_pattern_check(int n, int m, sd_diag *d);

/* Checks a mask [rows, cols/32]: cols % 32 == 0; N:M: every group of m columns keeps exactly n
 * (so every word has 16 bits); unstructured (n = m = 0): every row keeps exactly cols/2.
 * SD_EINVAL for bad arguments, SD_EFORMAT naming row/word/group for a broken mask. */
int sd_nm_validate(const uint32_t *mask, int64_t rows, int64_t cols, int n, int m, sd_diag *d);

/* Top-n of every group of m columns by score, per row (ties: the lower column wins); n = m = 0:
 * the top cols/2 of each row. scores: fp32 [rows, cols]; mask_out: u32 [rows, cols/32]. */
int sd_nm_mask_from_scores(const float *scores, int64_t rows, int64_t cols, int n, int m, uint32_t *mask_out,
                           sd_diag *d);

/* Packs dense bf16 [rows, cols] under keep-mask u32 [rows, cols/32] (each row must keep exactly
 * cols/2 columns) into values bf16 [rows, cols/2] and mask u32 [rows, cols/32] (a copy of keep;
 * mask may alias keep). SD_EINVAL/SD_EFORMAT naming the row on a bad shape or count. */
int sd_nm_pack(const uint16_t *dense, const uint32_t *keep, int64_t rows, int64_t cols, uint16_t *values,
               uint32_t *mask, sd_diag *d);

/* Expands (values, mask) back to dense bf16 [rows, cols] with zeros where pruned. Returns 0, or
 * SD_EFORMAT if a row's mask has more than cols/2 bits (values would be overrun) or cols % 32. */
int sd_nm_expand(const uint16_t *values, const uint32_t *mask, int64_t rows, int64_t cols,
                 uint16_t *dense_out);

#ifdef __cplusplus
}
#endif
#endif
