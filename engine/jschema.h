/* jschema: JSON-Schema-constrained sampling (OpenAI `response_format: {"type": "json_schema"}`).
 *
 * sd_jschema_compile turns a JSON Schema into flat arrays (sd_jschema, immutable, shareable
 * across threads); its states are byte-level incremental validators, small fixed-size buffers
 * that a trie walker copies at every node to find the tokens that keep the text a prefix of one
 * JSON document valid against the schema.
 *
 * The supported subset (anything else fails to compile with SD_EINVAL naming the keyword and
 * the JSON pointer of its schema node, e.g. "schema/properties/n: 'multipleOf' is not supported";
 * no constraint is ever ignored):
 *  - "type": "object" | "array" | "string" | "number" | "integer" | "boolean" | "null", or an
 *    array of them. Every schema needs "type", "enum", "const", "$ref" or "anyOf"/"oneOf" (an
 *    unconstrained value is not supported).
 *  - objects: "properties", "required", "additionalProperties". Extra keys are never
 *    generated: "additionalProperties" absent, true or false all mean "only the listed keys"
 *    (what OpenAI's strict mode demands); a schema there is rejected. Keys come in the order of
 *    "properties", each at most once; optional ones may be left out. A key is matched byte for
 *    byte in its plain form: property names that would need escaping (a '"', '\' or control
 *    character) are rejected; at most 255 properties per object.
 *  - arrays: "items" (required; a schema, not a tuple), "minItems", "maxItems" (0..255).
 *  - strings: "minLength", "maxLength" (code points, 0..65534; an escape counts as the one
 *    character it stands for); "pattern" in a regex subset and the "format"s date, time,
 *    date-time, uuid, email, ipv4 (jschema_re.c: a DFA over code points, every live state able
 *    to reach a match; not beside minLength, enum or const).
 *  - numbers: the JSON number grammar; "integer" admits no fraction or exponent (so 1.0 is not
 *    an integer here). "minimum", "maximum", "exclusiveMinimum" and "exclusiveMaximum" bound
 *    integers and numbers (jschema_num.c: fixed point, a character goes in only where the value
 *    can still end within them; a bounded number has no exponent and at most 19 digits).
 *  - "enum" / "const" of strings, numbers, booleans and null (not objects or arrays): the value
 *    must be one of them written exactly as JSON-encoded by jansson (compact: strings with
 *    their UTF-8 raw and only '"', '\' and control characters escaped, as \n or \u001F;
 *    integers in decimal; reals in their shortest round-trip form, with ".0" added to integral
 *    ones). Values whose type "type" excludes are dropped (a real counts as a number, never as
 *    an integer); string values outside minLength/maxLength too.
 *  - "anyOf" / "oneOf" (the same here) whose alternatives differ in the first byte of their
 *    values: at most one alternative per kind among object '{', array '[', string '"', number
 *    '-0-9', boolean 't' 'f', null 'n' (e.g. anyOf [{...object...}, {"type": "null"}]); no
 *    other keywords beside them. Alternatives that overlap (two objects, integer and number,
 *    two string enums) are rejected, and so is a oneOf listing one schema twice (two $refs to
 *    it: no value could match exactly one).
 *  - "$ref" to a local JSON pointer ("#", "#/$defs/Name", "#/definitions/Name", any "#/..."),
 *    recursion included; no other keywords beside it. "$defs" / "definitions" anywhere (their
 *    schemas are checked even when unused).
 *  - annotations, ignored: "title", "description", "default", "examples", "deprecated",
 *    "$schema", "$comment", and "$id" at the root only (below it, it would move the base of
 *    "$ref"s). Nothing else: not even "name", "nullable" or "x-..." extensions.
 *
 * The text: one JSON value (any type the root schema allows); whitespace between tokens in runs
 * of at most SD_JSCHEMA_MAX_WS bytes (as JSON mode: models otherwise fall into endless
 * newlines), before the value too but not after it; containers nested at most
 * SD_JSCHEMA_MAX_DEPTH deep (the limit matters for recursive or very deep schemas: near it, a
 * container, key or element is taken only if what it requires inside still fits, so every
 * accepted prefix can be completed; a schema all of whose documents nest deeper fails to
 * compile); strings as in jsonc.h (valid UTF-8, \uXXXX forming valid UTF-16).
 *
 * The end: sd_jschema_complete says 1 once nothing can follow: after the closing brace, bracket
 * or quote of the top-level value, after true/false/null, or after an enum number that no other
 * value of the enum extends; a mask then allows only end-of-sequence. A top-level number can
 * end or go on (12 may become 123): there sd_jschema_can_end says 1 while complete says 0, and
 * a mask must allow end-of-sequence beside the bytes that continue it whenever can_end is 1.
 *
 * Threading: an sd_jschema is read-only after compile. A state is a plain buffer owned by its
 * request; it must be aligned for uint16_t (malloc'd, or slots of sd_jschema_state_size bytes,
 * a multiple of 8, in one such buffer). */
#ifndef SD_JSCHEMA_H
#define SD_JSCHEMA_H

#include <stddef.h>
#include <stdint.h>

#include "diag.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SD_JSCHEMA_MAX_DEPTH 32  /* open containers at most */
#define SD_JSCHEMA_MAX_WS 32     /* whitespace bytes in one run at most */
#define SD_JSCHEMA_STATE_MAX 128 /* sd_jschema_state_size is never larger */

/* A compiled schema: immutable after compile, shareable across threads. */
typedef struct sd_jschema sd_jschema;

/* Compiles a JSON Schema given as JSON text (len bytes, no terminator needed). SD_EINVAL with a
 * message naming the problem and the JSON pointer of its node ("schema/properties/n: 'multipleOf'
 * is not supported") for malformed or unsupported schemas; SD_ENOMEM. *ret is set only on
 * success. */
int sd_jschema_compile(sd_jschema **ret, const char *json, size_t len, sd_diag *d);
/* SD_JSCHEMA_LENIENT: the content assertions the subset lacks (a "pattern" or "format" outside it, the
 * numeric bounds on values that are no numbers, "multipleOf", "minProperties", "maxProperties",
 * "uniqueItems", "propertyNames", "patternProperties", "contentEncoding", "contentMediaType") are left out
 * instead of refused, and "additionalProperties" may be a schema (extra keys are never generated, so it never
 * applies). For what OpenAI itself does not enforce: tools without "strict": true. Everything else is as
 * strict as ever. */
#define SD_JSCHEMA_LENIENT 1u
int sd_jschema_compile_opts(sd_jschema **ret, const char *json, size_t len, unsigned flags, sd_diag *d);
void sd_jschema_free(sd_jschema *s); /* NULL: no-op */
/* Caps runs of whitespace outside strings at n bytes (at most SD_JSCHEMA_MAX_WS, the default).
 * Tool-call arguments take 1: a space after ':' and ',' as models write them, and no token spent
 * on layout. Call before the schema is shared: it is the one change after compile. */
void sd_jschema_set_max_ws(sd_jschema *s, unsigned n);

/* Bytes of one state: fixed per schema, a multiple of 8, at most SD_JSCHEMA_STATE_MAX (16 plus 3
 * per level of container nesting the schema allows). States are canonical: texts that leave the
 * validator in the same place give states equal under memcmp (nothing unused is left nonzero). */
size_t sd_jschema_state_size(const sd_jschema *s);
/* Sets state to the start of the text (before the top-level value). */
void sd_jschema_init(const sd_jschema *s, void *state);
/* One byte: 0 while the text is still a valid prefix; -1 when rejected (state unspecified). */
int sd_jschema_step(const sd_jschema *s, void *state, unsigned byte);
/* n bytes, all or nothing: -1 leaves state as it was. */
int sd_jschema_feed(const sd_jschema *s, void *state, const char *bytes, size_t n);
/* 1 once a whole valid document has been read and no byte can follow (every byte is then
 * rejected). */
int sd_jschema_complete(const sd_jschema *s, const void *state);
/* 1 when the text so far is a whole valid document: after complete, and in a top-level number
 * that more digits could still extend. A mask allows end-of-sequence exactly then. */
int sd_jschema_can_end(const sd_jschema *s, const void *state);
/* 1 when state is inside a string whose content is unconstrained (no enum/const/key matching,
 * no length limit) with no UTF-8 character pending: any byte that is not '"', '\' or a control
 * byte < 0x20, forming valid UTF-8, keeps it there (and keeps this 1 between characters). */
int sd_jschema_in_plain_string(const sd_jschema *s, const void *state);
/* 1 when state is inside any string: a key, a value, an enum string, an escape. */
int sd_jschema_in_string(const sd_jschema *s, const void *state);

#ifdef __cplusplus
}
#endif
#endif
