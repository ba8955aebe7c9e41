/* synthetic: what synthetic-weight runs need besides the weights themselves (which the CUDA
 * backend generates on the GPU) — sparsity pattern names and the byte count of a decode
 * step at a config's shapes, the numerator of the bandwidth roofline. */
#ifndef SD_SYNTHETIC_H
#define SD_SYNTHETIC_H

#include <stddef.h>

#include "engine/model_config.h"

#ifdef __cplusplus
extern "C" {
#endif

/* "dense" -> 0/0; "N:M" -> n, m. SD_EINVAL unless 2N == M (50%) and M divides 32 (the
 * bitmask format's fixed 16 kept weights per 32-bit mask word). */
int sd_synth_pattern_parse(const char *s, int *ret_n, int *ret_m);

/* Bytes of weights one decode step must read at cfg's shapes: every linear of every layer
 * (dense bf16 = 2 B/weight; N:M bitmask = 1 B/weight of values + 1/8 B/weight of mask),
 * the lm_head (dense bf16), and the norms. Embedding rows are not counted. */
size_t sd_synth_step_weight_bytes(const sd_model_config *cfg, int n, int m);

/* KV-cache bytes (bf16 K and V, all layers) per cached token. */
size_t sd_synth_kv_bytes_per_token(const sd_model_config *cfg);

#ifdef __cplusplus
}
#endif
#endif
