#include "tokenizer/byte_level_bpe.h"

#include <queue>
#include <string>

#include "tokenizer/unicode.h"

namespace minfer {

namespace {

// A normal token's text is GPT-2 stand-in characters; its bytes are what they stand for. A text with a
// character outside the table (possible in hand-made vocabularies) is taken as raw bytes, as HF does.
std::vector<std::string> byte_level_token_bytes(const Vocab& vocab) {
  std::vector<std::string> bytes(vocab.tokens.size());
  for (size_t i = 0; i < vocab.tokens.size(); ++i) {
    const Vocab::Token& t = vocab.tokens[i];
    if (t.type != TokenType::kNormal && t.type != TokenType::kByte) continue;
    std::string& b = bytes[i];
    b.reserve(t.text.size());
    for (size_t pos = 0; pos < t.text.size();) {
      const int byte = unicode::byte_level_byte(unicode::next_codepoint(t.text, pos));
      if (byte < 0) {
        b = t.text;
        break;
      }
      b += static_cast<char>(byte);
    }
  }
  return bytes;
}

constexpr size_t kMaxCachedWords = 1 << 16;
constexpr size_t kMaxCachedWordBytes = 256;

}  // namespace

ByteLevelBpe::ByteLevelBpe(Vocab vocab, const std::vector<std::pair<std::string_view, std::string_view>>& merges,
                           ByteLevelBpeOptions options)
    : VocabTokenizer(std::move(vocab), byte_level_token_bytes, /*strip_first_space=*/false),
      options_(std::move(options)),
      byte_ids_(256, -1) {
  const Vocab& v = this->vocab();
  const auto& table = unicode::byte_level_table();
  for (int b = 0; b < 256; ++b) byte_ids_[static_cast<size_t>(b)] = v.find(table.byte_to_utf8[static_cast<size_t>(b)]);

  merges_.reserve(merges.size());
  std::string joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    const int32_t l = v.find(left);
    const int32_t r = v.find(right);
    joined.assign(left).append(right);
    const int32_t result = v.find(joined);
    if (l < 0 || r < 0 || result < 0) continue;
    // The first (lowest-rank) listing of a pair wins.
    merges_.try_emplace(l, r, {static_cast<int32_t>(rank), result});
  }
}

void ByteLevelBpe::encode_text(std::string_view text, bool /*at_input_start*/, std::vector<int32_t>& out) const {
  std::string prefixed;
  if (options_.add_prefix_space && !text.empty() && text.front() != ' ') {
    prefixed.reserve(text.size() + 1);
    prefixed.append(" ").append(text);
    text = prefixed;
  }
  if (options_.pre_tokenizer.empty()) {
    encode_word(text, out);
    return;
  }
  for (std::string_view word : options_.pre_tokenizer.split(text)) encode_word(word, out);
}

void ByteLevelBpe::push_id(int32_t id, std::vector<int32_t>& out) const {
  if (id >= 0) {
    out.push_back(id);
  } else if (vocab().unk >= 0) {
    out.push_back(vocab().unk);
  }
  // else: a byte the vocabulary cannot express is dropped, as llama.cpp does.
}

void ByteLevelBpe::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (word.size() == 1) {
    push_id(byte_ids_[static_cast<unsigned char>(word[0])], out);
    return;
  }
  if (word.size() > kMaxCachedWordBytes) {  // long runs (base64, minified code) rarely repeat
    merge_word(word, out);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    auto it = cache_.find(word);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> ids;
  merge_word(word, ids);
  out.insert(out.end(), ids.begin(), ids.end());
  std::lock_guard<std::mutex> lock(cache_mutex_);
  if (cache_.size() >= kMaxCachedWords) cache_.clear();
  cache_.emplace(std::string(word), std::move(ids));
}

void ByteLevelBpe::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  if (options_.ignore_merges) {
    std::string mapped;
    const auto& table = unicode::byte_level_table();
    for (char c : word) mapped += table.byte_to_utf8[static_cast<unsigned char>(c)];
    const int32_t id = vocab().find(mapped);
    if (id >= 0 && vocab().type(id) == TokenType::kNormal) {
      out.push_back(id);
      return;
    }
  }

  // One symbol per byte in a linked list; a heap of candidate merges ordered by (rank, position) — the
  // lowest rank first, the leftmost among equals (HF's and llama.cpp's order). Stale entries are skipped.
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
  };
  struct Candidate {
    int32_t rank;
    int32_t left;
    int32_t left_id;
    int32_t right_id;
    int32_t result;
    bool operator<(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  const auto n = static_cast<int32_t>(word.size());
  std::vector<Symbol> symbols(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    symbols[static_cast<size_t>(i)] = {byte_ids_[static_cast<unsigned char>(word[static_cast<size_t>(i)])], i - 1,
                                       i + 1 < n ? i + 1 : -1};
  }
  std::priority_queue<Candidate> heap;
  auto consider = [&](int32_t left) {
    if (left < 0) return;
    const Symbol& l = symbols[static_cast<size_t>(left)];
    if (l.next < 0) return;
    const Symbol& r = symbols[static_cast<size_t>(l.next)];
    if (l.id < 0 || r.id < 0) return;
    if (const MergeTable::Merge* m = merges_.find(l.id, r.id)) heap.push({m->rank, left, l.id, r.id, m->result});
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i);

  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    Symbol& l = symbols[static_cast<size_t>(c.left)];
    if (l.id != c.left_id || l.next < 0) continue;  // the left symbol was merged away or changed
    Symbol& r = symbols[static_cast<size_t>(l.next)];
    if (r.id != c.right_id) continue;
    l.id = c.result;
    r.id = -2;  // dead
    l.next = r.next;
    if (r.next >= 0) symbols[static_cast<size_t>(r.next)].prev = c.left;
    consider(l.prev);
    consider(c.left);
  }
  for (int32_t i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next)
    push_id(symbols[static_cast<size_t>(i)].id, out);
}

}  // namespace minfer
