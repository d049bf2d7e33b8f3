// Tokenizer from a GGUF file's tokenizer.ggml.* metadata, with llama.cpp's defaults and meanings.
#include <cctype>
#include <string>
#include <vector>

#include "base/error.h"
#include "formats/gguf_file.h"
#include "tokenizer/byte_level_bpe.h"
#include "tokenizer/sentencepiece_bpe.h"
#include "tokenizer/tokenizer.h"

namespace minfer {

namespace {

TokenType token_type_from_gguf(int64_t value) {
  if (value >= 0 && value <= 6) return static_cast<TokenType>(value);
  return TokenType::kUndefined;
}

// An optional token id key; ids outside the vocabulary are ignored (llama.cpp warns and keeps its default;
// some converters write 0xFFFFFFFF for "none").
int32_t find_token_id(const GgufFile& gguf, std::string_view key, int32_t fallback, int32_t vocab_size) {
  const auto v = gguf.find_int(key);
  if (!v) return fallback;
  if (*v < 0 || *v >= vocab_size) return -1;
  return static_cast<int32_t>(*v);
}

Vocab read_vocab(const GgufFile& gguf) {
  Vocab vocab;
  const auto texts = gguf.get_string_array("tokenizer.ggml.tokens");
  const size_t n = texts.size();
  if (n == 0) fail_load(gguf.path(), "tokenizer.ggml.tokens is empty");
  std::vector<float> scores;
  if (gguf.has("tokenizer.ggml.scores")) scores = gguf.get_float_array("tokenizer.ggml.scores");
  std::vector<int64_t> types;
  if (gguf.has("tokenizer.ggml.token_type")) types = gguf.get_int_array("tokenizer.ggml.token_type");
  if (!scores.empty() && scores.size() != n) {
    fail_load(gguf.path(), "tokenizer.ggml.scores has {} entries for {} tokens", scores.size(), n);
  }
  if (!types.empty() && types.size() != n) {
    fail_load(gguf.path(), "tokenizer.ggml.token_type has {} entries for {} tokens", types.size(), n);
  }
  vocab.tokens.resize(n);
  for (size_t i = 0; i < n; ++i) {
    Vocab::Token& t = vocab.tokens[i];
    t.text = std::string(texts[i]);
    if (t.text.empty()) t.text = "[EMPTY_" + std::to_string(i) + "]";  // as llama.cpp, so lookups stay unique
    if (!scores.empty()) t.score = scores[i];
    if (!types.empty()) t.type = token_type_from_gguf(types[i]);
  }
  return vocab;
}

// BOS/EOS/UNK and add_bos/add_eos from metadata over the per-model defaults already in vocab.
void read_special_ids(const GgufFile& gguf, Vocab& vocab) {
  const int32_t n = vocab.size();
  vocab.bos = find_token_id(gguf, "tokenizer.ggml.bos_token_id", vocab.bos, n);
  const int32_t eos = find_token_id(gguf, "tokenizer.ggml.eos_token_id", vocab.eos.empty() ? -1 : vocab.eos[0], n);
  vocab.eos.clear();
  if (eos >= 0) vocab.eos.push_back(eos);
  for (std::string_view key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    const int32_t id = find_token_id(gguf, key, -1, n);
    if (id >= 0 && id != eos) vocab.eos.push_back(id);
  }
  vocab.unk = find_token_id(gguf, "tokenizer.ggml.unknown_token_id", vocab.unk, n);
  if (auto v = gguf.find_int("tokenizer.ggml.add_bos_token")) vocab.add_bos = *v != 0;
  if (auto v = gguf.find_int("tokenizer.ggml.add_eos_token")) vocab.add_eos = *v != 0;
}

// Per-token strip flags are not stored in GGUF; llama.cpp restores Phi-3's (its tokenizer.json has
// rstrip on the added tokens, so "<|user|>\n" swallows the newline) from the model name. Same here.
void apply_model_token_attributes(const GgufFile& gguf, Vocab& vocab) {
  std::string name = gguf.find_string("general.name").value_or("");
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (name.find("phi-3") == std::string::npos && name.find("phi3") == std::string::npos) return;
  for (Vocab::Token& t : vocab.tokens) {
    const bool special =
        t.type == TokenType::kControl || t.type == TokenType::kUserDefined || t.type == TokenType::kUnknown;
    if (special || t.text == "</s>") t.rstrip = true;
    if (t.text == "<unk>" || t.text == "<s>" || t.text == "<|endoftext|>") t.rstrip = false;
  }
}

}  // namespace

std::unique_ptr<Tokenizer> tokenizer_from_gguf(const GgufFile& gguf) {
  const std::string path = gguf.path();
  if (!gguf.has("tokenizer.ggml.model"))
    fail_load(path, "no tokenizer in this GGUF file (tokenizer.ggml.model missing)");
  const std::string model = gguf.get_string("tokenizer.ggml.model");
  Vocab vocab = read_vocab(gguf);
  apply_model_token_attributes(gguf, vocab);

  if (model == "llama") {
    // SentencePiece: llama.cpp's defaults are <unk>=0, <s>=1, </s>=2, BOS added, a space prefix.
    vocab.unk = vocab.size() > 0 ? 0 : -1;
    vocab.bos = vocab.size() > 1 ? 1 : -1;
    vocab.eos = {vocab.size() > 2 ? 2 : -1};
    vocab.add_bos = true;
    read_special_ids(gguf, vocab);
    SentencePieceBpeOptions options;
    if (auto v = gguf.find_int("tokenizer.ggml.add_space_prefix")) {
      options.space_prefix =
          *v != 0 ? SentencePieceBpeOptions::SpacePrefix::kEverySegment : SentencePieceBpeOptions::SpacePrefix::kNever;
    }
    vocab.finalize();
    return std::make_unique<SentencePieceBpe>(std::move(vocab), options);
  }

  if (model == "gpt2") {
    const std::string pre = gguf.find_string("tokenizer.ggml.pre").value_or("default");
    auto spec = gguf_pre_tokenizer_spec(pre);
    if (!spec) fail_load(path, "unsupported pre-tokenizer tokenizer.ggml.pre = '{}'", pre);
    ByteLevelBpeOptions options;
    for (const auto& regex : spec->regexes) options.pre_tokenizer.add_regex(regex);
    options.ignore_merges = spec->ignore_merges;
    vocab.add_bos = spec->add_bos;
    read_special_ids(gguf, vocab);
    const auto merge_texts = gguf.get_string_array("tokenizer.ggml.merges");
    std::vector<std::pair<std::string_view, std::string_view>> merges;
    merges.reserve(merge_texts.size());
    for (std::string_view m : merge_texts) {
      // Split at the first space after the first byte, as llama.cpp does.
      const size_t space = m.find(' ', 1);
      if (space == std::string_view::npos) fail_load(path, "malformed merge '{}' (expected 'left right')", m);
      merges.emplace_back(m.substr(0, space), m.substr(space + 1));
    }
    vocab.finalize();
    return std::make_unique<ByteLevelBpe>(std::move(vocab), merges, std::move(options));
  }

  fail_load(path, "unsupported tokenizer model '{}' (supported: 'llama' SentencePiece BPE, 'gpt2' byte-level BPE)",
            model);
}

}  // namespace minfer
