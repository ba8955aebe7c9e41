/* cmd_bench: the 'bench' subcommand (not built yet). */
#include <stdio.h>

#include "server/cmd.h"

int sd_cmd_bench(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "sparsed: 'bench' is not available in this build yet\n");
    return 2;
}
