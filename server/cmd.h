/* cmd: the subcommands of the sparsed binary; each returns the process exit status. */
#ifndef SD_CMD_H
#define SD_CMD_H

int sd_cmd_generate(int argc, char **argv);        /* server/cmd_generate.c */
int sd_cmd_serve(int argc, char **argv);           /* server/cmd_serve.c */
int sd_cmd_bench(int argc, char **argv);           /* server/cmd_bench.c */
int sd_cmd_tokenize(int argc, char **argv);        /* server/cmd_tokenize.c */
int sd_cmd_render_template(int argc, char **argv); /* server/cmd_template.c */
int sd_cmd_prune(int argc, char **argv);           /* server/cmd_prune.c */
int sd_cmd_eval(int argc, char **argv);            /* server/cmd_eval.c */

#endif
