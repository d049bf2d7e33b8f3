// Tokenizer from a Hugging Face tokenizer.json (model type BPE) and, optionally, tokenizer_config.json.
// Byte-level BPE when the pre-tokenizer or decoder is ByteLevel (GPT-2, Qwen2, Llama 3); otherwise
// SentencePiece-style BPE (Llama 2: Prepend/Replace "▁" normalizer or Metaspace, byte_fallback).
#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "tokenizer/byte_level_bpe.h"
#include "tokenizer/hf_json_reader.h"
#include "tokenizer/sentencepiece_bpe.h"
#include "tokenizer/tokenizer.h"

namespace minfer {

namespace {

using json = nlohmann::json;
using MergeList = std::vector<std::pair<std::string_view, std::string_view>>;

std::string type_of(const json& j) {
  if (!j.is_object()) return "";
  auto it = j.find("type");
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// Visits j and, for a "Sequence", its members (pretokenizers / normalizers / decoders / processors).
template <typename Fn>
void for_each_component(const json& j, const Fn& fn) {
  if (j.is_null()) return;
  if (type_of(j) == "Sequence") {
    for (const char* key : {"pretokenizers", "normalizers", "decoders", "processors"}) {
      auto it = j.find(key);
      if (it != j.end() && it->is_array()) {
        for (const json& member : *it) for_each_component(member, fn);
      }
    }
    return;
  }
  fn(j);
}

bool mentions_byte_level(const json& j) {
  bool found = false;
  for_each_component(j, [&](const json& c) { found = found || type_of(c) == "ByteLevel"; });
  return found;
}

// A Split pattern {"Regex": ...} or {"String": ...} as a PCRE2 regex.
std::string split_pattern(const std::string& path, const json& pattern) {
  if (pattern.contains("Regex")) return pattern.at("Regex").get<std::string>();
  if (pattern.contains("String")) {
    std::string out;
    for (char c : pattern.at("String").get<std::string>()) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && static_cast<unsigned char>(c) < 0x80) out += '\\';
      out += c;
    }
    return out;
  }
  fail_load(path, "Split pre-tokenizer pattern must be {{\"Regex\": ...}} or {{\"String\": ...}}");
}

PreTokenizer::Behavior split_behavior(const std::string& path, const std::string& name) {
  if (name == "Isolated") return PreTokenizer::Behavior::kIsolated;
  if (name == "Removed") return PreTokenizer::Behavior::kRemoved;
  if (name == "MergedWithPrevious") return PreTokenizer::Behavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return PreTokenizer::Behavior::kMergedWithNext;
  fail_load(path, "unsupported Split behavior '{}'", name);
}

void add_pre_tokenizer(const std::string& path, const json& pre, ByteLevelBpeOptions& options) {
  for_each_component(pre, [&](const json& c) {
    const std::string type = type_of(c);
    if (type == "Split") {
      if (c.value("invert", false)) fail_load(path, "Split pre-tokenizer with invert = true is not supported");
      options.pre_tokenizer.add_regex(split_pattern(path, c.at("pattern")),
                                      split_behavior(path, c.value("behavior", std::string("Isolated"))),
                                      PreTokenizer::Anchors::kLines);
    } else if (type == "ByteLevel") {
      options.add_prefix_space = c.value("add_prefix_space", false);
      if (c.value("use_regex", true)) options.pre_tokenizer.add_regex(gpt2_regex());
    } else if (type == "Digits") {
      options.pre_tokenizer.add_regex(c.value("individual_digits", false) ? R"(\p{N})" : R"(\p{N}+)");
    } else {
      fail_load(path, "unsupported pre-tokenizer '{}' for a byte-level BPE model", type);
    }
  });
}

// SentencePiece-style options from the normalizer (Prepend "▁" + Replace " " -> "▁", Llama 2) or the
// Metaspace pre-tokenizer (newer conversions).
SentencePieceBpeOptions spm_options(const std::string& path, const json& root) {
  using SpacePrefix = SentencePieceBpeOptions::SpacePrefix;
  SentencePieceBpeOptions options;
  options.space_prefix = SpacePrefix::kNever;
  for_each_component(root.value("normalizer", json()), [&](const json& c) {
    const std::string type = type_of(c);
    if (type == "Prepend") {
      options.space_prefix = SpacePrefix::kEverySegment;  // HF normalizes each segment between added tokens
    } else if (type == "Replace") {
      // Replace " " -> "▁" is what SentencePieceBpe always does.
    } else if (type != "NFC" && type != "NFKC") {
      fail_load(path, "unsupported normalizer '{}' for a SentencePiece-style BPE model", type);
    }
  });
  for_each_component(root.value("pre_tokenizer", json()), [&](const json& c) {
    if (type_of(c) != "Metaspace") {
      fail_load(path, "unsupported pre-tokenizer '{}' for a SentencePiece-style model", type_of(c));
    }
    std::string scheme = "always";
    if (c.contains("prepend_scheme")) {
      scheme = c.at("prepend_scheme").get<std::string>();
    } else if (c.contains("add_prefix_space")) {
      scheme = c.at("add_prefix_space").get<bool>() ? "always" : "never";
    }
    if (scheme == "always") {
      options.space_prefix = SpacePrefix::kEverySegment;
    } else if (scheme == "first") {
      options.space_prefix = SpacePrefix::kInputStart;
    } else if (scheme == "never") {
      options.space_prefix = SpacePrefix::kNever;
    } else {
      fail_load(path, "unsupported Metaspace prepend_scheme '{}'", scheme);
    }
    options.split_words = c.value("split", true);
  });
  options.fuse_unk = root.at("model").value("fuse_unk", false);
  return options;
}

// bos_token / eos_token in tokenizer_config.json: a string, {"content": ...}, or null.

// BOS/EOS and whether they are added: the post_processor's TemplateProcessing first (what HF itself
// applies), then tokenizer_config.json, which wins where it says something.
void read_special_tokens(const std::string& config_path, const json& root, const json& config, bool spm, Vocab& vocab) {
  bool bos_from_template = false;
  for_each_component(root.value("post_processor", json()), [&](const json& c) {
    if (type_of(c) != "TemplateProcessing" || !c.contains("single") || !c.at("single").is_array()) return;
    const json& single = c.at("single");
    auto special_id = [&](const json& piece) -> int32_t {
      if (!piece.contains("SpecialToken")) return -1;
      return vocab.find(piece.at("SpecialToken").at("id").get<std::string>());
    };
    if (!single.empty() && special_id(single.front()) >= 0) {
      vocab.bos = special_id(single.front());
      vocab.add_bos = true;
      bos_from_template = true;
    }
    if (single.size() > 1 && special_id(single.back()) >= 0) {
      vocab.eos = {special_id(single.back())};
      vocab.add_eos = true;
    }
  });
  if (spm) {
    // Llama-2 style vocabularies add <s> unless told otherwise, and end with </s>.
    if (!bos_from_template) {
      vocab.bos = vocab.find("<s>");
      vocab.add_bos = vocab.bos >= 0;
    }
    if (vocab.eos.empty() && vocab.find("</s>") >= 0) vocab.eos = {vocab.find("</s>")};
  }
  if (config.is_null()) return;
  auto lookup = [&](const std::string& text) {
    const int32_t id = vocab.find(text);
    if (id < 0) fail_load(config_path, "special token '{}' is not in the vocabulary", text);
    return id;
  };
  if (config.contains("bos_token")) {
    const auto bos = hf_config_token(config, "bos_token");
    vocab.bos = bos ? lookup(*bos) : -1;
  }
  if (auto eos = hf_config_token(config, "eos_token")) vocab.eos = {lookup(*eos)};
  if (config.contains("add_bos_token") && config.at("add_bos_token").is_boolean()) {
    vocab.add_bos = config.at("add_bos_token").get<bool>();
  }
  if (config.contains("add_eos_token") && config.at("add_eos_token").is_boolean()) {
    vocab.add_eos = config.at("add_eos_token").get<bool>();
  }
}

std::unique_ptr<Tokenizer> build(const std::string& path, const std::string& config_path, HfTokenizerJson& file,
                                 const json& config) {
  const json& root = file.root;
  if (!root.contains("model") || !root.at("model").is_object()) fail_load(path, "not a tokenizer.json: no \"model\"");
  const json& model = root.at("model");
  const std::string model_type = model.contains("type") ? model.at("type").get<std::string>() : "BPE";
  if (model_type != "BPE") {
    fail_load(path, "unsupported tokenizer model type '{}' (only BPE is supported)", model_type);
  }
  if (!file.has_vocab) fail_load(path, "model.vocab is missing");

  // Vocabulary: model.vocab plus added_tokens, by id.
  const json added = root.value("added_tokens", json::array());
  int64_t max_id = -1;
  for (const auto& [text, id] : file.vocab) {
    if (id < 0) fail_load(path, "token '{}' has negative id {}", text, id);
    max_id = std::max(max_id, id);
  }
  for (const json& a : added) max_id = std::max<int64_t>(max_id, a.at("id").get<int64_t>());
  if (max_id < 0) fail_load(path, "empty vocabulary");
  if (max_id >= (int64_t{1} << 31) - 1) fail_load(path, "token id {} out of range", max_id);

  Vocab vocab;
  vocab.tokens.resize(static_cast<size_t>(max_id + 1));
  for (auto& t : vocab.tokens) t.type = TokenType::kUnused;  // ids no entry names stay unused
  for (auto& [text, id] : file.vocab) {
    vocab.tokens[static_cast<size_t>(id)].text = std::move(text);
    vocab.tokens[static_cast<size_t>(id)].type = TokenType::kNormal;
  }
  const bool byte_fallback = model.value("byte_fallback", false);
  if (byte_fallback) {
    for (auto& t : vocab.tokens) {
      const std::string& s = t.text;
      if (s.size() == 6 && s.compare(0, 3, "<0x") == 0 && s[5] == '>') t.type = TokenType::kByte;
    }
  }
  std::string unk_text;
  if (model.contains("unk_token") && model.at("unk_token").is_string())
    unk_text = model.at("unk_token").get<std::string>();
  for (const json& a : added) {
    const auto id = a.at("id").get<int64_t>();
    if (id < 0) fail_load(path, "added token has negative id {}", id);
    Vocab::Token& t = vocab.tokens[static_cast<size_t>(id)];
    t.text = a.at("content").get<std::string>();
    t.type = a.value("special", false) ? TokenType::kControl : TokenType::kUserDefined;
    t.lstrip = a.value("lstrip", false);
    t.rstrip = a.value("rstrip", false);
  }
  for (size_t i = 0; !unk_text.empty() && i < vocab.tokens.size(); ++i) {
    if (vocab.tokens[i].text == unk_text) {
      vocab.unk = static_cast<int32_t>(i);
      vocab.tokens[i].type = TokenType::kUnknown;
    }
  }
  vocab.build_index();  // lookups are needed below, before the special ids are known

  MergeList merges;
  merges.reserve(file.merges.size());
  for (const auto& [left, right] : file.merges) merges.emplace_back(left, right);

  const json pre = root.value("pre_tokenizer", json());
  const bool byte_level = mentions_byte_level(pre) || mentions_byte_level(root.value("decoder", json()));
  read_special_tokens(config_path, root, config, !byte_level, vocab);
  vocab.finalize();

  if (byte_level) {
    ByteLevelBpeOptions options;
    add_pre_tokenizer(path, pre, options);
    options.ignore_merges = model.value("ignore_merges", false);
    // A normalizer other than NFC (not applied: text is almost always NFC already) would change the text.
    for_each_component(root.value("normalizer", json()), [&](const json& c) {
      if (type_of(c) != "NFC") fail_load(path, "unsupported normalizer '{}' for a byte-level BPE model", type_of(c));
    });
    return std::make_unique<ByteLevelBpe>(std::move(vocab), merges, std::move(options));
  }
  return std::make_unique<SentencePieceBpe>(std::move(vocab), merges, spm_options(path, root));
}

}  // namespace

std::optional<std::string> hf_config_token(const json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content")) return it->at("content").get<std::string>();
  return std::nullopt;
}

PreTokenizer hf_byte_level_pre_tokenizer(const std::string& path, const json& root) {
  ByteLevelBpeOptions options;
  add_pre_tokenizer(path, root.value("pre_tokenizer", json()), options);
  if (options.add_prefix_space)
    fail_load(path, "a ByteLevel pre-tokenizer with add_prefix_space is not supported here");
  return std::move(options.pre_tokenizer);
}

std::unique_ptr<Tokenizer> tokenizer_from_hf_json(const std::string& tokenizer_json_path,
                                                  const std::string& tokenizer_config_path) {
  HfTokenizerJson file = read_hf_tokenizer_json(tokenizer_json_path);
  json config;
  if (!tokenizer_config_path.empty()) config = read_json_file(tokenizer_config_path);
  try {
    return build(tokenizer_json_path, tokenizer_config_path, file, config);
  } catch (const json::exception& e) {
    // A field of the wrong JSON type somewhere: still the file's fault, named as such.
    fail_load(tokenizer_json_path, "unexpected tokenizer.json structure: {}", e.what());
  } catch (const LoadError&) {
    throw;
  } catch (const Error& e) {
    fail_load(tokenizer_json_path, "{}", e.what());  // e.g. a Split regex PCRE2 rejects
  }
}

}  // namespace minfer
