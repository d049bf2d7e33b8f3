#include "vision/vision_model.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/error.h"

namespace minfer::vision {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json read_json(const fs::path& path) {
  std::ifstream in(path);
  if (!in) fail_load(path.string(), "cannot open");
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    fail_load(path.string(), "not valid JSON: {}", e.what());
  }
}

int64_t positive(const json& j, const char* key, int64_t fallback, const std::string& path) {
  if (!j.contains(key)) return fallback;
  if (!j[key].is_number_integer() || j[key].get<int64_t>() <= 0)
    fail_load(path, "vision_config.{} must be a positive integer, got {}", key, j[key].dump());
  return j[key].get<int64_t>();
}

// One row per weight of the tower: the HF name after "vision_tower.vision_model." (layers: after
// "encoder.layers.{i}.") and the canonical name after "v." / "v.layers.{i}.".
struct NameRow {
  const char* hf;
  const char* canonical;
};
constexpr NameRow kGlobalRows[] = {
    {"embeddings.patch_embedding.weight", "patch_embd"},
    {"embeddings.patch_embedding.bias", "patch_bias"},
    {"embeddings.position_embedding.weight", "pos_embd"},
    {"post_layernorm.weight", "post_ln_w"},
    {"post_layernorm.bias", "post_ln_b"},
};
constexpr NameRow kLayerRows[] = {
    {"layer_norm1.weight", "ln1_w"},   {"layer_norm1.bias", "ln1_b"},       {"layer_norm2.weight", "ln2_w"},
    {"layer_norm2.bias", "ln2_b"},     {"self_attn.q_proj.weight", "wq"},   {"self_attn.q_proj.bias", "bq"},
    {"self_attn.k_proj.weight", "wk"}, {"self_attn.k_proj.bias", "bk"},     {"self_attn.v_proj.weight", "wv"},
    {"self_attn.v_proj.bias", "bv"},   {"self_attn.out_proj.weight", "wo"}, {"self_attn.out_proj.bias", "bo"},
    {"mlp.fc1.weight", "fc1"},         {"mlp.fc1.bias", "fc1_b"},           {"mlp.fc2.weight", "fc2"},
    {"mlp.fc2.bias", "fc2_b"},
};
constexpr std::string_view kTower = "vision_tower.vision_model.";
constexpr std::string_view kProjector = "multi_modal_projector.";

// Without the "model." that newer transformers put before both.
std::string_view unprefixed(std::string_view name) {
  if (name.starts_with("model.") && (name.substr(6).starts_with(kTower) || name.substr(6).starts_with(kProjector)))
    name.remove_prefix(6);
  return name;
}

Tensor transposed_f32(const Tensor& t) {
  const Tensor f = to_f32(t);
  const int64_t rows = f.dim(0), cols = f.dim(1);
  Tensor out = Tensor::allocate(DType::F32, {cols, rows});
  const float* src = f.as<float>();
  float* dst = out.mutable_as<float>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[c * rows + r] = src[r * cols + c];
  return out;
}

}  // namespace

const Tensor& VisionModel::get(const std::string& name) const {
  const auto it = tensors.find(name);
  if (it == tensors.end()) fail_load(path, "missing vision weight '{}'", name);
  return it->second;
}

std::optional<VisionConfig> read_hf_vision_config(const std::string& dir, int64_t text_hidden) {
  const fs::path config_path = fs::path(dir) / "config.json";
  const json top = read_json(config_path);
  if (!top.contains("vision_config") || top["vision_config"].is_null()) return std::nullopt;
  const std::string path = config_path.string();
  const json& v = top["vision_config"];
  const std::string type = top.value("model_type", "");
  if (type != "gemma3") {
    fail_load(path, "the vision tower of a '{}' model is not supported yet (supported: gemma3's SigLIP)", type);
  }
  if (v.value("model_type", "siglip_vision_model") != "siglip_vision_model" ||
      v.value("hidden_act", "gelu_pytorch_tanh") != "gelu_pytorch_tanh") {
    fail_load(path,
              "vision_config: model_type {} with hidden_act {} (supported: siglip_vision_model, gelu_pytorch_tanh)",
              v.value("model_type", ""), v.value("hidden_act", ""));
  }
  VisionConfig c;
  c.hidden = positive(v, "hidden_size", 768, path);
  c.intermediate = positive(v, "intermediate_size", 3072, path);
  c.layers = positive(v, "num_hidden_layers", 12, path);
  c.heads = positive(v, "num_attention_heads", 12, path);
  c.patch_size = positive(v, "patch_size", 16, path);
  c.image_size = positive(v, "image_size", 224, path);
  c.channels = positive(v, "num_channels", 3, path);
  c.eps = v.value("layer_norm_eps", 1e-6f);
  c.tokens_per_image = positive(top, "mm_tokens_per_image", 256, path);
  c.text_hidden = text_hidden;
  c.image_token_id = top.value("image_token_index", 262144);
  c.begin_image_id = top.value("boi_token_index", 255999);
  c.end_image_id = top.value("eoi_token_index", 256000);
  const int64_t side = c.patches_per_side();
  const auto pooled_side = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(c.tokens_per_image))));
  if (c.channels != 3 || c.hidden % c.heads != 0 || c.image_size % c.patch_size != 0 ||
      pooled_side * pooled_side != c.tokens_per_image || side % pooled_side != 0) {
    fail_load(path,
              "vision_config: {} channels, hidden {} over {} heads, image {} in patches of {}, {} tokens per image: "
              "not a shape Gemma 3's projector pools",
              c.channels, c.hidden, c.heads, c.image_size, c.patch_size, c.tokens_per_image);
  }
  const fs::path processor = fs::path(dir) / "preprocessor_config.json";
  if (fs::is_regular_file(processor)) {
    try {
      c.processor = media::ImageProcessorConfig::from_json(read_json(processor));
    } catch (const LoadError&) {
      throw;
    } catch (const Error& e) {
      fail_load(processor.string(), "{}", e.what());
    }
  } else {  // Gemma3ImageProcessor's defaults at the tower's size
    c.processor.height = c.processor.width = c.image_size;
  }
  if (c.processor.rule != media::ResizeRule::kFixed || c.processor.height != c.image_size ||
      c.processor.width != c.image_size) {
    fail_load(processor.string(), "the processor must resize to the tower's {}x{} (Gemma3ImageProcessor)", c.image_size,
              c.image_size);
  }
  return c;
}

bool is_hf_vision_name(std::string_view hf_name) {
  const std::string_view n = unprefixed(hf_name);
  return n.starts_with(kTower) || n.starts_with(kProjector);
}

std::optional<std::string> hf_vision_to_canonical(std::string_view hf_name) {
  std::string_view n = unprefixed(hf_name);
  if (n == "multi_modal_projector.mm_soft_emb_norm.weight") return "mm.norm";
  if (n == "multi_modal_projector.mm_input_projection_weight") return "mm.proj";
  if (!n.starts_with(kTower)) return std::nullopt;
  n.remove_prefix(kTower.size());
  for (const NameRow& r : kGlobalRows)
    if (n == r.hf) return std::string("v.") + r.canonical;
  constexpr std::string_view kLayers = "encoder.layers.";
  if (!n.starts_with(kLayers)) return std::nullopt;
  n.remove_prefix(kLayers.size());
  const size_t dot = n.find('.');
  if (dot == std::string_view::npos || dot == 0) return std::nullopt;
  const std::string_view index = n.substr(0, dot), rest = n.substr(dot + 1);
  if (index.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
  for (const NameRow& r : kLayerRows)
    if (rest == r.hf) return "v.layers." + std::string(index) + "." + r.canonical;
  return std::nullopt;
}

void finish_vision_weights(VisionModel& m, bool norm_has_one) {
  const VisionConfig& c = m.config;
  const int64_t h = c.hidden, p = c.patch_size;
  auto expect = [&](const std::string& name, std::vector<int64_t> shape) {
    const Tensor& t = m.get(name);
    if (t.shape != shape)
      fail_load(m.path, "vision weight '{}' has shape {}, the config wants {}", name, t.shape_string(),
                shape_string(shape));
  };
  auto to_f32_in_place = [&](const std::string& name) { m.tensors[name] = to_f32(m.get(name)); };
  expect("v.patch_embd", {h, c.channels, p, p});
  m.tensors["v.patch_embd"].shape = {h, c.channels * p * p};
  expect("v.patch_bias", {h});
  expect("v.pos_embd", {c.patches(), h});
  for (const char* n : {"v.patch_bias", "v.post_ln_w", "v.post_ln_b"}) expect(n, {h}), to_f32_in_place(n);
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string l = "v.layers." + std::to_string(i) + ".";
    for (const char* n : {"wq", "wk", "wv", "wo"}) expect(l + n, {h, h});
    expect(l + "fc1", {c.intermediate, h});
    expect(l + "fc2", {h, c.intermediate});
    for (const char* n : {"ln1_w", "ln1_b", "ln2_w", "ln2_b", "bq", "bk", "bv", "bo", "fc2_b"})
      expect(l + n, {h}), to_f32_in_place(l + n);
    expect(l + "fc1_b", {c.intermediate});
    to_f32_in_place(l + "fc1_b");
  }
  expect("mm.norm", {h});
  Tensor norm = to_f32(m.get("mm.norm"));
  if (!norm_has_one)
    for (int64_t i = 0; i < h; ++i) norm.mutable_as<float>()[i] += 1.0f;  // Gemma3RMSNorm: x * (1 + w)
  m.tensors["mm.norm"] = std::move(norm);
  expect("mm.proj", {h, c.text_hidden});
  m.tensors["mm.proj"] = transposed_f32(m.get("mm.proj"));
  for (const auto& [name, t] : m.tensors)
    if (!name.starts_with("v.") && !name.starts_with("mm.")) fail_load(m.path, "unexpected vision weight '{}'", name);
}

}  // namespace minfer::vision
