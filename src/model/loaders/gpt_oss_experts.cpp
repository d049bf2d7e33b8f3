// gpt-oss's Hugging Face experts, stacked in one tensor per projection (bf16 / f32, or MXFP4 in OpenAI's own
// checkpoints), split into each expert's canonical matrices and biases (layers.{i}.experts.{j}.w_gate, b_gate, ...).
#include <cstring>

#include "base/error.h"
#include "model/loaders/weight_check.h"

namespace minfer {
namespace {

// gpt-oss's HF experts: gate_up_proj [experts, hidden, 2 ff] (x @ W, gate and up interleaved column by column),
// gate_up_proj_bias [experts, 2 ff], down_proj [experts, ff, hidden] -> each expert's w_gate / w_up [ff, hidden],
// b_gate / b_up [ff] and w_down [hidden, ff], copied transposed in the checkpoint's dtype.
void split_gpt_oss_hf_experts(ModelWeights& weights, std::map<std::string, WeightOrigin>& origins,
                              const std::string& p) {
  const ModelConfig& c = weights.config;
  const int64_t ne = c.num_experts, ff = c.moe_intermediate_size, hidden = c.hidden_size;
  struct Stacked {
    const char* name;
    std::vector<int64_t> shape;
  };
  for (const Stacked& s : {Stacked{"gate_up_proj", {ne, hidden, 2 * ff}}, Stacked{"gate_up_proj_bias", {ne, 2 * ff}},
                           Stacked{"down_proj", {ne, ff, hidden}}}) {
    auto it = weights.tensors.find(p + "experts." + s.name);
    if (it == weights.tensors.end()) continue;
    const Tensor stacked = it->second;
    const WeightOrigin origin = origins[p + "experts." + s.name];
    if (stacked.shape != s.shape ||
        !(stacked.dtype == DType::F32 || stacked.dtype == DType::F16 || stacked.dtype == DType::BF16))
      fail_load(origin.file, "tensor '{}' is {} {}, expected f32, f16 or bf16 {}", origin.name,
                dtype_name(stacked.dtype), stacked.shape_string(), shape_string(s.shape));
    const size_t es = dtype_bytes(stacked.dtype, 1);
    const auto* src = static_cast<const unsigned char*>(stacked.data);
    // out[r, col] = in[expert e][col, first + r * step] for an [rows, cols] output read from the [cols, width] slab.
    auto gather = [&](int64_t e, int64_t rows, int64_t cols, int64_t width, int64_t first, int64_t step) {
      Tensor out = Tensor::allocate(stacked.dtype, cols == 1 ? std::vector<int64_t>{rows} : std::vector{rows, cols});
      auto* dst = out.mutable_as<unsigned char>();
      const unsigned char* slab = src + static_cast<size_t>(e * cols * width) * es;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t k = 0; k < cols; ++k)
          std::memcpy(dst + static_cast<size_t>(r * cols + k) * es,
                      slab + static_cast<size_t>(k * width + first + r * step) * es, es);
      return out;
    };
    for (int64_t e = 0; e < ne; ++e) {
      const std::string x = p + "experts." + std::to_string(e) + ".";
      std::vector<std::pair<std::string, Tensor>> parts;
      if (std::string_view(s.name) == "gate_up_proj") {
        parts = {{"w_gate", gather(e, ff, hidden, 2 * ff, 0, 2)}, {"w_up", gather(e, ff, hidden, 2 * ff, 1, 2)}};
      } else if (std::string_view(s.name) == "gate_up_proj_bias") {
        parts = {{"b_gate", gather(e, ff, 1, 2 * ff, 0, 2)}, {"b_up", gather(e, ff, 1, 2 * ff, 1, 2)}};
      } else {
        parts = {{"w_down", gather(e, hidden, ff, hidden, 0, 1)}};
      }
      for (auto& [w, t] : parts) {
        weights.tensors[x + w] = std::move(t);
        origins[x + w] = origin;
      }
    }
    weights.tensors.erase(it);
    origins.erase(p + "experts." + s.name);
  }
}

// OpenAI's MXFP4 gpt-oss checkpoints: {gate_up,down}_proj_blocks [experts, rows, cols / 32, 16] and _scales [experts,
// rows, cols / 32] bytes (transformers' Mxfp4GptOssExperts: rows are outputs, gate and up interleaved by row; byte j
// holds elements 2j (low nibble) and 2j + 1 (high); the scale an E8M0 power of two) -> each expert's w_gate / w_up /
// w_down as GGUF MXFP4 rows (the same scale byte, then element j in the low and j + 16 in the high nibble), the
// values unchanged: E2M1 codes index the same table in both.
void split_gpt_oss_mxfp4_experts(ModelWeights& weights, std::map<std::string, WeightOrigin>& origins,
                                 const std::string& p) {
  const ModelConfig& c = weights.config;
  const int64_t ne = c.num_experts, ff = c.moe_intermediate_size, hidden = c.hidden_size;
  struct Packed {
    const char* name;
    int64_t rows, cols;
  };
  for (const Packed& s : {Packed{"gate_up_proj", 2 * ff, hidden}, Packed{"down_proj", hidden, ff}}) {
    const std::string x = p + "experts." + s.name;
    const auto blocks = weights.tensors.find(x + "_blocks"), scales = weights.tensors.find(x + "_scales");
    if (blocks == weights.tensors.end() && scales == weights.tensors.end()) continue;
    const WeightOrigin origin = origins[blocks != weights.tensors.end() ? x + "_blocks" : x + "_scales"];
    const int64_t groups = s.cols / 32;
    const std::vector<int64_t> want_blocks = {ne, s.rows, groups, 16}, want_scales = {ne, s.rows, groups};
    if (blocks == weights.tensors.end() || scales == weights.tensors.end() || s.cols % 32 != 0 ||
        blocks->second.dtype != DType::I8 || blocks->second.shape != want_blocks || scales->second.dtype != DType::I8 ||
        scales->second.shape != want_scales)
      fail_load(origin.file, "MXFP4 experts '{}' need U8 _blocks {} and _scales {}", origin.name,
                shape_string(want_blocks), shape_string(want_scales));
    const auto* q = blocks->second.as<uint8_t>();
    const auto* e8 = scales->second.as<uint8_t>();
    // Rows first, first + step, ... of expert e as an MXFP4 [rows, cols] matrix.
    auto repack = [&](int64_t e, int64_t rows, int64_t first, int64_t step) {
      Tensor out = Tensor::allocate(DType::MXFP4, {rows, s.cols});
      auto* dst = out.mutable_as<uint8_t>();
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t src = e * s.rows + first + r * step;
        for (int64_t g = 0; g < groups; ++g, dst += 17) {
          const uint8_t* packed = q + (src * groups + g) * 16;
          const auto nibble = [&](int i) { return (packed[i / 2] >> (4 * (i % 2))) & 0x0F; };
          dst[0] = e8[src * groups + g];
          for (int j = 0; j < 16; ++j) dst[1 + j] = static_cast<uint8_t>(nibble(j) | (nibble(j + 16) << 4));
        }
      }
      return out;
    };
    for (int64_t e = 0; e < ne; ++e) {
      const std::string w = p + "experts." + std::to_string(e) + ".";
      if (std::string_view(s.name) == "gate_up_proj") {
        weights.tensors[w + "w_gate"] = repack(e, ff, 0, 2);
        weights.tensors[w + "w_up"] = repack(e, ff, 1, 2);
        origins[w + "w_gate"] = origins[w + "w_up"] = origin;
      } else {
        weights.tensors[w + "w_down"] = repack(e, hidden, 0, 1);
        origins[w + "w_down"] = origin;
      }
    }
    for (const char* part : {"_blocks", "_scales"}) {
      weights.tensors.erase(x + part);
      origins.erase(x + part);
    }
  }
}

}  // namespace

void split_gpt_oss_experts(ModelWeights& weights, std::map<std::string, WeightOrigin>& origins,
                           const std::string& prefix) {
  split_gpt_oss_hf_experts(weights, origins, prefix);
  split_gpt_oss_mxfp4_experts(weights, origins, prefix);
}

}  // namespace minfer
