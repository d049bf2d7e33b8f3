// tokenizer.json loading: the real Qwen tokenizer (special tokens, EOS, added non-special tokens), a tiny
// Llama-2-style SentencePiece BPE tokenizer.json and a tiny GPT-2-style byte-level one written here.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace minfer {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Ids = std::vector<int32_t>;

const std::string kQwenDir = std::string(MINFER_CACHE_DIR) + "/qwen-tokenizer";

class QwenTokenizer : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kQwenDir + "/tokenizer.json")) {
      GTEST_SKIP() << kQwenDir << "/tokenizer.json missing; run scripts/fetch-qwen-tokenizer.sh";
    }
    tok_ = tokenizer_from_hf_json(kQwenDir + "/tokenizer.json", kQwenDir + "/tokenizer_config.json");
  }
  int32_t id(std::string_view text) const {
    auto v = tok_->token_id(text);
    EXPECT_TRUE(v.has_value()) << text;
    return v.value_or(-1);
  }
  std::unique_ptr<Tokenizer> tok_;
};

TEST_F(QwenTokenizer, Vocabulary) {
  EXPECT_EQ(tok_->vocab_size(), 151669);
  EXPECT_EQ(id("<|endoftext|>"), 151643);
  EXPECT_EQ(id("<|im_start|>"), 151644);
  EXPECT_EQ(id("<|im_end|>"), 151645);
  EXPECT_EQ(tok_->bos_id(), -1);  // bos_token is null in tokenizer_config.json
  EXPECT_FALSE(tok_->adds_bos());
  const Ids eos = tok_->eos_ids();
  ASSERT_FALSE(eos.empty());
  EXPECT_EQ(eos.front(), 151645);                                   // eos_token "<|im_end|>" from tokenizer_config.json
  EXPECT_NE(std::find(eos.begin(), eos.end(), 151643), eos.end());  // <|endoftext|> also ends generation
  EXPECT_TRUE(tok_->is_special(151644));
  EXPECT_FALSE(tok_->is_special(id("<think>")));  // an added token with "special": false
  EXPECT_FALSE(tok_->is_special(id("Hello")));
  EXPECT_EQ(tok_->token_bytes(id("ĠHello")), " Hello");
}

TEST_F(QwenTokenizer, SpecialTokensParseAsOneId) {
  const Ids ids = tok_->encode("<|im_start|>user\nHello<|im_end|>\n");
  Ids expected = {151644};
  for (int32_t t : tok_->encode("user\nHello", false, false)) expected.push_back(t);
  expected.push_back(151645);
  expected.push_back(id("Ċ"));
  EXPECT_EQ(ids, expected);
  EXPECT_EQ(tok_->decode(ids), "<|im_start|>user\nHello<|im_end|>\n");
  EXPECT_EQ(tok_->decode(ids, /*skip_special=*/true), "user\nHello\n");

  // Without parse_special the markers are plain text.
  const Ids plain = tok_->encode("<|im_start|>", true, /*parse_special=*/false);
  EXPECT_GT(plain.size(), 1u);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 151644), 0);
  EXPECT_EQ(tok_->decode(plain), "<|im_start|>");
  // Non-special added tokens are always matched whole, as HF and llama.cpp do.
  EXPECT_EQ(tok_->encode("<think>", false, false), Ids{id("<think>")});
  EXPECT_EQ(tok_->decode({id("<think>"), 151645}, /*skip_special=*/true), "<think>");
}

TEST_F(QwenTokenizer, RoundTrips) {
  for (const char* text : {"Hello, world!", "  leading spaces and trailing  ", "数字 12345 and 中文 text",
                           "emoji 🦙🚀 and \t tabs\n\nnew lines", "def f(x):\n    return x**2\n", ""}) {
    EXPECT_EQ(tok_->decode(tok_->encode(text)), text) << text;
  }
}

fs::path temp_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("minfer_tok_" + name + "_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir;
}

void write(const fs::path& path, const json& j) { std::ofstream(path) << j.dump(2); }

// A Llama-2-style tokenizer.json: <unk> <s> </s>, 256 byte pieces, a few merged pieces.
json tiny_llama2_json() {
  json vocab = json::object();
  vocab["<unk>"] = 0;
  vocab["<s>"] = 1;
  vocab["</s>"] = 2;
  char name[8];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    vocab[name] = 3 + b;
  }
  const std::vector<std::string> pieces = {"▁",  "h",   "e",   "l",      "o",  "w",  "r",    "d",  "▁h",
                                           "ll", "▁he", "llo", "▁hello", "▁w", "or", "▁wor", "ld", "▁world"};
  for (size_t i = 0; i < pieces.size(); ++i) vocab[pieces[i]] = 259 + static_cast<int>(i);
  const json merges = {"▁ h", "l l", "▁h e", "ll o", "▁he llo", "▁ w", "o r", "▁w or", "l d", "▁wor ld"};
  auto added = [](int id, const char* content) {
    return json{{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
                {"rstrip", false}, {"normalized", false}, {"special", true}};
  };
  const json bos_piece = {{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}};
  return {
      {"version", "1.0"},
      {"added_tokens", {added(0, "<unk>"), added(1, "<s>"), added(2, "</s>")}},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers",
         {{{"type", "Prepend"}, {"prepend", "▁"}},
          {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "▁"}}}}}},
      {"pre_tokenizer", nullptr},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", {bos_piece, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}}},
      {"decoder",
       {{"type", "Sequence"},
        {"decoders",
         {{{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}},
          {{"type", "ByteFallback"}},
          {{"type", "Fuse"}},
          {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}},
      {"model",
       {{"type", "BPE"},
        {"unk_token", "<unk>"},
        {"fuse_unk", true},
        {"byte_fallback", true},
        {"vocab", vocab},
        {"merges", merges}}},
  };
}

TEST(HfJsonTokenizer, TinyLlama2Style) {
  const fs::path dir = temp_dir("llama2");
  write(dir / "tokenizer.json", tiny_llama2_json());
  auto tok = tokenizer_from_hf_json((dir / "tokenizer.json").string());
  EXPECT_EQ(tok->vocab_size(), 277);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_TRUE(tok->adds_bos());  // from the TemplateProcessing post-processor
  EXPECT_EQ(tok->eos_ids(), Ids{2});

  EXPECT_EQ(tok->encode("hello world"), (Ids{1, 271, 276}));
  EXPECT_EQ(tok->encode("hello world", /*add_special=*/false), (Ids{271, 276}));
  // 'i' has no piece: byte fallback <0x69>.
  EXPECT_EQ(tok->encode("hi", false), (Ids{267, 3 + 'i'}));
  // A special token in the text; the text after it gets its own "▁" prefix.
  EXPECT_EQ(tok->encode("hello<s>world"), (Ids{1, 271, 1, 276}));
  EXPECT_EQ(tok->encode("hello<s>world", true, /*parse_special=*/false),
            (Ids{1, 271, 3 + '<', 3 + 's', 3 + '>', 264, 273, 275}));

  EXPECT_EQ(tok->decode({1, 271, 276}), "<s>hello world");
  EXPECT_EQ(tok->decode({1, 271, 276}, /*skip_special=*/true), "hello world");
  EXPECT_EQ(tok->decode({267, 3 + 'i'}), "hi");
  EXPECT_EQ(tok->decode({276, 276}), "world world");
  // Bytes of a multi-byte character arrive as byte tokens and decode to the character.
  const Ids euro = tok->encode("€", false);
  EXPECT_EQ(euro, (Ids{259, 3 + 0xE2, 3 + 0x82, 3 + 0xAC}));
  EXPECT_EQ(tok->decode(euro), "€");
  fs::remove_all(dir);
}

TEST(HfJsonTokenizer, ConfigOverridesBos) {
  const fs::path dir = temp_dir("llama2cfg");
  write(dir / "tokenizer.json", tiny_llama2_json());
  write(dir / "tokenizer_config.json",
        {{"add_bos_token", false}, {"bos_token", {{"content", "<s>"}, {"special", true}}}, {"eos_token", "</s>"}});
  auto tok = tokenizer_from_hf_json((dir / "tokenizer.json").string(), (dir / "tokenizer_config.json").string());
  EXPECT_FALSE(tok->adds_bos());
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->encode("hello world"), (Ids{271, 276}));
  // from_file reads tokenizer_config.json beside tokenizer.json by itself.
  EXPECT_FALSE(tokenizer_from_file((dir / "tokenizer.json").string())->adds_bos());
  EXPECT_FALSE(tokenizer_from_file(dir.string())->adds_bos());
  fs::remove_all(dir);
}

TEST(HfJsonTokenizer, MetaspacePrependFirst) {
  // Newer conversions: no normalizer, a Metaspace pre-tokenizer that prefixes only the input's start.
  json j = tiny_llama2_json();
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"}, {"split", false}};
  const fs::path dir = temp_dir("metaspace");
  write(dir / "tokenizer.json", j);
  auto tok = tokenizer_from_hf_json((dir / "tokenizer.json").string());
  EXPECT_EQ(tok->encode("hello world"), (Ids{1, 271, 276}));
  EXPECT_EQ(tok->encode("hello<s>world"), (Ids{1, 271, 1, 264, 273, 275}));  // no "▁" after <s>
  EXPECT_EQ(tok->encode("<s>w w"), (Ids{1, 1, 264, 272}));
  EXPECT_EQ(tok->decode({1, 271, 276}, /*skip_special=*/true), "hello world");
  fs::remove_all(dir);
}

// A GPT-2-style tokenizer.json: the 256 byte characters, a few merges, ByteLevel with its own regex.
json tiny_gpt2_json(bool add_prefix_space) {
  const auto& table = unicode::byte_level_table();
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[table.byte_to_utf8[static_cast<size_t>(b)]] = b;
  const std::vector<std::pair<std::string, std::string>> merges = {{"h", "e"},    {"l", "l"}, {"he", "ll"},
                                                                   {"hell", "o"}, {"Ġ", "w"}, {"o", "r"},
                                                                   {"Ġw", "or"},  {"l", "d"}, {"Ġwor", "ld"}};
  json merge_list = json::array();
  int next = 256;
  for (const auto& [a, b] : merges) {
    merge_list.push_back({a, b});
    vocab[a + b] = next++;
  }
  const json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", add_prefix_space}, {"use_regex", true}};
  return {{"added_tokens",
           {{{"id", next}, {"content", "<|endoftext|>"}, {"special", true}, {"lstrip", false}, {"rstrip", false}}}},
          {"normalizer", nullptr},
          {"pre_tokenizer", byte_level},
          {"decoder", byte_level},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merge_list}}}};
}

TEST(HfJsonTokenizer, TinyGpt2Style) {
  const fs::path dir = temp_dir("gpt2");
  write(dir / "tokenizer.json", tiny_gpt2_json(false));
  auto tok = tokenizer_from_hf_json((dir / "tokenizer.json").string());
  const int32_t hello = *tok->token_id("hello");
  const int32_t world = *tok->token_id("Ġworld");
  const int32_t eot = *tok->token_id("<|endoftext|>");
  EXPECT_EQ(tok->eos_ids(), Ids{eot});
  EXPECT_FALSE(tok->adds_bos());
  EXPECT_EQ(tok->encode("hello world<|endoftext|>"), (Ids{hello, world, eot}));
  EXPECT_EQ(tok->decode({hello, world, eot}, /*skip_special=*/true), "hello world");
  // Bytes outside ASCII go through the byte table and come back.
  const std::string text = "héllo wörld ∑ 🦙\n\t";
  EXPECT_EQ(tok->decode(tok->encode(text)), text);

  write(dir / "tokenizer.json", tiny_gpt2_json(true));
  auto prefixed = tokenizer_from_hf_json((dir / "tokenizer.json").string());
  EXPECT_EQ(prefixed->encode("hello world"), (Ids{*prefixed->token_id("Ġ"), hello, world}));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace minfer
