/* chat_template: a model's chat template (tokenizer_config.json "chat_template") rendered with
 * our Jinja interpreter exactly as transformers' apply_chat_template renders it, plus the
 * normalisation of OpenAI-style messages the server applies first. */
#ifndef SD_CHAT_TEMPLATE_H
#define SD_CHAT_TEMPLATE_H

#include <stddef.h>

#include <jansson.h>

#include "diag.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sd_chat_template sd_chat_template;

/* Parses a template source once (syntax errors: SD_EFORMAT with the line). No special tokens
 * are set; pass bos_token etc. in `extra` when rendering. */
int sd_chat_template_init(sd_chat_template **ret, const char *source, sd_diag *d);

/* Loads a tokenizer_config.json: its chat_template (a string, or a list of {name, template}
 * from which "default" and "tool_use" are taken; if absent, chat_template.jinja beside the
 * file), and the named special tokens (bos_token, eos_token, unk_token, sep_token, pad_token,
 * cls_token, mask_token; strings or {"content": ...}) that transformers passes to templates.
 * A config without any template is SD_ENOTFOUND. */
int sd_chat_template_load(sd_chat_template **ret, const char *tokenizer_config_path, sd_diag *d);

void sd_chat_template_free(sd_chat_template *t);

/* What a template does with `tools`, read from its source (the tool_use template when there is
 * one): the markup of the calls it teaches the model, which the server parses from replies. */
typedef enum sd_chat_tools {
    SD_CHAT_TOOLS_IGNORED = 0, /* never reads `tools`: the model is not shown them */
    SD_CHAT_TOOLS_HERMES,      /* <tool_call>{"name": ..., "arguments": ...}</tool_call> (Qwen, Hermes) */
    SD_CHAT_TOOLS_LLAMA,       /* {"name": ..., "parameters": ...} (Llama 3.1-3.3, <|python_tag|>) */
    SD_CHAT_TOOLS_OTHER,       /* shows the tools, in a markup we do not parse */
} sd_chat_tools;
sd_chat_tools sd_chat_template_tools(const sd_chat_template *t);
/* 1 when a template speaks of "</think>" (Qwen3, DeepSeek-R1): its model writes reasoning in
 * <think> ... </think> before the answer. */
int sd_chat_template_thinks(const sd_chat_template *t);

/* Renders `messages` (a JSON array, passed through as-is) with the variables transformers
 * passes: the special tokens, tools = null, documents = null, add_generation_prompt = false,
 * then every key of `extra` (a JSON object or NULL; e.g. add_generation_prompt, tools,
 * enable_thinking) overriding them. With a non-null "tools" and a "tool_use" template, that
 * template is used. *ret is malloc'd UTF-8 (caller frees); errors (including the template's
 * raise_exception) are SD_EINVAL/SD_EFULL with a message. Thread-safe on a shared template. */
int sd_chat_template_render(const sd_chat_template *t, const json_t *messages, const json_t *extra,
                            char **ret, size_t *ret_len, sd_diag *d);

/* Copies an OpenAI messages array into the form templates expect: content given as a list of
 * parts [{"type": "text", "text": ...}] becomes the concatenated string; null content becomes
 * "" (assistant messages with tool_calls); tool_calls[].function.arguments given as a JSON
 * string holding an object becomes that object (templates print it with tojson, as
 * transformers' callers pass it; any other string stays a string). Non-text parts are SD_ENOTSUP; a message
 * that is not an object with a string "role" is SD_EINVAL. *ret is a new reference. */
int sd_chat_messages_normalize(const json_t *messages, json_t **ret, sd_diag *d);

#ifdef __cplusplus
}
#endif
#endif
