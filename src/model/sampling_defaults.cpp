#include "model/sampling_defaults.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/error.h"
#include "formats/gguf_file.h"

namespace minfer {
namespace {

using json = nlohmann::json;

std::optional<double> number(const json& config, const char* key, const std::string& path) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) fail_load(path, "'{}' must be a number", key);
  return it->get<double>();
}

SamplingDefaults from_generation_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  const json config = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!config.is_object()) fail_load(path, "generation_config.json is not a JSON object");
  SamplingDefaults d;
  // transformers' do_sample false means greedy decoding, whatever temperature says.
  const auto sample = config.find("do_sample");
  if (sample != config.end() && sample->is_boolean() && !sample->get<bool>()) {
    d.temperature = 0.0f;
    return d;
  }
  if (auto v = number(config, "temperature", path)) d.temperature = static_cast<float>(*v);
  if (auto v = number(config, "top_p", path)) d.top_p = static_cast<float>(*v);
  if (auto v = number(config, "top_k", path)) d.top_k = static_cast<int32_t>(*v);
  if (auto v = number(config, "min_p", path)) d.min_p = static_cast<float>(*v);
  if (auto v = number(config, "repetition_penalty", path)) d.repetition_penalty = static_cast<float>(*v);
  return d;
}

SamplingDefaults from_gguf(const std::string& path) {
  const std::shared_ptr<GgufFile> file = GgufFile::open(path);
  SamplingDefaults d;
  if (auto v = file->find_float("general.sampling.temp")) d.temperature = static_cast<float>(*v);
  if (auto v = file->find_float("general.sampling.top_p")) d.top_p = static_cast<float>(*v);
  if (auto v = file->find_int("general.sampling.top_k")) d.top_k = static_cast<int32_t>(*v);
  if (auto v = file->find_float("general.sampling.min_p")) d.min_p = static_cast<float>(*v);
  if (auto v = file->find_float("general.sampling.penalty_repeat")) d.repetition_penalty = static_cast<float>(*v);
  return d;
}

}  // namespace

SamplingDefaults read_sampling_defaults(const ModelWeights& weights) {
  if (weights.format == CheckpointFormat::kGguf) return from_gguf(weights.path);
  if (weights.format != CheckpointFormat::kHuggingFace) return {};
  const std::filesystem::path path = std::filesystem::path(weights.path) / "generation_config.json";
  return std::filesystem::is_regular_file(path) ? from_generation_config(path.string()) : SamplingDefaults{};
}

}  // namespace minfer
