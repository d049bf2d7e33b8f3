// Opens the tokenizer that belongs to a loaded checkpoint (tokenizer.json, GGUF vocabulary, llama2.c .bin).
#pragma once

#include <memory>
#include <vector>

#include "model/model_weights.h"
#include "tokenizer/tokenizer.h"

namespace minfer {

// Throws LoadError naming the tokenizer file; Error when the checkpoint has no tokenizer at all.
std::unique_ptr<Tokenizer> load_tokenizer(const ModelWeights& weights);

// End-of-sequence ids from the tokenizer and the model config (generation_config.json), deduplicated.
std::vector<int32_t> eos_token_ids(const ModelWeights& weights, const Tokenizer* tokenizer);

}  // namespace minfer
