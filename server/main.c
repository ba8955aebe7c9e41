/* main: the sparsed command line — dispatches to the subcommands. */
#include <stdio.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: sparsed <command> [options]\n"
               "commands:\n"
               "  generate   generate text from a prompt (CPU or GPU backend)\n"
               "  serve      run the OpenAI-compatible HTTP daemon\n"
               "  bench      benchmarks (kernels, decode)\n"
               "run 'sparsed <command> --help' for its options\n");
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    fprintf(stderr, "sparsed: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
