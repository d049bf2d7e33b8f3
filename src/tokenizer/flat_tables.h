// Open-addressing hash tables for the two big lookups of a tokenizer: token text -> id and merge pair ->
// (rank, result). One flat array each instead of a node per entry: a 150K vocabulary loads and encodes
// with a fraction of the allocations and cache misses of std::unordered_map.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

namespace minfer {

// Maps strings held elsewhere (text_of(id)) to ids; stores only (hash tag, id) per slot.
class TextIdTable {
 public:
  // Re-creates the table for up to `count` entries.
  void reset(size_t count) {
    size_t capacity = 16;
    while (capacity < count * 2) capacity *= 2;
    slots_.assign(capacity, 0);
    mask_ = capacity - 1;
  }
  // Inserts id for text; an existing equal text (same_text(existing_id)) is overwritten, so the last wins.
  template <typename SameText>
  void insert(std::string_view text, int32_t id, const SameText& same_text) {
    const uint64_t h = hash(text);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      uint64_t& slot = slots_[i];
      if (slot == 0 || (tag(slot) == tag_of(h) && same_text(id_of(slot)))) {
        slot = (tag_of(h) << 32) | (static_cast<uint64_t>(id) + 1);
        return;
      }
    }
  }
  // The id whose text (text_of(id)) equals text, or -1.
  template <typename TextOf>
  int32_t find(std::string_view text, const TextOf& text_of) const {
    if (slots_.empty()) return -1;
    const uint64_t h = hash(text);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const uint64_t slot = slots_[i];
      if (slot == 0) return -1;
      if (tag(slot) == tag_of(h) && text_of(id_of(slot)) == text) return id_of(slot);
    }
  }

 private:
  static uint64_t hash(std::string_view s) { return std::hash<std::string_view>{}(s); }
  static uint64_t tag_of(uint64_t h) { return h >> 32; }
  static uint64_t tag(uint64_t slot) { return slot >> 32; }
  static int32_t id_of(uint64_t slot) { return static_cast<int32_t>((slot & 0xFFFFFFFFu) - 1); }

  std::vector<uint64_t> slots_;  // (upper 32 hash bits << 32) | (id + 1); 0 = empty
  size_t mask_ = 0;
};

// BPE merges keyed by the (left id, right id) pair.
class MergeTable {
 public:
  struct Merge {
    int32_t rank;
    int32_t result;
  };

  void reserve(size_t count) {
    size_t capacity = 16;
    while (capacity < count * 2) capacity *= 2;
    entries_.assign(capacity, Entry{kEmpty, {0, 0}});
    mask_ = capacity - 1;
    size_ = 0;
  }
  size_t size() const { return size_; }
  // Keeps the first merge given for a pair (the lowest rank when added in rank order).
  void try_emplace(int32_t left, int32_t right, Merge merge) {
    if (entries_.empty() || (size_ + 1) * 2 > entries_.size()) grow();
    const uint64_t k = key(left, right);
    for (size_t i = mix(k) & mask_;; i = (i + 1) & mask_) {
      Entry& e = entries_[i];
      if (e.key == k) return;
      if (e.key == kEmpty) {
        e = Entry{k, merge};
        ++size_;
        return;
      }
    }
  }
  const Merge* find(int32_t left, int32_t right) const {
    if (entries_.empty()) return nullptr;
    const uint64_t k = key(left, right);
    for (size_t i = mix(k) & mask_;; i = (i + 1) & mask_) {
      const Entry& e = entries_[i];
      if (e.key == k) return &e.merge;
      if (e.key == kEmpty) return nullptr;
    }
  }

 private:
  struct Entry {
    uint64_t key;
    Merge merge;
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};  // ids are non-negative int32, so no real key is this
  static uint64_t key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  static uint64_t mix(uint64_t k) {  // splitmix64 finalizer: spreads both ids over the low bits
    k ^= k >> 30;
    k *= 0xBF58476D1CE4E5B9ull;
    k ^= k >> 27;
    k *= 0x94D049BB133111EBull;
    return k ^ (k >> 31);
  }
  void grow() {
    std::vector<Entry> old;
    old.swap(entries_);
    reserve(old.empty() ? 16 : old.size());
    for (const Entry& e : old) {
      if (e.key != kEmpty) {
        try_emplace(static_cast<int32_t>(e.key >> 32), static_cast<int32_t>(e.key & 0xFFFFFFFFu), e.merge);
      }
    }
  }

  std::vector<Entry> entries_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace minfer
