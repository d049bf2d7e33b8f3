#include "tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <utility>

#include "base/error.h"
#include "tokenizer/unicode.h"

namespace minfer {

struct PreTokenizer::Regex {
  pcre2_code* code = nullptr;
  Behavior behavior = Behavior::kIsolated;
  std::string pattern;
  Regex() = default;
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  ~Regex() { pcre2_code_free(code); }
};

PreTokenizer::PreTokenizer() = default;
PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(const PreTokenizer&) = default;
PreTokenizer& PreTokenizer::operator=(const PreTokenizer&) = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

void PreTokenizer::add_regex(const std::string& pattern, Behavior behavior, Anchors anchors) {
  auto regex = std::make_shared<Regex>();
  regex->behavior = behavior;
  regex->pattern = pattern;
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  // UCP makes \s, \d, \w and POSIX classes Unicode-aware, as in the Rust / Python regexes the patterns
  // come from.
  uint32_t options = PCRE2_UTF | PCRE2_UCP;
  options |= anchors == Anchors::kText ? PCRE2_DOLLAR_ENDONLY : PCRE2_MULTILINE;
  regex->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options, &error,
                              &error_offset, nullptr);
  if (regex->code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    fail("invalid pre-tokenizer regex '{}' at offset {}: {}", pattern, error_offset,
         reinterpret_cast<const char*>(message));
  }
  // JIT makes matching several times faster; without it (unsupported CPU) the interpreter still works.
  pcre2_jit_compile(regex->code, PCRE2_JIT_COMPLETE);
  steps_.push_back(std::move(regex));
}

namespace {

struct MatchData {
  explicit MatchData(const pcre2_code* code) : data(pcre2_match_data_create_from_pattern(code, nullptr)) {}
  MatchData(const MatchData&) = delete;
  MatchData& operator=(const MatchData&) = delete;
  ~MatchData() { pcre2_match_data_free(data); }
  pcre2_match_data* data;
};

// Finds the next non-empty match in piece at or after offset; false when there is none.
bool next_match(const pcre2_code* code, pcre2_match_data* md, std::string_view piece, size_t offset,
                const std::string& pattern, size_t* begin, size_t* end) {
  while (offset <= piece.size()) {
    const auto subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
    int rc = pcre2_match(code, subject, piece.size(), offset, PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      // The interpreter keeps its backtracking state on the heap, so it copes where the JIT stack did not.
      rc = pcre2_match(code, subject, piece.size(), offset, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, nullptr);
    }
    if (rc == PCRE2_ERROR_NOMATCH) return false;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof(message));
      fail("pre-tokenizer regex '{}' failed: {}", pattern, reinterpret_cast<const char*>(message));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    if (ov[1] > ov[0]) {
      *begin = ov[0];
      *end = ov[1];
      return true;
    }
    // An empty match splits nothing; look again one character further on.
    if (ov[0] >= piece.size()) return false;
    offset = ov[0] + unicode::utf8_length(static_cast<uint8_t>(piece[ov[0]]));
  }
  return false;
}

}  // namespace

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  if (text.empty()) return pieces;
  pieces.push_back(text);
  std::vector<std::string_view> next;
  for (const auto& step : steps_) {
    MatchData md(step->code);
    next.clear();
    for (std::string_view piece : pieces) {
      size_t last = 0;  // end of the previous match
      size_t begin = 0;
      size_t end = 0;
      bool pending_merge = false;  // kMergedWithNext: the last match waits for the text after it
      size_t pending_begin = 0;
      while (next_match(step->code, md.data, piece, last, step->pattern, &begin, &end)) {
        const std::string_view gap = piece.substr(last, begin - last);
        switch (step->behavior) {
          case Behavior::kIsolated:
            if (!gap.empty()) next.push_back(gap);
            next.push_back(piece.substr(begin, end - begin));
            break;
          case Behavior::kRemoved:
            if (!gap.empty()) next.push_back(gap);
            break;
          case Behavior::kMergedWithPrevious: next.push_back(piece.substr(last, end - last)); break;
          case Behavior::kMergedWithNext:
            if (pending_merge) {
              next.push_back(piece.substr(pending_begin, begin - pending_begin));
            } else if (!gap.empty()) {
              next.push_back(gap);
            }
            pending_merge = true;
            pending_begin = begin;
            break;
        }
        last = end;
      }
      if (pending_merge) {
        next.push_back(piece.substr(pending_begin));
      } else if (last < piece.size()) {
        next.push_back(piece.substr(last));
      }
    }
    pieces.swap(next);
  }
  return pieces;
}

const std::string& gpt2_regex() {
  static const std::string regex = R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)re";
  return regex;
}

namespace {

// llama.cpp's regexes per pre-tokenizer family (llama-vocab.cpp, llm_tokenizer_bpe). Kept verbatim so that
// GGUF files tokenize as llama.cpp (and the HF tokenizers they were converted from) do.
const char* const kLlama3 =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const char* const kQwen2 =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// Qwen3.5 / 3.6: Qwen2's regex, but a letter run also takes combining marks (\p{M}), so a base letter and its
// marks (Devanagari vowel signs, decomposed accents) stay one word; punctuation runs leave marks out to match.
const char* const kQwen35 =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const char* const kGpt2Words = R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))re";
const char* const kPoro = R"re( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{964}\x{6D4}\x{60C})]+)re";

std::vector<std::string> deepseek_llm_regexes() {
  return {
      R"re([\r\n])re",
      R"re(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)re",
      R"re(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)re",
      R"re(\s+$)re",
      R"re([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)re",
      R"re(\p{N}+)re",
  };
}

}  // namespace

std::optional<GgufPreTokenizerSpec> gguf_pre_tokenizer_spec(std::string_view pre) {
  auto is = [&](std::initializer_list<std::string_view> names) {
    for (auto n : names) {
      if (pre == n) return true;
    }
    return false;
  };
  GgufPreTokenizerSpec spec;
  if (pre.empty() || pre == "default") {
    spec.regexes = {R"re([\p{P}\$\+<=>\^~\|]+)re", kGpt2Words, R"re(\p{N}+)re", R"re([0-9][0-9][0-9])re"};
  } else if (is({"llama3", "llama-v3", "llama-bpe", "falcon3"})) {
    spec.regexes = {kLlama3};
    spec.ignore_merges = true;
    spec.add_bos = true;
  } else if (is({"dbrx", "smaug-bpe", "chatglm-bpe"})) {
    spec.regexes = {kLlama3};
  } else if (pre == "deepseek-llm") {
    spec.regexes = deepseek_llm_regexes();
  } else if (pre == "deepseek-v3") {
    spec.regexes = {
        R"re(\p{N}{1,3})re",
        R"re([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)re",
        R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re",
    };
  } else if (pre == "deepseek-coder") {
    spec.regexes = {R"re([\r\n])re", R"re(\s?\p{L}+)re", R"re(\s?\p{P}+)re",
                    R"re([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)re", R"re(\p{N})re"};
  } else if (pre == "falcon") {
    spec.regexes = {R"re([\p{P}\$\+<=>\^~\|`]+)re", kGpt2Words, R"re([0-9][0-9][0-9])re"};
  } else if (is({"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"})) {
    spec.regexes = {R"re(\p{N})re", kGpt2Words};
  } else if (is({"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v1-en", "jina-v2-es", "jina-v2-de",
                 "jina-v2-code", "roberta-bpe", "mpt", "olmo", "jais"})) {
    spec.regexes = {kGpt2Words};
  } else if (is({"qwen2", "stablelm2", "megrez"})) {
    spec.regexes = {kQwen2};
  } else if (pre == "qwen35") {
    spec.regexes = {kQwen35};
  } else if (is({"poro-chat", "bloom", "gpt3-finnish"})) {
    spec.regexes = {kPoro};
  } else if (pre == "viking") {
    spec.regexes = {kPoro, R"re(\p{N})re"};
  } else if (pre == "tekken") {
    spec.regexes = {
        R"re([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"};
    spec.ignore_merges = true;
    spec.add_bos = true;
  } else if (is({"gpt-4o", "llama4", "kanana2", "talkie"})) {
    // o200k (gpt-oss, GPT-4o) as llama.cpp writes its tokenizer.json regex: letters split into an upper-case run and
    // a lower-case one by look-aheads, contractions case-insensitive, digits in threes.
    spec.regexes = {
        R"re([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re"};
  } else if (pre == "chameleon") {
    spec.regexes = {R"re(<sentinel:[0-9]+>)re",    R"re((IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z)re",
                    R"re(([\t\n]|    |  ))re",     R"re(\p{N})re",
                    R"re([\p{P}!-/:-@\[-`{-~])re", kGpt2Words};
    spec.add_bos = true;
  } else {
    return std::nullopt;
  }
  return spec;
}

}  // namespace minfer
