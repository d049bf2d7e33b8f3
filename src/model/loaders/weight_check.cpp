#include "model/loaders/weight_check.h"

#include <cmath>
#include <cstring>

#include "base/error.h"
#include "model/loaders/loaders.h"

namespace minfer {
namespace {

bool supported_dtype(DType d, size_t rank) {
  // GGUF block types (Q8_0, Q4_K, ...) only for matrices: their blocks run along rows.
  // I8: the int8 weights of a quantized checkpoint (their scales attached, model/quant/).
  return d == DType::F32 || d == DType::F16 || d == DType::BF16 || ((is_block_type(d) || d == DType::I8) && rank == 2);
}

// A Gated DeltaNet layer's mixer (model/families/qwen35.cpp).
void delta_rule_shapes(const ModelConfig& c, const std::string& p, std::map<std::string, std::vector<int64_t>>& out) {
  const LinearAttentionShape& l = c.linear;
  out[p + "ssm_in_qkv"] = {l.conv_channels(), c.hidden_size};
  out[p + "ssm_in_z"] = {l.v_heads * l.v_dim, c.hidden_size};
  out[p + "ssm_in_b"] = {l.v_heads, c.hidden_size};
  out[p + "ssm_in_a"] = {l.v_heads, c.hidden_size};
  out[p + "ssm_conv"] = {l.conv_channels(), l.conv_kernel};
  out[p + "ssm_a"] = {l.v_heads};
  out[p + "ssm_dt_bias"] = {l.v_heads};
  out[p + "ssm_norm_gated"] = {l.v_dim};
  out[p + "ssm_out"] = {c.hidden_size, l.v_heads * l.v_dim};
}

// An LFM2 gated short convolution (model/families/lfm2.cpp): in_proj split at load into its B, C and x rows.
void short_conv_shapes(const ModelConfig& c, const std::string& p, std::map<std::string, std::vector<int64_t>>& out) {
  for (const char* w : {"conv_in_b", "conv_in_c", "conv_in_x", "conv_out"}) out[p + w] = {c.hidden_size, c.hidden_size};
  out[p + "conv_kernel"] = {c.hidden_size, c.short_conv_kernel};
}

// A Mamba2 layer (model/families/granite_hybrid.cpp): in_proj split at load into z, x | B | C and dt rows.
void mamba_shapes(const ModelConfig& c, const std::string& p, std::map<std::string, std::vector<int64_t>>& out) {
  const MambaShape& m = c.mamba;
  out[p + "ssm_in_z"] = {m.inner(), c.hidden_size};
  out[p + "ssm_in_xbc"] = {m.conv_channels(), c.hidden_size};
  out[p + "ssm_in_dt"] = {m.heads, c.hidden_size};
  out[p + "ssm_conv"] = {m.conv_channels(), m.conv_kernel};
  if (m.conv_bias) out[p + "ssm_conv_bias"] = {m.conv_channels()};
  for (const char* w : {"ssm_a", "ssm_dt_bias", "ssm_d"}) out[p + w] = {m.heads};
  out[p + "ssm_norm_gated"] = {m.inner()};
  out[p + "ssm_out"] = {c.hidden_size, m.inner()};
}

// An attention layer's projections, biases, sinks and q/k norms.
void attention_shapes(const ModelConfig& c, const std::string& p, std::map<std::string, std::vector<int64_t>>& out) {
  const int64_t q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
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
  if (c.attn_output_gate) out[p + "wq_gate"] = {q, c.hidden_size};
}

}  // namespace

namespace {

using Shapes = std::map<std::string, std::vector<int64_t>>;

// A layer's feed-forward weights: its experts (with their router, biases and shared expert) or its MLP.
void feed_forward_shapes(const ModelConfig& c, const std::string& p, bool moe, Shapes& out) {
  if (moe && c.shared_expert_intermediate_size > 0) {
    const int64_t s = c.shared_expert_intermediate_size;
    out[p + "shared.w_gate"] = {s, c.hidden_size};
    out[p + "shared.w_up"] = {s, c.hidden_size};
    out[p + "shared.w_down"] = {c.hidden_size, s};
    if (c.shared_expert_gated) out[p + "shared_gate"] = {1, c.hidden_size};
  }
  if (!moe) {
    if (c.mlp_gated) out[p + "w_gate"] = {c.intermediate_size, c.hidden_size};
    out[p + "w_up"] = {c.intermediate_size, c.hidden_size};
    out[p + "w_down"] = {c.hidden_size, c.intermediate_size};
    return;
  }
  out[p + "router"] = {c.num_experts, c.hidden_size};
  if (c.moe_bias) out[p + "router_bias"] = {c.num_experts};
  if (c.moe_selection_bias) out[p + "expert_bias"] = {c.num_experts};
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
}

// One layer under prefix p: its mixer's weights and norms, then (with an MLP) its feed-forward block's.
void layer_shapes(const ModelConfig& c, const std::string& p, LayerMixer mixer, bool mlp, bool moe, Shapes& out) {
  if (!c.post_norms_only && mixer != LayerMixer::kNone) out[p + "attn_norm"] = {c.hidden_size};
  if (mixer == LayerMixer::kGatedDeltaNet) {
    delta_rule_shapes(c, p, out);
  } else if (mixer == LayerMixer::kShortConv) {
    short_conv_shapes(c, p, out);
  } else if (mixer == LayerMixer::kMamba2) {
    mamba_shapes(c, p, out);
  } else if (mixer == LayerMixer::kAttention) {
    attention_shapes(c, p, out);
  }
  if (!mlp) return;
  if (!c.post_norms_only) out[p + "ffn_norm"] = {c.hidden_size};
  if (c.sandwich_norms || c.post_norms_only) {
    out[p + "post_attn_norm"] = {c.hidden_size};
    out[p + "post_ffn_norm"] = {c.hidden_size};
  }
  feed_forward_shapes(c, p, moe, out);
}

}  // namespace

std::map<std::string, std::vector<int64_t>> expected_weight_shapes(const ModelConfig& c) {
  Shapes out;
  out["embed"] = {c.vocab_size, c.hidden_size};
  out["final_norm"] = {c.hidden_size};
  if (!c.tie_word_embeddings) out["lm_head"] = {c.vocab_size, c.hidden_size};
  for (int64_t i = 0; i < c.num_layers; ++i)
    layer_shapes(c, "layers." + std::to_string(i) + ".", c.mixer(i), c.has_mlp(i), c.is_moe(i), out);
  // The multi-token-prediction blocks: an attention layer with the model's feed-forward kind, its input projection
  // of [embedding | hidden] and three norms.
  for (int64_t j = 0; j < c.mtp_layers; ++j) {
    const std::string p = "mtp." + std::to_string(j) + ".";
    layer_shapes(c, p, LayerMixer::kAttention, true, c.num_experts > 0, out);
    out[p + "fc"] = {c.hidden_size, 2 * c.hidden_size};
    for (const char* norm : {"embed_norm", "hidden_norm", "final_norm"}) out[p + norm] = {c.hidden_size};
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
    split_gpt_oss_experts(weights, origins, p);  // only gpt-oss's names map to its stacked tensors
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
  // Looked up only for an error: a weight made at load from another (Qwen3.5's wq_gate, the gate rows of GGUF's
  // attn_q) has no origin and may have no name in the checkpoint's format (file_name_of throws for it).
  auto origin = [&](const std::string& canonical) {
    auto it = origins.find(canonical);
    return it != origins.end() ? it->second : WeightOrigin{checkpoint, file_name_of(canonical)};
  };
  for (const auto& [name, tensor] : weights.tensors) {
    auto it = expected.find(name);
    if (it == expected.end()) {
      const WeightOrigin o = origin(name);
      fail_load(o.file,
                "unexpected tensor '{}': not a weight of this {} model ({} layers, attention bias: {}, tied "
                "embeddings: {})",
                o.name, weights.config.arch_name(), weights.config.num_layers, weights.config.attention_bias,
                weights.config.tie_word_embeddings);
    }
    if (tensor.shape != it->second) {
      const WeightOrigin o = origin(name);
      fail_load(o.file, "shape mismatch for tensor '{}': expected {}, got {} (from the config: {} {})", o.name,
                shape_string(it->second), shape_string(tensor.shape), weights.config.arch_name(), name);
    }
    if (!supported_dtype(tensor.dtype, tensor.shape.size())) {
      const WeightOrigin o = origin(name);
      fail_load(o.file, "tensor '{}' has unsupported dtype {} (supported: f32, f16, bf16; q8_0, i8 for matrices)",
                o.name, dtype_name(tensor.dtype));
    }
  }
  for (const auto& [name, shape] : expected) {
    if (weights.tensors.count(name) == 0)
      fail_load(checkpoint, "missing tensor '{}' (expected shape {})", file_name_of(name), shape_string(shape));
  }
  // The weights' dtype: the first attention layer's query projection's (layer 0 may be recurrent).
  for (int64_t i = 0; i < weights.config.num_layers; ++i)
    if (weights.config.attends(i)) {
      weights.config.dtype = weights.tensors.at("layers." + std::to_string(i) + ".wq").dtype;
      break;
    }
}

void split_stacked_gate_up(ModelWeights& w, const std::string& p, const char* hf_name) {
  const ModelConfig& c = w.config;
  auto it = w.tensors.find(p + "experts.w_gate_up");
  if (it == w.tensors.end()) return;
  Tensor stacked = it->second;
  const int64_t width = c.moe_intermediate_size;
  if (stacked.rank() != 3 || stacked.dim(0) != c.num_experts || stacked.dim(1) != 2 * width || stacked.quant)
    fail_load(w.path, "tensor '{}{}' has shape {}, expected [{}, {}, {}]", p, hf_name, stacked.shape_string(),
              c.num_experts, 2 * width, c.hidden_size);
  stacked.shape = {c.num_experts * 2 * width, stacked.dim(2)};
  for (int64_t e = 0; e < c.num_experts; ++e) {
    const std::string x = p + "experts." + std::to_string(e) + ".";
    w.tensors[x + "w_gate"] = row_slice(stacked, 2 * e * width, (2 * e + 1) * width);
    w.tensors[x + "w_up"] = row_slice(stacked, (2 * e + 1) * width, (2 * e + 2) * width);
  }
  w.tensors.erase(it);
}

std::string checkpoint_name(const ModelWeights& w, const std::string& canonical) {
  if (w.format == CheckpointFormat::kHuggingFace) return canonical_to_hf(canonical, w.config.arch);
  if (w.format == CheckpointFormat::kGguf) return canonical_to_gguf(canonical, w.config.arch, w.config.num_layers);
  return canonical;
}

void squeeze_conv_kernel(ModelWeights& w, const std::string& name) {
  auto it = w.tensors.find(name);
  if (it == w.tensors.end() || it->second.rank() != 3) return;
  Tensor kernel = to_f32(it->second);
  kernel.shape = {kernel.dim(0), kernel.dim(2)};
  it->second = std::move(kernel);
}

void decay_from_a_log(ModelWeights& w, const std::string& name) {
  auto it = w.tensors.find(name);
  if (it == w.tensors.end()) return;
  Tensor a = to_f32(it->second);
  for (int64_t i = 0; i < a.numel(); ++i) a.mutable_as<float>()[i] = -std::exp(a.as<float>()[i]);
  it->second = std::move(a);
}

void require_fused(const ModelWeights& w, const std::string& fused, const std::string& first_part) {
  if (w.tensors.count(fused) == 0 && w.tensors.count(first_part) == 0)
    fail_load(w.path, "missing tensor '{}'", checkpoint_name(w, fused));
}

Tensor gather_row_ranges(const Tensor& t, const std::vector<std::pair<int64_t, int64_t>>& ranges) {
  int64_t rows = 0;
  for (auto [begin, end] : ranges) rows += end - begin;
  std::vector<int64_t> shape = t.shape;
  shape[0] = rows;
  Tensor out = Tensor::allocate(t.dtype, shape);
  auto* dst = out.mutable_as<unsigned char>();
  for (auto [begin, end] : ranges) {
    const Tensor part = row_slice(t, begin, end);
    std::memcpy(dst, part.data, part.nbytes());
    dst += part.nbytes();
  }
  return out;
}

}  // namespace minfer
