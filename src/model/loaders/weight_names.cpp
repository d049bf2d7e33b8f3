// The table from canonical weight names to Hugging Face and GGUF names that every family shares; a family's own rows
// (Family::layer_names, Family::hf_experts) are looked up first.
#include <charconv>
#include <span>
#include <string>

#include "base/error.h"
#include "model/families/family.h"
#include "model/loaders/loaders.h"

namespace minfer {
namespace {

using NameRow = WeightNameRow;

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

std::span<const WeightNameRow> layer_overrides(std::string_view arch) { return family_named(arch).layer_names; }

// "experts.<j>.<w>" <-> the HF name after the layer prefix; nullopt when `rest` is no expert weight.
std::optional<std::string> hf_expert_to_canonical(std::string_view rest, std::string_view arch) {
  const HfExpertNames* names = family_named(arch).hf_experts;
  std::string_view index, name;
  if (!names || !split_layer(rest, names->prefix, &index, &name)) return std::nullopt;
  const std::string_view w = name == names->gate   ? "w_gate"
                             : name == names->up   ? "w_up"
                             : name == names->down ? "w_down"
                                                   : "";
  if (w.empty()) return std::nullopt;
  return "experts." + std::string(index) + "." + std::string(w);
}
std::optional<std::string> canonical_expert_to_hf(std::string_view rest, std::string_view arch) {
  const HfExpertNames* names = family_named(arch).hf_experts;
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
std::optional<std::string> to_canonical(std::string_view name, std::string_view layer_prefix, std::string_view arch,
                                        Get external) {
  for (std::span<const NameRow> rows : {family_named(arch).global_names, std::span<const NameRow>(kGlobal)})
    for (const NameRow& r : rows)
      if (*external(r) != '\0' && name == external(r)) return std::string(r.canonical);
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
std::string from_canonical(const std::string& canonical, std::string_view layer_prefix, std::string_view arch,
                           Get external) {
  for (std::span<const NameRow> rows : {family_named(arch).global_names, std::span<const NameRow>(kGlobal)})
    for (const NameRow& r : rows)
      if (canonical == r.canonical) return external(r);
  std::string_view layer, rest;
  if (split_layer(canonical, "layers.", &layer, &rest)) {
    for (std::span<const NameRow> rows : {layer_overrides(arch), std::span<const NameRow>(kLayer)})
      for (const NameRow& r : rows)
        if (rest == r.canonical && *external(r) != '\0')
          return std::string(layer_prefix) + std::string(layer) + "." + external(r);
    // One expert's matrix: HF names it apart; GGUF holds it in the stacked tensor of its projection.
    if (layer_prefix == "model.layers." && family_named(arch).hf_experts) {
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

// Multi-token-prediction blocks (ModelConfig::mtp_layers): block j's weights are "mtp.{j}." and a layer's canonical
// name, or one of these rows (its input projection and norms). Hugging Face stores one block, as mtp.layers.0.*
// beside mtp.fc / mtp.pre_fc_norm_* / mtp.norm; GGUF stores block j as blk.{trunk + j}.*, beside blk.{..}.nextn.*.
constexpr NameRow kMtpRows[] = {
    {"fc", "fc.weight", "nextn.eh_proj.weight"},
    {"embed_norm", "pre_fc_norm_embedding.weight", "nextn.enorm.weight"},
    {"hidden_norm", "pre_fc_norm_hidden.weight", "nextn.hnorm.weight"},
    {"final_norm", "norm.weight", "nextn.shared_head_norm.weight"},
};

// "layers.{i}.x" as "mtp.{i - offset}.x", or nullopt.
std::optional<std::string> as_mtp(const std::optional<std::string>& layer_name, int64_t offset) {
  std::string_view index, rest;
  if (!layer_name || !split_layer(*layer_name, "layers.", &index, &rest)) return std::nullopt;
  const int64_t j = std::stoll(std::string(index)) - offset;
  if (j < 0) return std::nullopt;
  return "mtp." + std::to_string(j) + "." + std::string(rest);
}

// "mtp.{j}.x" -> j and x.
bool split_mtp(std::string_view canonical, int64_t* j, std::string_view* rest) {
  std::string_view index;
  if (!split_layer(canonical, "mtp.", &index, rest)) return false;
  *j = std::stoll(std::string(index));
  return true;
}

std::optional<std::string> hf_mtp_to_canonical(std::string_view hf_name, std::string_view arch) {
  const std::string_view rest = hf_name.substr(4);
  for (const NameRow& r : kMtpRows)
    if (rest == r.hf) return "mtp.0." + std::string(r.canonical);
  return as_mtp(to_canonical("model." + std::string(rest), "model.layers.", arch, hf_of), 0);
}

}  // namespace

// A multimodal checkpoint's text model sits under its own prefix (Family::hf_text_prefix) instead of "model.".
std::optional<std::string> hf_to_canonical(std::string_view hf_name, std::string_view arch) {
  if (hf_name.starts_with("mtp.")) return hf_mtp_to_canonical(hf_name, arch);
  // Where every ...ForConditionalGeneration keeps its language model: newer transformers save
  // "model.language_model.", older ones (and the Gemma 3 checkpoints on the Hub) "language_model.model.".
  for (std::string_view text : {"model.language_model.", "language_model.model."})
    if (hf_name.starts_with(text))
      return to_canonical("model." + std::string(hf_name.substr(text.size())), "model.layers.", arch, hf_of);
  if (hf_name == "language_model.lm_head.weight") return to_canonical("lm_head.weight", "model.layers.", arch, hf_of);
  const char* text = family_named(arch).hf_text_prefix;
  if (text != nullptr && hf_name.starts_with(text))
    return to_canonical("model." + std::string(hf_name.substr(std::string_view(text).size())), "model.layers.", arch,
                        hf_of);
  return to_canonical(hf_name, "model.layers.", arch, hf_of);
}
std::string canonical_to_hf(const std::string& canonical, std::string_view arch) {
  int64_t j = 0;
  if (std::string_view rest; split_mtp(canonical, &j, &rest)) {
    for (const NameRow& r : kMtpRows)
      if (rest == r.canonical) return "mtp." + std::string(r.hf);
    return "mtp." +
           from_canonical("layers." + std::to_string(j) + "." + std::string(rest), "model.layers.", arch, hf_of)
               .substr(6);
  }
  std::string name = from_canonical(canonical, "model.layers.", arch, hf_of);
  const char* text = family_named(arch).hf_text_prefix;
  if (text != nullptr && name.starts_with("model.")) name = text + name.substr(6);
  return name;
}
std::optional<std::string> gguf_to_canonical(std::string_view gguf_name, std::string_view arch, int64_t trunk_layers) {
  std::string_view index, rest;
  if (trunk_layers >= 0 && split_layer(gguf_name, "blk.", &index, &rest) &&
      std::stoll(std::string(index)) >= trunk_layers) {
    const std::string layer = "layers." + std::string(index) + ".";
    for (const NameRow& r : kMtpRows)
      if (rest == r.gguf) return as_mtp(layer + r.canonical, trunk_layers);
    return as_mtp(to_canonical(gguf_name, "blk.", arch, gguf_of), trunk_layers);
  }
  return to_canonical(gguf_name, "blk.", arch, gguf_of);
}
std::string canonical_to_gguf(const std::string& canonical, std::string_view arch, int64_t trunk_layers) {
  int64_t j = 0;
  if (std::string_view rest; split_mtp(canonical, &j, &rest)) {
    const std::string block = std::to_string(std::max<int64_t>(trunk_layers, 0) + j);
    for (const NameRow& r : kMtpRows)
      if (rest == r.canonical) return "blk." + block + "." + r.gguf;
    return from_canonical("layers." + block + "." + std::string(rest), "blk.", arch, gguf_of);
  }
  return from_canonical(canonical, "blk.", arch, gguf_of);
}

}  // namespace minfer
