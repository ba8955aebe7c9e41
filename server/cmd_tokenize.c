/* cmd_tokenize: the 'tokenize' subcommand — encodes or decodes JSON lines from stdin with a
 * tokenizer.json (the interface the tokenizer's Python tests drive). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/tokenizer.h"
#include "server/cmd.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: sparsed tokenize --tokenizer DIR_OR_FILE [--no-special] [--decode [--stream]]\n"
               "Reads JSON lines from stdin and writes one JSON line per input line.\n"
               "  --tokenizer P   a folder with tokenizer.json (and tokenizer_config.json), or the file\n"
               "  (encode)        each line a JSON string, or {\"hex\": \"...\"} for raw bytes (invalid\n"
               "                  UTF-8 is replaced by U+FFFD); prints a JSON array of ids\n"
               "  --decode        each line a JSON array of ids; prints the decoded JSON string\n"
               "  --stream        with --decode: decode id by id as a stream does; prints the JSON\n"
               "                  array of the pieces emitted (their concatenation is the text)\n"
               "  --no-special    encode without the post-processor's special tokens (BOS...);\n"
               "                  decode skipping special tokens\n"
               "A line that cannot be processed prints {\"error\": \"...\"} and the exit status is 1.\n");
}

static int hex_value(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* The text of an encode line: a JSON string, or raw bytes from {"hex": ...}. Malloc'd. */
static char *line_text(const json_t *v, size_t *n, const char **err)
{
    if (json_is_string(v)) {
        *n = json_string_length(v);
        char *s = malloc(*n + 1);
        if (s)
            memcpy(s, json_string_value(v), *n + 1);
        return s;
    }
    const char *hex = json_string_value(json_object_get(v, "hex"));
    size_t len = hex ? strlen(hex) : 1;
    if (!hex || len % 2) {
        *err = "expected a JSON string or {\"hex\": \"...\"}";
        return NULL;
    }
    char *s = malloc(len / 2 + 1);
    for (size_t i = 0; s && i < len / 2; i++) {
        int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            free(s);
            *err = "bad hex digit";
            return NULL;
        }
        s[i] = (char)(hi << 4 | lo);
    }
    *n = len / 2;
    return s;
}

static int encode_line(const sd_tokenizer *t, const json_t *v, int special, FILE *out)
{
    const char *err = "out of memory";
    size_t n, n_ids;
    char *text = line_text(v, &n, &err);
    int32_t *ids = NULL;
    sd_diag d = {0};
    int rc = text ? sd_tok_encode(t, text, n, special, &ids, &n_ids, &d) : -1;
    free(text);
    if (rc) {
        json_t *e = json_pack("{s:s}", "error", rc == -1 ? err : sd_diag_str(&d, rc));
        json_dumpf(e, out, JSON_COMPACT);
        fputc('\n', out);
        json_decref(e);
        return 1;
    }
    fputc('[', out);
    for (size_t i = 0; i < n_ids; i++)
        fprintf(out, i ? ",%d" : "%d", ids[i]);
    fputs("]\n", out);
    free(ids);
    return 0;
}

/* Streams ids through sd_tok_stream_*, collecting the pieces as a JSON array. */
static json_t *stream_pieces(const sd_tokenizer *t, const int32_t *ids, size_t n, int skip)
{
    sd_tok_stream s;
    sd_tok_stream_init(&s, t, skip);
    json_t *arr = json_array();
    size_t cap = 64;
    char *buf = malloc(cap);
    for (size_t i = 0; arr && buf && i <= n; i++) {
        size_t len;
        int rc =
            i < n ? sd_tok_stream_push(&s, ids[i], buf, cap, &len) : sd_tok_stream_flush(&s, buf, cap, &len);
        if (rc == SD_EFULL) { /* a long token: grow and retry the same id */
            char *p = realloc(buf, cap *= 4);
            if (!p)
                break;
            buf = p;
            i--;
            continue;
        }
        if (rc || (len && json_array_append_new(arr, json_stringn(buf, len)))) {
            json_decref(arr);
            arr = NULL; /* json_stringn rejects a piece that is not valid UTF-8 */
        }
    }
    free(buf);
    return arr;
}

static int decode_line(const sd_tokenizer *t, const json_t *v, int skip, int stream, FILE *out)
{
    size_t n = json_array_size(v);
    int32_t *ids = malloc((n + 1) * sizeof *ids);
    const char *err = json_is_array(v) ? NULL : "expected a JSON array of ids";
    for (size_t i = 0; ids && !err && i < n; i++) {
        json_t *x = json_array_get(v, i);
        if (!json_is_integer(x) || json_integer_value(x) < INT32_MIN || json_integer_value(x) > INT32_MAX)
            err = "ids must be 32-bit integers";
        else
            ids[i] = (int32_t)json_integer_value(x);
    }
    json_t *res = NULL;
    if (!ids) {
        err = "out of memory";
    } else if (!err && stream) {
        if (!(res = stream_pieces(t, ids, n, skip)))
            err = "streaming decode failed";
    } else if (!err) {
        char *text;
        size_t len;
        sd_diag d = {0};
        int rc = sd_tok_decode(t, ids, n, skip, &text, &len, &d);
        if (rc)
            err = "decode failed";
        else
            res = json_stringn(text, len);
        if (!rc)
            free(text);
        if (!rc && !res)
            err = "decoded text is not valid UTF-8";
    }
    free(ids);
    if (err)
        res = json_pack("{s:s}", "error", err);
    json_dumpf(res, out, JSON_COMPACT | JSON_ENCODE_ANY);
    fputc('\n', out);
    json_decref(res);
    return err != NULL;
}

int sd_cmd_tokenize(int argc, char **argv)
{
    const char *path = NULL;
    int special = 1, decode = 0, stream = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--tokenizer") && i + 1 < argc) {
            path = argv[++i];
        } else if (!strcmp(argv[i], "--no-special")) {
            special = 0;
        } else if (!strcmp(argv[i], "--decode")) {
            decode = 1;
        } else if (!strcmp(argv[i], "--stream")) {
            stream = 1;
        } else {
            fprintf(stderr, "sparsed tokenize: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (!path || (stream && !decode)) {
        usage(stderr);
        return 2;
    }
    sd_tokenizer *t;
    sd_diag d = {0};
    int rc = sd_tok_load(&t, path, &d);
    if (rc) {
        fprintf(stderr, "sparsed tokenize: %s\n", sd_diag_str(&d, rc));
        return 1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int failed = 0;
    while ((n = getline(&line, &cap, stdin)) >= 0) {
        json_error_t je;
        json_t *v = json_loadb(line, (size_t)n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
        if (!v) {
            json_t *e = json_pack("{s:s}", "error", je.text);
            json_dumpf(e, stdout, JSON_COMPACT);
            fputc('\n', stdout);
            json_decref(e);
            failed = 1;
            continue;
        }
        failed |= decode ? decode_line(t, v, !special, stream, stdout) : encode_line(t, v, special, stdout);
        json_decref(v);
        fflush(stdout); /* a driver may wait for each answer before sending the next line */
    }
    free(line);
    sd_tok_free(t);
    return failed;
}
