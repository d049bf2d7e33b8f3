#include "tokenizer/vocab.h"

#include <algorithm>
#include <cctype>

namespace minfer {

namespace {

bool is_matched_in_text(TokenType type) {
  return type == TokenType::kControl || type == TokenType::kUnknown || type == TokenType::kUserDefined;
}

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

}  // namespace

void Vocab::build_index() {
  index_.reset(tokens.size());
  for (auto& bucket : special_by_first_byte_) bucket.clear();
  for (size_t i = 0; i < tokens.size(); ++i) {
    const Token& t = tokens[i];
    const auto id = static_cast<int32_t>(i);
    if (!t.text.empty()) {
      index_.insert(t.text, id, [&](int32_t other) { return tokens[static_cast<size_t>(other)].text == t.text; });
    }
    if (!t.text.empty() && is_matched_in_text(t.type)) {
      special_by_first_byte_[static_cast<unsigned char>(t.text[0])].push_back(id);
    }
  }
  for (auto& bucket : special_by_first_byte_) {
    std::stable_sort(bucket.begin(), bucket.end(), [&](int32_t a, int32_t b) {
      return tokens[static_cast<size_t>(a)].text.size() > tokens[static_cast<size_t>(b)].text.size();
    });
  }
  indexed_ = true;
}

void Vocab::finalize() {
  if (!indexed_) build_index();

  // Chat models end a turn with a token other than the configured EOS (llama.cpp's end-of-generation list);
  // a generation loop must stop on any of them.
  static constexpr std::string_view kEndOfGeneration[] = {"<|eot_id|>",
                                                          "<|im_end|>",
                                                          "<|end|>",
                                                          "<end_of_turn>",
                                                          "<|endoftext|>",
                                                          "<|eom_id|>",
                                                          "<EOT>",
                                                          "<\xEF\xBD\x9C"
                                                          "end\xE2\x96\x81"
                                                          "of\xE2\x96\x81"
                                                          "sentence\xEF\xBD\x9C>" /* DeepSeek */};
  for (std::string_view text : kEndOfGeneration) {
    const int32_t id = find(text);
    if (id >= 0 && type(id) == TokenType::kControl && std::find(eos.begin(), eos.end(), id) == eos.end()) {
      eos.push_back(id);
    }
  }
}

std::vector<Vocab::Fragment> Vocab::split_special(std::string_view text, bool parse_special) const {
  std::vector<Fragment> out;
  size_t plain_begin = 0;  // start of the plain text not yet emitted
  size_t pos = 0;
  bool skip_leading_space = false;  // the previous token has rstrip
  while (pos < text.size()) {
    if (skip_leading_space) {
      if (pos == plain_begin && is_space(text[pos])) {
        ++pos;
        ++plain_begin;
        continue;
      }
      skip_leading_space = false;
    }
    int32_t match = -1;
    for (int32_t id : special_by_first_byte_[static_cast<unsigned char>(text[pos])]) {
      const Token& t = tokens[static_cast<size_t>(id)];
      if (!parse_special && t.type != TokenType::kUserDefined) continue;
      if (text.compare(pos, t.text.size(), t.text) == 0) {
        match = id;
        break;
      }
    }
    if (match < 0) {
      ++pos;
      continue;
    }
    const Token& t = tokens[static_cast<size_t>(match)];
    std::string_view plain = text.substr(plain_begin, pos - plain_begin);
    if (t.lstrip) {
      while (!plain.empty() && is_space(plain.back())) plain.remove_suffix(1);
    }
    if (!plain.empty()) out.push_back({plain, -1});
    out.push_back({text.substr(pos, t.text.size()), match});
    pos += t.text.size();
    plain_begin = pos;
    skip_leading_space = t.rstrip;
  }
  if (plain_begin < text.size()) out.push_back({text.substr(plain_begin), -1});
  return out;
}

}  // namespace minfer
