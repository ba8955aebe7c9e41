/* bench_prefill: the 'sparsed bench prefill' mode (CUDA backend on synthetic weights): prompt
 * chunks of T tokens, dense vs N:M bitmask. */
#ifndef SD_BENCH_PREFILL_H
#define SD_BENCH_PREFILL_H

#ifdef __cplusplus
extern "C" {
#endif

/* argv[0] is the mode name ("prefill"); options follow. Returns the process exit status:
 * 0 all runs done, 1 a run failed or no GPU, 2 usage. */
int sd_bench_prefill_main(int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif
