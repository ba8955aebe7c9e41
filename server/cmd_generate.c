/* cmd_generate: the 'generate' subcommand (not built yet). */
#include <stdio.h>

#include "server/cmd.h"

int sd_cmd_generate(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "sparsed: 'generate' is not available in this build yet\n");
    return 2;
}
