// Quantized Hugging Face checkpoints, in the layout of the "compressed-tensors" int-quantized format (what vLLM
// reads for W8A8/W8A16 int8): each quantized Linear weight `X.weight` is stored as int8 [out, in] with
// `X.weight_scale` f32 [out, groups] (and `X.weight_zero_point` int8 [out, groups] when asymmetric), and
// config.json carries a quantization_config saying the bits, symmetry, strategy (channel / group + group_size)
// and whether activations are quantized dynamically per token. minfer also quantizes the (tied) embedding /
// lm_head matrix the same way, which vLLM's reader would not expect.
#pragma once

#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>

#include "minfer/config.h"
#include "model/model_weights.h"
#include "model/quant/quantize_model.h"

namespace minfer {

// The QuantConfig of a config.json's quantization_config, or nullopt when it has none. Throws LoadError(path)
// for a quantization_config minfer cannot run (another method, bits or strategy).
std::optional<QuantConfig> read_checkpoint_quantization(const std::string& config_json_path);

// True for tensor names that belong to a quantized weight rather than standing alone (…weight_scale,
// …weight_zero_point); the loader skips them and attach_checkpoint_quantization consumes them.
bool is_quantization_companion(const std::string& hf_name);

// Turns the int8 weights of a just-mapped quantized checkpoint into quantized tensors: for every I8 tensor,
// finds its companions with `find` (HF name -> tensor, nullopt when absent) and attaches scales and zero points,
// laid out for q.activation_bits. `hf_name_of` maps canonical names to the checkpoint's. Throws LoadError naming
// the file on a missing or mis-shaped companion.
void attach_checkpoint_quantization(ModelWeights& weights, const QuantConfig& q, const std::string& checkpoint,
                                    const std::function<std::optional<Tensor>(const std::string&)>& find,
                                    const std::function<std::string(const std::string&)>& hf_name_of);

// Writes `weights` (quantized with quantize_model, from the Hugging Face directory weights.path) as a quantized
// checkpoint in out_dir: config.json with the quantization_config (and `extra_config` merged into its "minfer"
// entry), generation_config.json and the tokenizer files copied, model.safetensors. Throws Error on a source that
// is not a Hugging Face directory or on I/O failure.
void write_quantized_checkpoint(const ModelWeights& weights, const std::string& out_dir,
                                const nlohmann::json& extra_config);

}  // namespace minfer
