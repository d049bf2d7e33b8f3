// Quantization of a loaded model's weights (at load, or before writing a quantized checkpoint), the
// `--quantization` spelling of a QuantConfig, and the bytes the weights occupy.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "minfer/config.h"
#include "model/model_weights.h"
#include "model/quant/smoothing.h"

namespace minfer {

// "none" / "bf16" (no quantization), "w8a16", "w8a8"; group_size 0 (per channel), 32, 64 or 128.
// Throws Error naming the accepted values.
QuantConfig parse_quantization(const std::string& mode, int group_size = 0, bool symmetric = true);
std::string quantization_name(const QuantConfig& q);
// Throws Error when a field is outside what the kernels support.
void validate_quant_config(const QuantConfig& q);

// Called after each weight with (done, total, canonical name).
using QuantProgress = std::function<void(size_t, size_t, const std::string&)>;

// Replaces every matrix weight (the Linear layers, and the embedding / lm_head) by its int8 form for `q`:
// float weights are quantized, GGUF Q8_0 and already-int8 weights are re-laid out (never re-rounded). W8A8 keeps
// the embedding / lm_head at W8A16 (activations into the lm_head stay f32: the logits are the most sensitive
// product). `smoothing` (optional): per weight, the SmoothQuant factors its columns and rows are multiplied by
// before rounding (the inverse already folded into the producer of its input; see model/quant/smoothing.h).
// Runs on `threads` threads (0 = all). No-op when !q.enabled(). Sets weights.quant.
void quantize_model(ModelWeights& weights, const QuantConfig& q, int threads = 0, const QuantProgress& progress = {},
                    const SmoothingPlan* smoothing = nullptr);

// Bytes of the weights as they sit in memory (int8 payload + scales for quantized tensors). Tensors shared
// (tied embeddings) count once.
uint64_t weight_bytes(const ModelWeights& weights);
// What weight_bytes would be after quantize_model(weights, q), from the shapes alone (no quantization run);
// for `minfer info`. q disabled: the bytes as bf16.
uint64_t estimated_weight_bytes(const ModelWeights& weights, const QuantConfig& q);

}  // namespace minfer
