// The Mamba2 mixer shared by Granite 4.0-H and Nemotron-H (mamba2.h).
#include "model/families/mamba2.h"

#include <cmath>

#include "model/families/family_file.h"
#include "model/loaders/weight_check.h"

namespace minfer {
namespace {

using graph::Node;
using graph::OpKind;
using graph::ValueId;

// in_proj [z | x B C | dt] into its three parts.
void split_in_proj(ModelWeights& w, const std::string& p) {
  require_fused(w, p + "ssm_in", p + "ssm_in_z");
  auto it = w.tensors.find(p + "ssm_in");
  if (it == w.tensors.end()) return;
  const MambaShape& m = w.config.mamba;
  const Tensor in = it->second;
  const int64_t rows = m.inner() + m.conv_channels() + m.heads;
  if (in.rank() != 2 || in.dim(0) != rows || in.quant)
    fail_load(w.path, "tensor '{}' has shape {}, expected [{}, {}] (z, x|B|C and dt rows)",
              checkpoint_name(w, p + "ssm_in"), in.shape_string(), rows, w.config.hidden_size);
  w.tensors[p + "ssm_in_z"] = row_slice(in, 0, m.inner());
  w.tensors[p + "ssm_in_xbc"] = row_slice(in, m.inner(), m.inner() + m.conv_channels());
  w.tensors[p + "ssm_in_dt"] = row_slice(in, m.inner() + m.conv_channels(), m.inner() + m.conv_channels() + m.heads);
  w.tensors.erase(it);
}

// Vectors stored as matrices ([heads, 1] in GGUF; the norm as [groups, width / groups]) and HF's conv [C, 1, K].
void reshape_vectors(ModelWeights& w, const std::string& p) {
  for (const char* name : {"ssm_a", "ssm_d", "ssm_norm_gated", "ssm_dt_bias", "ssm_conv_bias"})
    if (auto it = w.tensors.find(p + name); it != w.tensors.end() && it->second.rank() == 2)
      it->second.shape = {it->second.numel()};
  squeeze_conv_kernel(w, p + "ssm_conv");
}

}  // namespace

ValueId mamba2_mixer(DecoderBuilder& b, int64_t layer, ValueId h) {
  const MambaShape& m = b.config().mamba;
  const std::string p = DecoderBuilder::prefix(layer);
  graph::Graph& g = b.graph();
  const ValueId z = b.matmul(h, p + "ssm_in_z", "", p + "z");
  const ValueId xbc = b.matmul(h, p + "ssm_in_xbc", "", p + "xbc");
  const ValueId dt = b.matmul(h, p + "ssm_in_dt", "", p + "dt");
  const auto index = static_cast<int32_t>(layer);
  const ValueId conv = b.conv1d(layer, xbc, p + "ssm_conv", m.conv_bias ? p + "ssm_conv_bias" : "", m.conv_channels(),
                                true, p + "xbc_conv");
  Node scan{.kind = OpKind::kSsmScan,
            .inputs = {conv, dt},
            .output = g.add_value(p + "scan", m.inner()),
            .layer = index,
            .heads = m.heads,
            .head_dim = m.head_dim};
  scan.kv_heads = m.groups;
  scan.value_dim = m.state;
  scan.weight = b.f32(p + "ssm_a");
  scan.bias = b.f32(p + "ssm_dt_bias");
  scan.skip = b.f32(p + "ssm_d");
  const ValueId y = g.add_node(scan);
  const ValueId gated =
      g.add_node(Node{.kind = OpKind::kSiluMul, .inputs = {z, y}, .output = g.add_value(p + "scan_gated", m.inner())});
  const ValueId normed = b.rmsnorm(gated, p + "ssm_norm_gated", p + "scan_normed", m.inner() / m.groups);
  return b.all_reduce(b.matmul(normed, p + "ssm_out", "", p + b.shard_name("o")), p + "o");
}

void adapt_mamba2_weights(ModelWeights& w, const std::string& p) {
  split_in_proj(w, p);
  reshape_vectors(w, p);
  if (w.format == CheckpointFormat::kHuggingFace) decay_from_a_log(w, p + "ssm_a");  // GGUF stores -exp(A_log)
}

void read_mamba2_gguf(const GgufFile& g, const std::string& a, MambaShape& m) {
  m.conv_kernel = g.get_int(a + ".ssm.conv_kernel");
  m.state = g.get_int(a + ".ssm.state_size");
  m.heads = g.get_int(a + ".ssm.time_step_rank");
  m.groups = g.get_int(a + ".ssm.group_count");
  const int64_t inner = g.get_int(a + ".ssm.inner_size");
  m.head_dim = m.heads > 0 ? inner / m.heads : 0;
  // The first Mamba2 layer's conv tells whether they have a bias (layer 0 may attend).
  m.conv_bias = false;
  for (int64_t i = 0; i < g.get_int(a + ".block_count"); ++i) {
    const std::string conv = "blk." + std::to_string(i) + ".ssm_conv1d.";
    if (g.find_tensor(conv + "weight") == nullptr) continue;
    m.conv_bias = g.find_tensor(conv + "bias") != nullptr;
    break;
  }
}

void check_time_step_limit(const HfFields& f) {
  const nlohmann::json* limit = f.get("time_step_limit");
  if (limit == nullptr) return;
  const bool default_limit =
      limit->is_array() && limit->size() == 2 && (*limit)[0] == 0.0 &&
      ((*limit)[1].is_null() || ((*limit)[1].is_number() && std::isinf((*limit)[1].get<double>())));
  if (!default_limit) fail_load(f.path(), "unsupported: time_step_limit {} (only (0, inf))", limit->dump());
}

}  // namespace minfer
