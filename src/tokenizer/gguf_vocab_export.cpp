#include "tokenizer/gguf_vocab_export.h"

#include <array>
#include <nlohmann/json.hpp>
#include <string_view>

#include "base/error.h"
#include "tokenizer/hf_json_reader.h"
#include "tokenizer/pre_tokenizer.h"

namespace minfer {
namespace {

using json = nlohmann::json;

constexpr int32_t kNormal = 1, kControl = 3, kUserDefined = 4, kUnused = 5;

// Text on which the pre-tokenizers llama.cpp knows split differently from one another.
constexpr std::string_view kProbe =
    "Hello world! I'm here, you'RE there; they'll've gone.  Numbers 1 12 123 1234 12345 3.14159 -42\n\n"
    "\tTabs\tand   spaces   \n  indented line\r\nCRLF ... !!! ??? (x+y)*z=w; a_b-c/d\\e\n"
    "ünïcödé Grüße façade naïve Привет мир 你好世界 こんにちは 안녕하세요 مرحبا "
    "🙂🙂 "
    "x²\n"
    // Combining marks (decomposed accents, Devanagari vowel signs, a mark after a space): qwen35 keeps them in the
    // letter run, qwen2 splits them off.
    "cafe\u0301 Tie\u0302\u0301ng नमस्ते \u0301x\n"
    "def f(x):\n    return x**2  # comment\n\n\n   ";

// llama.cpp's pre-tokenizer names, most common first.
constexpr std::array kCandidates = {"qwen2",        "qwen35",      "llama-bpe",      "smollm", "gpt-2",
                                    "deepseek-llm", "deepseek-v3", "deepseek-coder", "falcon", "poro-chat",
                                    "viking",       "tekken",      "default"};

std::string detect_pre(const std::string& path, const json& root, bool ignore_merges) {
  const PreTokenizer own = hf_byte_level_pre_tokenizer(path, root);
  const auto want = own.split(kProbe);
  for (const char* name : kCandidates) {
    const auto spec = gguf_pre_tokenizer_spec(name);
    if (!spec || spec->ignore_merges != ignore_merges) continue;
    PreTokenizer candidate;
    for (const std::string& r : spec->regexes) candidate.add_regex(r);
    if (candidate.split(kProbe) == want) return name;
  }
  fail_load(path,
            "its pre-tokenizer splits text unlike any pre-tokenizer llama.cpp knows by name; convert the model "
            "with llama.cpp's convert_hf_to_gguf.py and quantize that GGUF instead");
}

void read_config(const std::string& path, GgufVocab& v) {
  const json config = read_json_file(path);
  auto id_of = [&](const std::string& text) -> std::optional<int32_t> {
    for (size_t i = 0; i < v.tokens.size(); ++i)
      if (v.tokens[i] == text) return static_cast<int32_t>(i);
    return std::nullopt;
  };
  if (auto t = hf_config_token(config, "bos_token")) v.bos = id_of(*t);
  if (auto t = hf_config_token(config, "eos_token")) v.eos = id_of(*t);
  if (auto t = hf_config_token(config, "pad_token")) v.pad = id_of(*t);
  if (config.contains("add_bos_token") && config.at("add_bos_token").is_boolean())
    v.add_bos = config.at("add_bos_token").get<bool>();
  if (config.contains("chat_template") && config.at("chat_template").is_string())
    v.chat_template = config.at("chat_template").get<std::string>();
}

}  // namespace

GgufVocab gguf_vocab_from_hf(const std::string& tokenizer_json, const std::string& tokenizer_config,
                             int64_t vocab_size) {
  const HfTokenizerJson file = read_hf_tokenizer_json(tokenizer_json);
  const json& model = file.root.at("model");
  if (model.value("type", std::string()) != "BPE" || !file.has_vocab)
    fail_load(tokenizer_json, "only BPE tokenizers are written to GGUF (model.type is '{}')",
              model.value("type", std::string()));
  GgufVocab v;
  v.ignore_merges = model.value("ignore_merges", false);
  v.pre = detect_pre(tokenizer_json, file.root, v.ignore_merges);
  v.tokens.resize(static_cast<size_t>(vocab_size));
  v.token_types.assign(static_cast<size_t>(vocab_size), kUnused);
  std::vector<bool> assigned(static_cast<size_t>(vocab_size), false);
  auto put = [&](int64_t id, const std::string& text, int32_t type) {
    if (id < 0 || id >= vocab_size)
      fail_load(tokenizer_json, "token '{}' has id {}, past the model's vocab_size {}", text, id, vocab_size);
    v.tokens[static_cast<size_t>(id)] = text;
    v.token_types[static_cast<size_t>(id)] = type;
    assigned[static_cast<size_t>(id)] = true;
  };
  for (const auto& [text, id] : file.vocab) put(id, text, kNormal);
  for (const json& a : file.root.value("added_tokens", json::array()))
    put(a.at("id").get<int64_t>(), a.at("content").get<std::string>(),
        a.value("special", false) ? kControl : kUserDefined);
  for (int64_t i = 0; i < vocab_size; ++i)
    if (!assigned[static_cast<size_t>(i)]) v.tokens[static_cast<size_t>(i)] = "[PAD" + std::to_string(i) + "]";
  v.merges.reserve(file.merges.size());
  for (const auto& [left, right] : file.merges) v.merges.push_back(left + " " + right);
  if (!tokenizer_config.empty()) read_config(tokenizer_config, v);
  return v;
}

}  // namespace minfer
