#include "model/test_tokenizer.h"

#include <algorithm>
#include <cctype>

#include "base/error.h"

namespace minfer {
namespace {

using ojson = nlohmann::ordered_json;

constexpr std::string_view kCorpus =
    "Once upon a time, in a small town by the sea, there lived a little girl who loved to read. Every morning she "
    "walked to the old library at the end of the street, where the shelves were tall and the windows were wide. "
    "She read about ships and stars, about kings and farmers, about the rain that falls on the mountains and the "
    "rivers that run to the sea. The librarian, a kind old man with a long white beard, always saved the best "
    "books for her. One day he gave her a book with no title. \"This one is special,\" he said. \"It writes "
    "itself while you read it.\" The girl opened the book and saw her own name on the first page. She read the "
    "story of her morning: the walk, the library, the man with the beard. Then the words stopped, and the rest "
    "of the pages were empty. She looked up and smiled, because she knew what it meant. The story was hers to "
    "write. She took a pencil from the desk and began to write about the things she wanted to see: the great "
    "cities of the world, the forests in the north, the deserts in the south, and the people she would meet on "
    "the way. When the sun went down, she closed the book and walked home. In 2024, many years later, she still "
    "keeps that book on the table by her bed, and every night she writes one more line.\n"
    "The quick brown fox jumps over the lazy dog. Numbers like 3, 14 and 1000 appear in stories too!\n";

constexpr const char* kQwenSplit =
    R"RE((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)RE";
constexpr const char* kLlama3Split =
    R"RE((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)RE";

constexpr const char* kQwenChatTemplate =
    "{%- for message in messages %}{%- if loop.first and message['role'] != 'system' %}{{- '<|im_start|>system\\n"
    "You are a helpful assistant.<|im_end|>\\n' }}{%- endif %}{{- '<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- "
    "'<|im_start|>assistant\\n' }}{%- endif %}";
constexpr const char* kLlama3ChatTemplate =
    "{{- bos_token }}{%- for message in messages %}{{- '<|start_header_id|>' + message['role'] + "
    "'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{%- endfor %}{%- if "
    "add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}";

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xc0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    s += static_cast<char>(0xe0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  }
  return s;
}

bool printable_as_itself(int b) { return (b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || (b >= 0xae); }

// Pre-splits like the families' regexes, simplified to ASCII: " ?letters", " ?digit", " ?punctuation", whitespace.
std::vector<std::string> pre_split(std::string_view text) {
  auto kind = [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalpha(c)) return 0;
    if (std::isdigit(c)) return 1;
    if (std::isspace(c)) return 3;
    return 2;
  };
  std::vector<std::string> out;
  size_t i = 0;
  while (i < text.size()) {
    const size_t start = i;
    if (text[i] == ' ' && i + 1 < text.size() && kind(text[i + 1]) != 3) ++i;
    const int k = kind(text[i]);
    if (k == 1) {
      ++i;
    } else {
      while (i < text.size() && kind(text[i]) == k) ++i;
    }
    out.emplace_back(text.substr(start, i - start));
  }
  return out;
}

ojson added_token(int64_t id, const std::string& content) {
  return {{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", false}, {"special", true}};
}

ojson byte_level(bool add_prefix_space, bool trim_offsets, bool use_regex) {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", add_prefix_space},
          {"trim_offsets", trim_offsets},
          {"use_regex", use_regex}};
}

// The family's named special tokens in id order, from the family's first special id.
std::vector<std::string> named_specials(TokenizerFamily family, bool tiny) {
  if (family == TokenizerFamily::kQwen2) return {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  if (tiny)
    return {"<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
            "<|end_header_id|>", "<|eom_id|>",      "<|eot_id|>"};
  // Llama 3's real layout of 128000..128010.
  return {"<|begin_of_text|>",
          "<|end_of_text|>",
          "<|reserved_special_token_0|>",
          "<|reserved_special_token_1|>",
          "<|finetune_right_pad_id|>",
          "<|reserved_special_token_2|>",
          "<|start_header_id|>",
          "<|end_header_id|>",
          "<|eom_id|>",
          "<|eot_id|>",
          "<|python_tag|>"};
}

}  // namespace

std::string_view test_tokenizer_corpus() { return kCorpus; }

std::string byte_to_unicode(uint8_t byte) {
  if (printable_as_itself(byte)) return utf8(byte);
  // The other 68 bytes map to 256, 257, ... in byte order.
  uint32_t n = 0;
  for (int b = 0; b < byte; ++b)
    if (!printable_as_itself(b)) ++n;
  return utf8(256 + n);
}

std::vector<std::string> byte_level_alphabet() {
  std::vector<std::string> out;
  for (int b = 0; b < 256; ++b)
    if (printable_as_itself(b)) out.push_back(byte_to_unicode(static_cast<uint8_t>(b)));
  for (int b = 0; b < 256; ++b)
    if (!printable_as_itself(b)) out.push_back(byte_to_unicode(static_cast<uint8_t>(b)));
  return out;
}

std::vector<std::pair<std::string, std::string>> learn_bpe_merges(std::string_view text, int max_merges) {
  // Each distinct pre-split word as its symbol sequence, with its count.
  std::map<std::string, int> counts;
  for (const std::string& w : pre_split(text)) counts[w]++;
  std::vector<std::pair<std::vector<std::string>, int>> words;
  for (const auto& [w, n] : counts) {
    std::vector<std::string> symbols;
    for (char c : w) symbols.push_back(byte_to_unicode(static_cast<uint8_t>(c)));
    words.emplace_back(std::move(symbols), n);
  }
  std::vector<std::pair<std::string, std::string>> merges;
  while (static_cast<int>(merges.size()) < max_merges) {
    std::map<std::pair<std::string, std::string>, int> pairs;
    for (const auto& [symbols, n] : words)
      for (size_t i = 0; i + 1 < symbols.size(); ++i) pairs[{symbols[i], symbols[i + 1]}] += n;
    // std::map iterates pairs in lexicographic order, so the first maximum is the smallest pair.
    auto best = pairs.end();
    for (auto it = pairs.begin(); it != pairs.end(); ++it)
      if (best == pairs.end() || it->second > best->second) best = it;
    if (best == pairs.end()) break;
    const auto [a, b] = best->first;
    for (auto& [symbols, n] : words) {
      std::vector<std::string> merged;
      for (size_t i = 0; i < symbols.size(); ++i) {
        if (i + 1 < symbols.size() && symbols[i] == a && symbols[i + 1] == b) {
          merged.push_back(a + b);
          ++i;
        } else {
          merged.push_back(symbols[i]);
        }
      }
      symbols = std::move(merged);
    }
    merges.emplace_back(a, b);
  }
  return merges;
}

namespace {

// The ids: the byte alphabet, one token per merge (a merge whose result already exists adds none), then the named
// specials from the family's base id and reserved ones up to vocab_size. A real shape whose vocabulary is smaller
// than that base (Mistral's 32000, Granite's 49159) gets them at its end.
struct Vocabulary {
  std::vector<std::string> regular;
  std::vector<std::pair<int64_t, std::string>> specials;
  std::vector<std::pair<std::string, std::string>> merges;
  int64_t base = 0;  // the first special's id
  int64_t size = 0;
};

Vocabulary build_vocabulary(TokenizerFamily family, int64_t vocab_size, int max_merges) {
  const bool qwen = family == TokenizerFamily::kQwen2;
  const bool tiny = vocab_size == 0;
  Vocabulary v;
  v.regular = byte_level_alphabet();
  std::map<std::string, int64_t> ids;
  for (size_t i = 0; i < v.regular.size(); ++i) ids[v.regular[i]] = static_cast<int64_t>(i);
  v.merges = learn_bpe_merges(kCorpus, max_merges);
  for (const auto& [a, b] : v.merges) {
    if (ids.emplace(a + b, static_cast<int64_t>(v.regular.size())).second) v.regular.push_back(a + b);
  }
  const std::vector<std::string> named = named_specials(family, tiny);
  const int64_t family_base = qwen ? 151643 : 128000;
  const auto named_count = static_cast<int64_t>(named.size());
  v.base = tiny                                      ? static_cast<int64_t>(v.regular.size())
           : vocab_size >= family_base + named_count ? family_base
                                                     : vocab_size - named_count;
  if (v.base < static_cast<int64_t>(v.regular.size()) || (!tiny && vocab_size < v.base + named_count))
    fail("test tokenizer: vocab size {} is too small for the {} special tokens", vocab_size,
         qwen ? "Qwen2" : "Llama 3");
  for (size_t i = 0; i < named.size(); ++i) v.specials.emplace_back(v.base + static_cast<int64_t>(i), named[i]);
  v.size = tiny ? v.base + named_count : vocab_size;
  for (int64_t id = v.base + named_count, k = qwen ? 0 : 3; id < v.size; ++id, ++k)
    v.specials.emplace_back(id, "<|reserved_special_token_" + std::to_string(k) + "|>");
  for (auto id = static_cast<int64_t>(v.regular.size()); id < v.base; ++id)
    v.regular.push_back("<|reserved_" + std::to_string(id) + "|>");
  return v;
}

// Qwen2's byte-level post-processor; Llama 3's adds <|begin_of_text|> (id bos) before each sequence.
ojson post_processor(bool qwen, int64_t bos_id) {
  if (qwen) return byte_level(false, false, false);
  const std::string bos = "<|begin_of_text|>";
  const ojson bos_piece = {{"SpecialToken", {{"id", bos}, {"type_id", 0}}}};
  return {{"type", "Sequence"},
          {"processors",
           {byte_level(true, false, true),
            {{"type", "TemplateProcessing"},
             {"single", {bos_piece, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
             {"pair",
              {bos_piece,
               {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
               bos_piece,
               {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}}},
             {"special_tokens", {{bos, {{"id", bos}, {"ids", {bos_id}}, {"tokens", {bos}}}}}}}}}};
}

ojson tokenizer_config(bool qwen, const ojson& added_decoder) {
  ojson c;
  if (qwen) {
    c["add_bos_token"] = false;
    c["add_prefix_space"] = false;
    c["added_tokens_decoder"] = added_decoder;
    c["additional_special_tokens"] = {"<|im_start|>", "<|im_end|>"};
    c["bos_token"] = nullptr;
    c["chat_template"] = kQwenChatTemplate;
    c["clean_up_tokenization_spaces"] = false;
    c["eos_token"] = "<|endoftext|>";
    c["errors"] = "replace";
    c["model_max_length"] = 131072;
    c["pad_token"] = "<|endoftext|>";
    c["split_special_tokens"] = false;
    c["tokenizer_class"] = "Qwen2Tokenizer";
    c["unk_token"] = nullptr;
    return c;
  }
  // Llama 3's tokenizer adds BOS through its post-processor; add_bos_token says so to readers of this file.
  c["add_bos_token"] = true;
  c["added_tokens_decoder"] = added_decoder;
  c["bos_token"] = "<|begin_of_text|>";
  c["chat_template"] = kLlama3ChatTemplate;
  c["clean_up_tokenization_spaces"] = true;
  c["eos_token"] = "<|end_of_text|>";
  c["model_input_names"] = {"input_ids", "attention_mask"};
  c["model_max_length"] = 131072;
  c["tokenizer_class"] = "PreTrainedTokenizerFast";
  return c;
}

}  // namespace

GeneratedTokenizer generate_test_tokenizer(TokenizerFamily family, int64_t vocab_size, int max_merges) {
  const bool qwen = family == TokenizerFamily::kQwen2;
  const Vocabulary v = build_vocabulary(family, vocab_size, max_merges);
  GeneratedTokenizer out;
  out.size = v.size;

  // Appended directly: ordered_json's keyed insert searches linearly, quadratic for a 150k-token vocabulary.
  // The keys are distinct by construction.
  ojson vocab = ojson::object();
  auto& vocab_entries = vocab.get_ref<ojson::object_t&>();
  vocab_entries.reserve(v.regular.size() + v.specials.size());
  for (size_t i = 0; i < v.regular.size(); ++i) vocab_entries.emplace_back(v.regular[i], i);
  ojson added = ojson::array();
  ojson added_decoder = ojson::object();
  for (const auto& [id, content] : v.specials) {
    added.push_back(added_token(id, content));
    added_decoder[std::to_string(id)] = {{"content", content}, {"lstrip", false},      {"normalized", false},
                                         {"rstrip", false},    {"single_word", false}, {"special", true}};
    if (!qwen) vocab_entries.emplace_back(content, id);  // Llama 3 lists its specials in the vocabulary too
    out.special_ids[content] = static_cast<int32_t>(id);
  }
  ojson merge_list = ojson::array();
  for (const auto& [a, b] : v.merges) merge_list.push_back({a, b});

  ojson& t = out.tokenizer;
  t["version"] = "1.0";
  t["truncation"] = nullptr;
  t["padding"] = nullptr;
  t["added_tokens"] = added;
  t["normalizer"] = qwen ? ojson{{"type", "NFC"}} : ojson(nullptr);
  t["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers",
                         {{{"type", "Split"},
                           {"pattern", {{"Regex", qwen ? kQwenSplit : kLlama3Split}}},
                           {"behavior", "Isolated"},
                           {"invert", false}},
                          byte_level(false, !qwen, false)}}};
  t["post_processor"] = post_processor(qwen, v.base);
  t["decoder"] = qwen ? byte_level(false, false, false) : byte_level(true, true, true);
  t["model"] = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", nullptr},
                {"continuing_subword_prefix", ""},
                {"end_of_word_suffix", ""},
                {"fuse_unk", false},
                {"byte_fallback", false},
                {"ignore_merges", !qwen},
                {"vocab", vocab},
                {"merges", merge_list}};
  out.config = tokenizer_config(qwen, added_decoder);
  return out;
}

}  // namespace minfer
