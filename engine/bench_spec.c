/* bench_spec: 'sparsed bench spec' — speculative decoding by prompt lookup (engine/spec.h)
 * against plain decoding on a real model, through the scheduler (engine/sched.h) as the server
 * runs it. Each workload is a set of greedy requests; every draft length is run beside draft
 * length 0 in alternating rounds (after one untimed round of each, which pays first-use tuning on
 * GPUs), and the table prints generated tokens a second, the ratio to no drafts measured in the
 * same rounds, tokens per step, the share of drafts kept, and whether every output was the same
 * as without drafts (it must be: the drafts only change how many steps the tokens take). */
#include "engine/bench_spec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/backend.h"
#include "engine/bench_common.h"
#include "engine/model.h"
#include "engine/sched.h"
#include "engine/tokenizer.h"
#ifdef SD_HAVE_CUDA
#include "engine/cuda_backend.h"
#endif

#define BS_MAX_K 8
#define BS_MAX_REQ 16
#define BS_MAX_GEN 2048

/* Prompts of a code model: text that repeats what came before (methods written alike, a test
 * table), and free continuation, where little repeats and drafts are rarely made. */
typedef struct bs_workload {
    const char *name, *prompt;
} bs_workload;

static const bs_workload k_work[] = {
    {"similar-methods",
     "class Vector:\n    def __init__(self, x, y):\n        self.x = x\n        self.y = y\n\n"
     "    def add(self, other):\n        return Vector(self.x + other.x, self.y + other.y)\n\n"
     "    def sub(self, other):\n        return Vector(self.x - other.x, self.y - other.y)\n\n"
     "    def mul(self, other):\n"},
    {"test-table", "import unittest\n\n\nclass TestParse(unittest.TestCase):\n    def test_int(self):\n"
                   "        self.assertEqual(parse(\"1\"), 1)\n\n    def test_float(self):\n"
                   "        self.assertEqual(parse(\"1.5\"), 1.5)\n\n    def test_"},
    {"free", "import numpy as np\n\n\ndef"},
};
#define BS_N_WORK (sizeof k_work / sizeof k_work[0])

typedef struct bs_opts {
    const char *model, *backend, *out, *prompt_file;
    const char *draft_model; /* --draft-model DIR: its drafts instead of the prompt lookup's */
    sd_model *dm;            /* opened, with its backend */
    sd_backend *db;
    int ks[BS_MAX_K], n_k;
    int gen, batch, rounds, threads, device, ngram_min, ngram_max;
} bs_opts;

static void usage(FILE *f)
{
    fprintf(f, "usage: sparsed bench spec [--model models/tiny] [--backend cpu|cuda] [--tokens 2,4,8]\n"
               "       [--gen 256] [--batch 1] [--rounds 3] [--ngram-min 2] [--ngram-max 4] [--threads 0]\n"
               "       [--device 0] [--prompt-file FILE] [--draft-model DIR] [--out FILE.md]\n");
}

static int parse_args(int argc, char **argv, bs_opts *o)
{
    *o = (bs_opts){.model = "models/tiny",
                   .backend = "cpu",
                   .gen = 256,
                   .batch = 1,
                   .rounds = 3,
                   .ngram_min = 2,
                   .ngram_max = 4};
    const char *ks = "2,4,8";
    const sd_bench_opt opts[] = {{"--model", SD_BENCH_STR, &o->model},
                                 {"--backend", SD_BENCH_STR, &o->backend},
                                 {"--tokens", SD_BENCH_STR, &ks},
                                 {"--gen", SD_BENCH_INT, &o->gen},
                                 {"--batch", SD_BENCH_INT, &o->batch},
                                 {"--rounds", SD_BENCH_INT, &o->rounds},
                                 {"--ngram-min", SD_BENCH_INT, &o->ngram_min},
                                 {"--ngram-max", SD_BENCH_INT, &o->ngram_max},
                                 {"--threads", SD_BENCH_INT, &o->threads},
                                 {"--device", SD_BENCH_INT, &o->device},
                                 {"--prompt-file", SD_BENCH_STR, &o->prompt_file},
                                 {"--out", SD_BENCH_STR, &o->out},
                                 {"--draft-model", SD_BENCH_STR, &o->draft_model}};
    const int p = sd_bench_parse_opts(argc, argv, opts, sizeof opts / sizeof opts[0]);
    if (p)
        return p;
    o->n_k = sd_bench_parse_ints(ks, o->ks, BS_MAX_K, SD_SPEC_MAX_TOKENS);
    if (o->n_k < 1 || o->gen < 1 || o->gen > BS_MAX_GEN || o->batch < 1 || o->batch > BS_MAX_REQ ||
        o->rounds < 1 || o->rounds > 100 || o->ngram_min < 1 || o->ngram_max < o->ngram_min ||
        o->ngram_max > SD_SPEC_MAX_NGRAM || o->threads < 0 || o->device < 0)
        return -1;
    if (strcmp(o->backend, "cpu") && strcmp(o->backend, "cuda"))
        return -1;
    return 0;
}

/* One request's tokens, recorded by its events, and with logprobs asked for, how far apart the
 * two best tokens' logprobs were at each one. */
typedef struct bs_rec {
    int32_t tok[BS_MAX_GEN];
    float gap[BS_MAX_GEN];
    int n, done, error;
} bs_rec;

static void on_event(void *ud, const sd_event *ev)
{
    bs_rec *r = ud;
    if (ev->type == SD_EV_TOKEN && r->n < BS_MAX_GEN) {
        r->gap[r->n] = ev->n_top >= 2 ? ev->top_logprobs[0] - ev->top_logprobs[1] : NAN;
        r->tok[r->n++] = ev->token;
    }
    r->done |= ev->type == SD_EV_DONE;
    r->error |= ev->type == SD_EV_ERROR;
}

/* What one run of a workload gave. */
typedef struct bs_run {
    double ms;
    int64_t gen;
    uint64_t steps, drafted, accepted;
} bs_run;

/* Runs `batch` copies of the prompt (greedy, gen tokens, EOS ignored) with draft length k to
 * completion; their tokens into rec[0..batch) (with the top-2 logprob gaps when `gaps`). */
static int run_once(sd_backend *b, const sd_model *m, const bs_opts *o, const int32_t *ids, int32_t n_ids,
                    int k, int gaps, bs_rec *rec, bs_run *out, sd_diag *d)
{
    sd_engine_opts eo;
    sd_engine_opts_default(&eo);
    eo.max_seqs = o->batch;
    eo.prefix_caching = 0; /* every run computes its prompts */
    eo.spec = (sd_spec_opts){k, o->ngram_min, o->ngram_max, o->batch, o->dm, o->db};
    sd_sched *s = NULL;
    int rc = sd_sched_init(&s, m, b, &eo, d);
    for (int i = 0; i < o->batch && rc == 0; i++) {
        sd_request_params p;
        sd_request_params_default(&p);
        p.prompt = ids;
        p.n_prompt = n_ids;
        p.max_tokens = o->gen;
        p.sampling.temperature = 0;
        p.ignore_eos = 1;
        if (gaps)
            p.logprobs = 2;
        memset(&rec[i], 0, sizeof rec[i]);
        sd_sched_req *r = NULL;
        if ((rc = sd_sched_req_new(s, &p, on_event, &rec[i], (uint64_t)i + 1, &r, d)) == 0)
            sd_sched_add(s, r);
    }
    const double t0 = sd_bench_now_ms();
    while (rc == 0 && sd_sched_has_work(s))
        rc = sd_sched_step(s, d);
    out->ms = sd_bench_now_ms() - t0;
    sd_engine_stats st;
    if (s) {
        sd_sched_stats(s, &st);
        out->gen = (int64_t)st.generation_tokens;
        out->steps = st.steps, out->drafted = st.spec_draft_tokens, out->accepted = st.spec_accepted_tokens;
    }
    sd_sched_free(s);
    for (int i = 0; i < o->batch && rc == 0; i++)
        if (!rec[i].done || rec[i].error)
            rc = sd_diag_set(d, SD_EINVAL, "bench spec: request %d did not finish", i);
    return rc;
}

/* The summed runs of one draft length on one workload. */
typedef struct bs_cell {
    double ms;
    int64_t gen;
    uint64_t steps, drafted, accepted;
    int same; /* every output equal to the no-draft run's */
} bs_cell;

static void cell_add(bs_cell *c, const bs_run *r)
{
    c->ms += r->ms, c->gen += r->gen, c->steps += r->steps, c->drafted += r->drafted,
        c->accepted += r->accepted;
}

static int same_tokens(const bs_rec *a, const bs_rec *b, int n)
{
    for (int i = 0; i < n; i++)
        if (a[i].n != b[i].n || memcmp(a[i].tok, b[i].tok, sizeof a[i].tok[0] * (size_t)a[i].n))
            return 0;
    return 1;
}

static void print_row(FILE *f, const char *work, int k, const bs_cell *c, const bs_cell *base)
{
    const double tps = c->gen / (c->ms / 1000.0), tps0 = base->gen / (base->ms / 1000.0);
    fprintf(f, "| %s | %d | %.1f | %.2fx | %.2f | ", work, k, tps, tps / tps0,
            (double)c->gen / (double)c->steps);
    if (k)
        fprintf(f, "%.0f%% | %s |\n", c->drafted ? 100.0 * c->accepted / c->drafted : 0.0,
                c->same ? "yes" : "NO");
    else
        fprintf(f, "- | - |\n");
}

/* Where the first output that differed from the no-draft run's parts from it, and how close the
 * no-draft run's two best tokens were there (rerun with logprobs): a line for the notes under the
 * table. The drafts change no arithmetic on the CPU; on a GPU a step of 1 + K rows may take other
 * kernels than a step of one, so a near-tie can go the other way, as between batch sizes. */
static int explain_diff(sd_backend *b, const sd_model *m, const bs_opts *o, const int32_t *ids, int32_t n_ids,
                        const char *name, int k, const bs_rec *diff, bs_rec *base, char *notes, size_t cap,
                        sd_diag *d)
{
    bs_run r = {0};
    int rc = run_once(b, m, o, ids, n_ids, 0, 1, base, &r, d);
    for (int i = 0; i < o->batch && rc == 0; i++) {
        int t = 0;
        while (t < base[i].n && t < diff[i].n && base[i].tok[t] == diff[i].tok[t])
            t++;
        if (t == base[i].n && t == diff[i].n)
            continue;
        size_t len = strlen(notes);
        snprintf(notes + len, cap - len,
                 "- %s, %d draft tokens: request %d parts from the run without drafts at generated token %d "
                 "(%d there, %d with drafts); the run without drafts had its two best tokens %.3g apart in "
                 "logprob at that token\n",
                 name, k, i, t, t < base[i].n ? base[i].tok[t] : -1, t < diff[i].n ? diff[i].tok[t] : -1,
                 t < base[i].n ? (double)base[i].gap[t] : NAN);
        break;
    }
    return rc;
}

/* Every draft length of one workload: a warm-up round, then `rounds` rounds that run each length
 * beside no drafts in turn (the rounds' times summed). */
static int bench_workload(sd_backend *b, const sd_model *m, const bs_opts *o, const char *name,
                          const char *text, FILE **outs, int n_out, char *notes, size_t cap, sd_diag *d)
{
    int32_t *ids = NULL;
    size_t n_ids = 0;
    int rc = sd_tok_encode(sd_model_tokenizer(m), text, strlen(text), 1, &ids, &n_ids, d);
    bs_rec *base = calloc((size_t)o->batch, sizeof *base), *rec = calloc((size_t)o->batch, sizeof *rec);
    bs_rec *diff = calloc((size_t)o->batch, sizeof *diff);
    int diff_k = 0; /* the draft length of the first run that differed, kept in diff */
    bs_cell cells[BS_MAX_K + 1] = {{0}};
    if (rc == 0 && (!base || !rec || !diff))
        rc = sd_diag_set(d, SD_ENOMEM, "bench spec: out of memory");
    for (int round = 0; round <= o->rounds && rc == 0; round++) {
        for (int j = 0; j <= o->n_k && rc == 0; j++) { /* j = 0: no drafts */
            bs_run r = {0};
            rc = run_once(b, m, o, ids, (int32_t)n_ids, j ? o->ks[j - 1] : 0, 0, j ? rec : base, &r, d);
            if (rc || round == 0) /* round 0 warms up */
                continue;
            cell_add(&cells[j], &r);
            const int same = j == 0 || same_tokens(base, rec, o->batch);
            cells[j].same = round == 1 ? same : cells[j].same && same;
            if (!same && !diff_k) {
                diff_k = o->ks[j - 1];
                memcpy(diff, rec, (size_t)o->batch * sizeof *diff);
            }
        }
    }
    if (rc == 0 && diff_k)
        rc = explain_diff(b, m, o, ids, (int32_t)n_ids, name, diff_k, diff, base, notes, cap, d);
    for (int i = 0; i < n_out && rc == 0; i++)
        for (int j = 0; j <= o->n_k; j++)
            print_row(outs[i], name, j ? o->ks[j - 1] : 0, &cells[j], &cells[0]);
    free(ids);
    free(base);
    free(rec);
    free(diff);
    return rc;
}

#define BS_MAX_PROMPT_BYTES (1 << 20)

/* The prompt file, NUL-terminated; NULL (the reason in d) when it cannot be read or passes 1 MB
 * (it would not fit the context of the models this runs on anyway). */
static char *read_prompt(const char *path, sd_diag *d)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        sd_diag_set(d, SD_EIO, "cannot read %s", path);
        return NULL;
    }
    char *buf = malloc(BS_MAX_PROMPT_BYTES);
    size_t n = buf ? fread(buf, 1, BS_MAX_PROMPT_BYTES - 1, f) : 0;
    const int whole = buf && !ferror(f) && fgetc(f) == EOF;
    fclose(f);
    if (!whole) {
        sd_diag_set(d, buf ? SD_EINVAL : SD_ENOMEM, "%s: %s", path,
                    buf ? "unreadable, or larger than 1 MB" : "out of memory");
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    return buf;
}

static int backend_new(const bs_opts *o, const sd_model *m, sd_backend **b, sd_diag *d)
{
    sd_backend_opts bo;
    sd_backend_opts_default(&bo);
    bo.n_threads = o->threads;
    bo.device = o->device;
    bo.kv_blocks = o->batch * ((BS_MAX_GEN + 1024) / 16 + 1);
    if (!strcmp(o->backend, "cpu"))
        return sd_backend_cpu_init(b, m, &bo, d);
#ifdef SD_HAVE_CUDA
    return sd_backend_cuda_init(b, m, &bo, d);
#else
    return sd_diag_set(d, SD_ENOTSUP, "bench spec: this build has no CUDA backend");
#endif
}

int sd_bench_spec_main(int argc, char **argv)
{
    bs_opts o;
    int p = parse_args(argc, argv, &o);
    if (p) {
        usage(p > 0 ? stdout : stderr);
        return p > 0 ? 0 : 2;
    }
    sd_diag d = {0};
    sd_model *m = NULL;
    sd_backend *b = NULL;
    char *custom = o.prompt_file ? read_prompt(o.prompt_file, &d) : NULL;
    int rc = o.prompt_file && !custom ? SD_EIO : 0;
    if (rc == 0)
        rc = sd_model_open(&m, o.model, &d);
    if (rc == 0 && !sd_model_tokenizer(m))
        rc = sd_diag_set(&d, SD_EINVAL, "%s has no tokenizer", o.model);
    if (rc == 0)
        rc = backend_new(&o, m, &b, &d);
    if (rc == 0 && o.draft_model && (rc = sd_model_open(&o.dm, o.draft_model, &d)) == 0)
        rc = backend_new(&o, o.dm, &o.db, &d);
    FILE *outs[2] = {stdout, NULL};
    int n_out = 1;
    if (rc == 0 && o.out && !(outs[n_out++] = fopen(o.out, "w")))
        rc = sd_diag_set(&d, SD_EIO, "cannot write %s", o.out);
    time_t now = time(NULL);
    char date[32];
    strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    for (int i = 0; i < n_out && rc == 0; i++) {
        fprintf(outs[i], "## bench spec: %s, %s backend, batch %d, %d tokens, drafts from ", o.model,
                o.backend, o.batch, o.gen);
        if (o.draft_model)
            fprintf(outs[i], "the draft model %s", o.draft_model);
        else
            fprintf(outs[i], "the prompt (n-grams %d-%d)", o.ngram_min, o.ngram_max);
        fprintf(outs[i], ", %d rounds\n\n- date: %s\n- command: `sparsed bench", o.rounds, date);
        for (int a = 0; a < argc; a++)
            fprintf(outs[i], " %s", argv[a]);
        fprintf(
            outs[i],
            "`\n\n| workload | draft tokens | tok/s | vs none | tokens/step | drafts kept | same output |\n"
            "| --- | --- | --- | --- | --- | --- | --- |\n");
    }
    char notes[4096] = "";
    for (size_t w = 0; w < BS_N_WORK && rc == 0 && !custom; w++)
        rc = bench_workload(b, m, &o, k_work[w].name, k_work[w].prompt, outs, n_out, notes, sizeof notes, &d);
    if (rc == 0 && custom)
        rc = bench_workload(b, m, &o, o.prompt_file, custom, outs, n_out, notes, sizeof notes, &d);
    for (int i = 0; i < n_out && rc == 0 && notes[0]; i++)
        fprintf(outs[i], "\nOutputs that differ from the run without drafts:\n\n%s", notes);
    if (rc < 0)
        fprintf(stderr, "sparsed bench spec: %s\n", sd_diag_str(&d, rc));
    if (outs[1])
        fclose(outs[1]);
    free(custom);
    sd_backend_free(b);
    sd_model_free(m);
    sd_backend_free(o.db);
    sd_model_free(o.dm);
    return rc < 0 ? 1 : 0;
}
