/* bench_decode: the 'sparsed bench decode' mode (CUDA backend on synthetic weights). */
#ifndef SD_BENCH_DECODE_H
#define SD_BENCH_DECODE_H

#ifdef __cplusplus
extern "C" {
#endif

/* argv[0] is the mode name ("decode"); options follow. Returns the process exit status:
 * 0 all runs done, 1 a run failed or no GPU, 2 usage. */
int sd_bench_decode_main(int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif
