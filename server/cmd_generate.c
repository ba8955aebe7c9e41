/* cmd_generate: the 'generate' subcommand — one prompt through the model and a backend with
 * the KV allocator and the sampler, text streamed to stdout as it is produced. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/cmd.h"

#include "engine/backend.h"
#include "engine/kv.h"
#include "engine/model.h"
#include "engine/sampler.h"
#include "engine/tokenizer.h"
#include "engine/warmup.h"
#ifdef SD_HAVE_CUDA
#include "engine/cuda_backend.h"
#endif

typedef struct gen_args {
    const char *model, *prompt, *prompt_ids, *backend, *dump;
    int32_t max_tokens;
    int threads, no_bos, ignore_eos, warmup;
    int have_temperature;
    sd_sampling s;
} gen_args;

static void usage(FILE *f)
{
    fprintf(f, "usage: sparsed generate --model DIR (--prompt TEXT | --prompt-ids 1,2,3) [options]\n"
               "  --max-tokens N          tokens to generate (default 64)\n"
               "  --temperature T         0 = greedy; default: greedy unless generation_config.json\n"
               "                          sets do_sample (then its temperature, or 1)\n"
               "  --top-k K --top-p P --min-p P\n"
               "  --presence-penalty X --frequency-penalty X --repetition-penalty X\n"
               "  --seed S                sampling seed (default 0)\n"
               "  --threads N             CPU threads (default: all cores)\n"
               "  --backend cpu|cuda      compute backend (default cpu; cuda in CUDA builds)\n"
               "  --no-bos                do not add the tokenizer's special tokens to --prompt\n"
               "  --ignore-eos            keep generating past EOS\n"
               "  --warmup                GPU backends: tune the kernels and capture the decode graph\n"
               "                          first (engine/warmup.h), so the timings below leave it out\n"
               "  --dump-logits FILE      raw fp32 logits [steps, vocab] to FILE, ids to FILE.json\n");
}

static int parse_num(const char *s, double *ret)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end)
        return -1;
    *ret = v;
    return 0;
}

static int parse_args(int argc, char **argv, gen_args *a)
{
    memset(a, 0, sizeof *a);
    sd_sampling_default(&a->s);
    a->max_tokens = 64;
    a->backend = "cpu";
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i];
        int *flag = !strcmp(k, "--no-bos")       ? &a->no_bos
                    : !strcmp(k, "--ignore-eos") ? &a->ignore_eos
                    : !strcmp(k, "--warmup")     ? &a->warmup
                                                 : NULL;
        if (flag) {
            *flag = 1;
            continue;
        }
        if (!strcmp(k, "--help") || !strcmp(k, "-h"))
            return 1;
        if (i + 1 >= argc) {
            fprintf(stderr, "sparsed generate: %s needs a value\n", k);
            return -1;
        }
        const char *v = argv[++i];
        double x = 0;
        int num = parse_num(v, &x) == 0;
        if (!strcmp(k, "--model"))
            a->model = v;
        else if (!strcmp(k, "--prompt"))
            a->prompt = v;
        else if (!strcmp(k, "--prompt-ids"))
            a->prompt_ids = v;
        else if (!strcmp(k, "--backend"))
            a->backend = v;
        else if (!strcmp(k, "--dump-logits"))
            a->dump = v;
        else if (!num)
            goto bad;
        else if (!strcmp(k, "--max-tokens") && x >= 0 && x <= 1e7)
            a->max_tokens = (int32_t)x;
        else if (!strcmp(k, "--temperature") && x >= 0)
            a->s.temperature = (float)x, a->have_temperature = 1;
        else if (!strcmp(k, "--top-k"))
            a->s.top_k = (int32_t)x;
        else if (!strcmp(k, "--top-p") && x > 0 && x <= 1)
            a->s.top_p = (float)x;
        else if (!strcmp(k, "--min-p") && x >= 0 && x <= 1)
            a->s.min_p = (float)x;
        else if (!strcmp(k, "--presence-penalty"))
            a->s.presence_penalty = (float)x;
        else if (!strcmp(k, "--frequency-penalty"))
            a->s.frequency_penalty = (float)x;
        else if (!strcmp(k, "--repetition-penalty") && x > 0)
            a->s.repetition_penalty = (float)x;
        else if (!strcmp(k, "--seed") && x >= 0)
            a->s.seed = (uint64_t)x;
        else if (!strcmp(k, "--threads") && x >= 0 && x <= 1024)
            a->threads = (int)x;
        else
            goto bad;
        continue;
    bad:
        fprintf(stderr, "sparsed generate: bad option or value: %s %s\n", k, v);
        return -1;
    }
    if (!a->model || (!a->prompt && !a->prompt_ids)) {
        fprintf(stderr, "sparsed generate: --model and --prompt (or --prompt-ids) are required\n");
        return -1;
    }
    return 0;
}

/* "0,12,5" -> ids (malloc'd) */
static int parse_ids(const char *s, int32_t vocab, int32_t **ret, int32_t *ret_n)
{
    size_t cap = 1;
    for (const char *p = s; *p; p++)
        cap += *p == ',';
    int32_t *ids = malloc(cap * sizeof *ids);
    if (!ids)
        return SD_ENOMEM;
    int32_t n = 0;
    const char *p = s;
    for (;;) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || end == p || v < 0 || v >= vocab || (*end && *end != ',')) {
            free(ids);
            return SD_EINVAL;
        }
        ids[n++] = (int32_t)v;
        if (!*end)
            break;
        p = end + 1;
    }
    *ret = ids;
    *ret_n = n;
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct gen_run {
    sd_model *m;
    sd_backend *b;
    sd_kv *kv;
    sd_kv_seq seq;
    const sd_tokenizer *tok;
    int32_t *hist; /* [n_prompt + max_tokens] prompt then generated ids */
    int32_t n_prompt, n_hist, vocab;
    float *logits; /* [vocab] */
    void *scratch; /* sampler scratch */
    FILE *dump;
    sd_diag d;
} gen_run;

static void run_free(gen_run *r)
{
    if (r->kv)
        sd_kv_seq_release(r->kv, &r->seq);
    sd_kv_free(r->kv);
    sd_backend_free(r->b);
    sd_model_free(r->m);
    free(r->hist);
    free(r->logits);
    free(r->scratch);
    if (r->dump)
        fclose(r->dump);
}

/* Runs tokens [n] at the end of the sequence; the last row's logits land in r->logits. */
static int run_tokens(gen_run *r, const int32_t *tokens, int32_t n)
{
    int rc = sd_kv_seq_append(r->kv, &r->seq, n);
    if (rc != 0)
        return sd_diag_set(&r->d, rc, "KV cache: no room for %d more tokens", n);
    sd_batch_seq bs = {.pos = r->seq.n_tokens - n,
                       .n_tokens = n,
                       .tokens = tokens,
                       .block_table = r->seq.blocks,
                       .all_logits = 0};
    return sd_backend_forward(r->b, &bs, 1, r->logits, &r->d);
}

static int prompt_ids(gen_run *r, const gen_args *a, int32_t **ret, int32_t *ret_n)
{
    if (a->prompt_ids) {
        if (parse_ids(a->prompt_ids, r->vocab, ret, ret_n) != 0)
            return sd_diag_set(&r->d, SD_EINVAL, "--prompt-ids: want comma-separated ids in [0, %d)",
                               r->vocab);
        return 0;
    }
    if (!r->tok)
        return sd_diag_set(&r->d, SD_ENOTFOUND, "%s has no tokenizer.json: use --prompt-ids", a->model);
    size_t n = 0;
    int rc = sd_tok_encode(r->tok, a->prompt, strlen(a->prompt), !a->no_bos, ret, &n, &r->d);
    *ret_n = (int32_t)n;
    return rc;
}

static int setup(gen_run *r, gen_args *a)
{
    int rc = sd_model_open(&r->m, a->model, &r->d);
    if (rc != 0)
        return rc;
    const sd_model_config *c = sd_model_cfg(r->m);
    r->vocab = c->vocab;
    r->tok = sd_model_tokenizer(r->m);
    int32_t *ids = NULL, n = 0;
    if ((rc = prompt_ids(r, a, &ids, &n)) != 0)
        return rc;
    if (n == 0 || n >= c->max_pos) {
        free(ids);
        return sd_diag_set(&r->d, SD_EINVAL, "the prompt has %d tokens; the model takes 1..%d", n,
                           c->max_pos - 1);
    }
    if (a->max_tokens > c->max_pos - n) {
        fprintf(stderr, "sparsed generate: max tokens capped at %d by the model's context\n", c->max_pos - n);
        a->max_tokens = c->max_pos - n;
    }
    r->hist = realloc(ids, (size_t)(n + a->max_tokens) * sizeof *ids);
    if (!r->hist) {
        free(ids);
        return sd_diag_set(&r->d, SD_ENOMEM, "out of memory");
    }
    r->n_prompt = r->n_hist = n;
    const sd_gen_defaults *gd = sd_model_gen_defaults(r->m);
    if (!a->have_temperature) /* HF semantics: greedy unless the model asks for sampling */
        a->s.temperature =
            gd && gd->do_sample == 1 ? (gd->temperature >= 0 ? (float)gd->temperature : 1.0f) : 0;

    sd_backend_opts o;
    sd_backend_opts_default(&o);
    o.n_threads = a->threads;
    o.kv_blocks = (n + a->max_tokens + o.block_size - 1) / o.block_size + 1; /* this one sequence */
    if (!strcmp(a->backend, "cpu"))
        rc = sd_backend_cpu_init(&r->b, r->m, &o, &r->d);
#ifdef SD_HAVE_CUDA
    else if (!strcmp(a->backend, "cuda"))
        rc = sd_backend_cuda_init(&r->b, r->m, &o, &r->d);
#endif
    else
        rc = sd_diag_set(&r->d, SD_ENOTSUP, "backend '%s' is not available in this build", a->backend);
    if (rc != 0)
        return rc;
    if ((rc = sd_kv_init(&r->kv, r->b->kv_blocks, r->b->block_size, &r->d)) != 0)
        return rc;
    sd_kv_seq_init(&r->seq);
    r->logits = malloc((size_t)r->vocab * sizeof *r->logits);
    r->scratch = malloc(sd_sampler_scratch_bytes(r->vocab));
    if (!r->logits || !r->scratch)
        return sd_diag_set(&r->d, SD_ENOMEM, "out of memory");
    if (a->dump && !(r->dump = fopen(a->dump, "wb")))
        return sd_diag_set(&r->d, SD_EIO, "%s: %s", a->dump, strerror(errno));
    return 0;
}

static int is_eos(const gen_run *r, int32_t tok)
{
    const int32_t *eos;
    int n = sd_model_eos_ids(r->m, &eos);
    for (int i = 0; i < n; i++)
        if (eos[i] == tok)
            return 1;
    return 0;
}

static void emit(gen_run *r, sd_tok_stream *st, int32_t tok)
{
    char buf[256];
    size_t len = 0;
    if (!r->tok) {
        printf("%s%d", r->n_hist > r->n_prompt + 1 ? " " : "", tok);
    } else if (sd_tok_stream_push(st, tok, buf, sizeof buf, &len) == 0) {
        fwrite(buf, 1, len, stdout);
    }
    fflush(stdout);
}

static int write_ids_json(const gen_run *r, const char *path)
{
    char name[4096];
    snprintf(name, sizeof name, "%s.json", path);
    FILE *f = fopen(name, "w");
    if (!f)
        return -1;
    fprintf(f, "{\"vocab\": %d, \"prompt_ids\": [", r->vocab);
    for (int32_t i = 0; i < r->n_prompt; i++)
        fprintf(f, "%s%d", i ? ", " : "", r->hist[i]);
    fprintf(f, "], \"generated_ids\": [");
    for (int32_t i = r->n_prompt; i < r->n_hist; i++)
        fprintf(f, "%s%d", i > r->n_prompt ? ", " : "", r->hist[i]);
    fprintf(f, "]}\n");
    return fclose(f) == 0 ? 0 : -1;
}

/* Prefill in chunks of the backend's batch limit, then decode until EOS or max_tokens. */
static int generate(gen_run *r, const gen_args *a, double *t_prefill, double *t_decode)
{
    double t0 = now_s();
    int rc = 0;
    for (int32_t done = 0; done < r->n_prompt && rc == 0;) {
        int32_t n = r->n_prompt - done < r->b->max_batch_tokens ? r->n_prompt - done : r->b->max_batch_tokens;
        rc = run_tokens(r, r->hist + done, n);
        done += n;
    }
    double t1 = now_s();
    *t_prefill = t1 - t0;
    sd_tok_stream st;
    if (r->tok)
        sd_tok_stream_init(&st, r->tok, 1);
    sd_rng rng;
    sd_rng_seed(&rng, a->s.seed);
    for (int32_t i = 0; i < a->max_tokens && rc == 0; i++) {
        if (i > 0 && (rc = run_tokens(r, &r->hist[r->n_hist - 1], 1)) != 0)
            break;
        if (r->dump && fwrite(r->logits, sizeof(float), (size_t)r->vocab, r->dump) != (size_t)r->vocab)
            return sd_diag_set(&r->d, SD_EIO, "%s: write failed", a->dump);
        int32_t tok =
            sd_sample(r->logits, r->vocab, &a->s, r->hist, r->n_hist, r->n_prompt, &rng, r->scratch);
        r->hist[r->n_hist++] = tok;
        if (!a->ignore_eos && is_eos(r, tok))
            break;
        emit(r, &st, tok);
    }
    if (r->tok && rc == 0) {
        char buf[64];
        size_t len = 0;
        if (sd_tok_stream_flush(&st, buf, sizeof buf, &len) == 0)
            fwrite(buf, 1, len, stdout);
    }
    printf("\n");
    fflush(stdout);
    *t_decode = now_s() - t1;
    if (rc == 0 && r->dump && write_ids_json(r, a->dump) != 0)
        rc = sd_diag_set(&r->d, SD_EIO, "%s.json: write failed", a->dump);
    return rc;
}

/* --warmup: the backend's first-use work (kernel tuning, graph capture) for this one sequence's
 * shapes before the timed prefill and decode; a backend without any says so. */
static int warm_up(gen_run *r)
{
    if (!sd_backend_wants_warmup(r->b)) {
        fprintf(stderr, "warm-up: nothing to warm up on the %s backend\n", r->b->vt->name);
        return 0;
    }
    const sd_warmup_opts o = {1, r->b->max_batch_tokens, sd_model_cfg(r->m)->max_pos, NULL, NULL, 0, 0};
    sd_warmup_stats st;
    const int rc = sd_backend_warmup(r->b, &o, &st, &r->d);
    if (rc == 0)
        fprintf(stderr, "warm-up: %d steps in %.1f s (not in the timings below)\n", st.steps, st.seconds);
    return rc;
}

int sd_cmd_generate(int argc, char **argv)
{
    gen_args a;
    int prc = parse_args(argc, argv, &a);
    if (prc != 0) {
        usage(prc > 0 ? stdout : stderr);
        return prc > 0 ? 0 : 2;
    }
    gen_run r;
    memset(&r, 0, sizeof r);
    double tp = 0, td = 0;
    int rc = setup(&r, &a);
    if (rc == 0 && a.warmup)
        rc = warm_up(&r);
    if (rc == 0)
        rc = generate(&r, &a, &tp, &td);
    if (rc != 0) {
        fprintf(stderr, "sparsed generate: %s\n", sd_diag_str(&r.d, rc));
        run_free(&r);
        return 1;
    }
    int32_t n_gen = r.n_hist - r.n_prompt;
    /* the first token comes from the prefill: decode speed counts the steps after it */
    fprintf(
        stderr, "prompt tokens: %d, generated tokens: %d, prefill: %.3f s (%.1f tok/s), decode: %.1f tok/s\n",
        r.n_prompt, n_gen, tp, tp > 0 ? r.n_prompt / tp : 0.0, td > 0 && n_gen > 1 ? (n_gen - 1) / td : 0.0);
    run_free(&r);
    return 0;
}
