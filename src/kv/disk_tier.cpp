#include "kv/disk_tier.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>

namespace minfer {
namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'M', 'I', 'N', 'F', 'K', 'V', 'P', '1'};
constexpr uint32_t kVersion = 1;

// Native byte order: a folder is read by the machine (and build) that wrote it; the identity names the build.
struct FileHeader {
  char magic[8];
  uint32_t version;
  uint32_t num_tokens;
  uint64_t payload_bytes;
  uint64_t identity_hi, identity_lo, key_hi, key_lo;
  uint64_t payload_checksum;  // XXH3-64 of the payload
  uint64_t header_checksum;   // XXH3-64 of the fields above and the tokens
};

uint64_t header_checksum(const FileHeader& h, std::span<const int32_t> tokens) {
  XXH3_state_t st;
  XXH3_64bits_reset(&st);
  XXH3_64bits_update(&st, &h, offsetof(FileHeader, header_checksum));
  XXH3_64bits_update(&st, tokens.data(), tokens.size_bytes());
  return XXH3_64bits_digest(&st);
}

bool write_all(int fd, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w, n -= static_cast<size_t>(w);
  }
  return true;
}

bool read_all(int fd, void* data, size_t n) {
  auto* p = static_cast<unsigned char*>(data);
  while (n > 0) {
    const ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r, n -= static_cast<size_t>(r);
  }
  return true;
}

// A temporary file of a writer that is gone: ".<key>.<pid>.<serial>.tmp".
bool orphan_tmp(const fs::path& p) {
  const std::string name = p.filename().string();
  if (name.size() < 5 || name.compare(name.size() - 4, 4, ".tmp") != 0) return false;
  const size_t a = name.find('.', 1);
  const size_t b = a == std::string::npos ? a : name.find('.', a + 1);
  if (b == std::string::npos) return true;
  const long pid = std::strtol(name.c_str() + a + 1, nullptr, 10);
  return pid <= 0 || pid == ::getpid() || (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH);
}

}  // namespace

std::string ContentKey::hex() const { return fmt::format("{:016x}{:016x}", hi, lo); }

std::optional<ContentKey> ContentKey::from_hex(std::string_view hex) {
  if (hex.size() != 32) return std::nullopt;
  const std::string digits(hex);
  return ContentKey{std::strtoull(digits.substr(0, 16).c_str(), nullptr, 16),
                    std::strtoull(digits.substr(16).c_str(), nullptr, 16)};
}

DiskTier::DiskTier(fs::path dir, int64_t max_bytes, const ContentKey& identity)
    : root_(std::move(dir)), max_bytes_(max_bytes), identity_(identity) {
  model_dir_ = root_ / identity.hex();
  std::error_code ec;
  fs::create_directories(model_dir_, ec);
  if (ec) {
    turn_off(fmt::format("cannot create {}: {}", model_dir_.string(), ec.message()));
    return;
  }
  if (::access(model_dir_.c_str(), W_OK | X_OK) != 0) {
    turn_off(fmt::format("{} is not writable: {}", model_dir_.string(), std::strerror(errno)));
    return;
  }
  enabled_ = true;
  scan();
  spdlog::info("KV disk tier: {} ({} entries of this model, {} MiB of {} MiB used)", model_dir_.string(), index_.size(),
               total_bytes_ >> 20, max_bytes_ >> 20);
}

// Every entry in the folder, oldest first; temporary files of dead writers removed; then the size bound applied.
void DiskTier::scan() {
  struct Found {
    Entry entry;
    fs::file_time_type mtime;
  };
  std::vector<Found> found;
  std::error_code ec;
  for (const fs::directory_entry& sub : fs::directory_iterator(root_, ec)) {
    if (!sub.is_directory(ec)) continue;
    const bool ours = sub.path() == model_dir_;
    for (const fs::directory_entry& f : fs::directory_iterator(sub.path(), ec)) {
      if (!f.is_regular_file(ec)) continue;
      const fs::path& p = f.path();
      if (orphan_tmp(p)) {
        fs::remove(p, ec);
        continue;
      }
      if (p.extension() != ".kv") continue;
      Entry e{p, static_cast<int64_t>(f.file_size(ec)), {}, ours};
      const std::optional<ContentKey> key = ContentKey::from_hex(p.stem().string());
      if (ours && key)
        e.key = *key;
      else
        e.ours = false;
      found.push_back({std::move(e), f.last_write_time(ec)});
    }
  }
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) { return a.mtime < b.mtime; });
  std::lock_guard lock(mu_);
  for (Found& f : found) add_entry(std::move(f.entry));
}

fs::path DiskTier::path_of(const ContentKey& key) const { return model_dir_ / (key.hex() + ".kv"); }

bool DiskTier::contains(const ContentKey& key) const {
  std::lock_guard lock(mu_);
  return index_.count(key) != 0;
}

void DiskTier::add_entry(Entry e) {
  total_bytes_ += e.bytes;
  lru_.push_back(std::move(e));
  if (lru_.back().ours) index_[lru_.back().key] = std::prev(lru_.end());
  while (total_bytes_ > max_bytes_ && !lru_.empty()) {
    Entry& old = lru_.front();
    std::error_code ec;
    fs::remove(old.path, ec);
    total_bytes_ -= old.bytes;
    if (old.ours) index_.erase(old.key);
    lru_.pop_front();
    ++counts_.evictions;
  }
}

void DiskTier::remove_entry(const ContentKey& key) {
  std::lock_guard lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return;
  total_bytes_ -= it->second->bytes;
  lru_.erase(it->second);
  index_.erase(it);
}

void DiskTier::turn_off(const std::string& why) {
  enabled_ = false;
  if (!warned_.exchange(true))
    spdlog::warn("KV disk tier off: {}; serving goes on from the pool and the RAM tier", why);
}

bool DiskTier::write(const ContentKey& key, std::span<const int32_t> tokens, std::span<const unsigned char> payload) {
  if (!enabled() || contains(key)) return false;
  FileHeader h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kVersion;
  h.num_tokens = static_cast<uint32_t>(tokens.size());
  h.payload_bytes = payload.size();
  h.identity_hi = identity_.hi, h.identity_lo = identity_.lo, h.key_hi = key.hi, h.key_lo = key.lo;
  h.payload_checksum = XXH3_64bits(payload.data(), payload.size());
  h.header_checksum = header_checksum(h, tokens);
  const fs::path tmp = model_dir_ / fmt::format(".{}.{}.{}.tmp", key.hex(), ::getpid(), tmp_serial_++);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  bool ok = fd >= 0 && write_all(fd, &h, sizeof h) && write_all(fd, tokens.data(), tokens.size_bytes()) &&
            write_all(fd, payload.data(), payload.size());
  int err = ok ? 0 : errno;
  if (fd >= 0 && ::close(fd) != 0 && ok) ok = false, err = errno;
  if (ok && std::rename(tmp.c_str(), path_of(key).c_str()) != 0) ok = false, err = errno;
  if (ok) {
    std::lock_guard lock(mu_);
    add_entry(Entry{path_of(key), static_cast<int64_t>(sizeof h + tokens.size_bytes() + payload.size()), key, true});
    return true;
  }
  ::unlink(tmp.c_str());
  {
    std::lock_guard lock(mu_);
    ++counts_.write_errors;
  }
  turn_off(fmt::format("writing {} failed: {}", tmp.string(), std::strerror(err)));
  return false;
}

TierRead DiskTier::read(const ContentKey& key, std::span<const int32_t> tokens, int64_t payload_bytes,
                        std::vector<unsigned char>& payload) {
  if (!contains(key)) return TierRead::kMissing;
  const fs::path path = path_of(key);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    remove_entry(key);  // removed behind our back
    return TierRead::kMissing;
  }
  FileHeader h{};
  std::vector<int32_t> stored;
  struct stat st {};
  bool ok = ::fstat(fd, &st) == 0 && read_all(fd, &h, sizeof h) && std::memcmp(h.magic, kMagic, sizeof kMagic) == 0 &&
            h.version == kVersion && h.num_tokens == tokens.size() &&
            h.payload_bytes == static_cast<uint64_t>(payload_bytes) &&
            static_cast<uint64_t>(st.st_size) == sizeof h + tokens.size_bytes() + h.payload_bytes &&
            h.identity_hi == identity_.hi && h.identity_lo == identity_.lo && h.key_hi == key.hi && h.key_lo == key.lo;
  if (ok) {
    stored.resize(tokens.size());
    payload.resize(static_cast<size_t>(payload_bytes));
    ok = read_all(fd, stored.data(), stored.size() * sizeof(int32_t)) &&
         header_checksum(h, stored) == h.header_checksum && read_all(fd, payload.data(), payload.size()) &&
         XXH3_64bits(payload.data(), payload.size()) == h.payload_checksum;
  }
  ::close(fd);
  if (!ok) {
    std::error_code ec;
    fs::remove(path, ec);
    remove_entry(key);
    std::lock_guard lock(mu_);
    ++counts_.corrupt_removed;
    spdlog::warn("KV disk tier: {} is torn or corrupt: removed, not used", path.string());
    return TierRead::kCorrupt;
  }
  if (!std::equal(tokens.begin(), tokens.end(), stored.begin())) return TierRead::kMissing;  // another prefix
  ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // most recently used, also for the next start's order
  std::lock_guard lock(mu_);
  if (auto it = index_.find(key); it != index_.end()) lru_.splice(lru_.end(), lru_, it->second);
  return TierRead::kOk;
}

DiskTierStats DiskTier::stats() const {
  std::lock_guard lock(mu_);
  DiskTierStats s = counts_;
  s.entries = static_cast<int64_t>(index_.size());
  s.bytes = total_bytes_;
  s.enabled = enabled();
  return s;
}

}  // namespace minfer
