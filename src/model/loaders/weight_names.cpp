// The one table from canonical weight names to Hugging Face and GGUF names.
#include <charconv>
#include <span>
#include <string>

#include "base/error.h"
#include "model/loaders/loaders.h"

namespace minfer {
namespace {

struct NameRow {
  const char* canonical;
  const char* hf;
  const char* gguf;
};

constexpr NameRow kGlobal[] = {
    {"embed", "model.embed_tokens.weight", "token_embd.weight"},
    {"final_norm", "model.norm.weight", "output_norm.weight"},
    {"lm_head", "lm_head.weight", "output.weight"},
};

// Per layer, after the prefixes "layers.{i}.", "model.layers.{i}." and "blk.{i}.".
constexpr NameRow kLayer[] = {
    {"attn_norm", "input_layernorm.weight", "attn_norm.weight"},
    {"wq", "self_attn.q_proj.weight", "attn_q.weight"},
    {"wk", "self_attn.k_proj.weight", "attn_k.weight"},
    {"wv", "self_attn.v_proj.weight", "attn_v.weight"},
    {"wo", "self_attn.o_proj.weight", "attn_output.weight"},
    {"bo", "self_attn.o_proj.bias", "attn_output.bias"},
    {"bq", "self_attn.q_proj.bias", "attn_q.bias"},
    {"bk", "self_attn.k_proj.bias", "attn_k.bias"},
    {"bv", "self_attn.v_proj.bias", "attn_v.bias"},
    {"q_norm", "self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"k_norm", "self_attn.k_norm.weight", "attn_k_norm.weight"},
    {"ffn_norm", "post_attention_layernorm.weight", "ffn_norm.weight"},
    {"w_gate", "mlp.gate_proj.weight", "ffn_gate.weight"},
    {"w_up", "mlp.up_proj.weight", "ffn_up.weight"},
    {"w_down", "mlp.down_proj.weight", "ffn_down.weight"},
};

// Gemma 2/3 name their norms apart from the table above (HF's post_attention_layernorm is their post-attention
// norm, not the pre-FFN one); these rows are looked up first for them.
constexpr NameRow kGemmaLayer[] = {
    {"post_attn_norm", "post_attention_layernorm.weight", "post_attention_norm.weight"},
    {"ffn_norm", "pre_feedforward_layernorm.weight", "ffn_norm.weight"},
    {"post_ffn_norm", "post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
};

// Phi-3 stores q/k/v as one matrix and gate/up as another (GGUF's ffn_up is gate and up, not up alone); the loaders
// split them (split_fused_projections).
constexpr NameRow kPhi3Layer[] = {
    {"wqkv", "self_attn.qkv_proj.weight", "attn_qkv.weight"},
    {"w_gate_up", "mlp.gate_up_proj.weight", "ffn_up.weight"},
};

// Splits "<prefix><digits>.<rest>" into the layer number and rest.
bool split_layer(std::string_view name, std::string_view prefix, std::string_view* layer, std::string_view* rest) {
  if (name.substr(0, prefix.size()) != prefix) return false;
  name.remove_prefix(prefix.size());
  const size_t dot = name.find('.');
  if (dot == 0 || dot == std::string_view::npos) return false;
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + dot, value);
  if (ec != std::errc() || end != name.data() + dot || (dot > 1 && name[0] == '0')) return false;
  *layer = name.substr(0, dot);
  *rest = name.substr(dot + 1);
  return true;
}

// Mixture-of-experts layers: the router, and in GGUF the experts stacked in one 3-D tensor per projection (split into
// layers.{i}.experts.{j}.* by split_fused_projections). HF names each expert's matrices apart (kExpertNames).
constexpr NameRow kQwen3MoeLayer[] = {
    {"router", "mlp.gate.weight", "ffn_gate_inp.weight"},
    {"experts.w_gate", "", "ffn_gate_exps.weight"},
    {"experts.w_up", "", "ffn_up_exps.weight"},
    {"experts.w_down", "", "ffn_down_exps.weight"},
};
constexpr NameRow kMixtralLayer[] = {
    {"router", "block_sparse_moe.gate.weight", "ffn_gate_inp.weight"},
    {"experts.w_gate", "", "ffn_gate_exps.weight"},
    {"experts.w_up", "", "ffn_up_exps.weight"},
    {"experts.w_down", "", "ffn_down_exps.weight"},
};

// gpt-oss: HF's post_attention_layernorm is the pre-FFN norm (GGUF calls it post_attention_norm); per-head sinks; a
// router with a bias; experts with biases. HF stacks the experts transposed ([experts, in, out]) with gate and up
// interleaved column by column (gate_up_proj; OpenAI's own checkpoints hold them in MXFP4 as *_blocks and *_scales,
// rows being outputs) and GGUF stacks them as Qwen3-MoE's plus biases: the stacked forms
// have canonical names of their own (experts.gate_up_proj, ...) and split_fused_projections makes each expert's
// matrices and biases. The per-expert rows' HF names are the stacked tensors they come from (for error messages).
constexpr NameRow kGptOssLayer[] = {
    {"ffn_norm", "post_attention_layernorm.weight", "post_attention_norm.weight"},
    {"sinks", "self_attn.sinks", "attn_sinks.weight"},
    {"router", "mlp.router.weight", "ffn_gate_inp.weight"},
    {"router_bias", "mlp.router.bias", "ffn_gate_inp.bias"},
    {"experts.gate_up_proj", "mlp.experts.gate_up_proj", ""},
    {"experts.gate_up_proj_bias", "mlp.experts.gate_up_proj_bias", ""},
    {"experts.down_proj", "mlp.experts.down_proj", ""},
    {"experts.gate_up_proj_blocks", "mlp.experts.gate_up_proj_blocks", ""},
    {"experts.gate_up_proj_scales", "mlp.experts.gate_up_proj_scales", ""},
    {"experts.down_proj_blocks", "mlp.experts.down_proj_blocks", ""},
    {"experts.down_proj_scales", "mlp.experts.down_proj_scales", ""},
    {"experts.w_gate", "mlp.experts.gate_up_proj", "ffn_gate_exps.weight"},
    {"experts.w_up", "mlp.experts.gate_up_proj", "ffn_up_exps.weight"},
    {"experts.w_down", "mlp.experts.down_proj", "ffn_down_exps.weight"},
    {"experts.b_gate", "mlp.experts.gate_up_proj_bias", "ffn_gate_exps.bias"},
    {"experts.b_up", "mlp.experts.gate_up_proj_bias", "ffn_up_exps.bias"},
    {"experts.b_down", "mlp.experts.down_proj_bias", "ffn_down_exps.bias"},
};

std::span<const NameRow> layer_overrides(Architecture arch) {
  // OLMo 2/3 name their post norms as Gemma does (and have no pre-FFN norm for the middle row to find).
  if (arch == Architecture::kGemma2 || arch == Architecture::kGemma3 || arch == Architecture::kOlmo2)
    return kGemmaLayer;
  if (arch == Architecture::kPhi3) return kPhi3Layer;
  if (arch == Architecture::kQwen3Moe) return kQwen3MoeLayer;
  if (arch == Architecture::kMixtral) return kMixtralLayer;
  if (arch == Architecture::kGptOss) return kGptOssLayer;
  return {};
}

// HF's per-expert names: "<prefix><j>.<name>" for canonical "experts.<j>.<w_gate|w_up|w_down>".
struct ExpertNames {
  std::string_view prefix;
  std::string_view gate, up, down;
};
std::optional<ExpertNames> hf_expert_names(Architecture arch) {
  if (arch == Architecture::kQwen3Moe)
    return ExpertNames{"mlp.experts.", "gate_proj.weight", "up_proj.weight", "down_proj.weight"};
  if (arch == Architecture::kMixtral)
    return ExpertNames{"block_sparse_moe.experts.", "w1.weight", "w3.weight", "w2.weight"};
  return std::nullopt;
}

// "experts.<j>.<w>" <-> the HF name after the layer prefix; nullopt when `rest` is no expert weight.
std::optional<std::string> hf_expert_to_canonical(std::string_view rest, Architecture arch) {
  const auto names = hf_expert_names(arch);
  std::string_view index, name;
  if (!names || !split_layer(rest, names->prefix, &index, &name)) return std::nullopt;
  const std::string_view w = name == names->gate   ? "w_gate"
                             : name == names->up   ? "w_up"
                             : name == names->down ? "w_down"
                                                   : "";
  if (w.empty()) return std::nullopt;
  return "experts." + std::string(index) + "." + std::string(w);
}
std::optional<std::string> canonical_expert_to_hf(std::string_view rest, Architecture arch) {
  const auto names = hf_expert_names(arch);
  std::string_view index, w;
  if (!names || !split_layer(rest, "experts.", &index, &w)) return std::nullopt;
  const std::string_view name = w == "w_gate"   ? names->gate
                                : w == "w_up"   ? names->up
                                : w == "w_down" ? names->down
                                                : "";
  if (name.empty()) return std::nullopt;
  return std::string(names->prefix) + std::string(index) + "." + std::string(name);
}

template <typename Get>
std::optional<std::string> to_canonical(std::string_view name, std::string_view layer_prefix, Architecture arch,
                                        Get external) {
  for (const NameRow& r : kGlobal)
    if (name == external(r)) return std::string(r.canonical);
  std::string_view layer, rest;
  if (!split_layer(name, layer_prefix, &layer, &rest)) return std::nullopt;
  for (std::span<const NameRow> rows : {layer_overrides(arch), std::span<const NameRow>(kLayer)})
    for (const NameRow& r : rows)
      if (*external(r) != '\0' && rest == external(r)) return "layers." + std::string(layer) + "." + r.canonical;
  if (layer_prefix == "model.layers.")
    if (auto expert = hf_expert_to_canonical(rest, arch)) return "layers." + std::string(layer) + "." + *expert;
  return std::nullopt;
}

template <typename Get>
std::string from_canonical(const std::string& canonical, std::string_view layer_prefix, Architecture arch,
                           Get external) {
  for (const NameRow& r : kGlobal)
    if (canonical == r.canonical) return external(r);
  std::string_view layer, rest;
  if (split_layer(canonical, "layers.", &layer, &rest)) {
    for (std::span<const NameRow> rows : {layer_overrides(arch), std::span<const NameRow>(kLayer)})
      for (const NameRow& r : rows)
        if (rest == r.canonical && *external(r) != '\0')
          return std::string(layer_prefix) + std::string(layer) + "." + external(r);
    // One expert's matrix: HF names it apart; GGUF holds it in the stacked tensor of its projection.
    if (layer_prefix == "model.layers." && hf_expert_names(arch)) {
      if (auto hf = canonical_expert_to_hf(rest, arch))
        return std::string(layer_prefix) + std::string(layer) + "." + *hf;
    } else if (std::string_view index, w; split_layer(rest, "experts.", &index, &w)) {
      return from_canonical("layers." + std::string(layer) + ".experts." + std::string(w), layer_prefix, arch,
                            external);
    }
  }
  fail("no checkpoint name for canonical weight '{}'", canonical);
}

const char* hf_of(const NameRow& r) { return r.hf; }
const char* gguf_of(const NameRow& r) { return r.gguf; }

}  // namespace

std::optional<std::string> hf_to_canonical(std::string_view hf_name, Architecture arch) {
  return to_canonical(hf_name, "model.layers.", arch, hf_of);
}
std::string canonical_to_hf(const std::string& canonical, Architecture arch) {
  return from_canonical(canonical, "model.layers.", arch, hf_of);
}
std::optional<std::string> gguf_to_canonical(std::string_view gguf_name, Architecture arch) {
  return to_canonical(gguf_name, "blk.", arch, gguf_of);
}
std::string canonical_to_gguf(const std::string& canonical, Architecture arch) {
  return from_canonical(canonical, "blk.", arch, gguf_of);
}

}  // namespace minfer
