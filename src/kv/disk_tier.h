// The disk tier of the KV cache (--kv-cache-dir DIR --kv-cache-dir-size SIZE): one file a page, under a folder named
// by the model's identity (model_identity.h), so it outlives the process and another model or KV type never reads it.
//
//   DIR/<identity hex>/<content key hex>.kv   header (magic, version, identity, key, token count, payload size and
//                                             checksum, header checksum), the page's token ids, the page's KV
//
// Writes are atomic (a temporary file renamed into place), so a crash leaves whole entries or temporary files, which
// the next start removes. Every read checks the sizes, the identity, the key, the tokens and both checksums: a torn,
// truncated or corrupt file is removed and counted, never used. The folder is bounded by size, least recently used
// first (across every identity in it: file modification times carry the order over restarts). A write that fails
// for want of space or permission turns the tier off with one warning; the engine keeps serving from the pool.
//
// Thread-safe: the step thread asks contains(), the tiers' worker reads and writes.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <list>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/content_key.h"

namespace minfer {

struct DiskTierStats {
  int64_t entries = 0;  // of this model
  int64_t bytes = 0;    // of every entry in the folder
  int64_t corrupt_removed = 0;
  int64_t write_errors = 0;
  int64_t evictions = 0;
  bool enabled = false;
};

enum class TierRead : uint8_t { kOk, kMissing, kCorrupt };

class DiskTier {
 public:
  // Scans `dir` (creating it when absent) and removes what crashed writers left; turns itself off with a warning
  // when the folder cannot be used.
  DiskTier(std::filesystem::path dir, int64_t max_bytes, const ContentKey& identity);

  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }
  bool contains(const ContentKey& key) const;
  // Stores a page unless present (true: a file was written). Called by one thread at a time.
  bool write(const ContentKey& key, std::span<const int32_t> tokens, std::span<const unsigned char> payload);
  // Reads a page into `payload` (payload_bytes expected) when its file is whole and holds these tokens.
  TierRead read(const ContentKey& key, std::span<const int32_t> tokens, int64_t payload_bytes,
                std::vector<unsigned char>& payload);
  DiskTierStats stats() const;
  const std::filesystem::path& folder() const { return model_dir_; }

 private:
  struct Entry {
    std::filesystem::path path;
    int64_t bytes = 0;
    ContentKey key;     // empty for another model's entries
    bool ours = false;  // this model's (in index_)
  };
  void scan();
  void add_entry(Entry e);                   // at the most recently used end; evicts past max_bytes_
  void remove_entry(const ContentKey& key);  // a corrupt entry: its file is already gone
  void turn_off(const std::string& why);
  std::filesystem::path path_of(const ContentKey& key) const;

  std::filesystem::path root_, model_dir_;
  int64_t max_bytes_ = 0;
  ContentKey identity_;
  std::atomic<bool> enabled_{false};
  std::atomic<bool> warned_{false};  // the one warning given
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // front: least recently used
  std::unordered_map<ContentKey, std::list<Entry>::iterator, ContentKeyHash> index_;
  int64_t total_bytes_ = 0;
  DiskTierStats counts_;
  uint64_t tmp_serial_ = 0;
};

}  // namespace minfer
