/* cmd_tokenize: the 'tokenize' subcommand (not built yet). */
#include <stdio.h>

#include "server/cmd.h"

int sd_cmd_tokenize(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "sparsed: 'tokenize' is not available in this build yet\n");
    return 2;
}
