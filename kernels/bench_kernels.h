/* bench_kernels: the 'sparsed bench kernels' mode — N:M SpMV vs our dense GEMV vs cuBLAS on
 * real model shapes and their TP shards, against measured bandwidth ceilings. */
#ifndef SD_BENCH_KERNELS_H
#define SD_BENCH_KERNELS_H

#ifdef __cplusplus
extern "C" {
#endif

/* argv[0] is "kernels"; options: --quick (a CI-sized subset), --out FILE (markdown table),
 * --reps N. Returns the process exit status (2 on usage errors or a build without CUDA). */
int sd_bench_kernels(int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif
