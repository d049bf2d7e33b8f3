// Opens the tokenizer that belongs to a loaded checkpoint (tokenizer.json, GGUF vocabulary, llama2.c .bin).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/model_weights.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace minfer {

// Throws LoadError naming the tokenizer file; Error when the checkpoint has no tokenizer at all.
std::unique_ptr<Tokenizer> load_tokenizer(const ModelWeights& weights);

// End-of-sequence ids from the tokenizer and the model config (generation_config.json), deduplicated.
std::vector<int32_t> eos_token_ids(const ModelWeights& weights, const Tokenizer* tokenizer);

// The checkpoint's chat template (Jinja source): tokenizer_config.json "chat_template" (a string, or a list of
// {"name", "template"} of which "default" is taken), else chat_template.jinja in the model directory, else the
// GGUF key tokenizer.chat_template. Empty when the checkpoint has none. Throws LoadError for a malformed file.
std::string chat_template_source(const ModelWeights& weights);

// The BOS / EOS texts a template may print, from the tokenizer (null: the template family's defaults).
ChatTemplateOptions chat_template_options(const Tokenizer* tokenizer);

// The checkpoint's ChatTemplate, with BOS / EOS texts from tokenizer (may be null: the family's defaults).
// Throws Error naming the checkpoint when it has no chat template or one of an unsupported family.
ChatTemplate load_chat_template(const ModelWeights& weights, const Tokenizer* tokenizer);

}  // namespace minfer
