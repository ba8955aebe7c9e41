/* jinja: a Jinja2 template interpreter for the subset chat templates use, rendering byte for
 * byte what Python jinja2 renders under transformers' settings (sandboxed, trim_blocks,
 * lstrip_blocks, autoescape off, raise_exception/strftime_now globals, loop controls).
 *
 * A parsed template is immutable and may be rendered from several threads at once; each
 * render owns its own memory arena. Template input is untrusted: syntax errors, runtime
 * errors, and the output, memory, step and nesting limits all come back as error codes with
 * a message naming the line; nothing aborts. */
#ifndef SD_JINJA_H
#define SD_JINJA_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "diag.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sd_jinja_tmpl sd_jinja_tmpl;

/* Lexer options; sd_jinja_parse with NULL options uses transformers' (trim_blocks and
 * lstrip_blocks on, the template's single trailing newline dropped). */
typedef struct sd_jinja_opts {
    int trim_blocks;           /* drop the first newline after a block or comment tag */
    int lstrip_blocks;         /* strip blanks before a block or comment tag on its own line */
    int keep_trailing_newline; /* keep the source's final newline */
} sd_jinja_opts;

/* Render limits; NULL uses the defaults (sd_jinja_limits_default). */
typedef struct sd_jinja_limits {
    size_t max_output;  /* bytes of rendered text */
    size_t max_memory;  /* bytes of the render's arena (values, strings) */
    uint64_t max_steps; /* evaluated nodes (bounds loops) */
    int max_depth;      /* nesting of macro calls */
} sd_jinja_limits;

sd_jinja_limits sd_jinja_limits_default(void);

/* Parses `src` (UTF-8, `len` bytes). Syntax errors are SD_EFORMAT with "line N: ...".
 * On success *ret owns a copy of everything it needs; free with sd_jinja_free. */
int sd_jinja_parse(sd_jinja_tmpl **ret, const char *src, size_t len, const sd_jinja_opts *opts, sd_diag *d);
void sd_jinja_free(sd_jinja_tmpl *t);

/* Renders with the variables of the JSON object `vars` (may be NULL). Objects keep their key
 * order; JSON integers stay integers. *ret (malloc'd, NUL-terminated, caller frees) and
 * *ret_len are set only on success. raise_exception(msg) gives SD_EINVAL with msg; other
 * template errors give SD_EINVAL (runtime) or SD_EFULL (a limit), with the line. */
int sd_jinja_render(const sd_jinja_tmpl *t, const json_t *vars, const sd_jinja_limits *lim, char **ret,
                    size_t *ret_len, sd_diag *d);

#ifdef __cplusplus
}
#endif
#endif
