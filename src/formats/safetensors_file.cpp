#include "formats/safetensors_file.h"

#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "base/error.h"

namespace minfer {
namespace {

using json = nlohmann::json;

// The reference implementation refuses headers over 100 MB; so do we (it also bounds what we parse).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

bool safetensors_dtype(std::string_view name, DType* out) {
  static const std::pair<std::string_view, DType> kTypes[] = {
      {"F32", DType::F32},
      {"F16", DType::F16},
      {"BF16", DType::BF16},
      {"I8", DType::I8},
      {"I32", DType::I32},
      // Raw bytes, read as I8: gpt-oss's MXFP4 blocks and scales (loaders/weight_check.cpp repacks them).
      {"U8", DType::I8}};
  for (const auto& [n, d] : kTypes) {
    if (n == name) {
      *out = d;
      return true;
    }
  }
  return false;
}

size_t element_size(DType d) { return dtype_bytes(d, 1); }

}  // namespace

std::shared_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  std::shared_ptr<SafetensorsFile> f(new SafetensorsFile(MappedFile::open(path)));
  f->parse();
  return f;
}

void SafetensorsFile::parse() {
  const std::string& path = file_->path();
  const uint64_t size = file_->size();
  if (size < 8)
    fail_load(path, "truncated safetensors file: {} bytes, but the 8-byte header length alone needs 8", size);
  uint64_t header_len = 0;
  std::memcpy(&header_len, file_->data(), 8);  // little-endian on every platform minfer supports
  if (header_len > size - 8)
    fail_load(path, "truncated or not a safetensors file: header length {} exceeds the {} bytes after it", header_len,
              size - 8);
  if (header_len > kMaxHeaderBytes)
    fail_load(path, "safetensors header length {} exceeds the format's limit of {} bytes", header_len, kMaxHeaderBytes);
  data_offset_ = 8 + header_len;
  const uint64_t data_size = size - data_offset_;

  json header;
  try {
    header = json::parse(file_->view().substr(8, header_len));
  } catch (const json::exception& e) {
    fail_load(path, "invalid safetensors header JSON: {}", e.what());
  }
  if (!header.is_object()) fail_load(path, "invalid safetensors header: the JSON is not an object");

  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;  // free-form string map; nothing minfer needs
    if (!entry.is_object()) fail_load(path, "invalid safetensors header: entry '{}' is not an object", name);
    SafetensorsTensorInfo info;
    info.name = name;
    const auto dtype = entry.find("dtype");
    const auto shape = entry.find("shape");
    const auto offsets = entry.find("data_offsets");
    if (dtype == entry.end() || !dtype->is_string())
      fail_load(path, "invalid safetensors header: tensor '{}' has no \"dtype\" string", name);
    if (!safetensors_dtype(dtype->get_ref<const std::string&>(), &info.dtype))
      fail_load(path, "tensor '{}' has unsupported dtype {} (supported: F32, F16, BF16, I8, U8, I32)", name,
                dtype->get_ref<const std::string&>());
    if (shape == entry.end() || !shape->is_array())
      fail_load(path, "invalid safetensors header: tensor '{}' has no \"shape\" array", name);
    // Element count with overflow checks: each dimension and the product stay below 2^62.
    uint64_t numel = 1;
    for (const auto& d : *shape) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > (1ull << 40))
        fail_load(path, "invalid safetensors header: tensor '{}' has an invalid dimension {}", name, d.dump());
      const uint64_t v = d.get<uint64_t>();
      if (v != 0 && numel > (1ull << 62) / v)
        fail_load(path, "invalid safetensors header: tensor '{}' shape {} is too large", name, shape->dump());
      numel *= v;
      info.shape.push_back(static_cast<int64_t>(v));
    }
    if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
        !(*offsets)[1].is_number_unsigned())
      fail_load(path, "invalid safetensors header: tensor '{}' has no \"data_offsets\" [begin, end]", name);
    info.begin = (*offsets)[0].get<uint64_t>();
    info.end = (*offsets)[1].get<uint64_t>();
    if (info.begin > info.end)
      fail_load(path, "invalid safetensors header: tensor '{}' has data_offsets [{}, {}] with begin > end", name,
                info.begin, info.end);
    if (info.end > data_size)
      fail_load(path,
                "truncated or corrupt safetensors file: tensor '{}' data_offsets [{}, {}] lie beyond the end of the "
                "file (the data section has {} bytes)",
                name, info.begin, info.end, data_size);
    const uint64_t need = numel * element_size(info.dtype);
    if (info.end - info.begin != need)
      fail_load(path, "invalid safetensors header: tensor '{}' data_offsets [{}, {}] span {} bytes, but {} {} needs {}",
                name, info.begin, info.end, info.end - info.begin, dtype->get_ref<const std::string&>(),
                shape_string(info.shape), need);
    by_name_[name] = tensors_.size();
    tensors_.push_back(std::move(info));
  }
}

const SafetensorsTensorInfo* SafetensorsFile::find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

Tensor SafetensorsFile::tensor(const SafetensorsTensorInfo& info) const {
  Tensor t;
  t.dtype = info.dtype;
  t.shape = info.shape;
  const uint8_t* p = file_->data() + data_offset_ + info.begin;
  if (reinterpret_cast<uintptr_t>(p) % element_size(info.dtype) != 0) {
    Tensor copy = Tensor::allocate(info.dtype, info.shape);
    std::memcpy(copy.mutable_as<uint8_t>(), p, info.end - info.begin);
    return copy;
  }
  t.data = p;
  t.owner = file_;
  return t;
}

std::map<std::string, std::string> read_safetensors_index(const std::string& index_path) {
  json index;
  try {
    index = json::parse(read_text_file(index_path));
  } catch (const json::exception& e) {
    fail_load(index_path, "invalid JSON: {}", e.what());
  }
  const auto wm = index.is_object() ? index.find("weight_map") : index.end();
  if (wm == index.end() || !wm->is_object()) fail_load(index_path, "no \"weight_map\" object in the index");
  std::map<std::string, std::string> out;
  for (const auto& [name, file] : wm->items()) {
    if (!file.is_string()) fail_load(index_path, "weight_map entry '{}' is not a file name", name);
    const std::string& f = file.get_ref<const std::string&>();
    // Shards live beside the index; a path that climbs out of the directory is not a shard name.
    if (f.empty() || f.find('/') != std::string::npos || f == "." || f == "..")
      fail_load(index_path, "weight_map entry '{}' names an invalid shard file '{}'", name, f);
    out[name] = f;
  }
  return out;
}

}  // namespace minfer
