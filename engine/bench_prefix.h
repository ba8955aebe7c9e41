/* bench_prefix: 'sparsed bench prefix' — the prefix cache's hit rate on synthetic request streams,
 * least-recently-used insertion beside the adaptive rule the server runs (engine/prefix_sim.h). */
#ifndef SD_BENCH_PREFIX_H
#define SD_BENCH_PREFIX_H

#ifdef __cplusplus
extern "C" {
#endif

/* argv[0] is "prefix"; returns the process exit status. */
int sd_bench_prefix_main(int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif
