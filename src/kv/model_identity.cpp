#include "kv/model_identity.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <vector>

#include "base/error.h"

namespace minfer {
namespace fs = std::filesystem;

namespace {

std::vector<fs::path> weight_files(const fs::path& model) {
  std::vector<fs::path> files;
  if (!fs::is_directory(model)) return {model};
  for (const fs::directory_entry& e : fs::directory_iterator(model)) {
    const std::string ext = e.path().extension().string();
    if (e.is_regular_file() && (ext == ".safetensors" || ext == ".bin" || ext == ".gguf" || ext == ".json"))
      files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

void hash_file(XXH3_state_t& st, const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("{}: cannot open to checksum the weights for the KV tiers", path.string());
  struct stat sb {};
  ::fstat(fd, &sb);
  const auto size = static_cast<size_t>(sb.st_size);
  if (size > 0) {
    void* data = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (data == MAP_FAILED) {
      ::close(fd);
      fail("{}: cannot map to checksum the weights for the KV tiers", path.string());
    }
    ::madvise(data, size, MADV_SEQUENTIAL);
    XXH3_128bits_update(&st, data, size);
    ::munmap(data, size);
  }
  ::close(fd);
}

// What the memo is keyed by: names, sizes, modification times and inodes of the files.
uint64_t files_stamp(const std::vector<fs::path>& files) {
  XXH3_state_t st;
  XXH3_64bits_reset(&st);
  for (const fs::path& f : files) {
    struct stat sb {};
    ::stat(f.c_str(), &sb);
    const std::string name = fs::absolute(f).string();
    const int64_t fields[4] = {sb.st_size, sb.st_mtim.tv_sec, sb.st_mtim.tv_nsec, static_cast<int64_t>(sb.st_ino)};
    XXH3_64bits_update(&st, name.data(), name.size() + 1);
    XXH3_64bits_update(&st, fields, sizeof fields);
  }
  return XXH3_64bits_digest(&st);
}

ContentKey weights_checksum(const std::string& model_path, const fs::path& memo_dir) {
  const std::vector<fs::path> files = weight_files(model_path);
  const fs::path memo = memo_dir.empty() ? fs::path() : memo_dir / fmt::format(".weights-{:016x}", files_stamp(files));
  if (!memo.empty()) {
    std::ifstream in(memo);
    std::string hex;
    if (in >> hex)
      if (const std::optional<ContentKey> remembered = ContentKey::from_hex(hex)) return *remembered;
  }
  const auto start = std::chrono::steady_clock::now();
  XXH3_state_t st;
  XXH3_128bits_reset(&st);
  for (const fs::path& f : files) {
    const std::string name = f.filename().string();
    XXH3_128bits_update(&st, name.data(), name.size() + 1);
    hash_file(st, f);
  }
  const XXH128_hash_t h = XXH3_128bits_digest(&st);
  const ContentKey sum{h.high64, h.low64};
  spdlog::info("KV tiers: weights checksum {} ({} files, {:.2f} s)", sum.hex(), files.size(),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  if (!memo.empty()) {
    std::error_code ec;
    fs::create_directories(memo_dir, ec);
    const fs::path tmp = memo.string() + fmt::format(".{}.tmp", ::getpid());
    std::ofstream(tmp) << sum.hex() << "\n";
    fs::rename(tmp, memo, ec);
    if (ec) fs::remove(tmp, ec);
  }
  return sum;
}

}  // namespace

ContentKey model_identity(const std::string& model_path, const std::string& settings, const fs::path& memo_dir) {
  const ContentKey weights = weights_checksum(model_path, memo_dir);
  XXH3_state_t st;
  XXH3_128bits_reset(&st);
  const uint64_t w[2] = {weights.hi, weights.lo};
  XXH3_128bits_update(&st, w, sizeof w);
  XXH3_128bits_update(&st, settings.data(), settings.size());
  const XXH128_hash_t h = XXH3_128bits_digest(&st);
  return ContentKey{h.high64, h.low64};
}

}  // namespace minfer
