#include "model/loaders/weight_check.h"

#include <cstring>

#include "base/error.h"

namespace minfer {
namespace {

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

bool supported_dtype(DType d, size_t rank) {
  // GGUF block types (Q8_0, Q4_K, ...) only for matrices: their blocks run along rows.
  // I8: the int8 weights of a quantized checkpoint (their scales attached, model/quant/).
  return d == DType::F32 || d == DType::F16 || d == DType::BF16 || ((is_block_type(d) || d == DType::I8) && rank == 2);
}

}  // namespace

std::map<std::string, std::vector<int64_t>> expected_weight_shapes(const ModelConfig& c) {
  const int64_t q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  std::map<std::string, std::vector<int64_t>> out;
  out["embed"] = {c.vocab_size, c.hidden_size};
  out["final_norm"] = {c.hidden_size};
  if (!c.tie_word_embeddings) out["lm_head"] = {c.vocab_size, c.hidden_size};
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    if (!c.post_norms_only) out[p + "attn_norm"] = {c.hidden_size};
    out[p + "wq"] = {q, c.hidden_size};
    out[p + "wk"] = {kv, c.hidden_size};
    out[p + "wv"] = {kv, c.hidden_size};
    out[p + "wo"] = {c.hidden_size, q};
    if (c.o_bias) out[p + "bo"] = {c.hidden_size};
    if (c.attention_sinks) out[p + "sinks"] = {c.num_heads};
    if (c.attention_bias) {
      out[p + "bq"] = {q};
      out[p + "bk"] = {kv};
      out[p + "bv"] = {kv};
    }
    if (c.qk_norm) {
      out[p + "q_norm"] = {c.qk_norm_full_width ? q : c.head_dim};
      out[p + "k_norm"] = {c.qk_norm_full_width ? kv : c.head_dim};
    }
    if (!c.post_norms_only) out[p + "ffn_norm"] = {c.hidden_size};
    if (c.sandwich_norms || c.post_norms_only) {
      out[p + "post_attn_norm"] = {c.hidden_size};
      out[p + "post_ffn_norm"] = {c.hidden_size};
    }
    if (c.is_moe(i)) {
      out[p + "router"] = {c.num_experts, c.hidden_size};
      if (c.moe_bias) out[p + "router_bias"] = {c.num_experts};
      for (int64_t e = 0; e < c.num_experts; ++e) {
        const std::string x = p + "experts." + std::to_string(e) + ".";
        out[x + "w_gate"] = {c.moe_intermediate_size, c.hidden_size};
        out[x + "w_up"] = {c.moe_intermediate_size, c.hidden_size};
        out[x + "w_down"] = {c.hidden_size, c.moe_intermediate_size};
        if (!c.moe_bias) continue;
        out[x + "b_gate"] = {c.moe_intermediate_size};
        out[x + "b_up"] = {c.moe_intermediate_size};
        out[x + "b_down"] = {c.hidden_size};
      }
      continue;
    }
    out[p + "w_gate"] = {c.intermediate_size, c.hidden_size};
    out[p + "w_up"] = {c.intermediate_size, c.hidden_size};
    out[p + "w_down"] = {c.hidden_size, c.intermediate_size};
  }
  return out;
}

namespace {

// Stacked experts (layers.{i}.experts.w_gate, [experts, rows, cols]; biases [experts, n]) ->
// layers.{i}.experts.{j}.w_gate views (GGUF's form, and gpt-oss's down-projection biases in HF).
void split_stacked_experts(ModelWeights& weights, std::map<std::string, WeightOrigin>& origins, const std::string& p) {
  for (const char* w : {"w_gate", "w_up", "w_down", "b_gate", "b_up", "b_down"}) {
    auto it = weights.tensors.find(p + "experts." + w);
    if (it == weights.tensors.end()) continue;
    Tensor stacked = it->second;
    const WeightOrigin origin = origins[p + "experts." + w];
    const bool bias = w[0] == 'b';
    if (stacked.rank() != (bias ? 2 : 3) || stacked.dim(0) != weights.config.num_experts || stacked.quant ||
        (bias && is_block_type(stacked.dtype)))
      fail_load(origin.file, "tensor '{}' has shape {}, expected [{}, {}] (one {} per expert)", origin.name,
                stacked.shape_string(), weights.config.num_experts, bias ? "n" : "rows, cols",
                bias ? "bias" : "matrix");
    const int64_t rows = bias ? 1 : stacked.dim(1);
    stacked.shape = {stacked.dim(0) * rows, stacked.dim(-1)};
    for (int64_t e = 0; e < weights.config.num_experts; ++e) {
      const std::string name = p + "experts." + std::to_string(e) + "." + w;
      Tensor part = row_slice(stacked, e * rows, (e + 1) * rows);
      if (bias) part.shape = {part.dim(1)};
      weights.tensors[name] = std::move(part);
      origins[name] = origin;
    }
    weights.tensors.erase(it);
    origins.erase(p + "experts." + w);
  }
}

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
                dtype_name(stacked.dtype), stacked.shape_string(), shape_str(s.shape));
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
                shape_str(want_blocks), shape_str(want_scales));
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

void split_fused_projections(ModelWeights& weights, std::map<std::string, WeightOrigin>& origins) {
  const ModelConfig& c = weights.config;
  const int64_t q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  struct Fused {
    const char* name;
    std::vector<std::pair<const char*, int64_t>> parts;  // canonical suffix, rows
  };
  const Fused fused[] = {{"wqkv", {{"wq", q}, {"wk", kv}, {"wv", kv}}},
                         {"w_gate_up", {{"w_gate", c.intermediate_size}, {"w_up", c.intermediate_size}}}};
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    split_stacked_experts(weights, origins, p);
    if (c.arch == Architecture::kGptOss) {
      split_gpt_oss_hf_experts(weights, origins, p);
      split_gpt_oss_mxfp4_experts(weights, origins, p);
    }
    for (const Fused& f : fused) {
      auto it = weights.tensors.find(p + f.name);
      if (it == weights.tensors.end()) continue;
      const Tensor whole = it->second;
      const WeightOrigin origin = origins[p + f.name];
      int64_t rows = 0;
      for (const auto& part : f.parts) rows += part.second;
      if (whole.rank() != 2 || whole.dim(0) != rows || whole.dim(1) != c.hidden_size || whole.quant)
        fail_load(origin.file, "tensor '{}' has shape {}, expected [{}, {}] (fused projections)", origin.name,
                  whole.shape_string(), rows, c.hidden_size);
      int64_t begin = 0;
      for (const auto& [suffix, n] : f.parts) {
        weights.tensors[p + suffix] = row_slice(whole, begin, begin + n);
        origins[p + suffix] = origin;
        begin += n;
      }
      weights.tensors.erase(it);
      origins.erase(p + f.name);
    }
  }
}

void check_weights(ModelWeights& weights, const std::map<std::string, WeightOrigin>& origins,
                   const std::string& checkpoint, const std::function<std::string(const std::string&)>& file_name_of) {
  const auto expected = expected_weight_shapes(weights.config);
  auto origin = [&](const std::string& canonical) {
    auto it = origins.find(canonical);
    return it != origins.end() ? it->second : WeightOrigin{checkpoint, file_name_of(canonical)};
  };
  for (const auto& [name, tensor] : weights.tensors) {
    const WeightOrigin o = origin(name);
    auto it = expected.find(name);
    if (it == expected.end())
      fail_load(o.file,
                "unexpected tensor '{}': not a weight of this {} model ({} layers, attention bias: {}, tied "
                "embeddings: {})",
                o.name, weights.config.arch_name(), weights.config.num_layers, weights.config.attention_bias,
                weights.config.tie_word_embeddings);
    if (tensor.shape != it->second)
      fail_load(o.file, "shape mismatch for tensor '{}': expected {}, got {} (from the config: {} {})", o.name,
                shape_str(it->second), shape_str(tensor.shape), weights.config.arch_name(), name);
    if (!supported_dtype(tensor.dtype, tensor.shape.size()))
      fail_load(o.file, "tensor '{}' has unsupported dtype {} (supported: f32, f16, bf16; q8_0, i8 for matrices)",
                o.name, dtype_name(tensor.dtype));
  }
  for (const auto& [name, shape] : expected) {
    if (weights.tensors.count(name) == 0)
      fail_load(checkpoint, "missing tensor '{}' (expected shape {})", file_name_of(name), shape_str(shape));
  }
  weights.config.dtype = weights.tensors.at("layers.0.wq").dtype;
}

}  // namespace minfer
