/* bench_prefix: 'sparsed bench prefix' (engine/bench_prefix.h). Each stream runs at each pool size
 * once under each policy, on the same requests; no model and no timing, so the numbers are the
 * same on every machine. */
#include "engine/bench_prefix.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "engine/bench_common.h"
#include "engine/prefix.h"
#include "engine/prefix_sim.h"

#define BP_MAX_POOLS 16

static void usage(FILE *f)
{
    fprintf(f, "usage: sparsed bench prefix [--stream NAME|all] [--pool 500,1000,2000] [--requests 2000]\n"
               "       [--running 4] [--block-size 16] [--seed 1] [--out FILE.md]\n"
               "streams:");
    for (int i = 0; sd_prefix_sim_streams[i]; i++)
        fprintf(f, " %s", sd_prefix_sim_streams[i]);
    fprintf(f, "\n");
}

static void row(FILE *f, const sd_prefix_sim_opts *o, const sd_prefix_sim_result *lru,
                const sd_prefix_sim_result *ad)
{
    fprintf(f, "| %s | %d | %.1f%% | %.1f%% | %+.1f | %llu / %llu | %llu | %d / %d |\n", o->stream, o->pool,
            100 * lru->hit_rate, 100 * ad->hit_rate, 100 * (ad->hit_rate - lru->hit_rate),
            (unsigned long long)lru->evicted, (unsigned long long)ad->evicted, (unsigned long long)ad->cold,
            lru->skipped, ad->skipped);
}

static int run_stream(FILE *out, sd_prefix_sim_opts *o, const int *pools, int n_pools)
{
    for (int i = 0; i < n_pools; i++) {
        o->pool = pools[i];
        sd_prefix_sim_result lru, ad;
        sd_diag d = {0};
        if (sd_prefix_sim_run(o, SD_PREFIX_LRU, &lru, &d) ||
            sd_prefix_sim_run(o, SD_PREFIX_ADAPTIVE, &ad, &d)) {
            fprintf(stderr, "sparsed bench prefix: %s\n", d.msg);
            return 1;
        }
        row(stdout, o, &lru, &ad);
        if (out)
            row(out, o, &lru, &ad);
    }
    return 0;
}

static void head(FILE *f, const sd_prefix_sim_opts *o, int argc, char **argv)
{
    char when[64];
    time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    fprintf(f, "## prefix cache: hit rate, LRU against the adaptive rule\n\n- date: %s\n- command: `sparsed",
            when);
    for (int i = 0; i < argc; i++)
        fprintf(f, " %s%s", i == 0 ? "bench " : "", argv[i]);
    fprintf(
        f,
        "`\n- %d requests a stream, %d running at once, blocks of %d tokens, seed %llu; hit rate = prompt "
        "tokens found cached / prompt tokens looked up (engine/prefix_sim.h)\n\n",
        o->requests, o->running, o->block_size, (unsigned long long)o->seed);
    fprintf(f, "| stream | pool blocks | LRU hits | adaptive hits | gain (points) | evicted LRU / adaptive | "
               "entered cold | skipped LRU / adaptive |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | "
               "---: |\n");
}

int sd_bench_prefix_main(int argc, char **argv)
{
    sd_prefix_sim_opts o;
    sd_prefix_sim_defaults(&o);
    const char *stream = "all", *pool_list = "500,1000,2000", *out_path = NULL;
    int seed = 1;
    const sd_bench_opt opts[] = {
        {"--stream", SD_BENCH_STR, &stream},
        {"--pool", SD_BENCH_STR, &pool_list},
        {"--requests", SD_BENCH_INT, &o.requests},
        {"--running", SD_BENCH_INT, &o.running},
        {"--block-size", SD_BENCH_INT, &o.block_size},
        {"--seed", SD_BENCH_INT, &seed},
        {"--out", SD_BENCH_STR, &out_path},
    };
    int rc = sd_bench_parse_opts(argc, argv, opts, (int)(sizeof opts / sizeof opts[0]));
    if (rc) {
        usage(rc > 0 ? stdout : stderr);
        return rc > 0 ? 0 : 2;
    }
    o.seed = (uint64_t)seed;
    int pools[BP_MAX_POOLS];
    int n_pools = sd_bench_parse_ints(pool_list, pools, BP_MAX_POOLS, 1 << 24);
    if (n_pools < 0) {
        fprintf(stderr, "sparsed bench prefix: --pool wants a list of block counts\n");
        return 2;
    }
    int known = !strcmp(stream, "all");
    for (int i = 0; sd_prefix_sim_streams[i]; i++)
        known |= !strcmp(stream, sd_prefix_sim_streams[i]);
    if (!known) {
        fprintf(stderr, "sparsed bench prefix: unknown stream '%s'\n", stream);
        usage(stderr);
        return 2;
    }
    FILE *out = NULL;
    if (out_path && !(out = fopen(out_path, "w"))) {
        fprintf(stderr, "sparsed bench prefix: cannot write %s\n", out_path);
        return 1;
    }
    head(stdout, &o, argc, argv);
    if (out)
        head(out, &o, argc, argv);
    rc = 0;
    for (int i = 0; sd_prefix_sim_streams[i] && rc == 0; i++) {
        if (strcmp(stream, "all") && strcmp(stream, sd_prefix_sim_streams[i]))
            continue;
        o.stream = sd_prefix_sim_streams[i];
        rc = run_stream(out, &o, pools, n_pools);
    }
    if (out && fclose(out) != 0 && rc == 0) {
        fprintf(stderr, "sparsed bench prefix: cannot write %s\n", out_path);
        rc = 1;
    }
    return rc;
}
