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
               "                               [--no-generation-prompt] [--jsonl]\n"
               "Reads {\"messages\": [...], <extra template variables>} from stdin and prints the\n"
               "rendered prompt (no trailing newline added). add_generation_prompt defaults to true\n"
               "unless --no-generation-prompt; a key in the input overrides it.\n"
               "--jsonl: one such object per input line; prints one line per input,\n"
               "{\"text\": ...} or {\"error\": ...} (for batch tests).\n");
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

/* Renders one input object; on success *ret is the malloc'd text. */
static int render_one(const sd_chat_template *t, json_t *in, int gen_prompt, char **ret, size_t *ret_len,
                      sd_diag *d)
{
    json_t *msgs = NULL;
    if (!json_is_object(in))
        return sd_diag_set(d, SD_EINVAL, "input: expected a JSON object");
    int rc = sd_chat_messages_normalize(json_object_get(in, "messages"), &msgs, d);
    if (rc < 0)
        return sd_diag_wrap(d, rc, "messages");
    if (!json_object_get(in, "add_generation_prompt"))
        json_object_set_new(in, "add_generation_prompt", json_boolean(gen_prompt));
    json_object_del(in, "messages");
    rc = sd_chat_template_render(t, msgs, in, ret, ret_len, d);
    json_decref(msgs);
    return rc;
}

/* --jsonl: one object per line in, one {"text"} / {"error"} line out. */
static int render_lines(const sd_chat_template *t, int gen_prompt)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int status = 0;
    while ((n = getline(&line, &cap, stdin)) > 0) {
        json_error_t jerr;
        sd_diag d = {0};
        char *out = NULL;
        size_t out_len = 0;
        json_t *in = json_loadb(line, (size_t)n, 0, &jerr);
        int rc = in ? render_one(t, in, gen_prompt, &out, &out_len, &d)
                    : sd_diag_set(&d, SD_EINVAL, "%s", jerr.text);
        json_t *res = rc < 0 ? json_pack("{ss}", "error", sd_diag_str(&d, rc))
                             : json_pack("{ss%}", "text", out, out_len);
        char *txt = res ? json_dumps(res, JSON_COMPACT) : NULL;
        if (!txt || printf("%s\n", txt) < 0)
            status = 1;
        free(txt);
        json_decref(res);
        json_decref(in);
        free(out);
    }
    free(line);
    return fflush(stdout) == 0 ? status : 1;
}

int sd_cmd_render_template(int argc, char **argv)
{
    const char *config = NULL, *raw = NULL;
    int gen_prompt = 1, jsonl = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tokenizer-config") && i + 1 < argc)
            config = argv[++i];
        else if (!strcmp(argv[i], "--template") && i + 1 < argc)
            raw = argv[++i];
        else if (!strcmp(argv[i], "--no-generation-prompt"))
            gen_prompt = 0;
        else if (!strcmp(argv[i], "--jsonl"))
            jsonl = 1;
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
    json_t *in = NULL;
    char *out = NULL;
    size_t out_len = 0;
    int status = 1, rc;
    if ((rc = load(&t, config, raw, &d)) < 0) {
        fail("", &d, rc);
        goto cleanup;
    }
    if (jsonl) {
        status = render_lines(t, gen_prompt);
        goto cleanup;
    }
    json_error_t jerr;
    in = json_loadf(stdin, 0, &jerr);
    if (!in) {
        fprintf(stderr, "sparsed render-template: stdin: %s\n", jerr.text);
        goto cleanup;
    }
    if ((rc = render_one(t, in, gen_prompt, &out, &out_len, &d)) < 0) {
        fail("", &d, rc);
        goto cleanup;
    }
    status = fwrite(out, 1, out_len, stdout) == out_len && fflush(stdout) == 0 ? 0 : 1;
cleanup:
    free(out);
    json_decref(in);
    sd_chat_template_free(t);
    return status;
}
