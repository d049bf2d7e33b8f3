/* minfer's C ABI over its Rust libraries (rust/minfer_ffi): chat templates rendered by minijinja. The
 * structured-output functions are llguidance's own (llguidance.h), linked from the same static library. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct MinferChatTemplate MinferChatTemplate;

/* Compiles a Jinja chat template (transformers' settings). Returns NULL on a syntax error and sets *error
 * ("line N: ..."; free it with minfer_string_free). */
MinferChatTemplate* minfer_chat_template_new(const char* source, size_t len, char** error);

/* Renders with the variables of a JSON object. now_unix >= 0 pins strftime_now (UTC); < 0 uses the clock.
 * Returns true with *out = the text, or false with *out = the error ("line N: ..."); free *out with
 * minfer_string_free. Thread-safe. */
bool minfer_chat_template_render(const MinferChatTemplate* tmpl, const char* context_json, size_t len, int64_t now_unix,
                                 char** out);

void minfer_chat_template_free(MinferChatTemplate* tmpl);
void minfer_string_free(char* s);

#ifdef __cplusplus
}
#endif
