// Pre-tokenization: splits text into the words BPE runs on, with a chain of PCRE2 regexes. Each regex splits
// every piece the previous one produced into matches and the text between them (llama.cpp's
// unicode_regex_split and HF's Split pre-tokenizer with behavior "Isolated"), so pieces never cross a boundary
// an earlier regex drew.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace minfer {

class PreTokenizer {
 public:
  // What happens to a match (HF's SplitDelimiterBehavior; llama.cpp always isolates).
  enum class Behavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext };
  // How ^ and $ behave: llama.cpp's std::regex (end of text only) or HF's Oniguruma (ends of lines).
  enum class Anchors { kText, kLines };

  PreTokenizer();
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&);
  PreTokenizer& operator=(const PreTokenizer&);
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;

  // Compiles the pattern (UTF + Unicode properties, JIT); throws Error with PCRE2's message if it is invalid.
  void add_regex(const std::string& pattern, Behavior behavior = Behavior::kIsolated, Anchors anchors = Anchors::kText);
  bool empty() const { return steps_.empty(); }

  // The pieces of text, in order, as views into it. text must be valid UTF-8.
  std::vector<std::string_view> split(std::string_view text) const;

 private:
  struct Regex;
  std::vector<std::shared_ptr<const Regex>> steps_;  // compiled code is immutable, so copies share it
};

// GPT-2's pre-split regex (also HF's ByteLevel pre-tokenizer with use_regex = true).
const std::string& gpt2_regex();

// What llama.cpp does for a GGUF tokenizer.ggml.pre value: the regexes (exactly llama.cpp's), and whether
// whole words found in the vocabulary skip the merges (ignore_merges) and BOS is added by default.
struct GgufPreTokenizerSpec {
  std::vector<std::string> regexes;
  bool ignore_merges = false;
  bool add_bos = false;
};
// nullopt for a name llama.cpp does not know; "" and "default" give llama.cpp's default regexes.
std::optional<GgufPreTokenizerSpec> gguf_pre_tokenizer_spec(std::string_view pre);

}  // namespace minfer
