/* cmd_template: the 'render-template' subcommand: renders a model's chat template for a JSON
 * conversation read from stdin, exactly as the server would before tokenizing. */
#include "server/cmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "engine/chat_template.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: sparsed render-template (--tokenizer-config FILE | --template FILE)\n"
               "                               [--no-generation-prompt]\n"
               "Reads {\"messages\": [...], <extra template variables>} from stdin and prints the\n"
               "rendered prompt (no trailing newline added). add_generation_prompt defaults to true\n"
               "unless --no-generation-prompt; a key in the input overrides it.\n");
}

static int fail(const char *what, const sd_diag *d, int code)
{
    fprintf(stderr, "sparsed render-template: %s%s%s\n", what, *what ? ": " : "", sd_diag_str(d, code));
    return 1;
}

/* Loads a template from a tokenizer_config.json or a raw Jinja file. */
static int load(sd_chat_template **t, const char *config, const char *raw, sd_diag *d)
{
    if (config)
        return sd_chat_template_load(t, config, d);
    FILE *f = fopen(raw, "rb");
    if (!f)
        return sd_diag_set(d, SD_EIO, "%s: cannot open", raw);
    char *src = NULL;
    size_t cap = 0, n = 0, got;
    do {
        if (n + 4097 > cap) {
            char *nb = realloc(src, cap = cap * 2 + 8192);
            if (!nb) {
                free(src);
                fclose(f);
                return sd_diag_set(d, SD_ENOMEM, "out of memory");
            }
            src = nb;
        }
        got = fread(src + n, 1, cap - n - 1, f);
        n += got;
    } while (got > 0);
    fclose(f);
    src[n] = 0;
    int rc = sd_chat_template_init(t, src, d);
    free(src);
    return rc;
}

int sd_cmd_render_template(int argc, char **argv)
{
    const char *config = NULL, *raw = NULL;
    int gen_prompt = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tokenizer-config") && i + 1 < argc)
            config = argv[++i];
        else if (!strcmp(argv[i], "--template") && i + 1 < argc)
            raw = argv[++i];
        else if (!strcmp(argv[i], "--no-generation-prompt"))
            gen_prompt = 0;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (!config == !raw) {
        usage(stderr);
        return 2;
    }
    sd_diag d = {0};
    sd_chat_template *t = NULL;
    json_t *in = NULL, *msgs = NULL;
    char *out = NULL;
    size_t out_len = 0;
    int status = 1, rc;
    if ((rc = load(&t, config, raw, &d)) < 0) {
        fail("", &d, rc);
        goto cleanup;
    }
    json_error_t jerr;
    in = json_loadf(stdin, 0, &jerr);
    if (!json_is_object(in)) {
        fprintf(stderr, "sparsed render-template: stdin: expected a JSON object (%s)\n", in ? "" : jerr.text);
        goto cleanup;
    }
    if ((rc = sd_chat_messages_normalize(json_object_get(in, "messages"), &msgs, &d)) < 0) {
        fail("messages", &d, rc);
        goto cleanup;
    }
    if (!json_object_get(in, "add_generation_prompt"))
        json_object_set_new(in, "add_generation_prompt", json_boolean(gen_prompt));
    json_object_del(in, "messages");
    if ((rc = sd_chat_template_render(t, msgs, in, &out, &out_len, &d)) < 0) {
        fail("", &d, rc);
        goto cleanup;
    }
    status = fwrite(out, 1, out_len, stdout) == out_len && fflush(stdout) == 0 ? 0 : 1;
cleanup:
    free(out);
    json_decref(msgs);
    json_decref(in);
    sd_chat_template_free(t);
    return status;
}
