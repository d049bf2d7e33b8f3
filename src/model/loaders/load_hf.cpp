// Hugging Face directory: config.json (+ generation_config.json), model.safetensors or an index and its shards,
// tokenizer.json (+ tokenizer_config.json).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <memory>

#include "base/error.h"
#include "formats/safetensors_file.h"
#include "model/config_hf.h"
#include "model/families/family.h"
#include "model/loaders/loaders.h"
#include "model/loaders/weight_check.h"
#include "model/quant/quantized_checkpoint.h"
#include "vision/vision_model.h"

namespace minfer {
namespace {

namespace fs = std::filesystem;

// Old transformers versions saved RoPE's buffer with the weights; it is recomputed from the config.
// A multimodal checkpoint's vision tower (the images issue will read it), and multi-token-prediction layers a config
// does not declare (mtp_num_hidden_layers 0); declared ones are loaded as mtp.{j}.*.
bool beside_text_model(std::string_view hf_name, const ModelConfig& c) {
  return hf_name.starts_with("model.visual.") || vision::is_hf_vision_name(hf_name) ||
         (c.mtp_layers == 0 && (hf_name.starts_with("mtp.") || hf_name.starts_with("model.mtp.")));
}

bool ignorable(std::string_view hf_name) {
  constexpr std::string_view kSuffix = ".self_attn.rotary_emb.inv_freq";
  return hf_name.size() >= kSuffix.size() && hf_name.substr(hf_name.size() - kSuffix.size()) == kSuffix;
}

// Gemma's RMSNorm multiplies by (1 + w): the norms become f32 copies holding 1 + w, as GGUF files store them.
void add_one_to_norms(ModelWeights& w) {
  for (auto& [name, tensor] : w.tensors) {
    if (tensor.rank() != 1 || !name.ends_with("norm")) continue;
    Tensor plus_one = to_f32(tensor);
    float* v = plus_one.mutable_as<float>();
    for (int64_t i = 0; i < plus_one.numel(); ++i) v[i] += 1.0f;
    tensor = std::move(plus_one);
  }
}

// The vision tower and projector of a multimodal checkpoint whose config.json has a vision_config; null otherwise
// (their tensors are then skipped, as Qwen3.5's are until its tower is supported).
std::shared_ptr<const vision::VisionModel> load_vision(
    const std::string& dir, const ModelConfig& text,
    const std::map<std::string, std::shared_ptr<SafetensorsFile>>& placement) {
  auto config = vision::read_hf_vision_config(dir, text.hidden_size);
  if (!config) return nullptr;
  auto model = std::make_shared<vision::VisionModel>();
  model->path = dir;
  model->config = *config;
  for (const auto& [name, file] : placement) {
    if (!vision::is_hf_vision_name(name)) continue;
    const auto canonical = vision::hf_vision_to_canonical(name);
    if (!canonical) fail_load(file->path(), "unexpected tensor '{}' in the vision tower", name);
    model->tensors[*canonical] = file->tensor(*file->find(name));
  }
  vision::finish_vision_weights(*model);
  spdlog::info("{}: vision tower of {} layers, {} image tokens per {}x{} image", dir, config->layers,
               config->tokens_per_image, config->image_size, config->image_size);
  return model;
}

}  // namespace

ModelWeights load_hf_checkpoint(const std::string& dir) {
  ModelWeights w;
  w.format = CheckpointFormat::kHuggingFace;
  w.path = dir;
  w.config = read_hf_config(dir);

  // tensor name -> the shard that holds it.
  std::map<std::string, std::shared_ptr<SafetensorsFile>> placement;
  const fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
  const fs::path single_path = fs::path(dir) / "model.safetensors";
  std::string checkpoint;
  if (fs::is_regular_file(index_path)) {
    checkpoint = index_path.string();
    std::map<std::string, std::shared_ptr<SafetensorsFile>> shards;
    for (const auto& [name, file] : read_safetensors_index(checkpoint)) {
      auto& shard = shards[file];
      if (!shard) {
        const fs::path shard_path = fs::path(dir) / file;
        if (!fs::is_regular_file(shard_path))
          fail_load(checkpoint, "missing weights: shard '{}' (named for tensor '{}') is not in the directory", file,
                    name);
        shard = SafetensorsFile::open(shard_path.string());
      }
      if (shard->find(name) == nullptr)
        fail_load(shard->path(), "missing tensor '{}', which model.safetensors.index.json places in this shard", name);
      placement[name] = shard;
    }
  } else if (fs::is_regular_file(single_path)) {
    checkpoint = single_path.string();
    auto file = SafetensorsFile::open(checkpoint);
    for (const auto& info : file->tensors()) placement[info.name] = file;
  } else {
    const bool has_bin =
        fs::exists(fs::path(dir) / "pytorch_model.bin") || fs::exists(fs::path(dir) / "pytorch_model.bin.index.json");
    fail_load(dir, "missing weights: no model.safetensors or model.safetensors.index.json{}",
              has_bin ? " (found pytorch_model.bin: minfer reads only safetensors; convert the checkpoint)" : "");
  }

  // A quantized checkpoint (model/quant/): int8 weights with companion scale tensors.
  const std::optional<QuantConfig> quant = read_checkpoint_quantization((fs::path(dir) / "config.json").string());
  const auto hf_name_of = [arch = w.config.arch](const std::string& c) { return canonical_to_hf(c, arch); };
  std::map<std::string, WeightOrigin> origins;
  const auto skipped = std::count_if(placement.begin(), placement.end(),
                                     [&](const auto& placed) { return beside_text_model(placed.first, w.config); });
  for (const auto& [name, file] : placement) {
    if (beside_text_model(name, w.config) || ignorable(name) || (quant && is_quantization_companion(name))) continue;
    const auto canonical = hf_to_canonical(name, w.config.arch);
    if (!canonical)
      fail_load(file->path(), "unexpected tensor '{}' (not a weight of a {} model)", name, w.config.arch_name());
    // Some tied checkpoints also store lm_head.weight (a copy of the embedding); the embedding is used.
    if (*canonical == "lm_head" && w.config.tie_word_embeddings) continue;
    w.tensors[*canonical] = file->tensor(*file->find(name));
    origins[*canonical] = {file->path(), name};
  }
  w.vision = load_vision(dir, w.config, placement);
  if (skipped > 0 && !w.vision)
    spdlog::info(
        "{}: {} tensors of the vision tower / undeclared MTP layers skipped (the text model runs without them)",
        checkpoint, skipped);
  if (quant) {
    auto find = [&](const std::string& hf_name) -> std::optional<Tensor> {
      auto it = placement.find(hf_name);
      if (it == placement.end()) return std::nullopt;
      return it->second->tensor(*it->second->find(hf_name));
    };
    attach_checkpoint_quantization(w, *quant, checkpoint, find, hf_name_of);
  }
  split_fused_projections(w, origins);
  if (const auto adapt = family_of(w.config).adapt_weights) adapt(w);
  check_weights(w, origins, checkpoint, hf_name_of);
  if (w.config.norm_weight_plus_one) add_one_to_norms(w);

  const fs::path tok = fs::path(dir) / "tokenizer.json";
  const fs::path tok_config = fs::path(dir) / "tokenizer_config.json";
  if (fs::is_regular_file(tok)) {
    w.tokenizer.hf_tokenizer_json = tok.string();
    if (fs::is_regular_file(tok_config)) w.tokenizer.hf_tokenizer_config_json = tok_config.string();
  }
  return w;
}

}  // namespace minfer
