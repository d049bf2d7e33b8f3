#include "model/quant/quantized_checkpoint.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "formats/safetensors_writer.h"
#include "kernels/quant.h"
#include "model/loaders/loaders.h"

namespace minfer {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr std::string_view kScaleSuffix = "_scale";
constexpr std::string_view kZeroSuffix = "_zero_point";

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

json quantization_config_json(const QuantConfig& q) {
  json weights = {{"num_bits", 8},
                  {"type", "int"},
                  {"symmetric", q.symmetric},
                  {"strategy", q.group_size == 0 ? "channel" : "group"},
                  {"group_size", q.group_size == 0 ? json(nullptr) : json(q.group_size)},
                  {"dynamic", false}};
  json acts = nullptr;
  if (q.activation_bits == 8)
    acts = {{"num_bits", 8}, {"type", "int"}, {"symmetric", true}, {"strategy", "token"}, {"dynamic", true}};
  return {{"quant_method", "compressed-tensors"},
          {"format", "int-quantized"},
          {"config_groups",
           {{"group_0", {{"targets", json::array({"Linear"})}, {"weights", weights}, {"input_activations", acts}}}}},
          {"ignore", json::array()}};
}

void copy_if_exists(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  if (fs::is_regular_file(from)) fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
  if (ec) fail("{}: cannot copy to {}: {}", from.string(), to.string(), ec.message());
}

}  // namespace

std::optional<QuantConfig> read_checkpoint_quantization(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  const json config = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object() || !config.contains("quantization_config")) return std::nullopt;
  const json& qc = config["quantization_config"];
  const std::string method = qc.is_object() ? qc.value("quant_method", "") : "";
  // gpt-oss's own checkpoints: MXFP4 experts, which its loader repacks (loaders/weight_check.cpp), not int8.
  if (method == "mxfp4") return std::nullopt;
  if (method != "compressed-tensors" || qc.value("format", "") != "int-quantized")
    fail_load(path,
              "quantization_config with quant_method '{}' is not supported (minfer reads int8 "
              "'compressed-tensors' checkpoints of format 'int-quantized', as `minfer quantize` writes)",
              method);
  const json* group = nullptr;
  if (qc.contains("config_groups") && qc["config_groups"].is_object() && qc["config_groups"].size() == 1)
    group = &qc["config_groups"].begin().value();
  if (!group || !group->is_object() || !group->contains("weights") || !(*group)["weights"].is_object())
    fail_load(path, "quantization_config needs exactly one config group with a 'weights' entry");
  const json& w = (*group)["weights"];
  QuantConfig q;
  q.weight_bits = w.value("num_bits", 0);
  q.symmetric = w.value("symmetric", true);
  const std::string strategy = w.value("strategy", "");
  if (strategy == "group") {
    q.group_size = w.contains("group_size") && w["group_size"].is_number_integer() ? w["group_size"].get<int>() : -1;
  } else if (strategy != "channel") {
    fail_load(path, "quantization_config: weight strategy '{}' is not supported (channel or group)", strategy);
  }
  q.activation_bits = 16;
  if (group->contains("input_activations") && (*group)["input_activations"].is_object()) {
    const json& a = (*group)["input_activations"];
    if (!a.value("dynamic", false) || a.value("strategy", "") != "token")
      fail_load(path, "quantization_config: only dynamic per-token activation quantization is supported");
    q.activation_bits = a.value("num_bits", 0);
  }
  if (q.weight_bits != 8) fail_load(path, "quantization_config: {}-bit weights are not supported (8)", q.weight_bits);
  try {
    validate_quant_config(q);
  } catch (const Error& e) {
    fail_load(path, "{}", e.what());
  }
  return q;
}

bool is_quantization_companion(const std::string& hf_name) {
  return ends_with(hf_name, std::string(".weight").append(kScaleSuffix)) ||
         ends_with(hf_name, std::string(".weight").append(kZeroSuffix));
}

void attach_checkpoint_quantization(ModelWeights& weights, const QuantConfig& q, const std::string& checkpoint,
                                    const std::function<std::optional<Tensor>(const std::string&)>& find,
                                    const std::function<std::string(const std::string&)>& hf_name_of) {
  for (auto& [name, t] : weights.tensors) {
    if (t.dtype != DType::I8) continue;
    const std::string hf = hf_name_of(name);
    const std::optional<Tensor> scale = find(hf + std::string(kScaleSuffix));
    if (!scale) fail_load(checkpoint, "int8 tensor '{}' has no '{}{}'", hf, hf, kScaleSuffix);
    const std::optional<Tensor> zero = find(hf + std::string(kZeroSuffix));
    if (q.symmetric == zero.has_value())
      fail_load(checkpoint, "tensor '{}': the quantization_config says {} but '{}{}' is {}", hf,
                q.symmetric ? "symmetric" : "asymmetric", hf, kZeroSuffix, zero ? "present" : "absent");
    if (t.rank() != 2) fail_load(checkpoint, "int8 tensor '{}' of shape {} is not a matrix", hf, t.shape_string());
    try {
      Tensor qt = kernels::make_quantized(t, *scale, zero ? *zero : Tensor{}, q.group_size);
      const bool vocab = name == "embed" || name == "lm_head";
      t = kernels::relayout(qt, q.activation_bits == 8 && !vocab);
    } catch (const LoadError&) {
      throw;
    } catch (const Error& e) {
      fail_load(checkpoint, "tensor '{}': {}", hf, e.what());
    }
  }
  weights.quant = q;
}

void write_quantized_checkpoint(const ModelWeights& weights, const std::string& out_dir, const json& extra_config) {
  if (weights.format != CheckpointFormat::kHuggingFace)
    fail("{}: quantized checkpoints are written from Hugging Face directories (config.json + safetensors)",
         weights.path);
  if (!weights.quant.enabled()) fail("write_quantized_checkpoint: the weights are not quantized");
  const fs::path src(weights.path), dst(out_dir);
  std::error_code ec;
  if (fs::equivalent(src, dst, ec)) fail("{}: the output directory must differ from the input", out_dir);
  fs::create_directories(dst, ec);
  if (ec) fail("{}: cannot create the directory: {}", out_dir, ec.message());

  std::ifstream in(src / "config.json");
  json config = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) fail("{}: config.json is not a JSON object", weights.path);
  config["quantization_config"] = quantization_config_json(weights.quant);
  if (!extra_config.is_null()) config["quantization_config"]["minfer"] = extra_config;
  {
    std::ofstream out(dst / "config.json");
    out << config.dump(2) << "\n";
    if (!out) fail("{}: cannot write config.json", out_dir);
  }
  for (const char* f : {"generation_config.json", "tokenizer.json", "tokenizer_config.json"})
    copy_if_exists(src / f, dst / f);

  std::vector<SafetensorsEntry> entries;
  for (const auto& [name, t] : weights.tensors) {
    const std::string hf = canonical_to_hf(name, weights.config.arch);
    if (!kernels::is_quantized(t)) {
      entries.push_back(SafetensorsEntry::from_tensor(hf, t));
      continue;
    }
    if (is_block_type(t.dtype) && t.dtype != DType::Q8_0)
      fail("{}: tensor '{}' is GGUF {}, which an int8 safetensors checkpoint cannot hold (write a GGUF instead)",
           out_dir, hf, dtype_name(t.dtype));
    const Tensor rows = kernels::relayout(t, false);  // Q8_0 and panels -> int8 rows with scales
    entries.push_back(SafetensorsEntry::from_tensor(hf, rows));
    entries.push_back(SafetensorsEntry::from_tensor(hf + std::string(kScaleSuffix), rows.quant->scales));
    if (!rows.quant->symmetric) {
      Tensor z = Tensor::allocate(DType::I8, rows.quant->zeros.shape);
      for (int64_t i = 0; i < z.numel(); ++i)
        z.mutable_as<int8_t>()[i] = static_cast<int8_t>(rows.quant->zeros.as<float>()[i]);
      entries.push_back(SafetensorsEntry::from_tensor(hf + std::string(kZeroSuffix), z));
    }
  }
  // Remove shards of an earlier checkpoint in the same place, so the loader cannot mix them up.
  for (const char* stale : {"model.safetensors.index.json"}) fs::remove(dst / stale, ec);
  write_safetensors_checkpoint(out_dir, entries, 0);
}

}  // namespace minfer
