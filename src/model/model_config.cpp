#include "model/model_config.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "base/error.h"

namespace minfer {

std::vector<float> ModelConfig::rope_inv_freq(bool local, int64_t max_model_len) const {
  const int64_t dims = rotary_dims(), half = dims / 2;
  std::vector<float> out(static_cast<size_t>(half));
  const RopeScaling unscaled;
  const RopeScaling& s = local ? unscaled : rope_scaling;
  const double theta = local ? rope_local_theta : rope_theta;
  // YaRN's ramp: the (fractional) dimension index at which a frequency turns `rotations` times over the original
  // context, rounded outwards when truncate, clamped to the rotary dims.
  double yarn_low = 0.0, yarn_high = 0.0;
  if (s.type == "yarn") {
    auto dim_of = [&](double rotations) {
      return static_cast<double>(dims) *
             std::log(static_cast<double>(s.original_max_position_embeddings) / (rotations * 2.0 * std::numbers::pi)) /
             (2.0 * std::log(theta));
    };
    yarn_low = dim_of(s.beta_fast);
    yarn_high = dim_of(s.beta_slow);
    if (s.truncate) yarn_low = std::floor(yarn_low), yarn_high = std::ceil(yarn_high);
    yarn_low = std::max(yarn_low, 0.0);
    yarn_high = std::min(yarn_high, static_cast<double>(dims - 1));
    if (yarn_high == yarn_low) yarn_high += 0.001;  // transformers' guard against a zero-width ramp
  }
  // Computed in double and rounded once; HF computes the same formula in float32 (results agree to ~1 ulp).
  for (int64_t i = 0; i < half; ++i) {
    double f = 1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(dims));
    if (s.type == "longrope") {
      const bool long_context = max_model_len > s.original_max_position_embeddings;
      f /= static_cast<double>((long_context ? s.long_factor : s.short_factor)[static_cast<size_t>(i)]);
    } else if (s.type == "linear") {
      f /= s.factor;
    } else if (s.type == "llama3") {
      // transformers' _compute_llama3_parameters: keep high frequencies, divide low ones by factor, and blend
      // the band between the two wavelength thresholds.
      const double old_ctx = static_cast<double>(s.original_max_position_embeddings);
      const double low_freq_wavelen = old_ctx / s.low_freq_factor;
      const double high_freq_wavelen = old_ctx / s.high_freq_factor;
      const double wavelen = 2.0 * std::numbers::pi / f;
      if (wavelen > low_freq_wavelen) {
        f /= s.factor;
      } else if (!(wavelen < high_freq_wavelen)) {
        const double smooth = (old_ctx / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        f = (1.0 - smooth) * f / s.factor + smooth * f;
      }
    } else if (s.type == "yarn") {
      // ramp: the weight of the interpolated (factor-divided) frequency, 0 below the ramp (fast-turning dimensions
      // keep theirs) and 1 above it.
      const double ramp = std::clamp((static_cast<double>(i) - yarn_low) / (yarn_high - yarn_low), 0.0, 1.0);
      f = f / s.factor * ramp + f * (1.0 - ramp);
    }
    if (!s.freq_factors.empty()) f /= static_cast<double>(s.freq_factors[static_cast<size_t>(i)]);
    out[static_cast<size_t>(i)] = static_cast<float>(f);
  }
  return out;
}

namespace {

void validate_rope_scaling(const RopeScaling& s, int64_t rotary_dims, const std::string& source) {
  if (s.type != "none" && s.type != "linear" && s.type != "llama3" && s.type != "longrope" && s.type != "yarn")
    fail_load(source, "unsupported rope_scaling type '{}' (supported: none, linear, llama3, longrope, yarn)", s.type);
  if (s.type == "yarn" && (s.original_max_position_embeddings <= 0 || !(s.attention_factor > 0) || !(s.beta_fast > 0) ||
                           !(s.beta_slow > 0)))
    fail_load(source,
              "rope_scaling: yarn needs original_max_position_embeddings, positive beta_fast / beta_slow and a "
              "positive attention factor (got {}, {}, {}, {})",
              s.original_max_position_embeddings, s.beta_fast, s.beta_slow, s.attention_factor);
  if (s.type == "longrope") {
    for (const auto* f : {&s.long_factor, &s.short_factor}) {
      if (static_cast<int64_t>(f->size()) != rotary_dims / 2)
        fail_load(source, "rope_scaling: longrope factors have {} entries, expected rotary dims / 2 = {}", f->size(),
                  rotary_dims / 2);
      for (float v : *f)
        if (!(v > 0) || !std::isfinite(v)) fail_load(source, "rope_scaling: longrope factor {} is not positive", v);
    }
    if (s.original_max_position_embeddings <= 0 || !(s.attention_factor > 0))
      fail_load(source,
                "rope_scaling: longrope needs original_max_position_embeddings and a positive attention factor");
  }
  if (s.type != "none" && s.type != "longrope" && (!(s.factor > 0) || !std::isfinite(s.factor)))
    fail_load(source, "invalid config: rope_scaling.factor = {} (must be positive)", s.factor);
  if (s.type == "llama3") {
    if (!(s.low_freq_factor > 0) || !(s.high_freq_factor > s.low_freq_factor))
      fail_load(source, "invalid config: rope_scaling needs 0 < low_freq_factor < high_freq_factor (got {} and {})",
                s.low_freq_factor, s.high_freq_factor);
    if (s.original_max_position_embeddings <= 0)
      fail_load(source, "invalid config: rope_scaling.original_max_position_embeddings = {}",
                s.original_max_position_embeddings);
  }
  if (!s.freq_factors.empty()) {
    if (static_cast<int64_t>(s.freq_factors.size()) != rotary_dims / 2)
      fail_load(source, "rope frequency factors have {} entries, expected rotary dims / 2 = {}", s.freq_factors.size(),
                rotary_dims / 2);
    for (float f : s.freq_factors)
      if (!(f > 0) || !std::isfinite(f)) fail_load(source, "rope frequency factor {} is not positive", f);
  }
}

void validate_mamba(const MambaShape& m, const std::string& source) {
  for (auto [field, v] : {std::pair{"mamba_n_heads", m.heads},
                          {"mamba_d_head", m.head_dim},
                          {"mamba_n_groups", m.groups},
                          {"mamba_d_state", m.state}})
    if (v <= 0 || v > 65536) fail_load(source, "invalid config: {} = {} (must be in 1..65536)", field, v);
  if (m.heads % m.groups != 0)
    fail_load(source, "invalid config: mamba_n_groups ({}) does not divide mamba_n_heads ({})", m.groups, m.heads);
  if (m.conv_kernel < 1 || m.conv_kernel > 8)
    fail_load(source, "invalid config: mamba_d_conv = {} (must be in 1..8)", m.conv_kernel);
}

void validate_mixers(const ModelConfig& c, const std::string& source) {
  if (c.layer_mixers.empty()) return;
  if (static_cast<int64_t>(c.layer_mixers.size()) != c.num_layers)
    fail_load(source, "invalid config: {} layer_types entries for {} layers", c.layer_mixers.size(), c.num_layers);
  bool any_attention = false, any_delta = false, any_conv = false;
  for (LayerMixer m : c.layer_mixers) {
    if (m == LayerMixer::kMamba2) validate_mamba(c.mamba, source);
    any_attention = any_attention || m == LayerMixer::kAttention;
    any_delta = any_delta || m == LayerMixer::kGatedDeltaNet;
    any_conv = any_conv || m == LayerMixer::kShortConv;
  }
  // The KV pools and the scheduler are sized by attention layers; every hybrid family has some.
  if (!any_attention) fail_load(source, "unsupported: no attention layer in layer_types (a purely recurrent model)");
  if (any_conv && (c.short_conv_kernel < 1 || c.short_conv_kernel > 8))
    fail_load(source, "invalid config: conv_L_cache = {} (must be in 1..8)", c.short_conv_kernel);
  if (!any_delta) return;
  const LinearAttentionShape& l = c.linear;
  for (auto [field, v] : {std::pair{"linear_num_key_heads", l.k_heads},
                          {"linear_num_value_heads", l.v_heads},
                          {"linear_key_head_dim", l.k_dim},
                          {"linear_value_head_dim", l.v_dim}})
    if (v <= 0 || v > 4096) fail_load(source, "invalid config: {} = {} (must be in 1..4096)", field, v);
  if (l.v_heads % l.k_heads != 0)
    fail_load(source, "invalid config: linear_num_key_heads ({}) does not divide linear_num_value_heads ({})",
              l.k_heads, l.v_heads);
  if (l.conv_kernel < 1 || l.conv_kernel > 8)
    fail_load(source, "invalid config: linear_conv_kernel_dim = {} (must be in 1..8)", l.conv_kernel);
}

}  // namespace

const char* layer_mixer_name(LayerMixer mixer) {
  switch (mixer) {
    case LayerMixer::kAttention: return "full_attention";
    case LayerMixer::kGatedDeltaNet: return "linear_attention";
    case LayerMixer::kShortConv: return "conv";
    case LayerMixer::kMamba2: return "mamba";
    case LayerMixer::kNone: return "mlp";
  }
  return "unknown";
}

int64_t ModelConfig::conv_state_floats(int64_t layer) const {
  if (mixer(layer) == LayerMixer::kGatedDeltaNet) return (linear.conv_kernel - 1) * linear.conv_channels();
  if (mixer(layer) == LayerMixer::kShortConv) return (short_conv_kernel - 1) * conv_channels();
  if (mixer(layer) == LayerMixer::kMamba2) return (mamba.conv_kernel - 1) * mamba.conv_channels();
  return 0;
}

int64_t ModelConfig::ssm_state_floats(int64_t layer) const {
  if (mixer(layer) == LayerMixer::kGatedDeltaNet) return linear.v_heads * linear.k_dim * linear.v_dim;
  if (mixer(layer) == LayerMixer::kMamba2) return mamba.heads * mamba.head_dim * mamba.state;
  return 0;
}

void ModelConfig::validate(const std::string& source) const {
  if (mtp_layers < 0 || mtp_layers > 16)
    fail_load(source, "invalid config: mtp_num_hidden_layers = {} (must be in 0..16)", mtp_layers);
  auto positive = [&](const char* field, int64_t v, int64_t max) {
    if (v <= 0 || v > max) fail_load(source, "invalid config: {} = {} (must be in 1..{})", field, v, max);
  };
  positive("vocab_size", vocab_size, int64_t{1} << 24);
  positive("hidden_size", hidden_size, int64_t{1} << 20);
  positive("intermediate_size", intermediate_size, int64_t{1} << 22);
  positive("num_hidden_layers", num_layers, 4096);
  positive("num_attention_heads", num_heads, 4096);
  positive("num_key_value_heads", num_kv_heads, 4096);
  positive("head_dim", head_dim, 4096);
  if (rotary_dim < 0 || rotary_dim > head_dim || rotary_dim % 2 != 0)
    fail_load(source, "invalid config: {} rotary dims of a {}-wide head (partial_rotary_factor)", rotary_dim, head_dim);
  positive("max_position_embeddings", max_position_embeddings, int64_t{1} << 30);
  if (num_heads % num_kv_heads != 0)
    fail_load(source, "invalid config: num_key_value_heads ({}) does not divide num_attention_heads ({})", num_kv_heads,
              num_heads);
  if (head_dim % 2 != 0) fail_load(source, "invalid config: head_dim {} is odd (RoPE rotates pairs)", head_dim);
  if (!(rms_norm_eps > 0) || !std::isfinite(rms_norm_eps))
    fail_load(source, "invalid config: rms_norm_eps = {} (must be positive)", rms_norm_eps);
  if (!(rope_theta > 0) || !std::isfinite(rope_theta))
    fail_load(source, "invalid config: rope_theta = {} (must be positive)", rope_theta);

  if (num_experts > 0) {
    positive("num_experts", num_experts, 4096);
    positive("num_experts_per_tok", num_experts_per_tok, num_experts);
    positive("moe_intermediate_size", moe_intermediate_size, int64_t{1} << 22);
    if (!layer_dense.empty() && static_cast<int64_t>(layer_dense.size()) != num_layers)
      fail_load(source, "invalid config: {} dense-layer flags for {} layers", layer_dense.size(), num_layers);
  }
  if (sliding_window < 0) fail_load(source, "invalid config: sliding_window = {} (must be >= 0)", sliding_window);
  if (!layer_rope.empty() && static_cast<int64_t>(layer_rope.size()) != num_layers)
    fail_load(source, "invalid config: {} no_rope_layers entries for {} layers", layer_rope.size(), num_layers);
  if (!layer_sliding.empty() && static_cast<int64_t>(layer_sliding.size()) != num_layers)
    fail_load(source, "invalid config: {} layer types for {} layers", layer_sliding.size(), num_layers);
  if (rope_local_theta < 0 || !std::isfinite(rope_local_theta))
    fail_load(source, "invalid config: rope_local_base_freq = {}", rope_local_theta);
  if (!(residual_multiplier > 0) || !std::isfinite(residual_multiplier) || !(logits_scaling > 0) ||
      !std::isfinite(logits_scaling))
    fail_load(source, "invalid config: residual_multiplier = {}, logits_scaling = {} (must be positive)",
              residual_multiplier, logits_scaling);
  for (double v : {attention_scale, attn_softcap, final_softcap})
    if (v < 0 || !std::isfinite(v)) fail_load(source, "invalid config: a scale or soft-cap of {} (must be >= 0)", v);

  validate_rope_scaling(rope_scaling, rotary_dims(), source);
  validate_mixers(*this, source);

  if (bos_token_id < -1 || bos_token_id >= vocab_size)
    fail_load(source, "bos_token_id {} is outside the vocabulary ({} tokens)", bos_token_id, vocab_size);
  for (int32_t id : eos_token_ids)
    if (id < 0 || id >= vocab_size)
      fail_load(source, "eos_token_id {} is outside the vocabulary ({} tokens)", id, vocab_size);
}

}  // namespace minfer
