// Qwen3-Next (80B-A3B): Qwen3.5-MoE's architecture a generation earlier (qwen35.cpp builds the graph): Gated DeltaNet
// on three layers of four, gated full attention on the fourth, routed experts plus a gated shared expert after each.
// What differs is how the checkpoints store the delta rule's input projections: Hugging Face fuses q | k | v | z into
// in_proj_qkvz and b | a into in_proj_ba, both grouped per key head ([q_g, k_g, v_g, z_g] for key head g, v_g and
// z_g the r = v_heads / k_heads value heads of the group); llama.cpp's converter splits in_proj_qkvz into attn_qkv
// (the conv's channel order) and attn_gate and keeps ssm_ba grouped. Both are split at load into the projections
// the graph reads (ssm_in_qkv, ssm_in_z, ssm_in_b, ssm_in_a). The value heads keep Hugging Face's grouped order in
// GGUF too (llama.cpp repeats q/k heads interleaved for this architecture).
#include "model/families/family_file.h"
#include "model/families/qwen35.h"
#include "model/loaders/weight_check.h"

namespace minfer {
namespace {

using Ranges = std::vector<std::pair<int64_t, int64_t>>;

// Per key head g, `parts` row counts one after the other; returns each part's rows over all groups, in group order.
std::vector<Ranges> grouped_parts(int64_t groups, const std::vector<int64_t>& parts) {
  std::vector<Ranges> out(parts.size());
  int64_t row = 0;
  for (int64_t g = 0; g < groups; ++g)
    for (size_t i = 0; i < parts.size(); ++i) {
      out[i].emplace_back(row, row + parts[i]);
      row += parts[i];
    }
  return out;
}

// Takes `fused` (rows grouped per key head, `parts` rows each in every group) out of the weights and stores each
// output: the rows of the parts it lists, each part over all groups in turn (q of every key head, then k, ...).
void split_grouped(ModelWeights& w, const std::string& p, const char* fused, const std::vector<int64_t>& parts,
                   const std::vector<std::pair<const char*, std::vector<size_t>>>& outputs) {
  // GGUF's in_proj_qkvz comes split (attn_qkv, attn_gate: check_weights names them); the rest must be there.
  if (w.format == CheckpointFormat::kHuggingFace || std::string_view(fused) != "ssm_in_qkvz")
    require_fused(w, p + fused, p + outputs[0].first);
  auto it = w.tensors.find(p + fused);
  if (it == w.tensors.end()) return;
  const Tensor t = it->second;
  const int64_t groups = w.config.linear.k_heads;
  int64_t group_rows = 0;
  for (int64_t n : parts) group_rows += n;
  if (t.rank() != 2 || t.dim(0) != groups * group_rows || t.quant)
    fail_load(w.path, "tensor '{}' has shape {}, expected [{}, {}] ({} key-head groups of {} rows)",
              checkpoint_name(w, p + fused), t.shape_string(), groups * group_rows, w.config.hidden_size, groups,
              group_rows);
  const std::vector<Ranges> rows = grouped_parts(groups, parts);
  for (const auto& [name, indices] : outputs) {
    Ranges taken;
    for (size_t i : indices) taken.insert(taken.end(), rows[i].begin(), rows[i].end());
    w.tensors[p + name] = gather_row_ranges(t, taken);
  }
  w.tensors.erase(it);
}

void adapt_weights(ModelWeights& w) {
  const LinearAttentionShape& l = w.config.linear;
  const int64_t r = l.k_heads > 0 ? l.v_heads / l.k_heads : 0;
  for (int64_t i = 0; i < w.config.num_layers; ++i) {
    if (!w.config.is_recurrent(i)) continue;
    const std::string p = "layers." + std::to_string(i) + ".";
    // q | k | v of every key head in turn: the conv's channel order.
    split_grouped(w, p, "ssm_in_qkvz", {l.k_dim, l.k_dim, r * l.v_dim, r * l.v_dim},
                  {{"ssm_in_qkv", {0, 1, 2}}, {"ssm_in_z", {3}}});
    split_grouped(w, p, "ssm_in_ba", {r, r}, {{"ssm_in_b", {0}}, {"ssm_in_a", {1}}});
  }
  adapt_qwen35_weights(w);
}

void read_hf(const HfFields& f, std::string_view model_type, ModelConfig& c) {
  read_qwen35_moe_hf(f, model_type, c);
  read_qwen_dense_layers(f, c);
}

void read_gguf(const GgufFile& g, const std::string& arch, ModelConfig& c) {
  read_qwen35_gguf(g, arch, c);
  c.linear.tiled_heads = false;
}

// The fused projections (HF, and ssm_in in GGUF files converted before llama.cpp split it), then Qwen3.5-MoE's rows.
constexpr WeightNameRow kFusedRows[] = {
    {"ssm_in_qkvz", "linear_attn.in_proj_qkvz.weight", "ssm_in.weight"},
    {"ssm_in_ba", "linear_attn.in_proj_ba.weight", "ssm_ba.weight"},
};
constexpr auto kNames = concat_names(kFusedRows, kQwen35Names, kQwen35MoeRows);

constexpr HfModelType kTypes[] = {{"qwen3_next", "Qwen3NextForCausalLM"}};

nlohmann::json test_config(const TestPreset& p, const TestConfigContext& x) {
  nlohmann::json t = test_config_base(p, x, "Qwen3NextForCausalLM", "5.25.0");
  nlohmann::json types = nlohmann::json::array();
  for (int64_t i = 0; i < p.layers; ++i)
    types.push_back((i + 1) % p.full_attention_interval != 0 ? "linear_attention" : "full_attention");
  t.update({{"attention_bias", false},
            {"decoder_sparse_step", 1},
            {"full_attention_interval", p.full_attention_interval},
            {"head_dim", p.head_size()},
            {"hidden_act", "silu"},
            {"layer_types", types},
            {"linear_conv_kernel_dim", 4},
            {"linear_key_head_dim", p.linear_k_dim},
            {"linear_num_key_heads", p.linear_k_heads},
            {"linear_num_value_heads", p.linear_v_heads},
            {"linear_value_head_dim", p.linear_v_dim},
            {"mlp_only_layers", nlohmann::json::array()},
            {"moe_intermediate_size", p.moe_intermediate},
            {"norm_topk_prob", true},
            {"num_experts", p.experts},
            {"num_experts_per_tok", p.experts_per_tok},
            {"rms_norm_eps", 1e-06},
            {"rope_parameters", {{"partial_rotary_factor", 0.25}, {"rope_theta", 10000000}, {"rope_type", "default"}}},
            {"router_aux_loss_coef", 0.001},
            {"shared_expert_intermediate_size", p.intermediate}});
  return t;
}

// The delta rule's input projections as the checkpoint fuses them (random weights: only the shapes matter), then
// Qwen3.5's forms (q_proj's gate rows, the conv kernel's shape).
void test_hf_weights(const ModelConfig& c, std::vector<HfTestWeight>& weights) {
  const LinearAttentionShape& l = c.linear;
  std::vector<HfTestWeight> out;
  for (HfTestWeight& w : weights) {
    const size_t at = w.name.find("linear_attn.in_proj_");
    if (at == std::string::npos) {
      out.push_back(std::move(w));
      continue;
    }
    const std::string layer = w.name.substr(0, at) + "linear_attn.";
    if (w.name.ends_with("in_proj_qkv.weight"))
      out.push_back(
          {layer + "in_proj_qkvz.weight", {2 * l.k_heads * l.k_dim + 2 * l.v_heads * l.v_dim, c.hidden_size}});
    if (w.name.ends_with("in_proj_b.weight"))
      out.push_back({layer + "in_proj_ba.weight", {2 * l.v_heads, c.hidden_size}});
  }
  qwen35_test_hf_weights(c, out);
  weights = std::move(out);
}

// qwen3-next-80b-a3b: Qwen/Qwen3-Next-80B-A3B-Instruct's shape (use --layers for a slice); tiny-qwen3-next: 8 experts,
// top 2, a shared expert, 4 value heads over 2 key heads.
// clang-format off
const TestPreset kPresets[] = {
    {.name = "qwen3-next-80b-a3b", .model_type = "qwen3_next", .tiny = false, .hidden = 2048, .intermediate = 512,
     .layers = 48, .heads = 16, .kv_heads = 2, .vocab = 151936, .max_position_embeddings = 262144, .tied = false,
     .embed_std = 0.02, .weight_std = 0.02, .head_dim = 256, .experts = 512, .experts_per_tok = 10,
     .moe_intermediate = 512, .linear_k_heads = 16, .linear_v_heads = 32, .linear_k_dim = 128, .linear_v_dim = 128,
     .full_attention_interval = 4, .bos = 151643, .config_eos = {151645}, .generation_eos = {151645, 151643},
     .qwen_tokenizer = true},
    {.name = "tiny-qwen3-next", .model_type = "qwen3_next", .tiny = true, .hidden = 64, .intermediate = 64,
     .layers = 4, .heads = 4, .kv_heads = 2, .vocab = 0, .max_position_embeddings = 262144, .tied = false,
     .embed_std = 0.08, .weight_std = 0.16, .head_dim = 32, .experts = 8, .experts_per_tok = 2, .moe_intermediate = 32,
     .linear_k_heads = 2, .linear_v_heads = 4, .linear_k_dim = 16, .linear_v_dim = 16, .full_attention_interval = 4,
     .qwen_tokenizer = true},
};
// clang-format on

}  // namespace

// clang-format off
extern const Family kQwen3NextFamily = {
    .name = "qwen3next", .hf_model_types = kTypes, .read_hf = read_hf, .gguf_arch = "qwen3next",
    .read_gguf = read_gguf, .layer_names = kNames, .hf_experts = &kQwen35Experts, .build_graph = build_qwen35_graph,
    .gguf_export = {.arch = nullptr, .refusal = "writing Qwen3-Next as GGUF is not supported yet"},
    .test_presets = kPresets, .test_config = test_config, .test_hf_weights = test_hf_weights,
    .adapt_weights = adapt_weights, .shared_experts = true};
// clang-format on

}  // namespace minfer
