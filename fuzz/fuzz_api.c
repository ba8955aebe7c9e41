/* fuzz_api: the OpenAI request-body parsers (server/api_parse.c) on arbitrary bytes, for both
 * endpoints; accepted requests also go through message normalisation and response building. */
#include <stdint.h>
#include <stdlib.h>

#include "engine/chat_template.h"
#include "fuzz/fuzz_util.h"
#include "server/api.h"

/* Builds the answer shapes from a parsed request, as the HTTP layer would. */
static void exercise(const sd_api_req *r)
{
    if (r->kind == SD_API_CHAT && r->messages) {
        json_t *norm = NULL;
        if (sd_chat_messages_normalize(r->messages, &norm, NULL) == 0)
            json_decref(norm);
    }
    sd_api_meta m = {
        .kind = r->kind, .id = "cmpl-fuzz", .created = 1, .model = r->model ? r->model : "m", .logprobs = -1};
    const char *text = r->n_prompts > 0 && r->prompts[0].text ? r->prompts[0].text : "";
    sd_api_choice_out c = {.index = 0, .text = text, .text_len = strlen(text), .finish = "stop"};
    sd_api_usage u = {.prompt = 1, .completion = 1};
    free(sd_api_response(&m, &c, 1, &u));
    free(sd_api_chunk(&m, &c, 0, r->include_usage));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n)
{
    if (n < 1)
        return 0;
    /* The first byte picks the endpoint; the rest is the body (not NUL-terminated). */
    sd_api_kind kind = data[0] & 1 ? SD_API_CHAT : SD_API_COMPLETION;
    char *body = malloc(n - 1 ? n - 1 : 1);
    if (!body)
        return 0;
    memcpy(body, data + 1, n - 1);
    sd_api_req r;
    sd_api_err e;
    if (sd_api_parse(&r, kind, body, n - 1, &e) == 0) {
        exercise(&r);
        sd_api_req_free(&r);
    } else {
        if (e.status < 400 || e.status > 599)
            abort(); /* a failed parse must describe an HTTP error */
        free(sd_api_error_json(&e));
    }
    free(body);
    return 0;
}
