/* jthink: a validator that lets the text think before another validator holds it (jthink.h). */
#include "jthink.h"

#include <string.h>

#include "diag.h"
#include "jsonc_utf8.h"

static const char OPEN[] = "<think>", CLOSE[] = "</think>";
#define OPEN_LEN (sizeof OPEN - 1)
#define CLOSE_LEN (sizeof CLOSE - 1)

/* The header: where the text is, and per phase the tag's bytes matched (pos) or the whitespace
 * after the block (gap); both 0 outside their phase, so equal places have equal bytes. */
struct hdr {
    uint8_t phase;
    uint8_t pos;
    uint8_t gap;
    uint8_t zero[SD_JTHINK_HEADER - 3];
};
_Static_assert(sizeof(struct hdr) == SD_JTHINK_HEADER, "the header is the inner state's offset");

enum {
    P_START, /* SD_THINK_MAY: "<think>" may open (pos: its bytes matched) */
    P_THINK, /* inside the block (pos: bytes of "</think>" matched) */
    P_CLOSE, /* the thinking was ended: only the rest of "</think>" (pos matched) */
    P_GAP,   /* after the block: up to SD_JTHINK_MAX_GAP whitespace bytes (gap) */
    P_INNER, /* the inner validator's text */
};

void *sd_jthink_inner(void *state)
{
    return (char *)state + SD_JTHINK_HEADER;
}

static const void *inner_c(const void *state)
{
    return (const char *)state + SD_JTHINK_HEADER;
}

static int enter_inner(struct hdr *h, const sd_jval *in, void *state, unsigned byte)
{
    h->phase = P_INNER;
    h->pos = h->gap = 0;
    return in->step(in->ctx, sd_jthink_inner(state), byte);
}

static int tk_step(const void *ctx, void *state, unsigned byte)
{
    const sd_jval *in = ctx;
    struct hdr *h = state;
    switch (h->phase) {
    case P_START:
        if (byte == (unsigned char)OPEN[h->pos]) {
            if (++h->pos == OPEN_LEN)
                h->phase = P_THINK, h->pos = 0;
            return 0;
        }
        /* no block after all: the bytes matched so far are the inner text's, then this one */
        for (int i = 0; i < h->pos; i++)
            if (in->step(in->ctx, sd_jthink_inner(state), (unsigned char)OPEN[i]) < 0)
                return -1;
        return enter_inner(h, in, state, byte);
    case P_THINK: /* '<' opens the tag only at its start: a mismatch restarts at 0 or 1 */
        h->pos = byte == (unsigned char)CLOSE[h->pos] ? h->pos + 1 : byte == '<';
        if (h->pos == CLOSE_LEN)
            h->phase = P_GAP, h->pos = 0;
        return 0;
    case P_CLOSE:
        if (byte != (unsigned char)CLOSE[h->pos])
            return -1;
        if (++h->pos == CLOSE_LEN)
            h->phase = P_GAP, h->pos = 0;
        return 0;
    case P_GAP:
        if (json_ws(byte) && h->gap < SD_JTHINK_MAX_GAP) {
            h->gap++;
            return 0;
        }
        return enter_inner(h, in, state, byte);
    default:
        return in->step(in->ctx, sd_jthink_inner(state), byte);
    }
}

static int tk_complete(const void *ctx, const void *state)
{
    const sd_jval *in = ctx;
    const struct hdr *h = state;
    return h->phase == P_INNER && in->complete(in->ctx, inner_c(state));
}

/* Where the inner text may begin next (or has begun), the end is the inner validator's to allow. */
static int tk_can_end(const void *ctx, const void *state)
{
    const sd_jval *in = ctx;
    const struct hdr *h = state;
    int outside = h->phase == P_INNER || h->phase == P_GAP || (h->phase == P_START && h->pos == 0);
    return outside && in->can_end && in->can_end(in->ctx, inner_c(state));
}

/* Inside the block every byte goes: any plain text continues it. */
static int tk_plain(const void *ctx, const void *state)
{
    const sd_jval *in = ctx;
    const struct hdr *h = state;
    if (h->phase == P_THINK)
        return 1;
    return h->phase == P_INNER && in->in_plain_string(in->ctx, inner_c(state));
}

int sd_jthink_wrap(const sd_jval *inner, sd_jval *ret)
{
    if (inner->size + SD_JTHINK_HEADER > SD_JVAL_MAX_STATE)
        return SD_EINVAL;
    *ret = (sd_jval){inner,
                     inner->id | (uint64_t)1 << 63,
                     inner->size + SD_JTHINK_HEADER,
                     tk_step,
                     tk_complete,
                     tk_can_end,
                     tk_plain};
    return 0;
}

void sd_jthink_init(void *state, sd_think start)
{
    struct hdr *h = state;
    memset(h, 0, sizeof *h);
    h->phase = start == SD_THINK_OPEN ? P_THINK : P_START;
}

int sd_jthink_thinking(const void *state)
{
    const struct hdr *h = state;
    return h->phase == P_THINK || h->phase == P_CLOSE;
}

int sd_jthink_past(const void *state)
{
    const struct hdr *h = state;
    return h->phase == P_GAP || h->phase == P_INNER;
}

void sd_jthink_close(void *state)
{
    struct hdr *h = state;
    if (h->phase == P_THINK)
        h->phase = P_CLOSE; /* pos stays: a tag begun is finished, not begun again */
}

/* Any text, ended anywhere. */
static int free_step(const void *ctx, void *state, unsigned byte)
{
    (void)ctx, (void)state, (void)byte;
    return 0;
}

static int free_complete(const void *ctx, const void *state)
{
    (void)ctx, (void)state;
    return 0;
}

static int free_yes(const void *ctx, const void *state)
{
    (void)ctx, (void)state;
    return 1;
}

const sd_jval sd_jval_free = {NULL, SD_JVAL_FREE_ID, 8, free_step, free_complete, free_yes, free_yes};
