#include "model/shard_mixers.h"

#include <cstring>

#include "base/error.h"

namespace minfer {
namespace {

using Ranges = std::vector<std::pair<int64_t, int64_t>>;

// Each head range times `width`, offset by `base`.
Ranges scaled(const Ranges& heads, int64_t width, int64_t base = 0) {
  Ranges out;
  for (auto [b, e] : heads) out.emplace_back(base + b * width, base + e * width);
  return out;
}

Ranges join(std::initializer_list<Ranges> parts) {
  Ranges out;
  for (const Ranges& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// Rows (elements of a vector) in `ranges`, copied into one tensor.
Tensor gather_rows(const Tensor& t, const Ranges& ranges) {
  int64_t n = 0;
  for (auto [b, e] : ranges) n += e - b;
  std::vector<int64_t> shape = t.shape;
  shape[0] = n;
  Tensor out = Tensor::allocate(t.dtype, shape);
  const size_t row = dtype_bytes(t.dtype, static_cast<size_t>(t.numel() / t.dim(0)));
  auto* dst = out.mutable_as<unsigned char>();
  for (auto [b, e] : ranges) {
    std::memcpy(dst, t.as<unsigned char>() + static_cast<size_t>(b) * row, static_cast<size_t>(e - b) * row);
    dst += static_cast<size_t>(e - b) * row;
  }
  return out;
}

// Columns in `ranges` of a 2-D weight, side by side (each range on block boundaries for a block type).
Tensor gather_columns(const std::string& name, const Tensor& t, const Ranges& ranges, int ranks) {
  const int64_t block = dtype_block(t.dtype).elements;
  int64_t n = 0;
  for (auto [b, e] : ranges) {
    if (b % block != 0 || e % block != 0)
      fail(
          "--tensor-parallel-size {}: {} ({} {}) would be split at column {} of {}, inside its {}-element blocks; "
          "use a tensor-parallel size whose split falls on block boundaries",
          ranks, name, dtype_name(t.dtype), t.shape_string(), b % block != 0 ? b : e, t.dim(1), block);
    n += e - b;
  }
  Tensor out = Tensor::allocate(t.dtype, {t.dim(0), n});
  auto* dst = out.mutable_as<unsigned char>();
  const size_t in_row = dtype_bytes(t.dtype, static_cast<size_t>(t.dim(1)));
  for (int64_t r = 0; r < t.dim(0); ++r)
    for (auto [b, e] : ranges) {
      const size_t bytes = dtype_bytes(t.dtype, static_cast<size_t>(e - b));
      std::memcpy(dst, t.as<unsigned char>() + static_cast<size_t>(r) * in_row + dtype_bytes(t.dtype, size_t(b)),
                  bytes);
      dst += bytes;
    }
  return out;
}

void check_divides(int ranks, int64_t n, const char* what) {
  if (n % ranks != 0)
    fail("--tensor-parallel-size {}: the model has {} {}, which do not divide among {} ranks", ranks, n, what, ranks);
}

}  // namespace

MixerShard::MixerShard(const ModelConfig& config, int rank, int ranks) : c_(config), rank_(rank), ranks_(ranks) {
  bool delta = false, mamba = false, conv = false;
  for (int64_t i = 0; i < c_.num_layers; ++i) {
    delta |= c_.mixer(i) == LayerMixer::kGatedDeltaNet;
    mamba |= c_.mixer(i) == LayerMixer::kMamba2;
    conv |= c_.mixer(i) == LayerMixer::kShortConv;
  }
  if (delta) plan_delta_rule(c_.linear);
  if (mamba) plan_mamba2(c_.mamba);
  if (conv) {
    check_divides(ranks, c_.conv_channels(), "short-convolution channels (hidden_size)");
    const int64_t n = c_.conv_channels() / ranks;
    const Ranges mine = {{rank * n, (rank + 1) * n}};
    for (const char* w : {"conv_in_b", "conv_in_c", "conv_in_x", "conv_kernel"}) conv_[w] = {mine};
    conv_["conv_out"] = {mine, true};
  }
  if (const int64_t s = c_.shared_expert_intermediate_size; s > 0 && c_.num_experts > 0) {
    check_divides(ranks, s, "shared-expert MLP columns (shared_expert_intermediate_size)");
    const Ranges mine = {{rank * s / ranks, (rank + 1) * s / ranks}};
    shared_["shared.w_gate"] = {mine};
    shared_["shared.w_up"] = {mine};
    shared_["shared.w_down"] = {mine, true};
  }
}

// The rank's key heads and the value heads that read them: value head h reads key head h / r (Hugging Face's
// grouped order) or h % k_heads (llama.cpp's tiled one), r = v_heads / k_heads.
void MixerShard::plan_delta_rule(const LinearAttentionShape& l) {
  check_divides(ranks_, l.k_heads, "linear-attention key heads (linear_num_key_heads)");
  const int64_t kh = l.k_heads / ranks_, vh = l.v_heads / ranks_, r = l.v_heads / l.k_heads;
  const Ranges keys = {{rank_ * kh, (rank_ + 1) * kh}};
  Ranges values;
  if (l.tiled_heads) {
    for (int64_t j = 0; j < r; ++j) values.emplace_back(j * l.k_heads + rank_ * kh, j * l.k_heads + (rank_ + 1) * kh);
  } else {
    values = {{rank_ * vh, (rank_ + 1) * vh}};
  }
  const int64_t qk = l.k_heads * l.k_dim;
  const Ranges qkv = join({scaled(keys, l.k_dim), scaled(keys, l.k_dim, qk), scaled(values, l.v_dim, 2 * qk)});
  delta_["ssm_in_qkv"] = {qkv};
  delta_["ssm_conv"] = {qkv};
  delta_["ssm_in_z"] = {scaled(values, l.v_dim)};
  for (const char* w : {"ssm_in_b", "ssm_in_a", "ssm_a", "ssm_dt_bias"}) delta_[w] = {values};
  delta_["ssm_out"] = {scaled(values, l.v_dim), true};
}

// The rank's heads and their groups of B and C; a group's heads stay on one rank, so its gated norm's RMS too.
void MixerShard::plan_mamba2(const MambaShape& m) {
  if (m.groups % ranks_ != 0)
    fail(
        "--tensor-parallel-size {}: the model's Mamba2 layers have {} group(s) (n_groups), which do not divide among "
        "{} ranks: their gated norm spans each group's heads; run it with a tensor-parallel size that divides {}",
        ranks_, m.groups, ranks_, m.groups);
  check_divides(ranks_, m.heads, "Mamba2 heads");
  const int64_t hm = m.heads / ranks_, gr = m.groups / ranks_;
  const Ranges heads = {{rank_ * hm, (rank_ + 1) * hm}}, groups = {{rank_ * gr, (rank_ + 1) * gr}};
  const Ranges x = scaled(heads, m.head_dim);
  const Ranges xbc =
      join({x, scaled(groups, m.state, m.inner()), scaled(groups, m.state, m.inner() + m.groups * m.state)});
  mamba_["ssm_in_z"] = {x};
  mamba_["ssm_norm_gated"] = {x};
  for (const char* w : {"ssm_in_xbc", "ssm_conv", "ssm_conv_bias"}) mamba_[w] = {xbc};
  for (const char* w : {"ssm_in_dt", "ssm_a", "ssm_d", "ssm_dt_bias"}) mamba_[w] = {heads};
  mamba_["ssm_out"] = {x, true};
}

std::optional<Tensor> MixerShard::part(const std::string& name, int64_t layer, std::string_view rest,
                                       const Tensor& t) const {
  const LayerMixer m = c_.mixer(layer);
  const Cuts* cuts = m == LayerMixer::kGatedDeltaNet ? &delta_
                     : m == LayerMixer::kMamba2      ? &mamba_
                     : m == LayerMixer::kShortConv   ? &conv_
                                                     : nullptr;
  auto it = cuts ? cuts->find(rest) : Cuts::const_iterator{};
  if (cuts == nullptr || it == cuts->end()) {
    it = shared_.find(rest);
    if (it == shared_.end()) return std::nullopt;
  }
  MINFER_CHECK(t.layout == TensorLayout::kRowMajor && !t.quant, "tensor parallel: {} is not a row-major weight", name);
  return it->second.columns ? gather_columns(name, t, it->second.ranges, ranks_) : gather_rows(t, it->second.ranges);
}

void MixerShard::shrink(ModelConfig& c) const {
  c.linear.k_heads /= ranks_;
  c.linear.v_heads /= ranks_;
  c.mamba.heads /= ranks_;
  c.mamba.groups /= ranks_;
  c.short_conv_channels = c.conv_channels() / ranks_;
  c.shared_expert_intermediate_size /= ranks_;
}

}  // namespace minfer
