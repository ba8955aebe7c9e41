/* cmd_serve: the 'serve' subcommand (not built yet). */
#include <stdio.h>

#include "server/cmd.h"

int sd_cmd_serve(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "sparsed: 'serve' is not available in this build yet\n");
    return 2;
}
