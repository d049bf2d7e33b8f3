#include "tokenizer/sentencepiece_bpe.h"

#include <algorithm>
#include <cstdio>
#include <queue>
#include <string>

#include "tokenizer/unicode.h"

namespace minfer {

namespace {

constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";  // U+2581 "▁"
constexpr size_t kMaxCachedWords = 1 << 16;
constexpr size_t kMaxCachedWordBytes = 256;

// "<0xAB>" -> 0xAB, or -1.
int parse_byte_token(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  int value = 0;
  for (size_t i = 3; i < 5; ++i) {
    const char c = text[i];
    int digit = -1;
    if (c >= '0' && c <= '9') digit = c - '0';
    if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
    if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}

std::vector<std::string> sentencepiece_token_bytes(const Vocab& vocab) {
  std::vector<std::string> bytes(vocab.tokens.size());
  for (size_t i = 0; i < vocab.tokens.size(); ++i) {
    const Vocab::Token& t = vocab.tokens[i];
    if (t.type == TokenType::kByte) {
      const int b = parse_byte_token(t.text);
      bytes[i] = b >= 0 ? std::string(1, static_cast<char>(b)) : t.text;
    } else if (t.type == TokenType::kNormal) {
      std::string& out = bytes[i];
      for (size_t pos = 0; pos < t.text.size();) {
        if (t.text.compare(pos, kSpaceSymbol.size(), kSpaceSymbol) == 0) {
          out += ' ';
          pos += kSpaceSymbol.size();
        } else {
          out += t.text[pos++];
        }
      }
    }
  }
  return bytes;
}

}  // namespace

SentencePieceBpe::SentencePieceBpe(Vocab vocab, SentencePieceBpeOptions options)
    : VocabTokenizer(std::move(vocab), sentencepiece_token_bytes,
                     options.space_prefix != SentencePieceBpeOptions::SpacePrefix::kNever),
      options_(options) {
  init();
}

SentencePieceBpe::SentencePieceBpe(Vocab vocab, const MergeList& merges, SentencePieceBpeOptions options)
    : VocabTokenizer(std::move(vocab), sentencepiece_token_bytes,
                     options.space_prefix != SentencePieceBpeOptions::SpacePrefix::kNever),
      options_(options),
      by_rank_(true) {
  init();
  merges_.reserve(merges.size());
  std::string joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    joined.assign(left).append(right);
    const int32_t l = piece_id(left);
    const int32_t r = piece_id(right);
    const int32_t result = piece_id(joined);
    if (l < 0 || r < 0 || result < 0) continue;
    merges_.try_emplace(l, r, {static_cast<int32_t>(rank), result});
  }
}

void SentencePieceBpe::init() {
  byte_ids_.assign(256, -1);
  const Vocab& v = vocab();
  splits_before_space_ = true;
  for (const Vocab::Token& t : v.tokens) {
    if (t.type != TokenType::kNormal && t.type != TokenType::kUserDefined) continue;
    for (size_t pos = t.text.find(kSpaceSymbol, 1); pos != std::string::npos;
         pos = t.text.find(kSpaceSymbol, pos + 1)) {
      if (pos < kSpaceSymbol.size() ||
          t.text.compare(pos - kSpaceSymbol.size(), kSpaceSymbol.size(), kSpaceSymbol) != 0) {
        splits_before_space_ = false;
      }
    }
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    int32_t id = v.find(name);
    // Vocabularies without byte pieces may still have the raw byte as a piece (llama.cpp's fallback).
    if (id < 0) id = piece_id(std::string(1, static_cast<char>(b)));
    byte_ids_[static_cast<size_t>(b)] = id;
  }
}

int32_t SentencePieceBpe::piece_id(std::string_view text) const {
  const int32_t id = vocab().find(text);
  if (id < 0) return -1;
  const TokenType t = vocab().type(id);
  return t == TokenType::kNormal || t == TokenType::kUserDefined ? id : -1;
}

void SentencePieceBpe::emit_piece(std::string_view text, int32_t id, bool& last_was_unk,
                                  std::vector<int32_t>& out) const {
  if (id >= 0) {
    out.push_back(id);
    last_was_unk = false;
    return;
  }
  // No piece for this character: its UTF-8 bytes as byte tokens, else <unk>.
  for (char c : text) {
    const int32_t b = byte_ids_[static_cast<unsigned char>(c)];
    if (b >= 0) {
      out.push_back(b);
      last_was_unk = false;
    } else if (vocab().unk >= 0) {
      if (!(options_.fuse_unk && last_was_unk)) out.push_back(vocab().unk);
      last_was_unk = true;
      break;  // one <unk> per character
    }
  }
}

void SentencePieceBpe::encode_text(std::string_view text, bool at_input_start, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  using SpacePrefix = SentencePieceBpeOptions::SpacePrefix;
  const bool prefix = options_.space_prefix == SpacePrefix::kEverySegment ||
                      (options_.space_prefix == SpacePrefix::kInputStart && at_input_start);
  std::string s;
  s.reserve(text.size() * 2 + 3);
  if (prefix) s += kSpaceSymbol;
  for (char c : text) {
    if (c == ' ') {
      s += kSpaceSymbol;
    } else {
      s += c;
    }
  }
  bool last_was_unk = false;
  const std::string_view sv = s;
  if (!options_.split_words && !splits_before_space_) {
    merge_word(sv, last_was_unk, out);
    return;
  }
  // Words start at a "▁": every one (HF's Metaspace split), or one after another character.
  size_t begin = 0;
  while (begin < sv.size()) {
    size_t end = sv.find(kSpaceSymbol, begin + 1);
    if (!options_.split_words) {
      while (end != std::string_view::npos && end >= kSpaceSymbol.size() &&
             sv.compare(end - kSpaceSymbol.size(), kSpaceSymbol.size(), kSpaceSymbol) == 0) {
        end = sv.find(kSpaceSymbol, end + 1);
      }
    }
    if (end == std::string_view::npos) end = sv.size();
    encode_word(sv.substr(begin, end - begin), last_was_unk, out);
    begin = end;
  }
}

void SentencePieceBpe::encode_word(std::string_view word, bool& last_was_unk, std::vector<int32_t>& out) const {
  if (word.size() > kMaxCachedWordBytes) {
    merge_word(word, last_was_unk, out);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    auto it = cache_.find(word);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      last_was_unk = false;  // words holding <unk> are not cached
      return;
    }
  }
  const size_t first = out.size();
  merge_word(word, last_was_unk, out);
  const int32_t unk = vocab().unk;
  if (unk >= 0 && std::find(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(), unk) != out.end()) return;
  std::lock_guard<std::mutex> lock(cache_mutex_);
  if (cache_.size() >= kMaxCachedWords) cache_.clear();
  cache_.emplace(std::string(word), std::vector<int32_t>(out.begin() + static_cast<std::ptrdiff_t>(first), out.end()));
}

void SentencePieceBpe::merge_word(std::string_view s, bool& last_was_unk, std::vector<int32_t>& out) const {
  // Symbols are contiguous slices of s, so a merged symbol's text is a slice too and needs no copy.
  struct Symbol {
    uint32_t start;
    uint32_t len;  // 0: merged into its left neighbour
    int32_t prev;
    int32_t next;
    int32_t id;  // by-rank mode: the symbol's token, or -1
  };
  struct Candidate {
    double priority;  // higher first: the merged piece's score, or minus the merge rank
    int32_t left;
    int32_t right;
    uint32_t len;
    int32_t result;
    bool operator<(const Candidate& o) const { return priority != o.priority ? priority < o.priority : left > o.left; }
  };
  std::vector<Symbol> symbols;
  symbols.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    const size_t n = std::min(unicode::utf8_length(static_cast<uint8_t>(s[pos])), s.size() - pos);
    const auto index = static_cast<int32_t>(symbols.size());
    const int32_t id = by_rank_ ? piece_id(s.substr(pos, n)) : -1;
    symbols.push_back({static_cast<uint32_t>(pos), static_cast<uint32_t>(n), index - 1, -1, id});
    if (index > 0) symbols[static_cast<size_t>(index - 1)].next = index;
    pos += n;
  }
  const std::string_view sv = s;
  auto slice = [&](const Symbol& sym, uint32_t len) { return sv.substr(sym.start, len); };

  std::priority_queue<Candidate> heap;
  auto consider = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[static_cast<size_t>(left)];
    const Symbol& r = symbols[static_cast<size_t>(right)];
    const uint32_t len = l.len + r.len;
    if (by_rank_) {
      if (l.id < 0 || r.id < 0) return;
      const MergeTable::Merge* m = merges_.find(l.id, r.id);
      if (m == nullptr) return;
      heap.push({-static_cast<double>(m->rank), left, right, len, m->result});
    } else {
      const int32_t id = piece_id(slice(l, len));
      if (id < 0) return;
      heap.push({static_cast<double>(vocab().tokens[static_cast<size_t>(id)].score), left, right, len, id});
    }
  };
  for (size_t i = 1; i < symbols.size(); ++i) consider(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));

  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    Symbol& l = symbols[static_cast<size_t>(c.left)];
    Symbol& r = symbols[static_cast<size_t>(c.right)];
    // Stale if either side was merged since (lengths changed or the pair is no longer adjacent).
    if (l.len == 0 || r.len == 0 || l.next != c.right || l.len + r.len != c.len) continue;
    l.len += r.len;
    l.id = c.result;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[static_cast<size_t>(r.next)].prev = c.left;
    consider(l.prev, c.left);
    consider(c.left, l.next);
  }

  for (int32_t i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next) {
    const Symbol& sym = symbols[static_cast<size_t>(i)];
    const std::string_view piece = slice(sym, sym.len);
    emit_piece(piece, by_rank_ ? sym.id : piece_id(piece), last_was_unk, out);
  }
}

}  // namespace minfer
