// ModelConfig from GGUF metadata ({arch}.* hyper-parameters and tokenizer.ggml.* special ids).
#pragma once

#include <string>

#include "formats/gguf_file.h"
#include "formats/gguf_writer.h"
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
// The reverse, for `minfer quantize`: <arch>.attention.sliding_window and the per-layer flags of
// <arch>.attention.sliding_window_pattern, which llama.cpp's load_swa_pattern reads as well.
void write_window_keys(const ModelConfig& c, const std::string& arch, GgufWriter& w);

}  // namespace minfer
