// One loader per checkpoint format; load_model (model/model_weights.h) picks one by what the path is.
// Each maps the format's tensor names to the canonical ones, views the weights in place in the memory map, checks
// them against the config and sets the tokenizer source. All problems raise LoadError naming the file.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "model/model_weights.h"

namespace minfer {

// A directory with config.json and model.safetensors or model.safetensors.index.json + shards.
ModelWeights load_hf_checkpoint(const std::string& dir);
// A .gguf file (architectures llama and qwen2).
ModelWeights load_gguf_checkpoint(const std::string& path);
// A llama2.c legacy .bin; the tokenizer is tok<vocab>.bin, tokenizer.bin or another tok*.bin beside it.
ModelWeights load_llama2c_checkpoint(const std::string& path);
// Granite's residual_multiplier and logits_scaling folded into the o/down projections and the final norm
// (loaders/output_scales.cpp; load_model calls it after whichever loader ran); nothing to do for other families.
void fold_output_scales(ModelWeights& w);

// Name mapping, exposed for tests. Canonical name, or nullopt for a name that is not part of the model.
// Most families share one table; a family's own rows come first (hence the architecture: ModelConfig::arch).
std::optional<std::string> hf_to_canonical(std::string_view hf_name, std::string_view arch = "llama");
std::string canonical_to_hf(const std::string& canonical, std::string_view arch = "llama");
// trunk_layers >= 0: blk.{trunk_layers + j}.* are multi-token-prediction block j's, mtp.{j}.*
// (ModelConfig::mtp_layers).
std::optional<std::string> gguf_to_canonical(std::string_view gguf_name, std::string_view arch = "llama",
                                             int64_t trunk_layers = -1);
std::string canonical_to_gguf(const std::string& canonical, std::string_view arch = "llama", int64_t trunk_layers = -1);

}  // namespace minfer
