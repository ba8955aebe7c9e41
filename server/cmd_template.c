/* cmd_template: the 'render_template' subcommand (not built yet). */
#include <stdio.h>

#include "server/cmd.h"

int sd_cmd_render_template(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "sparsed: 'render_template' is not available in this build yet\n");
    return 2;
}
