/* main: the sparsed command line — dispatches to the subcommands. */
#include <stdio.h>
#include <string.h>

#include "server/cmd.h"

static const struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
} cmds[] = {
    {"serve", sd_cmd_serve, "run the OpenAI-compatible HTTP daemon"},
    {"generate", sd_cmd_generate, "generate text from a prompt"},
    {"bench", sd_cmd_bench, "benchmarks: 'bench kernels', 'bench decode'"},
    {"tokenize", sd_cmd_tokenize, "encode/decode text with a model's tokenizer"},
    {"render-template", sd_cmd_render_template, "render a chat template for a list of messages"},
    {"prune", sd_cmd_prune, "calibrate and prune a dense checkpoint to a bitmask checkpoint"},
    {"eval", sd_cmd_eval, "perplexity and KL/agreement of a model against a dense reference"},
};
#define N_CMDS (sizeof cmds / sizeof cmds[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: sparsed <command> [options]\ncommands:\n");
    for (size_t i = 0; i < N_CMDS; i++)
        fprintf(f, "  %-16s %s\n", cmds[i].name, cmds[i].help);
    fprintf(f, "run 'sparsed <command> --help' for its options\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < N_CMDS; i++)
        if (!strcmp(argv[1], cmds[i].name))
            return cmds[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "sparsed: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
