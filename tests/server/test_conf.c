/* test_conf: the daemon's config (server/conf.c) — defaults, file over defaults, flags over
 * the file, errors that name the key/flag, key files; and the API-key checker (server/auth.c). */
#include "server/conf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/auth.h"
#include "tests/harness.h"

static char *write_tmp(const char *text)
{
    char *path = strdup("/tmp/sd_test_conf_XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0) {
        free(path);
        return NULL;
    }
    if (write(fd, text, strlen(text)) != (ssize_t)strlen(text)) {
        close(fd);
        free(path);
        return NULL;
    }
    close(fd);
    return path;
}

static int load(sd_conf *c, const char *json, int argc, char **argv, sd_diag *d)
{
    char *path = json ? write_tmp(json) : NULL;
    char *args[16];
    int n = 0;
    if (path) {
        args[n++] = "--config";
        args[n++] = path;
    }
    for (int i = 0; i < argc; i++)
        args[n++] = argv[i];
    sd_conf_init(c);
    memset(d, 0, sizeof *d);
    int rc = sd_conf_load(c, n, args, NULL, d);
    if (path)
        unlink(path);
    free(path);
    return rc;
}

static void test_precedence(void)
{
    sd_conf c;
    sd_diag d;
    char *argv[] = {"--max-seqs", "5", "--host=0.0.0.0", "--api-key", "k", "--log-priority-prefix"};
    REQUIRE(load(&c,
                 "{\"_comment\":\"x\",\"max_seqs\":3,\"port\":9000,\"drain_timeout\":2.5,"
                 "\"api_keys\":[\"a\",\"b\"]}",
                 6, argv, &d) == 0);
    CHECK(c.max_seqs == 5 && c.port == 9000 && c.drain_timeout == 2.5 && !strcmp(c.host, "0.0.0.0"));
    CHECK(c.n_api_keys == 1 && !strcmp(c.api_keys[0], "k") && c.log_priority_prefix == 1);
    sd_conf_free(&c);
    sd_conf_free(NULL);
    /* defaults survive when nothing overrides them */
    sd_conf def;
    sd_conf_init(&def);
    REQUIRE(load(&c, NULL, 0, NULL, &d) == 0);
    CHECK(c.max_seqs == def.max_seqs && c.port == def.port && !strcmp(c.model, def.model));
    sd_conf_free(&c);
    sd_conf_free(&def);
}

/* The engine options come from the config: `deterministic` (off by default) reaches the backend. */
static void test_engine_opts(void)
{
    sd_conf c;
    sd_diag d;
    sd_backend_opts bo;
    sd_tp_opts to;
    REQUIRE(load(&c, NULL, 0, NULL, &d) == 0);
    sd_conf_engine_opts(&c, &bo, &to);
    CHECK(bo.deterministic == 0);
    sd_conf_free(&c);
    char *argv[] = {"--deterministic", "--kv-blocks", "77"};
    REQUIRE(load(&c, "{\"deterministic\": false, \"block_size\": 32}", 3, argv, &d) == 0);
    sd_conf_engine_opts(&c, &bo, &to);
    CHECK(bo.deterministic == 1 && bo.kv_blocks == 77 && bo.block_size == 32);
    sd_conf_free(&c);
    REQUIRE(load(&c, "{\"deterministic\": 1}", 0, NULL, &d) != 0);
    CHECK_MSG(strstr(d.msg, "deterministic") != NULL, "%s", d.msg);
    sd_conf_free(&c);
}

static void test_errors_name_the_key(void)
{
    static const struct {
        const char *json;
        const char *flag, *val, *word;
    } bad[] = {
        {"{\"nope\":1}", NULL, NULL, "nope"},
        {"{\"max-seqs\":1}", NULL, NULL, "max-seqs"},
        {"{\"port\":\"80\"}", NULL, NULL, "port"},
        {"{\"port\":0}", NULL, NULL, "port"},
        {"{\"max_seqs\":1.5}", NULL, NULL, "max_seqs"},
        {"{\"backend\":\"tpu\"}", NULL, NULL, "backend"},
        {"{\"log_priority_prefix\":1}", NULL, NULL, "log_priority_prefix"},
        {"{\"api_keys\":\"k\"}", NULL, NULL, "api_keys"},
        {"[]", NULL, NULL, "object"},
        {NULL, "--max-queue", "-1", "--max-queue"},
        {NULL, "--frob", "1", "--frob"},
        {NULL, "--log-level", "loud", "--log-level"},
        {NULL, "--request-timeout", "abc", "--request-timeout"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        sd_conf c;
        sd_diag d;
        char *argv[] = {(char *)bad[i].flag, (char *)bad[i].val};
        int rc = load(&c, bad[i].json, bad[i].flag ? 2 : 0, argv, &d);
        CHECK_MSG(rc == SD_EINVAL && strstr(d.msg, bad[i].word), "case %zu: rc %d msg '%s'", i, rc, d.msg);
        sd_conf_free(&c);
    }
    sd_conf c;
    sd_diag d;
    char *argv[] = {"--port"};
    CHECK(load(&c, NULL, 1, argv, &d) == SD_EINVAL && strstr(d.msg, "--port"));
    sd_conf_free(&c);
}

static void test_key_file_and_auth(void)
{
    char *path = write_tmp("# comment\n  key-1  \n\nkey-2\r\n");
    REQUIRE(path);
    char **keys = NULL;
    int n = 0;
    REQUIRE(sd_conf_read_key_file(path, &keys, &n, NULL) == 0);
    CHECK(n == 2 && !strcmp(keys[0], "key-1") && !strcmp(keys[1], "key-2"));
    sd_auth *a;
    REQUIRE(sd_auth_init(&a) == 0);
    CHECK(sd_auth_check(a, NULL) == 1); /* no keys: open */
    REQUIRE(sd_auth_set_keys(a, keys, n) == 0);
    CHECK(sd_auth_check(a, "Bearer key-2") && sd_auth_check(a, "bearer key-1"));
    CHECK(!sd_auth_check(a, NULL) && !sd_auth_check(a, "Bearer key-") && !sd_auth_check(a, "Bearer key-12"));
    CHECK(!sd_auth_check(a, "key-1") && !sd_auth_check(a, "Basic key-1"));
    REQUIRE(sd_auth_set_keys(a, NULL, 0) == 0);
    CHECK(sd_auth_check(a, NULL) && sd_auth_count(a) == 0);
    sd_auth_free(a);
    sd_auth_free(NULL);
    sd_conf_free_keys(keys, n);
    unlink(path);
    free(path);
    CHECK(sd_conf_read_key_file("/nonexistent/keys", &keys, &n, NULL) == SD_EIO);
}

/* admin_listen: HOST:PORT (v6 in brackets), only with an admin token, not the main address. */
static void test_admin_listen(void)
{
    char host[64];
    int port = 0;
    CHECK(sd_conf_split_listen("127.0.0.1:9001", "x", host, sizeof host, &port, NULL) == 0 &&
          !strcmp(host, "127.0.0.1") && port == 9001);
    CHECK(sd_conf_split_listen("[::1]:9002", "x", host, sizeof host, &port, NULL) == 0 &&
          !strcmp(host, "::1") && port == 9002);
    CHECK(sd_conf_split_listen("localhost:65535", "x", host, sizeof host, &port, NULL) == 0 &&
          !strcmp(host, "localhost") && port == 65535);
    static const char *const bad[] = {
        "localhost", ":80",   "host:",   "host:0", "host:65536", "host:8x", "[::1]9000",
        "[::1]:",    "[]:80", "::1:80:", "",       "h:-1",       "[::1:80"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        sd_diag d = {0};
        int rc = sd_conf_split_listen(bad[i], "admin_listen", host, sizeof host, &port, &d);
        CHECK_MSG(rc == SD_EINVAL && strstr(d.msg, "admin_listen"), "'%s': rc %d msg '%s'", bad[i], rc,
                  d.msg);
    }
    char tiny[4];
    CHECK(sd_conf_split_listen("localhost:80", "x", tiny, sizeof tiny, &port, NULL) == SD_EINVAL);

    sd_conf c;
    sd_diag d;
    CHECK(load(&c, NULL, 0, NULL, &d) == 0 && !strcmp(c.admin_listen, "")); /* default: unset */
    sd_conf_free(&c);
    char *with_token[] = {"--admin-listen", "127.0.0.1:9001", "--admin-token", "t"};
    CHECK(load(&c, NULL, 4, with_token, &d) == 0 && !strcmp(c.admin_listen, "127.0.0.1:9001"));
    sd_conf_free(&c);
    CHECK(load(&c, "{\"admin_listen\":\"[::1]:9001\",\"admin_token_file\":\"/f\"}", 0, NULL, &d) == 0);
    sd_conf_free(&c);
    CHECK(load(&c, NULL, 2, with_token, &d) == SD_EINVAL && strstr(d.msg, "admin_listen") &&
          strstr(d.msg, "admin_token"));
    sd_conf_free(&c);
    char *same[] = {"--admin-listen", "127.0.0.1:8000", "--admin-token", "t", "--port", "8000"};
    CHECK(load(&c, NULL, 6, same, &d) == SD_EINVAL && strstr(d.msg, "main listener"));
    sd_conf_free(&c);
    char *badflag[] = {"--admin-listen", "9001", "--admin-token", "t"};
    CHECK(load(&c, NULL, 4, badflag, &d) == SD_EINVAL && strstr(d.msg, "admin_listen"));
    sd_conf_free(&c);
}

/* Speculative decoding's options: off by default, set by flags, and refused when the n-gram range
 * is upside down or a step's rows would pass SD_SPEC_MAX_ROWS. */
static void test_spec_opts(void)
{
    sd_conf c;
    sd_diag d;
    REQUIRE(load(&c, NULL, 0, NULL, &d) == 0);
    CHECK(c.spec_tokens == 0 && c.spec_ngram_min == 2 && c.spec_ngram_max == 4 && c.spec_max_seqs == 4);
    sd_conf_free(&c);
    char *on[] = {"--spec-tokens", "6", "--spec-ngram-min", "1", "--spec-max-seqs", "8"};
    CHECK(load(&c, NULL, 6, on, &d) == 0 && c.spec_tokens == 6 && c.spec_ngram_min == 1 &&
          c.spec_max_seqs == 8);
    sd_conf_free(&c);
    char *upside[] = {"--spec-ngram-min", "5", "--spec-ngram-max", "3"};
    CHECK(load(&c, NULL, 4, upside, &d) == SD_EINVAL && strstr(d.msg, "spec_ngram_min"));
    sd_conf_free(&c);
    char *rows[] = {"--spec-tokens", "16", "--spec-max-seqs", "16"}; /* 16 * 17 rows */
    CHECK(load(&c, NULL, 4, rows, &d) == SD_EINVAL && strstr(d.msg, "spec_max_seqs"));
    sd_conf_free(&c);
    CHECK(load(&c, "{\"spec_tokens\": 17}", 0, NULL, &d) == SD_EINVAL && strstr(d.msg, "spec_tokens"));
    sd_conf_free(&c);
    char *draft_alone[] = {"--spec-draft-model", "models/tiny"}; /* a draft model drafts spec_tokens */
    CHECK(load(&c, NULL, 2, draft_alone, &d) == SD_EINVAL && strstr(d.msg, "spec_draft_model"));
    sd_conf_free(&c);
    char *draft_tp[] = {"--spec-draft-model", "models/tiny", "--spec-tokens", "4",
                        "--tensor-parallel",  "2",           "--backend",     "cuda"};
    CHECK(load(&c, NULL, 8, draft_tp, &d) == SD_EINVAL && strstr(d.msg, "spec_draft_model"));
    sd_conf_free(&c);
    char *draft_ok[] = {"--spec-draft-model", "models/tiny", "--spec-tokens", "4"};
    CHECK(load(&c, NULL, 4, draft_ok, &d) == 0 && !strcmp(c.spec_draft_model, "models/tiny"));
    sd_conf_free(&c);
}

int main(void)
{
    RUN(test_precedence);
    RUN(test_spec_opts);
    RUN(test_engine_opts);
    RUN(test_errors_name_the_key);
    RUN(test_key_file_and_auth);
    RUN(test_admin_listen);
    return sd_test_done();
}
