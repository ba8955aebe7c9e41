/* Corruption fuzz for the loader's parsers of untrusted files: thousands of deterministic
 * mutations of the tiny model's safetensors header, its config.json, a sharded index and
 * tokenizer.json. Each must fail with a code and a message, or succeed with sane output;
 * none may crash (this binary runs under ASan + UBSan in CI). */
#include "engine/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/checkpoint.h"
#include "engine/model.h"
#include "engine/model_config.h"
#include "engine/tokenizer.h"
#include "tests/harness.h"
#include "tests/engine/ckpt_writer.h"

#define TINY "models/tiny"

static int n_ok, n_err;

/* A failure must carry its code in the diag and a non-empty message. */
static void check_outcome(int rc, const sd_diag *d, const char *what, int i)
{
    if (rc == 0) {
        n_ok++;
        return;
    }
    n_err++;
    CHECK_MSG(rc < 0 && d->code == rc && d->msg[0] != '\0', "%s mutation %d: rc %d, message '%s'", what, i,
              rc, d->msg);
}

/* ---- safetensors ---------------------------------------------------------------------- */

typedef struct st_src {
    char *header; /* [hlen + 1] the tiny model's header JSON */
    size_t hlen;
    size_t data_len; /* bytes after the header */
} st_src;

static int st_src_load(st_src *s)
{
    FILE *f = fopen(TINY "/model.safetensors", "rb");
    if (!f)
        return -1;
    unsigned char b[8];
    int ok = fread(b, 1, 8, f) == 8;
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = (n << 8) | b[i];
    s->header = malloc(n + 1);
    ok = ok && s->header && fread(s->header, 1, n, f) == n;
    fseek(f, 0, SEEK_END);
    long total = ftell(f);
    fclose(f);
    if (!ok)
        return -1;
    s->header[n] = '\0';
    s->hlen = n;
    s->data_len = (size_t)total - 8 - n;
    return 0;
}

/* Writes length field `n`, `hlen` header bytes, then a sparse data section so that the file
 * is `total` bytes (cheap: the real 10 MB of weights do not matter to header checks). */
static void st_put(const char *path, uint64_t n, const char *hdr, size_t hlen, size_t total)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return;
    unsigned char b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(n >> (8 * i));
    size_t w = 8 + hlen < total ? 8 + hlen : total;
    if (write(fd, b, w < 8 ? w : 8) < 0 || (w > 8 && write(fd, hdr, w - 8) < 0) ||
        ftruncate(fd, (off_t)total) != 0)
        fprintf(stderr, "write %s failed\n", path);
    close(fd);
}

/* Opens, and on success reads the first and last byte of every tensor (a view outside the
 * mapping would fault here) and checks nbytes against the shape. */
static int st_try(const char *path, sd_diag *d)
{
    sd_st_file *f = NULL;
    memset(d, 0, sizeof *d);
    int rc = sd_st_open(&f, path, d);
    if (rc)
        return rc;
    volatile unsigned sink = 0;
    for (size_t i = 0; i < sd_st_count(f); i++) {
        const sd_tensor_view *t = sd_st_at(f, i);
        size_t n = sd_dtype_size(t->dtype);
        for (int k = 0; k < t->ndim; k++)
            n *= (size_t)t->shape[k];
        CHECK(n == t->nbytes);
        if (t->nbytes)
            sink += ((const unsigned char *)t->data)[0] + ((const unsigned char *)t->data)[t->nbytes - 1];
    }
    (void)sink;
    sd_st_free(f);
    return 0;
}

/* Rewrites one field of one tensor entry with a lie; returns the new header (malloc'd). */
static char *st_lie(const st_src *s, uint64_t *rng)
{
    json_t *root = json_loadb(s->header, s->hlen, 0, NULL);
    size_t n = json_object_size(root), pick = tw_rng(rng) % n, i = 0;
    const char *k, *k2 = NULL;
    json_t *v, *e = NULL, *other = NULL;
    json_object_foreach(root, k, v)
    {
        if (strcmp(k, "__metadata__") == 0)
            continue;
        if (i == pick)
            e = v;
        else if (!other || tw_rng(rng) % 4 == 0)
            other = v, k2 = k;
        i++;
    }
    if (!e)
        e = other;
    static const json_int_t huge[] = {1ll << 31, 1ll << 32, 1ll << 40, 1ll << 62, INT64_MAX, -1, 3};
    json_t *off = json_object_get(e, "data_offsets"), *shape = json_object_get(e, "shape");
    json_int_t b = json_integer_value(json_array_get(off, 0)),
               en = json_integer_value(json_array_get(off, 1));
    static const char *dts[] = {"F8", "bf16", "", "U32", "F64", "BOOL", "I8", "F32 ", "\u00e9"};
    switch (tw_rng(rng) % 12) {
    case 0: /* end past EOF */
        json_array_set_new(off, 1,
                           json_integer((json_int_t)s->data_len + 1 + (json_int_t)(tw_rng(rng) % 64)));
        break;
    case 1: /* overlap another tensor */
        if (other)
            json_object_set(e, "data_offsets", json_object_get(other, "data_offsets"));
        (void)k2;
        break;
    case 2: /* shift into the neighbour */
        json_array_set_new(off, 0, json_integer(b + 2));
        json_array_set_new(off, 1, json_integer(en + 2));
        break;
    case 3: /* shape that does not match the byte length */
        json_array_set_new(shape, 0, json_integer(json_integer_value(json_array_get(shape, 0)) + 1));
        break;
    case 4: /* huge / overflowing / negative dims */
        for (size_t j = 0; j < json_array_size(shape); j++)
            json_array_set_new(shape, j, json_integer(huge[tw_rng(rng) % 7]));
        break;
    case 5:
        json_object_set_new(e, "dtype", json_string(dts[tw_rng(rng) % 9]));
        break;
    case 6: /* too many dims */
        for (int j = 0; j < 9; j++)
            json_array_append_new(shape, json_integer(1));
        break;
    case 7:
        json_object_del(e, tw_rng(rng) % 2 ? "shape" : "data_offsets");
        break;
    case 8: /* wrong JSON types */
        json_object_set_new(e, "data_offsets",
                            tw_rng(rng) % 2 ? json_string("0,8") : json_pack("[f,f]", 0.0, 8.0));
        break;
    case 9:
        json_array_set_new(off, 0, json_integer(huge[tw_rng(rng) % 7]));
        break;
    case 10: /* a zero-size tensor: legal */
        json_object_set_new(e, "shape", json_pack("[i,i]", 0, 7));
        json_array_set_new(off, 1, json_integer(b));
        break;
    default: /* metadata with a non-string value */
        json_object_set_new(root, "__metadata__", json_pack("{s:i}", "format", 1));
        break;
    }
    char *out = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(root);
    return out;
}

static void test_safetensors_mutations(void)
{
    st_src s;
    if (st_src_load(&s))
        SKIP("%s/model.safetensors unreadable", TINY);
    char dir[64], p[128];
    int made = tw_mkdtemp(dir, sizeof dir);
    REQUIRE(made == 0);
    snprintf(p, sizeof p, "%s/m.safetensors", dir);
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    size_t full = 8 + s.hlen + s.data_len;
    char *h = malloc(s.hlen + 1);
    sd_diag d;
    /* the unmodified header must load */
    st_put(p, s.hlen, s.header, s.hlen, full);
    CHECK(st_try(p, &d) == 0);
    for (int i = 0; i < 2400; i++) {
        int kind = i % 6;
        memcpy(h, s.header, s.hlen + 1);
        if (kind == 0) { /* truncation anywhere */
            st_put(p, s.hlen, h, s.hlen, (size_t)(tw_rng(&rng) % full));
        } else if (kind == 1) { /* byte flips in the header */
            for (int k = 0, nf = 1 + (int)(tw_rng(&rng) % 4); k < nf; k++)
                h[tw_rng(&rng) % s.hlen] ^= (char)(1u << (tw_rng(&rng) % 8));
            st_put(p, s.hlen, h, s.hlen, full);
        } else if (kind == 2 || kind == 3) { /* field lies */
            char *lie = st_lie(&s, &rng);
            st_put(p, strlen(lie), lie, strlen(lie), 8 + strlen(lie) + s.data_len);
            free(lie);
        } else if (kind == 4) { /* header length lies */
            static const uint64_t lens[] = {0, 1, 7, UINT64_MAX, 1ull << 40, SD_ST_MAX_HEADER + 1ull};
            uint64_t n = tw_rng(&rng) % 2 ? lens[tw_rng(&rng) % 6] : s.hlen + (tw_rng(&rng) % 33) - 16;
            st_put(p, n, h, s.hlen, full);
        } else { /* bad JSON: cut short and padded with spaces, or garbage bytes */
            size_t cut = tw_rng(&rng) % s.hlen;
            for (size_t k = cut; k < s.hlen; k++)
                h[k] = tw_rng(&rng) % 2 ? ' ' : (char)(tw_rng(&rng) & 0xff);
            st_put(p, s.hlen, h, s.hlen, full);
        }
        check_outcome(st_try(p, &d), &d, "safetensors", i);
    }
    /* benign: flipping data bytes changes no header fact */
    for (int i = 0; i < 50; i++) {
        st_put(p, s.hlen, s.header, s.hlen, full);
        int fd = open(p, O_WRONLY);
        unsigned char b = (unsigned char)tw_rng(&rng);
        ssize_t w = fd >= 0 ? pwrite(fd, &b, 1, (off_t)(8 + s.hlen + tw_rng(&rng) % s.data_len)) : -1;
        if (fd >= 0)
            close(fd);
        CHECK(w == 1 && st_try(p, &d) == 0);
    }
    free(h);
    free(s.header);
    tw_rmdir(dir);
}

/* ---- config.json ---------------------------------------------------------------------- */

static void check_cfg_sane(const sd_model_config *c)
{
    CHECK(c->hidden > 0 && c->n_layers > 0 && c->n_heads > 0 && c->n_kv_heads > 0 && c->head_dim > 0);
    CHECK(c->n_heads % c->n_kv_heads == 0 && c->intermediate > 0 && c->vocab > 0 && c->max_pos > 0);
    CHECK(c->rms_eps > 0 && c->rope_theta > 0 && c->n_eos >= 0 && c->n_eos <= SD_MAX_EOS);
}

static void test_config_mutations(void)
{
    size_t len;
    char *orig = (char *)tw_read(TINY "/config.json", &len);
    if (!orig)
        SKIP("%s/config.json unreadable", TINY);
    json_t *root = json_loads(orig, 0, NULL);
    REQUIRE(root);
    size_t nkeys = json_object_size(root);
    uint64_t rng = 0x1234567ull;
    char *buf = malloc(len + 1);
    sd_diag d;
    sd_model_config c;
    for (int i = 0; i < 1500; i++) {
        int rc;
        memset(&d, 0, sizeof d);
        if (i % 3 == 2) { /* replace one key's value by a hostile one */
            static const char *vals[] = {"-1",
                                         "0",
                                         "1e300",
                                         "\"x\"",
                                         "null",
                                         "[]",
                                         "{}",
                                         "1099511627776",
                                         "true",
                                         "2.5",
                                         "[1,2,3,4,5,6,7,8,9]",
                                         "{\"rope_type\":\"llama3\"}",
                                         "-9223372036854775808",
                                         "3"};
            json_t *cp = json_deep_copy(root);
            size_t pick = tw_rng(&rng) % nkeys, j = 0;
            const char *k;
            json_t *v;
            void *tmp;
            json_object_foreach_safe(cp, tmp, k, v)
            {
                if (j++ == pick)
                    json_object_set_new(cp, k, json_loads(vals[tw_rng(&rng) % 14], JSON_DECODE_ANY, NULL));
            }
            char *t = json_dumps(cp, 0);
            rc = sd_model_config_parse(&c, t, strlen(t), "config.json", &d);
            free(t);
            json_decref(cp);
        } else {
            memcpy(buf, orig, len + 1);
            size_t n = len;
            if (i % 3 == 0)
                n = tw_rng(&rng) % len; /* truncated */
            else
                for (int k = 0, nf = 1 + (int)(tw_rng(&rng) % 3); k < nf; k++)
                    buf[tw_rng(&rng) % len] ^= (char)(1u << (tw_rng(&rng) % 8));
            rc = sd_model_config_parse(&c, buf, n, "config.json", &d);
        }
        check_outcome(rc, &d, "config", i);
        if (rc == 0)
            check_cfg_sane(&c);
    }
    free(buf);
    free(orig);
    json_decref(root);
}

/* ---- sharded index -------------------------------------------------------------------- */

static void test_index_mutations(void)
{
    char dir[64], p[128];
    int made = tw_mkdtemp(dir, sizeof dir);
    REQUIRE(made == 0);
    tw_spec sp = tw_spec_default();
    sp.n_shards = 3;
    int wr = tw_write_model(dir, &sp);
    REQUIRE(wr == 0);
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    size_t len;
    char *orig = (char *)tw_read(p, &len);
    REQUIRE(orig);
    json_t *root = json_loads(orig, 0, NULL);
    REQUIRE(root);
    uint64_t rng = 42;
    sd_diag d;
    for (int i = 0; i < 300; i++) {
        json_t *cp = json_deep_copy(root), *wm = json_object_get(cp, "weight_map");
        size_t pick = tw_rng(&rng) % json_object_size(wm), j = 0;
        const char *k;
        json_t *v;
        void *tmp;
        static const char *names[] = {"../model-00001-of-00003.safetensors",
                                      "/etc/passwd",
                                      "",
                                      ".",
                                      "..",
                                      "model-00009-of-00003.safetensors",
                                      "model-00002-of-00003.safetensors",
                                      "config.json"};
        int op = i % 4;
        json_object_foreach_safe(wm, tmp, k, v)
        {
            if (j++ != pick)
                continue;
            if (op == 0)
                json_object_del(wm, k); /* a tensor missing from the index */
            else if (op == 1)
                json_object_set_new(wm, k, json_string(names[tw_rng(&rng) % 8]));
            else if (op == 2)
                json_object_set_new(wm, k, json_integer(3));
        }
        char *t = json_dumps(cp, JSON_INDENT(1));
        if (op == 3) /* bad JSON */
            t[tw_rng(&rng) % strlen(t)] = '\0';
        tw_write_str(dir, "model.safetensors.index.json", t);
        free(t);
        json_decref(cp);
        sd_model *m = NULL;
        memset(&d, 0, sizeof d);
        int rc = sd_model_open(&m, dir, &d);
        check_outcome(rc, &d, "index", i);
        sd_model_free(m);
    }
    json_decref(root);
    free(orig);
    tw_rmdir(dir);
}

/* ---- tokenizer.json ------------------------------------------------------------------- */

static void test_tokenizer_mutations(void)
{
    size_t len;
    char *orig = (char *)tw_read(TINY "/tokenizer.json", &len);
    if (!orig)
        SKIP("%s/tokenizer.json unreadable", TINY);
    char dir[64], p[128];
    int made = tw_mkdtemp(dir, sizeof dir);
    REQUIRE(made == 0);
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    char *buf = malloc(len + 1);
    uint64_t rng = 7;
    sd_diag d;
    /* the structural keys of tokenizer.json, for targeted lies */
    static const char *keys[] = {"\"type\"",   "\"vocab\"",         "\"merges\"",  "\"added_tokens\"",
                                 "\"id\"",     "\"pre_tokenizer\"", "\"decoder\"", "\"post_processor\"",
                                 "\"content\""};
    for (int i = 0; i < 60; i++) {
        memcpy(buf, orig, len + 1);
        size_t n = len;
        if (i % 3 == 0) {
            n = tw_rng(&rng) % len;
        } else if (i % 3 == 1) {
            for (int k = 0; k < 8; k++)
                buf[tw_rng(&rng) % len] ^= (char)(1u << (tw_rng(&rng) % 8));
        } else { /* damage the value after a structural key */
            char *at = strstr(buf, keys[tw_rng(&rng) % 9]);
            for (int k = 0; at && k < (int)(tw_rng(&rng) % 40); k++)
                at = strstr(at + 1, keys[tw_rng(&rng) % 9]) ? strstr(at + 1, keys[tw_rng(&rng) % 9]) : at;
            if (at) {
                char *colon = strchr(at, ':');
                static const char *lies[] = {"-5", "null", "\"\"", "[[[", "99999999999", "{}"};
                const char *l = lies[tw_rng(&rng) % 6];
                if (colon && (size_t)(colon - buf) + 1 + strlen(l) < len)
                    memcpy(colon + 1, l, strlen(l));
            }
        }
        tw_write(dir, "tokenizer.json", buf, n);
        sd_tokenizer *t = NULL;
        memset(&d, 0, sizeof d);
        int rc = sd_tok_load(&t, p, &d);
        check_outcome(rc, &d, "tokenizer", i);
        sd_tok_free(t);
    }
    free(buf);
    free(orig);
    tw_rmdir(dir);
}

int main(void)
{
    RUN(test_safetensors_mutations);
    RUN(test_config_mutations);
    RUN(test_index_mutations);
    RUN(test_tokenizer_mutations);
    fprintf(stderr, "mutations: %d loaded, %d refused\n", n_ok, n_err);
    return sd_test_done();
}
