/* bench_spec: 'sparsed bench spec' — speculative decoding by prompt lookup against plain
 * decoding on a real model (engine/bench_spec.c). */
#ifndef SD_BENCH_SPEC_H
#define SD_BENCH_SPEC_H

#ifdef __cplusplus
extern "C" {
#endif

/* argv[0] is "spec"; returns the process exit status. */
int sd_bench_spec_main(int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif
