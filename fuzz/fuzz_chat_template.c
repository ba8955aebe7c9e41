/* fuzz_chat_template: the Jinja chat-template parser and renderer (engine/chat_template.h,
 * engine/jinja*.c). Input: template source, then optionally a NUL and a JSON messages array
 * (a fixed conversation otherwise). */
#include <stdint.h>
#include <stdlib.h>

#include "engine/chat_template.h"
#include "fuzz/fuzz_util.h"

static const char default_msgs[] =
    "[{\"role\":\"system\",\"content\":\"You are terse.\"},{\"role\":\"user\",\"content\":\"hi <b>\"},"
    "{\"role\":\"assistant\",\"content\":\"hello\"},{\"role\":\"user\",\"content\":[{\"type\":\"text\","
    "\"text\":\"again\"}]}]";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    size_t n1;
    const uint8_t *rest = sd_fuzz_split(data, n, &n1);
    char *src = sd_fuzz_strndup(data, n1);
    if (!src)
        return 0;
    json_t *msgs = NULL;
    if (rest)
        msgs = json_loadb((const char *)rest, n - n1 - 1, 0, NULL);
    if (!msgs)
        msgs = json_loads(default_msgs, 0, NULL);
    json_t *norm = NULL;
    if (msgs && sd_chat_messages_normalize(msgs, &norm, NULL) < 0)
        norm = json_incref(msgs); /* the renderer must also cope with unnormalised input */
    sd_chat_template *t = NULL;
    if (norm && sd_chat_template_init(&t, src, NULL) == 0) {
        json_t *extra = json_pack("{s:b,s:s,s:s}", "add_generation_prompt", (int)(n & 1), "bos_token", "<s>",
                                  "eos_token", "</s>");
        char *out = NULL;
        size_t out_len = 0;
        if (sd_chat_template_render(t, norm, extra, &out, &out_len, NULL) == 0) {
            if (strlen(out) > out_len)
                abort(); /* the reported length covers the text */
            free(out);
        }
        json_decref(extra);
        sd_chat_template_free(t);
    }
    json_decref(norm);
    json_decref(msgs);
    free(src);
    return 0;
}
