#include "model/test_model_writer.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numbers>
#include <optional>

#include "base/error.h"
#include "base/half.h"
#include "base/mapped_file.h"
#include "base/thread_pool.h"
#include "formats/safetensors_writer.h"
#include "model/config_hf.h"
#include "model/families/family.h"
#include "model/families/test_config.h"
#include "model/loaders/loaders.h"
#include "model/loaders/weight_check.h"
#include "model/test_tokenizer.h"

namespace minfer {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

struct FoundPreset {
  const Family* family;
  TestPreset preset;
};

FoundPreset find_preset(const std::string& name) {
  std::string names;
  for (const Family* family : families()) {
    for (const TestPreset& p : family->test_presets) {
      if (name == p.name) return {family, p};
      names += (names.empty() ? "" : ", ") + std::string(p.name);
    }
  }
  fail("unknown test model preset '{}' (available: {})", name, names);
}

// The ids of the special tokens in the tokenizer actually written: the real presets keep the real model's ids; the
// tiny ones (and their Instruct-style eos lists, so chat tests stop at the end of a turn) use whatever ids the
// tokenizer has.
struct SpecialIds {
  int64_t bos = -1;
  std::vector<int64_t> config_eos;      // config.json's eos_token_id
  std::vector<int64_t> generation_eos;  // generation_config.json's
};

SpecialIds special_ids(const TestPreset& p, const std::map<std::string, int64_t>& by_text) {
  if (!p.tiny) return {p.bos, p.config_eos, p.generation_eos};
  SpecialIds s;
  auto id = [&](const char* text) {
    auto it = by_text.find(text);
    return it == by_text.end() ? std::optional<int64_t>() : std::optional<int64_t>(it->second);
  };
  auto add = [&](std::vector<int64_t>& v, const char* text) {
    if (const auto x = id(text)) v.push_back(*x);
  };
  const char* bos = p.qwen_tokenizer ? "<|endoftext|>" : "<|begin_of_text|>";
  s.bos = id(bos).value_or(-1);
  add(s.config_eos, p.qwen_tokenizer ? "<|endoftext|>" : "<|end_of_text|>");
  const std::vector<const char*> generation_eos =
      p.qwen_tokenizer ? std::vector<const char*>{"<|im_end|>", "<|endoftext|>"}
                       : std::vector<const char*>{"<|end_of_text|>", "<|eom_id|>", "<|eot_id|>"};
  for (const char* t : generation_eos) add(s.generation_eos, t);
  return s;
}

json generation_config(const TestPreset& p, const SpecialIds& s) {
  const json bos = s.bos >= 0 ? json(s.bos) : json(nullptr);
  if (p.qwen_tokenizer)
    return {{"bos_token_id", bos},
            {"do_sample", false},
            {"eos_token_id", id_or_list(s.generation_eos)},
            {"max_new_tokens", 2048},
            {"transformers_version", "4.37.0"}};
  return {{"_from_model_config", true},
          {"bos_token_id", bos},
          {"do_sample", true},
          {"eos_token_id", id_or_list(s.generation_eos)},
          {"temperature", 0.6},
          {"top_p", 0.9},
          {"transformers_version", "4.45.0.dev0"}};
}

// A user-supplied tokenizer.json: its size (highest id + 1) and token ids by text.
int64_t scan_tokenizer(const std::string& path, std::map<std::string, int64_t>* by_text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_text_file(path));
  } catch (const nlohmann::json::exception& e) {
    fail_load(path, "invalid JSON: {}", e.what());
  }
  const auto model = j.find("model");
  if (!j.is_object() || model == j.end() || !model->is_object() || !model->contains("vocab") ||
      !(*model)["vocab"].is_object())
    fail_load(path, "not a tokenizer.json (no model.vocab object)");
  int64_t size = 0;
  auto note = [&](const std::string& text, const nlohmann::json& id) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0) fail_load(path, "token '{}' has an invalid id", text);
    (*by_text)[text] = id.get<int64_t>();
    size = std::max(size, id.get<int64_t>() + 1);
  };
  for (const auto& [text, id] : (*model)["vocab"].items()) note(text, id);
  if (const auto added = j.find("added_tokens"); added != j.end() && added->is_array())
    for (const auto& t : *added)
      if (t.is_object() && t.contains("content") && t["content"].is_string() && t.contains("id"))
        note(t["content"].get<std::string>(), t["id"]);
  return size;
}

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t name_hash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

template <typename Json>
void write_json(const fs::path& path, const Json& j) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << j.dump(2) << "\n";
  if (!out) fail("{}: cannot write", path.string());
}

enum class Init : uint8_t { kMatrix, kNorm, kNormOffset, kBias, kSink };

// Random data, reproducible from (seed, tensor name, element index): each block of kBlock elements has its own
// generator, so the values do not depend on chunking or on the number of threads.
SafetensorsEntry random_entry(std::string name, std::vector<int64_t> shape, DType dtype, Init init, double std_dev,
                              uint64_t seed, ThreadPool& pool) {
  constexpr int64_t kBlock = 1 << 16;
  static_assert(SafetensorsEntry::kChunkElements % kBlock == 0);
  const uint64_t tensor_seed = seed * 0x9e3779b97f4a7c15ull ^ name_hash(name);
  SafetensorsEntry e{std::move(name), dtype, std::move(shape), nullptr};
  e.fill = [=, &pool](void* dst, int64_t first, int64_t count) {
    const size_t blocks = static_cast<size_t>((count + kBlock - 1) / kBlock);
    pool.parallel_for(blocks, 1, [&](size_t b0, size_t b1) {
      for (size_t b = b0; b < b1; ++b) {
        const int64_t begin = static_cast<int64_t>(b) * kBlock;
        const int64_t n = std::min(kBlock, count - begin);
        uint64_t state = tensor_seed ^ static_cast<uint64_t>((first + begin) / kBlock) * 0xd1b54a32d192ed03ull;
        for (int64_t i = 0; i < n; i += 2) {
          // Box-Muller: two normals from two uniforms in (0, 1].
          const double u1 = static_cast<double>((splitmix64(state) >> 11) + 1) * 0x1.0p-53;
          const double u2 = static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;
          const double r = std::sqrt(-2.0 * std::log(u1));
          const double pair[2] = {r * std::cos(2 * std::numbers::pi * u2), r * std::sin(2 * std::numbers::pi * u2)};
          for (int64_t k = 0; k < 2 && i + k < n; ++k) {
            float v = 0;
            switch (init) {
              case Init::kMatrix: v = static_cast<float>(pair[k] * std_dev); break;
              case Init::kBias: v = static_cast<float>(pair[k] * 0.02); break;
              case Init::kSink: v = static_cast<float>(1.0 + pair[k]); break;  // near the scores (gpt-oss)
              case Init::kNorm: v = static_cast<float>(1.0 + 0.1 * std::tanh(pair[k])); break;  // within 1 +- 0.1
              case Init::kNormOffset: v = static_cast<float>(0.1 * std::tanh(pair[k])); break;  // (1 + w) form
            }
            const size_t at = static_cast<size_t>(begin + i + k);
            if (dtype == DType::BF16) {
              static_cast<uint16_t*>(dst)[at] = f32_to_bf16(v);
            } else {
              static_cast<float*>(dst)[at] = v;
            }
          }
        }
      }
    });
  };
  return e;
}

// The weights a config implies (loaders/weight_check.h), in Hugging Face's names and the checkpoint's own forms
// (Family::test_hf_weights), ordered as HF saves them: the embedding, each layer in turn, the final norm and head.
std::vector<HfTestWeight> hf_test_weights(const Family& family, const ModelConfig& config) {
  std::vector<HfTestWeight> weights;
  for (const auto& [canonical, shape] : expected_weight_shapes(config))
    weights.push_back({canonical_to_hf(canonical, config.arch), shape});
  auto order = [](const HfTestWeight& w) {
    if (w.name == "model.embed_tokens.weight") return std::pair<int64_t, std::string_view>(-1, "");
    int64_t layer = INT64_MAX;
    if (w.name.starts_with("model.layers.")) std::from_chars(w.name.data() + 13, w.name.data() + w.name.size(), layer);
    return std::pair<int64_t, std::string_view>(layer, w.name);
  };
  std::sort(weights.begin(), weights.end(), [&](const auto& a, const auto& b) { return order(a) < order(b); });
  if (family.test_hf_weights) family.test_hf_weights(config, weights);
  return weights;
}

// How a weight is initialised, from its HF name. Gemma's norms multiply by (1 + w): their stored weights lie around 0.
Init init_of(const std::string& name, const ModelConfig& config) {
  if (name.ends_with("sinks")) return Init::kSink;
  if (name.find("bias") != std::string::npos) return Init::kBias;
  // The delta rule's output norm multiplies by w itself, whatever the model's other norms do.
  if (name.find("norm") != std::string::npos)
    return config.norm_weight_plus_one && name.find("linear_attn.") == std::string::npos ? Init::kNormOffset
                                                                                         : Init::kNorm;
  return Init::kMatrix;
}

// Copies the user's tokenizer.json (and the tokenizer_config.json beside it) or writes a generated one; returns its
// size and fills by_text with its token ids.
int64_t write_tokenizer(const TestModelOptions& o, const TestPreset& p, std::map<std::string, int64_t>& by_text) {
  const fs::path dir(o.out_dir);
  if (o.tokenizer_json.empty()) {
    const GeneratedTokenizer tok =
        generate_test_tokenizer(p.qwen_tokenizer ? TokenizerFamily::kQwen2 : TokenizerFamily::kLlama3, p.vocab);
    for (const auto& [text, id] : tok.special_ids) by_text[text] = id;
    write_json(dir / "tokenizer.json", tok.tokenizer);
    write_json(dir / "tokenizer_config.json", tok.config);
    return tok.size;
  }
  const int64_t size = scan_tokenizer(o.tokenizer_json, &by_text);
  const fs::path src_config = fs::path(o.tokenizer_json).parent_path() / "tokenizer_config.json";
  auto copy = [&](const fs::path& from, const char* name) {
    if (fs::exists(dir / name) && fs::equivalent(from, dir / name)) return;
    fs::copy_file(from, dir / name, fs::copy_options::overwrite_existing);
  };
  copy(o.tokenizer_json, "tokenizer.json");
  if (fs::is_regular_file(src_config)) {
    copy(src_config, "tokenizer_config.json");
  } else {
    fs::remove(dir / "tokenizer_config.json");
  }
  return size;
}

// Stale weights from an earlier run (e.g. shards when this run writes one file) would confuse the loader.
void remove_old_weights(const fs::path& dir) {
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name == "model.safetensors.index.json" ||
        (name.rfind("model", 0) == 0 && entry.path().extension() == ".safetensors"))
      fs::remove(entry.path());
  }
}

TestModelResult write_weights(const TestModelOptions& o, const TestPreset& p, const Family& family,
                              const ModelConfig& config) {
  ThreadPool pool(0);
  std::vector<SafetensorsEntry> entries;
  for (HfTestWeight& w : hf_test_weights(family, config)) {
    const double sd = w.name == "model.embed_tokens.weight" ? p.embed_std : p.weight_std;
    const Init init = init_of(w.name, config);
    entries.push_back(random_entry(std::move(w.name), std::move(w.shape), o.dtype, init, sd, o.seed, pool));
  }
  remove_old_weights(o.out_dir);
  SafetensorsWriteOptions wo;
  wo.metadata = {{"format", "pt"}};
  wo.skip_data = o.skip_weight_data;
  TestModelResult r;
  for (const auto& e : entries) {
    r.parameters += static_cast<uint64_t>(e.numel());
    r.weight_bytes += e.nbytes();
  }
  r.files = write_safetensors_checkpoint(o.out_dir, entries, o.shard_bytes, wo);
  return r;
}

TestModelResult write_test_model_files(const TestModelOptions& o) {
  auto [family, p] = find_preset(o.preset);
  if (o.layers < 0 || o.layers > p.layers)
    fail("make-test-model: --layers {} for preset {} of {} layers", o.layers, p.name, p.layers);
  if (o.layers > 0) p.layers = o.layers;
  if (o.dtype != DType::F32 && o.dtype != DType::BF16)
    fail("make-test-model: unsupported dtype {} (supported: f32, bf16)", dtype_name(o.dtype));
  if (o.sliding_window > 0 && p.sliding_window == 0)
    fail("make-test-model: preset {} has no sliding window to set", p.name);
  const fs::path dir(o.out_dir);
  fs::create_directories(dir);

  // Tokenizer first: the tiny presets take its size as their vocabulary.
  std::map<std::string, int64_t> by_text;
  const int64_t tok_size = write_tokenizer(o, p, by_text);
  const int64_t vocab = p.tiny ? tok_size : p.vocab;
  if (tok_size > vocab)
    fail("{}: the tokenizer has {} tokens, more than the {} preset's vocab size {}", o.tokenizer_json, tok_size, p.name,
         vocab);
  const SpecialIds ids = special_ids(p, by_text);
  const TestConfigContext context{vocab, ids.bos, ids.config_eos, o.dtype, o.sliding_window};
  const json config = family->test_config(p, context);
  write_json(dir / "config.json", config);
  write_json(dir / "generation_config.json", generation_config(p, ids));

  TestModelResult r = write_weights(o, p, *family, parse_hf_config(config.dump(), (dir / "config.json").string()));
  r.vocab_size = vocab;
  for (const char* f : {"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"})
    if (fs::exists(dir / f)) r.files.emplace_back(f);
  return r;
}

}  // namespace

std::vector<std::string> test_model_presets() {
  std::vector<std::string> out;
  for (const Family* family : families())
    for (const TestPreset& p : family->test_presets) out.emplace_back(p.name);
  return out;
}

DType default_test_model_dtype(const std::string& preset) {
  return find_preset(preset).preset.tiny ? DType::F32 : DType::BF16;
}

TestModelResult write_test_model(const TestModelOptions& o) {
  try {
    return write_test_model_files(o);
  } catch (const fs::filesystem_error& e) {
    fail("make-test-model: {}", e.what());  // names the path and the reason
  }
}

}  // namespace minfer
