/* bench_gemm: the 'sparsed bench gemm' mode (CUDA): each linear of a preset as a prompt chunk's GEMM,
 * dense cuBLAS against 2:4 expansion + cuBLAS and 2:4 on cuSPARSELt. */
#ifndef SD_BENCH_GEMM_H
#define SD_BENCH_GEMM_H

#ifdef __cplusplus
extern "C" {
#endif

/* argv[0] is the mode name ("gemm"); options follow. Returns the process exit status: 0 every
 * shape timed, 1 a run failed or no GPU, 2 usage (or a build without CUDA). */
int sd_bench_gemm_main(int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif
