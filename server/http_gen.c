/* http_gen: one /v1 generation request in flight — its lifetime (references), engine events,
 * the SSE stream (suspend/resume), the final JSON body, cancellation and disconnects. */
#include "server/http_impl.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "engine/tokenizer.h"
#include "server/log.h"

static void gen_free(sd_http__gen *g)
{
    sd_http *h = g->h;
    pthread_mutex_lock(&h->mu);
    if (g->prev)
        g->prev->next = g->next;
    else if (h->gens == g)
        h->gens = g->next;
    if (g->next)
        g->next->prev = g->prev;
    pthread_mutex_unlock(&h->mu);
    for (int i = 0; i < g->n_ch; i++) {
        free(g->ch[i].text);
        free(g->ch[i].toks);
    }
    for (int i = 0; g->pids && i < g->n_pids; i++)
        free(g->pids[i]);
    free(g->pids);
    free(g->plen);
    free(g->ch);
    free(g->out);
    sd_api_req_free(&g->req);
    sd_http__slot_put(g->slot); /* may free a replaced model: after its last request */
    pthread_mutex_destroy(&g->mu);
    free(g);
}

static void gen_unref(sd_http__gen *g)
{
    pthread_mutex_lock(&g->mu);
    int last = --g->refs == 0;
    pthread_mutex_unlock(&g->mu);
    if (last)
        gen_free(g);
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 16;
    while (n < need)
        n *= 2;
    void *q = realloc(*p, n * elem);
    if (!q)
        return -1;
    *p = q;
    *cap = n;
    return 0;
}

int sd_http__text_append(gen_choice *c, const char *s, size_t n)
{
    size_t clen = 0;
    char *clean = sd_api_utf8_sanitize(s, n, &clen);
    if (!clean || grow((void **)&c->text, &c->cap, c->len + clen + 1, 1) < 0) {
        free(clean);
        return -1;
    }
    memcpy(c->text + c->len, clean, clen);
    c->len += clen;
    c->text[c->len] = 0;
    free(clean);
    return 0;
}

static sd_api_tok *tok_push(gen_choice *c)
{
    size_t cap = (size_t)c->cap_toks;
    if (grow((void **)&c->toks, &cap, (size_t)c->n_toks + 1, sizeof *c->toks) < 0)
        return NULL;
    c->cap_toks = (int)cap;
    sd_api_tok *t = &c->toks[c->n_toks++];
    memset(t, 0, sizeof *t);
    return t;
}

static void on_prompt(gen_choice *c, const sd_event *ev)
{
    const int32_t *ids = c->g->pids[c->prompt_idx];
    int32_t n = c->g->plen[c->prompt_idx];
    int k = c->g->req.logprobs;
    for (int32_t i = 0; i < n; i++) {
        sd_api_tok *t = tok_push(c);
        if (!t)
            return;
        t->id = ids[i];
        t->lp = i == 0 ? NAN : ev->prompt_logprobs[i - 1];
        if (i == 0 || !ev->prompt_top_ids)
            continue;
        t->n_top = k < ev->n_top ? k : ev->n_top;
        for (int j = 0; j < t->n_top; j++) {
            t->top_ids[j] = ev->prompt_top_ids[(size_t)(i - 1) * (size_t)ev->n_top + (size_t)j];
            t->top_lps[j] = ev->prompt_top_logprobs[(size_t)(i - 1) * (size_t)ev->n_top + (size_t)j];
        }
    }
    c->got_prompt = 1;
}

static void on_token(gen_choice *c, const sd_event *ev, double now)
{
    sd_http__gen *g = c->g;
    if (!g->got_first) {
        g->got_first = 1;
        sd_metrics_ttft(g->h->metrics, now - g->t_start);
    }
    if (c->t_last > 0)
        sd_metrics_itl(g->h->metrics, now - c->t_last);
    c->t_last = now;
    c->n_generated++;
    if (ev->text_len)
        sd_http__text_append(c, ev->text, ev->text_len);
    if (g->req.logprobs < 0)
        return;
    sd_api_tok *t = tok_push(c);
    if (!t)
        return;
    t->id = ev->token;
    t->lp = ev->logprob;
    t->n_top = ev->n_top < g->req.logprobs ? ev->n_top : g->req.logprobs;
    for (int j = 0; j < t->n_top; j++) {
        t->top_ids[j] = ev->top_ids[j];
        t->top_lps[j] = ev->top_logprobs[j];
    }
}

static void on_final(gen_choice *c, const sd_event *ev, double now)
{
    sd_http__gen *g = c->g;
    c->final = 1;
    g->n_final++;
    if (ev->type == SD_EV_ERROR) {
        c->err_code = ev->code ? ev->code : SD_EIO;
        snprintf(c->err_msg, sizeof c->err_msg, "%s", ev->message ? ev->message : sd_strerror(c->err_code));
    } else {
        c->finish = ev->finish == SD_FINISH_STOP     ? "stop"
                    : ev->finish == SD_FINISH_LENGTH ? "length"
                                                     : "abort";
        c->n_cached = ev->n_cached;
    }
    sd_metrics_tokens(g->h->metrics, 0, (uint64_t)c->n_generated);
    if (g->n_final == g->n_ch) {
        sd_metrics_tokens(g->h->metrics, (uint64_t)g->prompt_tokens, 0);
        sd_metrics_e2e(g->h->metrics, now - g->t_start);
    }
}

/* Queues g for the loop thread to resume (g->mu held; takes a reference). Returns 1 if the
 * caller must call the waker once g->mu is released. */
static int queue_wake(sd_http__gen *g)
{
    sd_http *h = g->h;
    if (!h->wake) { /* no loop thread to hand over to: resume here */
        g->suspended = 0;
        MHD_resume_connection(g->conn);
        return 0;
    }
    if (g->wake_queued)
        return 0;
    g->wake_queued = 1;
    g->refs++;
    pthread_mutex_lock(&h->wake_mu);
    g->wake_next = h->wake_head;
    h->wake_head = g;
    pthread_mutex_unlock(&h->wake_mu);
    return 1;
}

void sd_http_resume_pending(sd_http *h)
{
    pthread_mutex_lock(&h->wake_mu);
    sd_http__gen *g = h->wake_head;
    h->wake_head = NULL;
    pthread_mutex_unlock(&h->wake_mu);
    while (g) {
        sd_http__gen *next = g->wake_next;
        pthread_mutex_lock(&g->mu);
        g->wake_queued = 0;
        if (g->suspended && !g->closed && h->mhd) {
            g->suspended = 0;
            MHD_resume_connection(g->conn);
        }
        pthread_mutex_unlock(&g->mu);
        gen_unref(g);
        g = next;
    }
}

/* Usage's cached prompt tokens: each prompt counts once, with the smallest hit among its
 * choices (n > 1 runs a prompt several times; the choices of one step share nothing yet). */
static int64_t cached_tokens(const sd_http__gen *g)
{
    int64_t sum = 0;
    for (int i = 0; i < g->n_ch; i++) {
        int seen = 0; /* an earlier choice of this prompt counted it */
        for (int j = 0; j < i && !seen; j++)
            seen = g->ch[j].prompt_idx == g->ch[i].prompt_idx;
        if (seen)
            continue;
        int32_t least = g->ch[i].n_cached;
        for (int j = i + 1; j < g->n_ch; j++)
            if (g->ch[j].prompt_idx == g->ch[i].prompt_idx && g->ch[j].n_cached < least)
                least = g->ch[j].n_cached;
        sum += least;
    }
    return sum;
}

/* Engine thread: record the event, queue the connection for resumption if it waits for it. */
void sd_http__on_event(void *ud, const sd_event *ev)
{
    gen_choice *c = ud;
    sd_http__gen *g = c->g;
    double now = sd_http__now();
    int final = ev->type == SD_EV_DONE || ev->type == SD_EV_ERROR, wake = 0;
    pthread_mutex_lock(&g->mu);
    if (ev->type == SD_EV_PROMPT)
        on_prompt(c, ev);
    else if (ev->type == SD_EV_TOKEN)
        on_token(c, ev, now);
    else if (final && !c->final)
        on_final(c, ev, now);
    if (g->suspended && !g->closed && (g->req.stream || g->n_final == g->n_ch))
        wake = queue_wake(g);
    sd_http *h = g->h;
    pthread_mutex_unlock(&g->mu);
    if (final)
        gen_unref(g);
    if (wake)
        h->wake(h->wake_ud);
}

/* ---- SSE building (MHD thread, g->mu held) ---- */

static int out_put(sd_http__gen *g, char *s)
{
    if (!s)
        return -1;
    size_t n = strlen(s);
    if (grow((void **)&g->out, &g->out_cap, g->out_len + n, 1) < 0) {
        free(s);
        return -1;
    }
    memcpy(g->out + g->out_len, s, n);
    g->out_len += n;
    free(s);
    return 0;
}

/* A chat choice's next increment (server/reply.h: reasoning, content, and at the end the tool
 * calls, which finish it with "tool_calls"). The caller frees o->calls. */
static void chat_delta(sd_http__gen *g, gen_choice *c, int final, sd_reply_pos *pos, sd_api_choice_out *o)
{
    sd_reply_delta d;
    if (sd_reply_next(&g->reply, c->text ? c->text : "", c->len, final, pos, &d) < 0)
        sd_log_warn(g->rid, "tool calls: out of memory; the reply is sent as text");
    o->text = d.content ? d.content : "";
    o->text_len = d.content_len;
    o->reasoning = d.reasoning;
    o->reasoning_len = d.reasoning_len;
    o->has_reasoning = d.had_reasoning;
    o->calls = d.calls;
    o->n_calls = d.n_calls;
    o->content_null = d.content_null;
    if (d.called && o->finish && !strcmp(o->finish, "stop"))
        o->finish = "tool_calls";
}

static void choice_chunk(sd_http__gen *g, gen_choice *c)
{
    int echo_lp = g->req.echo && g->req.logprobs >= 0;
    if (c->err_code || c->finish_sent || (echo_lp && !c->got_prompt && !c->final))
        return;
    int fin = c->final;
    sd_api_choice_out o = {.index = c->index,
                           .text = c->text ? c->text + c->sent : "",
                           .text_len = c->len - c->sent,
                           .toks = c->toks ? c->toks + c->toks_sent : NULL,
                           .n_toks = c->n_toks - c->toks_sent,
                           .text_offset0 = c->chars_sent,
                           .finish = fin ? c->finish : NULL};
    if (!fin && c->len == c->sent && !o.n_toks)
        return;                 /* nothing new: no rescan of the reply */
    sd_reply_pos pos = c->rpos; /* committed once the chunk is out: nothing lost to a failed one */
    if (g->meta.kind == SD_API_CHAT)
        chat_delta(g, c, fin, &pos, &o);
    if (!o.text_len && !o.reasoning_len && !o.n_calls && !o.n_toks && !fin) {
        c->rpos = pos; /* held back: nothing to send yet */
        c->sent = g->meta.kind == SD_API_CHAT ? c->len : c->sent;
        return;
    }
    int rc = out_put(g, sd_api_chunk(&g->meta, &o, 0, g->req.include_usage));
    sd_api_tool_calls_free((sd_api_tool_call *)o.calls, o.n_calls);
    if (rc < 0)
        return;
    c->rpos = pos;
    c->chars_sent += sd_api_utf8_chars(o.text, o.text_len);
    c->sent = g->meta.kind == SD_API_CHAT ? c->len : c->sent + o.text_len;
    c->toks_sent = c->n_toks;
    c->finish_sent |= fin;
}

static void build_pending(sd_http__gen *g)
{
    if (g->meta.kind == SD_API_CHAT && !g->role_sent) {
        for (int i = 0; i < g->n_ch; i++) {
            sd_api_choice_out o = {.index = g->ch[i].index, .text = ""};
            out_put(g, sd_api_chunk(&g->meta, &o, 1, g->req.include_usage));
        }
        g->role_sent = 1;
    }
    for (int i = 0; i < g->n_ch; i++)
        choice_chunk(g, &g->ch[i]);
    if (g->n_final < g->n_ch || g->done_sent)
        return;
    for (int i = 0; i < g->n_ch; i++)
        if (g->ch[i].err_code) { /* the stream has started: report in-band, then close */
            sd_api_err e;
            sd_api_fail(&e, 500, NULL, "engine_error", "%s", g->ch[i].err_msg);
            out_put(g, sd_api_error_event(&e));
            break;
        }
    if (g->req.include_usage) {
        sd_api_usage u = {.prompt = g->prompt_tokens, .cached = cached_tokens(g)};
        for (int i = 0; i < g->n_ch; i++)
            u.completion += g->ch[i].n_generated;
        out_put(g, sd_api_usage_chunk(&g->meta, &u));
    }
    out_put(g, strdup("data: [DONE]\n\n"));
    g->done_sent = 1;
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    sd_http__gen *g = cls;
    pthread_mutex_lock(&g->mu);
    if (g->out_off == g->out_len) {
        g->out_off = g->out_len = 0;
        build_pending(g);
    }
    if (g->out_off < g->out_len) {
        size_t n = g->out_len - g->out_off < max ? g->out_len - g->out_off : max;
        memcpy(buf, g->out + g->out_off, n);
        g->out_off += n;
        pthread_mutex_unlock(&g->mu);
        return (ssize_t)n;
    }
    if (g->done_sent) {
        pthread_mutex_unlock(&g->mu);
        return MHD_CONTENT_READER_END_OF_STREAM;
    }
    /* Nothing to send: park the connection until the engine thread resumes it. */
    g->suspended = 1;
    MHD_suspend_connection(g->conn);
    pthread_mutex_unlock(&g->mu);
    return 0;
}

/* ---- preparation (MHD thread) ---- */

sd_http__gen *sd_http__gen_new(sd_http *h, struct MHD_Connection *conn, sd_http__conn *c)
{
    sd_http__gen *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    pthread_mutex_init(&g->mu, NULL);
    g->refs = 1;
    g->h = h;
    g->conn = conn;
    g->t_start = c->t_start;
    g->rid = c->rid;
    pthread_mutex_lock(&h->mu);
    g->next = h->gens;
    if (h->gens)
        h->gens->prev = g;
    h->gens = g;
    pthread_mutex_unlock(&h->mu);
    return g;
}

static enum MHD_Result send_final(sd_http *h, struct MHD_Connection *conn, sd_http__conn *c, sd_http__gen *g)
{
    sd_api_choice_out *outs = calloc((size_t)g->n_ch, sizeof *outs);
    sd_api_usage u = {.prompt = g->prompt_tokens, .cached = cached_tokens(g)};
    sd_api_err e;
    if (!outs) {
        sd_api_fail(&e, 500, NULL, NULL, "out of memory");
        return sd_http__send_error(conn, c, &e);
    }
    pthread_mutex_lock(&g->mu);
    for (int i = 0; i < g->n_ch; i++) {
        gen_choice *ch = &g->ch[i];
        if (ch->err_code) {
            sd_api_fail(&e, sd_http__status_of(ch->err_code) == 400 ? 400 : 500, NULL, "engine_error", "%s",
                        ch->err_msg);
            pthread_mutex_unlock(&g->mu);
            for (int j = 0; j < i; j++)
                sd_api_tool_calls_free((sd_api_tool_call *)outs[j].calls, outs[j].n_calls);
            free(outs);
            return sd_http__send_error(conn, c, &e);
        }
        outs[i] = (sd_api_choice_out){.index = ch->index,
                                      .text = ch->text ? ch->text : "",
                                      .text_len = ch->len,
                                      .toks = ch->toks,
                                      .n_toks = ch->n_toks,
                                      .finish = ch->finish};
        sd_reply_pos pos = {0};
        if (g->meta.kind == SD_API_CHAT)
            chat_delta(g, ch, 1, &pos, &outs[i]);
        u.completion += ch->n_generated;
    }
    char *body = sd_api_response(&g->meta, outs, g->n_ch, &u);
    pthread_mutex_unlock(&g->mu);
    for (int i = 0; i < g->n_ch; i++)
        sd_api_tool_calls_free((sd_api_tool_call *)outs[i].calls, outs[i].n_calls);
    free(outs);
    sd_log_debug(c->rid, "finished: %lld prompt + %lld generated tokens", (long long)u.prompt,
                 (long long)u.completion);
    return sd_http__send(conn, c, 200, "application/json", body, body ? strlen(body) : 0);
}

static enum MHD_Result start_stream(struct MHD_Connection *conn, sd_http__conn *c, sd_http__gen *g)
{
    struct MHD_Response *r =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_reader, g, NULL);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream; charset=utf-8");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(r, "X-Request-Id", c->rid);
    c->status = 200;
    enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

enum MHD_Result sd_http__gen_handle(sd_http *h, struct MHD_Connection *conn, sd_http__conn *c)
{
    sd_api_err e;
    if (c->gen) /* resumed: every choice is final */
        return send_final(h, conn, c, c->gen);
    sd_http__gen *g = sd_http__gen_new(h, conn, c);
    if (!g) {
        sd_api_fail(&e, 500, NULL, NULL, "out of memory");
        return sd_http__send_error(conn, c, &e);
    }
    c->gen = g; /* released by on_completed -> sd_http__gen_closed */
    if (sd_http__gen_prepare(h, g, c, &e) < 0) {
        sd_http__gen_cancel(h, g);
        return sd_http__send_error(conn, c, &e);
    }
    sd_log_debug(c->rid, "%s: %d choice(s), %lld prompt tokens%s", c->url, g->n_ch,
                 (long long)g->prompt_tokens, g->req.stream ? ", streaming" : "");
    if (g->req.stream)
        return start_stream(conn, c, g);
    pthread_mutex_lock(&g->mu);
    if (g->n_final == g->n_ch) {
        pthread_mutex_unlock(&g->mu);
        return send_final(h, conn, c, g);
    }
    g->suspended = 1; /* the final event resumes us; MHD then calls the handler again */
    MHD_suspend_connection(conn);
    pthread_mutex_unlock(&g->mu);
    return MHD_YES;
}

void sd_http__gen_cancel(sd_http *h, sd_http__gen *g)
{
    pthread_mutex_lock(&g->mu);
    uint64_t *ids = malloc(((size_t)g->n_ch + 1) * sizeof *ids);
    int n = 0;
    for (int i = 0; ids && i < g->n_ch; i++)
        if (g->ch[i].submitted && !g->ch[i].final)
            ids[n++] = g->ch[i].eng_id;
    pthread_mutex_unlock(&g->mu);
    /* Outside g->mu: the engine may deliver events (which take g->mu) while we wait. */
    pthread_rwlock_rdlock(&h->engine_lock);
    for (int i = 0; i < n && !h->engine_gone; i++) /* n > 0 => g->slot is set */
        sd_engine_cancel(g->slot->m.engine, ids[i]);
    pthread_rwlock_unlock(&h->engine_lock);
    free(ids);
}

void sd_http__gen_closed(sd_http *h, sd_http__gen *g, int ok)
{
    pthread_mutex_lock(&g->mu);
    g->closed = 1;
    int unfinished = g->n_final < g->n_ch;
    pthread_mutex_unlock(&g->mu);
    if (unfinished) {
        sd_log_info(g->rid, "client went away: cancelling %s", g->id);
        sd_http__gen_cancel(h, g);
    }
    gen_unref(g);
}

void sd_http__gen_counts(sd_http__gen *g, int64_t *ret_prompt, int64_t *ret_generated)
{
    pthread_mutex_lock(&g->mu);
    int64_t n = 0;
    for (int i = 0; i < g->n_ch; i++)
        n += g->ch[i].n_generated;
    *ret_prompt = g->prompt_tokens;
    *ret_generated = n;
    pthread_mutex_unlock(&g->mu);
}

int sd_http__gen_peer_gone(sd_http__gen *g)
{
    pthread_mutex_lock(&g->mu);
    int gone = 0;
    if (g->suspended && !g->closed && !g->peer_gone) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(g->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        char b;
        ssize_t n = ci ? recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) : 1;
        gone = n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
        g->peer_gone = gone;
    }
    pthread_mutex_unlock(&g->mu);
    return gone;
}

/* Applies `fn` to the generations picked by `pick`, outside h->mu (cancel may block on the
 * engine's lock, and gen_free takes h->mu). References keep them alive meanwhile. */
static void for_gens(sd_http *h, int (*pick)(sd_http__gen *))
{
    pthread_mutex_lock(&h->mu);
    int n = 0;
    for (sd_http__gen *g = h->gens; g; g = g->next)
        n++;
    sd_http__gen **list = calloc((size_t)n + 1, sizeof *list);
    int k = 0;
    for (sd_http__gen *g = h->gens; g && list; g = g->next)
        if (pick(g)) {
            pthread_mutex_lock(&g->mu);
            int alive = g->refs > 0; /* 0: gen_free is about to unlink it */
            g->refs += alive;
            pthread_mutex_unlock(&g->mu);
            if (alive)
                list[k++] = g;
        }
    pthread_mutex_unlock(&h->mu);
    for (int i = 0; i < k; i++) {
        sd_http__gen_cancel(h, list[i]);
        gen_unref(list[i]);
    }
    free(list);
}

static int pick_all(sd_http__gen *g)
{
    return 1;
}

void sd_http_cancel_all(sd_http *h)
{
    if (atomic_load_explicit(&h->ready, memory_order_acquire))
        for_gens(h, pick_all);
}

void sd_http_reap_disconnected(sd_http *h)
{
    int n = sd_http__deadline_reap(h);
    if (n)
        sd_log_warn(NULL, "closed %d connection(s) that sent no whole request within request_timeout (%gs)",
                    n, h->o.request_timeout);
    if (atomic_load_explicit(&h->ready, memory_order_acquire))
        for_gens(h, sd_http__gen_peer_gone);
}
