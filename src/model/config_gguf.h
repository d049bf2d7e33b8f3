// ModelConfig from GGUF metadata ({arch}.* hyper-parameters and tokenizer.ggml.* special ids).
#pragma once

#include <string>

#include "formats/gguf_file.h"
#include "model/model_config.h"

namespace minfer {

// general.architecture names the family (model/families/family.h: Family::gguf_arch), whose reader adds its traits
// to the keys every architecture has. Vocabulary size from tokenizer.ggml.tokens (else the rows of
// token_embd.weight); tied embeddings when there is no output.weight; q/k/v biases when blk.0.attn_q.bias exists.
// Validated; throws LoadError naming the file and the key.
ModelConfig read_gguf_config(const GgufFile& gguf);

// Which layers slide, as llama.cpp's load_swa_pattern reads `key`: an array of per-layer flags, or a period (else
// `period`) whose last layer in each run is global.
void read_window_pattern(const GgufFile& g, const std::string& key, int64_t period, ModelConfig& c);

}  // namespace minfer
