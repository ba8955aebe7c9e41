/* cmd_bench: the 'bench' subcommand, a dispatcher on its first argument (the mode). Each mode
 * lives in its own module and takes argv starting at the mode name. */
#include <stdio.h>
#include <string.h>

#include "engine/bench_decode.h"
#include "engine/bench_gemm.h"
#include "engine/bench_prefill.h"
#include "engine/bench_prefix.h"
#include "engine/bench_spec.h"
#include "kernels/bench_kernels.h"
#include "server/cmd.h"

typedef struct bench_mode {
    const char *name, *help;
    int (*run)(int argc, char **argv);
} bench_mode;

static const bench_mode k_modes[] = {
    {"kernels", "N:M SpMV vs dense GEMV vs cuBLAS on model shapes [--quick] [--out FILE] [--reps N]",
     sd_bench_kernels},
    {"decode", "end-to-end decode on synthetic weights: --preset CONFIG.json [--pattern ..] [--batch ..]",
     sd_bench_decode_main},
    {"prefill", "prompt chunks on synthetic weights: --preset CONFIG.json [--pattern ..] [--chunk 64,128,..]",
     sd_bench_prefill_main},
    {"gemm", "a chunk's GEMM per linear, dense vs 2:4 paths: --preset CONFIG.json [--rows 128,256,..]",
     sd_bench_gemm_main},
    {"spec",
     "speculative decoding by prompt lookup vs none on a real model: [--model DIR] [--backend cpu|cuda]",
     sd_bench_spec_main},
    {"prefix", "prefix-cache hit rates, LRU vs the adaptive rule, on synthetic streams: [--pool 500,1000,..]",
     sd_bench_prefix_main},
};

static void bench_usage(void)
{
    fprintf(stderr, "usage: sparsed bench <mode> [options]\nmodes:\n");
    for (size_t i = 0; i < sizeof k_modes / sizeof k_modes[0]; i++)
        fprintf(stderr, "  %-10s %s\n", k_modes[i].name, k_modes[i].help);
}

/* argv[0] is "bench"; argv[1] the mode. */
int sd_cmd_bench(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        bench_usage();
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof k_modes / sizeof k_modes[0]; i++)
        if (!strcmp(argv[1], k_modes[i].name))
            return k_modes[i].run(argc - 1, argv + 1);
    fprintf(stderr, "sparsed bench: unknown mode '%s'\n", argv[1]);
    bench_usage();
    return 2;
}
