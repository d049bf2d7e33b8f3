#include "formats/safetensors_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "base/error.h"

namespace minfer {
namespace {

std::string_view safetensors_dtype_name(DType d) {
  switch (d) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::I8: return "I8";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
    default: break;  // GGUF block types
  }
  fail("safetensors cannot store dtype {}", dtype_name(d));
}

// A POSIX file descriptor that closes itself; writes fail with the path and errno.
class OutFile {
 public:
  explicit OutFile(std::string path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) fail("{}: cannot create: {}", path_, std::strerror(errno));
  }
  OutFile(const OutFile&) = delete;
  OutFile& operator=(const OutFile&) = delete;
  ~OutFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  void write(const void* p, size_t n) {
    const auto* c = static_cast<const uint8_t*>(p);
    while (n > 0) {
      const ssize_t w = ::write(fd_, c, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) fail("{}: write failed: {}", path_, std::strerror(errno));
      c += w;
      n -= static_cast<size_t>(w);
    }
  }
  void truncate(uint64_t size) {
    if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) fail("{}: cannot extend: {}", path_, std::strerror(errno));
  }
  void close() {
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail("{}: close failed: {}", path_, std::strerror(errno));
  }

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace

int64_t SafetensorsEntry::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

SafetensorsEntry SafetensorsEntry::from_tensor(std::string name, const Tensor& tensor) {
  SafetensorsEntry e{std::move(name), tensor.dtype, tensor.shape, nullptr};
  const size_t elem = dtype_bytes(tensor.dtype, 1);
  e.fill = [tensor, elem](void* dst, int64_t first, int64_t count) {
    std::memcpy(dst, static_cast<const uint8_t*>(tensor.data) + static_cast<size_t>(first) * elem,
                static_cast<size_t>(count) * elem);
  };
  return e;
}

void write_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& entries,
                       const SafetensorsWriteOptions& options) {
  // Larger elements first keeps every tensor aligned to its element size without gaps (the format forbids holes).
  std::vector<const SafetensorsEntry*> order;
  for (const auto& e : entries) order.push_back(&e);
  std::stable_sort(order.begin(), order.end(), [](const SafetensorsEntry* a, const SafetensorsEntry* b) {
    const size_t ea = dtype_bytes(a->dtype, 1), eb = dtype_bytes(b->dtype, 1);
    return ea != eb ? ea > eb : a->name < b->name;
  });

  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!options.metadata.empty()) header["__metadata__"] = options.metadata;
  uint64_t offset = 0;
  for (const SafetensorsEntry* e : order) {
    if (header.contains(e->name)) fail("{}: duplicate tensor name '{}'", path, e->name);
    const uint64_t bytes = e->nbytes();
    header[e->name] = {
        {"dtype", safetensors_dtype_name(e->dtype)}, {"shape", e->shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((64 - (8 + text.size()) % 64) % 64, ' ');  // trailing spaces are allowed by the format
  const uint64_t header_len = text.size();

  OutFile out(path);
  out.write(&header_len, 8);
  out.write(text.data(), text.size());
  if (options.skip_data) {
    out.truncate(8 + header_len + offset);
  } else {
    std::vector<uint8_t> buffer;
    for (const SafetensorsEntry* e : order) {
      const int64_t n = e->numel();
      const size_t elem = dtype_bytes(e->dtype, 1);
      for (int64_t first = 0; first < n; first += SafetensorsEntry::kChunkElements) {
        const int64_t count = std::min<int64_t>(SafetensorsEntry::kChunkElements, n - first);
        buffer.resize(static_cast<size_t>(count) * elem);
        if (!e->fill) fail("{}: tensor '{}' has no data", path, e->name);
        e->fill(buffer.data(), first, count);
        out.write(buffer.data(), buffer.size());
      }
    }
  }
  out.close();
}

std::vector<std::string> write_safetensors_checkpoint(const std::string& dir,
                                                      const std::vector<SafetensorsEntry>& entries,
                                                      uint64_t shard_bytes, const SafetensorsWriteOptions& options) {
  if (shard_bytes == 0) {
    write_safetensors(dir + "/model.safetensors", entries, options);
    return {"model.safetensors"};
  }
  std::vector<std::vector<SafetensorsEntry>> shards;
  uint64_t current = 0, total = 0;
  for (const auto& e : entries) {
    const uint64_t bytes = e.nbytes();
    if (shards.empty() || (current > 0 && current + bytes > shard_bytes)) {
      shards.emplace_back();
      current = 0;
    }
    shards.back().push_back(e);
    current += bytes;
    total += bytes;
  }
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  std::vector<std::string> names;
  std::map<std::string, std::string> sorted_map;
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string name = fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, shards.size());
    write_safetensors(dir + "/" + name, shards[i], options);
    for (const auto& e : shards[i]) sorted_map[e.name] = name;
    names.push_back(name);
  }
  for (const auto& [tensor, file] : sorted_map) weight_map[tensor] = file;
  nlohmann::ordered_json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  const std::string text = index.dump(2) + "\n";
  OutFile out(dir + "/model.safetensors.index.json");
  out.write(text.data(), text.size());
  out.close();
  names.push_back("model.safetensors.index.json");
  return names;
}

}  // namespace minfer
