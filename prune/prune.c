/* prune: the pruning job — spec checks, calibration set, capture (one-shot or sequential),
 * per-layer solving, and the atomic bitmask checkpoint with provenance. */
#include "prune/prune.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine/cpu_capture.h"
#include "kernels/nm_format.h"
#include "prune/ckptw.h"
#include "prune/prune_impl.h"

void sd_prune_spec_default(sd_prune_spec *s)
{
    *s = (sd_prune_spec){.pattern = "2:4",
                         .solver = SD_SOLVER_SPARSEGPT,
                         .source = SD_CALIB_DECODE,
                         .tokens_budget = 16384,
                         .seq_len = 512,
                         .max_new_tokens = 256,
                         .temperature = 0,
                         .top_p = 1,
                         .mode = SD_PRUNE_ONESHOT,
                         .damping = 0.01,
                         .block_size = 128,
                         .modules = SD_PRUNE_ALL};
}

static const char *solver_names[] = {"sparsegpt", "wanda", "magnitude"};
static const char *source_names[] = {"decode", "text", "tokens"};
static const char *phase_names[] = {"load", "generate", "capture", "solve", "write", "done"};

int sd_prune_solver_parse(const char *s)
{
    for (int i = 0; i < 3; i++)
        if (s && strcmp(s, solver_names[i]) == 0)
            return i;
    return -1;
}

const char *sd_prune_solver_name(sd_prune_solver s)
{
    return (unsigned)s < 3 ? solver_names[s] : "?";
}

int sd_calib_source_parse(const char *s)
{
    for (int i = 0; i < 3; i++)
        if (s && strcmp(s, source_names[i]) == 0)
            return i;
    return -1;
}

const char *sd_calib_source_name(sd_calib_source s)
{
    return (unsigned)s < 3 ? source_names[s] : "?";
}

static double elapsed(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + 1e-9 * (double)(t.tv_nsec - t0->tv_nsec);
}

void sd__prune_report(sd__job *j, sd_prune_phase ph, int32_t layer, int64_t tokens, int64_t target, double f,
                      const char *detail)
{
    if (!j->progress)
        return;
    f = f < 0 ? 0 : f > 1 ? 1 : f;
    sd_prune_progress p = {.phase = ph,
                           .phase_name = phase_names[ph],
                           .layer = layer,
                           .n_layers = j->cfg ? j->cfg->n_layers : 0,
                           .tokens = tokens,
                           .tokens_target = target,
                           .fraction = j->frac_lo + f * (j->frac_hi - j->frac_lo),
                           .elapsed_s = elapsed(&j->t0),
                           .detail = detail};
    j->progress(j->ud, &p);
}

static void set_phase(sd__job *j, double lo, double hi)
{
    j->frac_lo = lo;
    j->frac_hi = hi;
}

static void gen_tick(void *ud, int64_t done, int64_t target)
{
    sd__job *j = ud;
    sd__prune_report(j, SD_PH_GENERATE, -1, done, target, target ? (double)done / (double)target : 1, NULL);
}

static int check_spec(const sd_prune_spec *s, sd__job *j, sd_diag *d)
{
    if (!s->model_dir || !s->out_dir)
        return sd_diag_set(d, SD_EINVAL, "prune: --model and --out are required");
    if (s->solver == SD_SOLVER_MAGNITUDE ? 0 : !s->input)
        return sd_diag_set(d, SD_EINVAL, "prune: the %s source needs an input file",
                           sd_calib_source_name(s->source));
    if ((unsigned)s->solver > SD_SOLVER_MAGNITUDE || (unsigned)s->source > SD_CALIB_TOKENS ||
        (unsigned)s->mode > SD_PRUNE_SEQUENTIAL || (unsigned)s->device > SD_PRUNE_DEV_CUDA)
        return sd_diag_set(d, SD_EINVAL, "prune: bad solver/source/mode/device");
    if (s->tokens_budget < 0 || s->seq_len < 2 || s->max_new_tokens < 1 || !(s->damping >= 0) ||
        s->block_size <= 0 || s->block_size % 32)
        return sd_diag_set(d, SD_EINVAL,
                           "prune: budget %lld, seq_len %d, max_new_tokens %d, damping %g, block size %d "
                           "(a multiple of 32)",
                           (long long)s->tokens_budget, s->seq_len, s->max_new_tokens, s->damping,
                           s->block_size);
    if ((s->modules & SD_PRUNE_ALL) == 0)
        return sd_diag_set(d, SD_EINVAL, "prune: no module selected");
    int rc = sd_nm_pattern_parse(s->pattern, &j->nm_n, &j->nm_m, d);
    if (rc == 0)
        sd_nm_pattern_format(j->nm_n, j->nm_m, j->pattern, sizeof j->pattern);
    return rc;
}

static int hess_layer_init(sd__job *j, int32_t l);

/* The forward backend. CPU: as many KV blocks as it picks. CUDA: a pool sized for the
 * generation slots or a replay batch of sequences up to seq_tokens long, not the backend's 90%
 * of free memory — the Hessian accumulators live on the same GPU. */
static int backend_init(sd__job *j, int32_t seq_tokens)
{
    const sd_prune_spec *s = j->spec;
    sd_backend_opts bo;
    sd_backend_opts_default(&bo);
    bo.n_threads = s->threads;
    bo.max_batch_tokens = s->seq_len > 2048 ? s->seq_len : 2048;
    if (!j->cuda_cap)
        return sd_backend_cpu_init(&j->backend, j->model, &bo, j->d);
#ifdef SD_HAVE_CUDA
    sd_calib_gen_opts go;
    sd_calib_gen_opts_default(&go);
    int32_t per_seq = (seq_tokens + bo.block_size) / bo.block_size; /* seq_tokens + 1, rounded up */
    int32_t gen = go.parallel * per_seq, replay = bo.max_batch_tokens / bo.block_size + 64;
    bo.kv_blocks = (gen > replay ? gen : replay) + per_seq;
    bo.device = s->cuda_device;
    int rc = sd_backend_cuda_init(&j->backend, j->model, &bo, j->d);
    if (rc != SD_ENOTSUP)
        return rc;
    /* a model the CUDA backend does not run (its head_dim, say): the CPU backend captures, as
     * before; provenance then says capture_device "cpu" */
    j->cuda_cap = 0;
    bo.kv_blocks = 0;
    bo.device = 0;
    return sd_backend_cpu_init(&j->backend, j->model, &bo, j->d);
#else
    return sd_diag_set(j->d, SD_ENOTSUP, "prune: this build has no CUDA backend");
#endif
}

/* Longest sequence of the calibration set (the replay's KV need). */
static int32_t longest_seq(const sd_calib_set *s)
{
    int32_t n = 0;
    for (int32_t i = 0; i < s->n; i++)
        n = s->seqs[i].n > n ? s->seqs[i].n : n;
    return n;
}

/* SparseGPT on the GPU runs its forward passes there too (one-shot and sequential), unless
 * SD_PRUNE_CPU_CAPTURE=1 asks for the CPU backend. Wanda and magnitude (CPU solvers) keep the
 * CPU backend. */
static int want_cuda_capture(const sd__job *j)
{
    const char *e = getenv("SD_PRUNE_CPU_CAPTURE");
    return j->gpu && j->spec->solver == SD_SOLVER_SPARSEGPT && !(e && strcmp(e, "1") == 0);
}

static int load_calib(sd__job *j)
{
    const sd_prune_spec *s = j->spec;
    int32_t vocab = j->cfg->vocab;
    int rc;
    if (s->solver == SD_SOLVER_MAGNITUDE)
        return 0; /* no data needed */
    if (s->source == SD_CALIB_TEXT)
        return sd_calib_load_text(j->model, s->input, s->seq_len, s->tokens_budget, &j->calib, j->d);
    if (s->source == SD_CALIB_TOKENS)
        return sd_calib_load_tokens(s->input, vocab, s->tokens_budget, &j->calib, j->d);
    sd_calib_set prompts = {0};
    if ((rc = sd_calib_load_prompts(j->model, s->model_dir, s->input, &prompts, j->d)) != 0)
        return rc;
    sd_calib_gen_opts go;
    sd_calib_gen_opts_default(&go);
    go.max_new_tokens = s->max_new_tokens;
    go.budget = s->tokens_budget;
    go.sampling.temperature = s->temperature;
    go.sampling.top_k = s->top_k;
    go.sampling.top_p = s->top_p;
    go.sampling.seed = s->seed;
    set_phase(j, 0.02, 0.45);
    if (!j->backend && (rc = backend_init(j, longest_seq(&prompts) + s->max_new_tokens)) != 0) {
        sd_calib_set_clear(&prompts);
        return rc;
    }
    /* one-shot: the decode-step rows are captured live as the dense model generates (the
     * replay identity makes this equal to a replay of the finished sequences, minus each
     * sequence's last token, which is never fed); sequential mode replays per layer */
    sd__cap cap = {.j = j, .lo = 0, .hi = j->cfg->n_layers - 1};
    if (s->mode == SD_PRUNE_ONESHOT) {
        for (int32_t l = 0; l < j->cfg->n_layers && rc == 0; l++)
            rc = hess_layer_init(j, l);
        if (rc != 0) {
            sd_calib_set_clear(&prompts);
            return rc;
        }
        go.begin = sd__prune_cap_begin_live;
        go.begin_ud = &cap;
        rc = sd__prune_cap_install(j, &cap, -1);
        j->live = 1;
    }
    if (rc == 0)
        rc = sd_calib_generate(j->backend, j->model, &prompts, &go, gen_tick, j, j->cancel, &j->calib, j->d);
    sd__prune_cap_install(j, NULL, -1);
    memcpy(j->calib.input_sha, prompts.input_sha, sizeof prompts.input_sha);
    sd_calib_set_clear(&prompts);
    return rc;
}

static int alloc_state(sd__job *j)
{
    int32_t L = j->cfg->n_layers;
    j->hess = calloc((size_t)L, sizeof *j->hess);
    if (!j->hess)
        return sd_diag_set(j->d, SD_ENOMEM, "prune: out of memory");
    return 0;
}

/* Accumulators for the sites whose linears are selected (none for magnitude). */
static int hess_layer_init(sd__job *j, int32_t l)
{
    static const unsigned site_mods[SD_CAP_N] = {SD_PRUNE_Q | SD_PRUNE_K | SD_PRUNE_V, SD_PRUNE_O,
                                                 SD_PRUNE_GATE | SD_PRUNE_UP, SD_PRUNE_DOWN};
    const sd_model_config *c = j->cfg;
    int64_t cols[SD_CAP_N] = {c->hidden, (int64_t)c->n_heads * c->head_dim, c->hidden, c->intermediate};
    for (int s = 0; s < SD_CAP_N; s++) {
        if (!(j->spec->modules & site_mods[s]))
            continue;
        /* SparseGPT on the GPU folds its full Hessians there; Wanda's diagonals stay here */
        int rc = j->gpu && j->spec->solver == SD_SOLVER_SPARSEGPT
                     ? sd_hess_init_gpu(&j->hess[l][s], cols[s], j->gpu, j->d)
                     : sd_hess_init(&j->hess[l][s], cols[s], j->spec->solver == SD_SOLVER_WANDA, j->d);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Rows that entered the Hessians (every site sees the same rows). */
static int64_t rows_captured(const sd__job *j)
{
    for (int s = 0; s < SD_CAP_N; s++)
        if (j->hess[0][s])
            return sd_hess_rows(j->hess[0][s]);
    return 0;
}

static int run_layers(sd__job *j)
{
    int32_t L = j->cfg->n_layers;
    int rc = 0;
    int need_data = j->spec->solver != SD_SOLVER_MAGNITUDE;
    if (j->spec->mode == SD_PRUNE_ONESHOT || !need_data) {
        for (int32_t l = 0; l < L && rc == 0 && need_data && !j->live; l++)
            rc = hess_layer_init(j, l);
        set_phase(j, 0.35, 0.6);
        if (rc == 0 && need_data && !j->live)
            rc = sd__prune_capture(j, 0, L - 1);
        j->rows = need_data ? rows_captured(j) : 0;
        /* one-shot: no forward pass is left, and the CPU backend's fp32 copy of every weight
         * (twice the checkpoint) should not stay resident through the solve (the CUDA backend,
         * on the GPU, is left as it was) */
        if (!j->cuda_cap) {
            sd_backend_free(j->backend);
            j->backend = NULL;
        }
        for (int32_t l = 0; l < L && rc == 0; l++) {
            set_phase(j, 0.6 + 0.35 * l / L, 0.6 + 0.35 * (l + 1) / L);
            rc = sd__prune_layer(j, l);
        }
        return rc;
    }
    for (int32_t l = 0; l < L && rc == 0; l++) {
        double lo = 0.35 + 0.6 * l / L, hi = 0.35 + 0.6 * (l + 1) / L;
        set_phase(j, lo, lo + 0.6 * (hi - lo));
        if ((rc = hess_layer_init(j, l)) == 0 && (rc = sd__prune_capture(j, l, l)) == 0) {
            if (l == 0)
                j->rows = rows_captured(j);
            set_phase(j, lo + 0.6 * (hi - lo), hi);
            rc = sd__prune_layer(j, l);
        }
    }
    return rc;
}

static json_t *provenance(const sd__job *j, const char *dense_sha)
{
    const sd_prune_spec *s = j->spec;
    char created[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", &tm);
    json_t *p = json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:i, s:s, s:s, s:f, s:i, s:s}", "dense_checkpoint", s->model_dir,
        "dense_sha256", dense_sha, "solver", sd_prune_solver_name(s->solver), "pattern", j->pattern,
        "calibration", s->solver == SD_SOLVER_MAGNITUDE ? "none" : sd_calib_source_name(s->source),
        "calibration_tokens", (json_int_t)j->rows, "calibration_tokens_budget", (json_int_t)s->tokens_budget,
        "calibration_sequences", j->calib.n, "input", s->input ? s->input : "", "input_sha256",
        j->calib.input_sha, "damping", s->damping, "block_size", s->block_size, "mode",
        s->mode == SD_PRUNE_ONESHOT ? "oneshot" : "sequential");
    if (!p)
        return NULL;
    json_object_set_new(p, "created", json_string(created));
    if (s->source == SD_CALIB_DECODE) {
        json_object_set_new(p, "max_new_tokens", json_integer(s->max_new_tokens));
        json_object_set_new(p, "temperature", json_real(s->temperature));
        json_object_set_new(p, "seed", json_integer((json_int_t)s->seed));
    } else if (s->source == SD_CALIB_TEXT) {
        json_object_set_new(p, "seq_len", json_integer(s->seq_len));
    }
    json_object_set_new(p, "total_sparsegpt_error", json_real(j->total_loss));
    json_object_set_new(p, "solver_device", json_string(j->gpu ? "cuda" : "cpu"));
    json_object_set_new(p, "capture_device",
                        json_string(s->solver == SD_SOLVER_MAGNITUDE ? "none"
                                    : j->cuda_cap                    ? "cuda"
                                                                     : "cpu"));
    json_object_set_new(p, "writer", json_string("sparsed prune"));
    return p;
}

/* Dense tensors as they are (borrowed from the mmap'd checkpoint), pruned linears as bitmask. */
static void *hash_main(void *arg)
{
    sd__hash_job *h = arg;
    h->rc = sd_ckptw_hash_dir(h->dir, h->hex, &h->stop, h->cancel, &h->d);
    return NULL;
}

static void hash_start(sd__job *j)
{
    sd__hash_job *h = &j->hash;
    h->dir = j->spec->model_dir;
    h->cancel = j->cancel;
    h->started = pthread_create(&h->th, NULL, hash_main, h) == 0;
}

/* Waits for the hash (or, with `stop`, makes it give up first); 0 and the hex when it finished. */
static int hash_join(sd__job *j, int stop, char hex[65])
{
    sd__hash_job *h = &j->hash;
    if (!h->started) /* no thread (it could not start, or already joined) */
        return stop ? 0 : sd_ckptw_hash_dir(j->spec->model_dir, hex, NULL, j->cancel, j->d);
    if (stop)
        sd_cancel_request(&h->stop);
    pthread_join(h->th, NULL);
    h->started = 0;
    if (stop)
        return 0;
    if (h->rc)
        return sd_diag_set(j->d, h->rc, "%s", h->d.msg);
    memcpy(hex, h->hex, 65);
    return 0;
}

/* Which selected linear (layer, k) tensor `name` is the weight of; 0 if none. */
static int pruned_linear(const sd__job *j, const char *name, int32_t *ret_layer, int *ret_k)
{
    for (int32_t l = 0; l < j->cfg->n_layers; l++) {
        const sd_layer_weights *lw = &sd_model_w(j->model)->layers[l];
        const sd_linear *ls[SD_LIN_N] = {&lw->q, &lw->k, &lw->v, &lw->o, &lw->gate, &lw->up, &lw->down};
        for (int k = 0; k < SD_LIN_N; k++) {
            size_t n = strlen(ls[k]->name);
            if ((j->spec->modules & (1u << k)) && strncmp(name, ls[k]->name, n) == 0 &&
                strcmp(name + n, ".weight") == 0) {
                *ret_layer = l;
                *ret_k = k;
                return 1;
            }
        }
    }
    return 0;
}

void sd__prune_drop_pages(const void *p, size_t n)
{
    long pg = sysconf(_SC_PAGESIZE);
    uintptr_t a = ((uintptr_t)p + (uintptr_t)pg - 1) & ~(uintptr_t)(pg - 1);
    uintptr_t b = ((uintptr_t)p + n) & ~(uintptr_t)(pg - 1);
    if (pg > 0 && b > a)
        madvise((void *)a, b - a, MADV_DONTNEED);
}

/* Opens the output before solving: dense tensors as they are (from the mmap'd checkpoint), the
 * pruned linears reserved in their places and written by sd__prune_layer as they are packed. */
static int writer_start(sd__job *j)
{
    const sd_ckpt *ck = sd_model_ckpt(j->model);
    int rc = sd_ckptw_open(&j->w, j->spec->out_dir, j->d);
    for (size_t i = 0; rc == 0 && i < sd_ckpt_count(ck); i++) {
        const sd_tensor_view *t = sd_ckpt_at(ck, i);
        int32_t layer;
        int k;
        if (pruned_linear(j, t->name, &layer, &k) && t->ndim == 2) {
            char base[1024];
            snprintf(base, sizeof base, "%.*s", (int)(strlen(t->name) - 7), t->name);
            rc = sd_ckptw_reserve_bitmask(j->w, base, t->shape[0], t->shape[1], j->pattern, j->d);
        } else {
            rc = sd_ckptw_add(j->w, t->name, t->dtype, t->ndim, t->shape, t->data, t->nbytes, j->d);
        }
    }
    if (rc == 0)
        rc = sd_ckptw_start(j->w, j->d);
    for (size_t i = 0; rc == 0 && i < sd_ckpt_count(ck); i++) {
        const sd_tensor_view *t = sd_ckpt_at(ck, i);
        int32_t layer;
        int k;
        if (!pruned_linear(j, t->name, &layer, &k))
            sd__prune_drop_pages(t->data, t->nbytes); /* written; the backend has its own copy */
    }
    return rc;
}

static int write_checkpoint(sd__job *j)
{
    json_t *prov = NULL;
    char sha[65] = "";
    int rc = hash_join(j, 0, sha);
    static const char *side[] = {"config.json", "generation_config.json", "tokenizer.json",
                                 "tokenizer_config.json", "chat_template.jinja"};
    for (size_t i = 0; rc == 0 && i < sizeof side / sizeof side[0]; i++)
        rc = sd_ckptw_copy_file(j->w, j->spec->model_dir, side[i], i == 0, j->d);
    if (rc == 0 && !(prov = provenance(j, sha)))
        rc = sd_diag_set(j->d, SD_ENOMEM, "prune: out of memory");
    if (rc == 0 && sd_cancel_requested(j->cancel))
        rc = sd_diag_set(j->d, SD_ECANCEL, "prune: cancelled before the checkpoint was committed");
    if (rc == 0)
        rc = sd_ckptw_commit(j->w, prov, j->d);
    json_decref(prov);
    return rc;
}

static void job_free(sd__job *j)
{
    char unused[65];
    hash_join(j, 1, unused); /* a job that ended early: stop the hash */
    if (j->cfg) {
        for (int32_t l = 0; l < j->cfg->n_layers; l++) {
            for (int s = 0; j->hess && s < SD_CAP_N; s++)
                sd_hess_free(j->hess[l][s]);
        }
    }
    free(j->hess);
    sd_ckptw_free(j->w); /* a job that failed or was cancelled leaves no output directory */
    sd_prune_gpu_free(j->gpu);
    sd_calib_set_clear(&j->calib);
    sd_backend_free(j->backend);
    sd_cpu_pool_free(j->pool);
    sd_model_free(j->model);
}

int sd_prune_run(const sd_prune_spec *spec, sd_prune_progress_fn progress, void *ud,
                 const volatile int *cancel, sd_prune_result *result, sd_diag *d)
{
    sd__job j = {.spec = spec, .progress = progress, .ud = ud, .cancel = cancel, .d = d, .gpu_site = -1};
    clock_gettime(CLOCK_MONOTONIC, &j.t0);
    set_phase(&j, 0, 0.02);
    int rc = check_spec(spec, &j, d);
    /* the GPU first: a build or machine without one fails before any work */
    if (rc == 0 && spec->device == SD_PRUNE_DEV_CUDA)
        rc = sd_prune_gpu_init(&j.gpu, spec->cuda_device, d);
    if (rc == 0 && (rc = sd_model_open(&j.model, spec->model_dir, d)) == 0) {
        j.cfg = sd_model_cfg(j.model);
        if (strcmp(sd_model_sparsity(j.model), "dense") != 0)
            rc = sd_diag_set(d, SD_EINVAL, "prune: %s is already sparse (%s); prune a dense checkpoint",
                             spec->model_dir, sd_model_sparsity(j.model));
    }
    sd__prune_report(&j, SD_PH_LOAD, -1, 0, 0, 1, NULL);
    if (rc == 0)
        hash_start(&j);
    j.cuda_cap = want_cuda_capture(&j);
    /* the CUDA backend is made once the sequence lengths are known (its KV pool is sized to them);
     * magnitude pruning runs no forward pass and needs none (the CPU backend would convert every
     * weight to fp32: twice the checkpoint in memory, and time) */
    int fwd = spec->solver != SD_SOLVER_MAGNITUDE;
    if (rc == 0 && (rc = sd_cpu_pool_init(&j.pool, spec->threads, d)) == 0 &&
        (j.cuda_cap || !fwd || (rc = backend_init(&j, 0)) == 0) && (rc = alloc_state(&j)) == 0 &&
        (rc = writer_start(&j)) == 0 && (rc = load_calib(&j)) == 0 &&
        (j.backend || !fwd || (rc = backend_init(&j, longest_seq(&j.calib))) == 0)) {
        if (spec->save_tokens)
            rc = sd_calib_save_tokens(&j.calib, spec->save_tokens, d);
        if (rc == 0)
            rc = run_layers(&j);
        set_phase(&j, 0.95, 1);
        sd__prune_report(&j, SD_PH_WRITE, -1, j.calib.kept, spec->tokens_budget, 0, NULL);
        if (rc == 0)
            rc = write_checkpoint(&j);
    }
    if (rc == 0) {
        sd__prune_report(&j, SD_PH_DONE, -1, j.calib.kept, spec->tokens_budget, 1, NULL);
        if (result)
            *result = (sd_prune_result){.calib_tokens = j.rows,
                                        .calib_seqs = j.calib.n,
                                        .seconds = elapsed(&j.t0),
                                        .total_loss = j.total_loss,
                                        .linears = j.linears};
    }
    job_free(&j);
    return rc;
}
