#include "formats/gguf_writer.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "base/error.h"

namespace minfer {
namespace {

constexpr uint32_t kVersion = 3;
constexpr size_t kAlignment = 32;  // GGUF's default; general.alignment is never written

template <typename T>
void append(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}

void append_string(std::string& out, std::string_view s) {
  append<uint64_t>(out, s.size());
  out.append(s);
}

template <typename T>
std::string encode_array(GgufType element, const std::vector<T>& values) {
  std::string out;
  append<uint32_t>(out, static_cast<uint32_t>(element));
  append<uint64_t>(out, values.size());
  for (const T& v : values) append<T>(out, v);
  return out;
}

size_t padding(size_t n) { return (kAlignment - n % kAlignment) % kAlignment; }

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

}  // namespace

void GgufWriter::set(std::string_view key, GgufType type, std::string encoded) {
  for (auto& [k, v] : metadata_) {
    if (k == key) {
      v = {type, std::move(encoded)};
      return;
    }
  }
  metadata_.emplace_back(std::string(key), std::make_pair(type, std::move(encoded)));
}

void GgufWriter::set_u32(std::string_view key, uint32_t value) {
  std::string e;
  append(e, value);
  set(key, GgufType::U32, std::move(e));
}
void GgufWriter::set_i32(std::string_view key, int32_t value) {
  std::string e;
  append(e, value);
  set(key, GgufType::I32, std::move(e));
}
void GgufWriter::set_f32(std::string_view key, float value) {
  std::string e;
  append(e, value);
  set(key, GgufType::F32, std::move(e));
}
void GgufWriter::set_bool(std::string_view key, bool value) {
  set(key, GgufType::BOOL, std::string(1, value ? '\1' : '\0'));
}
void GgufWriter::set_string(std::string_view key, std::string_view value) {
  std::string e;
  append_string(e, value);
  set(key, GgufType::STRING, std::move(e));
}
void GgufWriter::set_string_array(std::string_view key, const std::vector<std::string>& values) {
  std::string e;
  append<uint32_t>(e, static_cast<uint32_t>(GgufType::STRING));
  append<uint64_t>(e, values.size());
  for (const std::string& v : values) append_string(e, v);
  set(key, GgufType::ARRAY, std::move(e));
}
void GgufWriter::set_i32_array(std::string_view key, const std::vector<int32_t>& values) {
  set(key, GgufType::ARRAY, encode_array(GgufType::I32, values));
}
void GgufWriter::set_bool_array(std::string_view key, const std::vector<bool>& values) {
  set(key, GgufType::ARRAY, encode_array(GgufType::BOOL, std::vector<uint8_t>(values.begin(), values.end())));
}
void GgufWriter::set_f32_array(std::string_view key, const std::vector<float>& values) {
  set(key, GgufType::ARRAY, encode_array(GgufType::F32, values));
}
void GgufWriter::set_copy(std::string_view key, const GgufValue& value) {
  set(key, value.type, std::string(value.encoded));
}

void GgufWriter::remove(std::string_view key) {
  std::erase_if(metadata_, [&](const auto& kv) { return kv.first == key; });
}

bool GgufWriter::has(std::string_view key) const {
  for (const auto& kv : metadata_)
    if (kv.first == key) return true;
  return false;
}

size_t GgufWriter::add_tensor(std::string name, std::vector<int64_t> shape, DType dtype) {
  const auto id = ggml_type_of(dtype);
  if (!id) fail("GGUF tensor '{}': {} has no ggml type", name, dtype_name(dtype));
  if (shape.empty() || shape.size() > 4) fail("GGUF tensor '{}': rank {} (GGUF holds 1 to 4)", name, shape.size());
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  const int64_t block = dtype_block(dtype).elements;
  if (shape.back() % block != 0)
    fail("GGUF tensor '{}': rows of {} are not whole {} blocks of {}", name, shape.back(), dtype_name(dtype), block);
  tensors_.push_back({std::move(name), std::move(shape), *id, dtype_bytes(dtype, static_cast<size_t>(n))});
  return tensors_.size() - 1;
}

std::string GgufWriter::header() const {
  std::string h = "GGUF";
  append<uint32_t>(h, kVersion);
  append<uint64_t>(h, tensors_.size());
  append<uint64_t>(h, metadata_.size());
  for (const auto& [key, value] : metadata_) {
    append_string(h, key);
    append<uint32_t>(h, static_cast<uint32_t>(value.first));
    h += value.second;
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    append_string(h, t.name);
    append<uint32_t>(h, static_cast<uint32_t>(t.shape.size()));
    for (auto d = t.shape.rbegin(); d != t.shape.rend(); ++d) append<uint64_t>(h, static_cast<uint64_t>(*d));
    append<uint32_t>(h, t.ggml_type);
    append<uint64_t>(h, offset);
    offset += t.bytes + padding(t.bytes);
  }
  h.append(padding(h.size()), '\0');
  return h;
}

void GgufWriter::write(const std::string& path, const FillTensor& fill) const {
  const std::string tmp = path + ".tmp";
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(tmp.c_str(), "wb"));
  if (!f) fail("{}: cannot create ({})", tmp, std::strerror(errno));
  auto put = [&](const void* data, size_t n) {
    if (n != 0 && std::fwrite(data, 1, n, f.get()) != n) fail("{}: write failed ({})", tmp, std::strerror(errno));
  };
  const std::string h = header();
  put(h.data(), h.size());
  std::vector<uint8_t> buffer;
  const char zeros[kAlignment] = {};
  for (size_t i = 0; i < tensors_.size(); ++i) {
    buffer.assign(tensors_[i].bytes, 0);
    fill(i, std::span<uint8_t>(buffer));
    put(buffer.data(), buffer.size());
    put(zeros, padding(buffer.size()));
  }
  if (std::fflush(f.get()) != 0) fail("{}: write failed ({})", tmp, std::strerror(errno));
  f.reset();
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) fail("{}: cannot rename to {} ({})", tmp, path, ec.message());
}

}  // namespace minfer
