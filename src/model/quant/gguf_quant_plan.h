// Which GGUF type each tensor gets in a quantized file: llama.cpp's quantization mixes (llama-quant.cpp,
// llama_tensor_get_type) for the file types `minfer quantize --type` writes, so a Q4_K_M file from minfer has the
// tensor types of one from llama-quantize:
//   Q4_0, Q8_0, Q6_K    every matrix in that type
//   F16, BF16           every matrix in that type, nothing else changed (a conversion, llama.cpp's MOSTLY_F16/BF16)
//   Q4_K_M / Q5_K_M     Q4_K / Q5_K, with attn_v and ffn_down in Q6_K in the first and last eighth of the layers
//                       and every third layer between (llama.cpp's use_more_bits)
// and for all: output.weight (token_embd.weight when tied) in Q6_K (Q8_0 for Q8_0 files, or when its rows are not
// whole 256-blocks); vectors and norms as they are; a matrix whose rows are not whole blocks of its type falls back
// as llama.cpp's does (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, then F16).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/dtype.h"

namespace minfer {

// llama.cpp's llama_ftype values, written as general.file_type.
enum class GgufFileType : uint32_t {
  kF16 = 1,
  kQ4_0 = 2,
  kQ8_0 = 7,
  kQ4_K_M = 15,
  kQ5_K_M = 17,
  kQ6_K = 18,
  kBF16 = 32
};

// "Q4_0", "Q8_0", "Q4_K_M", "Q5_K_M", "Q6_K", "F16", "BF16" (any case); nullopt otherwise.
std::optional<GgufFileType> parse_gguf_file_type(std::string_view name);
std::string_view gguf_file_type_name(GgufFileType type);
std::string gguf_file_type_names();  // "Q4_0|Q4_K_M|..." for messages

struct PlannedTensor {
  std::string name;             // GGUF name, e.g. "blk.3.attn_v.weight"
  std::vector<int64_t> shape;   // outermost first; shape.back() is a row
  std::optional<DType> target;  // set by plan_gguf_types; nullopt = keep as it is (not a quantized matrix)
};

// llama.cpp's order of tensors while quantizing (and in the file it writes): by layer number (tensors outside
// the blk.N. layers first), then by name. The per-layer counters of the mixes follow this order.
bool gguf_quantize_before(const std::string& a, const std::string& b);

// Sets each tensor's target. tensors must be in gguf_quantize_before order; n_layers is the model's block count.
void plan_gguf_types(GgufFileType type, int64_t n_layers, std::vector<PlannedTensor>& tensors);

}  // namespace minfer
