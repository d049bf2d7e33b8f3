#include "formats/gguf_file.h"

#include <cmath>
#include <cstring>

#include "base/error.h"

namespace minfer {
namespace {

// ggml type ids of the tensor types minfer reads, and the dtype each becomes.
struct GgmlType {
  uint32_t id;
  DType dtype;
};
constexpr GgmlType kGgmlTypes[] = {
    {0, DType::F32},     {1, DType::F16},     {2, DType::Q4_0},  {3, DType::Q4_1},
    {6, DType::Q5_0},    {7, DType::Q5_1},    {8, DType::Q8_0},  {10, DType::Q2_K},
    {11, DType::Q3_K},   {12, DType::Q4_K},   {13, DType::Q5_K}, {14, DType::Q6_K},
    {20, DType::IQ4_NL}, {23, DType::IQ4_XS}, {30, DType::BF16}, {39, DType::MXFP4},
};

const DType* dtype_of_ggml(uint32_t id) {
  for (const GgmlType& t : kGgmlTypes)
    if (t.id == id) return &t.dtype;
  return nullptr;
}

}  // namespace

std::optional<uint32_t> ggml_type_of(DType dtype) {
  for (const GgmlType& t : kGgmlTypes)
    if (t.dtype == dtype) return t.id;
  return std::nullopt;
}

namespace {

std::string supported_ggml_types() {
  std::string s;
  for (const GgmlType& t : kGgmlTypes) s += (s.empty() ? "" : ", ") + ggml_type_name(t.id);
  return s;
}

// A bounds-checked little-endian cursor over the mapped file.
class Cursor {
 public:
  Cursor(const MappedFile& file, size_t pos) : file_(file), pos_(pos) {}
  size_t pos() const { return pos_; }

  const uint8_t* take(uint64_t n, const char* what) {
    if (n > file_.size() || pos_ > file_.size() - n)
      fail_load(file_.path(), "truncated GGUF file: {} needs {} bytes at offset {} but the file has {}", what, n, pos_,
                file_.size());
    const uint8_t* p = file_.data() + pos_;
    pos_ += n;
    return p;
  }
  template <typename T>
  T read(const char* what) {
    T v;
    std::memcpy(&v, take(sizeof(T), what), sizeof(T));
    return v;
  }
  std::string_view string(const char* what) {
    const uint64_t n = read<uint64_t>(what);
    return {reinterpret_cast<const char*>(take(n, what)), static_cast<size_t>(n)};
  }

 private:
  const MappedFile& file_;
  size_t pos_;
};

size_t scalar_size(GgufType t) {
  switch (t) {
    case GgufType::U8:
    case GgufType::I8:
    case GgufType::BOOL: return 1;
    case GgufType::U16:
    case GgufType::I16: return 2;
    case GgufType::U32:
    case GgufType::I32:
    case GgufType::F32: return 4;
    case GgufType::U64:
    case GgufType::I64:
    case GgufType::F64: return 8;
    default: return 0;
  }
}

bool is_integer(GgufType t) {
  return t == GgufType::U8 || t == GgufType::I8 || t == GgufType::U16 || t == GgufType::I16 || t == GgufType::U32 ||
         t == GgufType::I32 || t == GgufType::U64 || t == GgufType::I64 || t == GgufType::BOOL;
}

// A float converted for integer use: NaN becomes 0 and out-of-range values saturate (a plain cast of those
// is undefined behaviour, and the file is untrusted input).
int64_t saturating_int(double v) {
  if (std::isnan(v)) return 0;
  if (v >= 9.2e18) return INT64_MAX;
  if (v <= -9.2e18) return INT64_MIN;
  return static_cast<int64_t>(v);
}

void read_number(const uint8_t* p, GgufType t, int64_t* i, double* f) {
  auto load = [p](auto v) {
    std::memcpy(&v, p, sizeof(v));
    return v;
  };
  switch (t) {
    case GgufType::U8: *i = load(uint8_t{}); break;
    case GgufType::I8: *i = load(int8_t{}); break;
    case GgufType::BOOL: *i = load(uint8_t{}) != 0; break;
    case GgufType::U16: *i = load(uint16_t{}); break;
    case GgufType::I16: *i = load(int16_t{}); break;
    case GgufType::U32: *i = load(uint32_t{}); break;
    case GgufType::I32: *i = load(int32_t{}); break;
    case GgufType::U64: *i = static_cast<int64_t>(load(uint64_t{})); break;
    case GgufType::I64: *i = load(int64_t{}); break;
    case GgufType::F32:
      *f = load(float{});
      *i = saturating_int(*f);
      return;
    case GgufType::F64:
      *f = load(double{});
      *i = saturating_int(*f);
      return;
    default: return;
  }
  *f = static_cast<double>(*i);
}

}  // namespace

std::string ggml_type_name(uint32_t type) {
  static const char* const names[] = {
      "F32",      "F16",      "Q4_0",    "Q4_1",  "Q4_2",       "Q4_3",       "Q5_0",       "Q5_1",
      "Q8_0",     "Q8_1",     "Q2_K",    "Q3_K",  "Q4_K",       "Q5_K",       "Q6_K",       "Q8_K",
      "IQ2_XXS",  "IQ2_XS",   "IQ3_XXS", "IQ1_S", "IQ4_NL",     "IQ3_S",      "IQ2_S",      "IQ4_XS",
      "I8",       "I16",      "I32",     "I64",   "F64",        "IQ1_M",      "BF16",       "Q4_0_4_4",
      "Q4_0_4_8", "Q4_0_8_8", "TQ1_0",   "TQ2_0", "IQ4_NL_4_4", "IQ4_NL_4_8", "IQ4_NL_8_8", "MXFP4"};
  if (type < sizeof(names) / sizeof(names[0])) return names[type];
  return "type " + std::to_string(type);
}

std::shared_ptr<GgufFile> GgufFile::open(const std::string& path) {
  std::shared_ptr<GgufFile> g(new GgufFile(MappedFile::open(path)));
  g->parse();
  return g;
}

namespace {

// One metadata value at the cursor (its type already read into v.type); arrays are kept as a view into the file.
void read_value(Cursor& c, const MappedFile& file, const std::string& key, GgufValue& v) {
  const std::string& path = file.path();
  if (v.type == GgufType::STRING) {
    v.string_value = c.string("metadata string");
  } else if (v.type == GgufType::ARRAY) {
    v.array_type = static_cast<GgufType>(c.read<uint32_t>("array type"));
    v.array_count = c.read<uint64_t>("array length");
    v.array_data = file.data() + c.pos();
    if (v.array_type == GgufType::STRING) {
      for (uint64_t i = 0; i < v.array_count; ++i) c.string("array string");
    } else {
      const size_t es = scalar_size(v.array_type);
      if (es == 0)
        fail_load(path, "metadata '{}': unsupported array element type {}", key, static_cast<uint32_t>(v.array_type));
      if (v.array_count > file.size() / es)
        fail_load(path, "metadata '{}': array length {} exceeds the file", key, v.array_count);
      c.take(v.array_count * es, "array data");
    }
  } else {
    const size_t size = scalar_size(v.type);
    if (size == 0) fail_load(path, "metadata '{}': unknown value type {}", key, static_cast<uint32_t>(v.type));
    read_number(c.take(size, "metadata value"), v.type, &v.int_value, &v.float_value);
  }
}

GgufTensorInfo read_tensor_info(Cursor& c, const std::string& path) {
  GgufTensorInfo info;
  info.name = std::string(c.string("tensor name"));
  const uint32_t n_dims = c.read<uint32_t>("tensor rank");
  if (n_dims == 0 || n_dims > 4) fail_load(path, "tensor '{}': invalid rank {}", info.name, n_dims);
  info.shape.resize(n_dims);
  for (uint32_t d = 0; d < n_dims; ++d) {
    const uint64_t ne = c.read<uint64_t>("tensor dims");
    if (ne == 0 || ne > (1ull << 40)) fail_load(path, "tensor '{}': invalid dimension {}", info.name, ne);
    info.shape[n_dims - 1 - d] = static_cast<int64_t>(ne);
  }
  info.ggml_type = c.read<uint32_t>("tensor type");
  info.offset = c.read<uint64_t>("tensor offset");
  return info;
}

// A tensor of a supported type must lie inside the file (others are reported only if used).
void check_tensor_extent(const GgufTensorInfo& info, uint64_t data_offset, const MappedFile& file) {
  const std::string& path = file.path();
  int64_t n = 1;
  for (int64_t d : info.shape)
    if (__builtin_mul_overflow(n, d, &n) || n > (int64_t{1} << 48))
      fail_load(path, "tensor '{}': its dimensions multiply past what any file holds", info.name);
  const DType* dtype = dtype_of_ggml(info.ggml_type);
  if (!dtype) return;
  const BlockShape block = dtype_block(*dtype);
  if (info.shape.empty() || info.shape.back() % block.elements != 0)
    fail_load(path, "tensor '{}' of type {}: row length {} is not a multiple of the block size {}", info.name,
              ggml_type_name(info.ggml_type), info.shape.empty() ? 0 : info.shape.back(), block.elements);
  const uint64_t bytes =
      static_cast<uint64_t>(n) / static_cast<uint64_t>(block.elements) * static_cast<uint64_t>(block.bytes);
  if (info.offset > file.size() || data_offset + info.offset + bytes > file.size())
    fail_load(
        path,
        "truncated GGUF file: tensor '{}' ({} bytes at data offset {}) extends past the end of the file ({} bytes)",
        info.name, bytes, info.offset, file.size());
}

}  // namespace

void GgufFile::parse() {
  const std::string& path = file_->path();
  Cursor c(*file_, 0);
  if (file_->size() < 4 || std::memcmp(file_->data(), "GGUF", 4) != 0)
    fail_load(path, "not a GGUF file (the first 4 bytes are not 'GGUF')");
  c.take(4, "magic");
  version_ = c.read<uint32_t>("version");
  if (version_ != 2 && version_ != 3) fail_load(path, "unsupported GGUF version {} (supported: 2, 3)", version_);
  const uint64_t tensor_count = c.read<uint64_t>("tensor count");
  const uint64_t kv_count = c.read<uint64_t>("metadata count");
  if (tensor_count > file_->size() || kv_count > file_->size())
    fail_load(path, "corrupt GGUF header: {} tensors and {} metadata entries in a {} byte file", tensor_count, kv_count,
              file_->size());
  for (uint64_t k = 0; k < kv_count; ++k) {
    const std::string key(c.string("metadata key"));
    GgufValue v;
    v.type = static_cast<GgufType>(c.read<uint32_t>("metadata type"));
    const size_t value_begin = c.pos();
    read_value(c, *file_, key, v);
    v.encoded = {reinterpret_cast<const char*>(file_->data() + value_begin), c.pos() - value_begin};
    metadata_[key] = v;
  }
  tensors_.reserve(tensor_count);
  for (uint64_t t = 0; t < tensor_count; ++t) tensors_.push_back(read_tensor_info(c, path));
  uint64_t alignment = 32;
  if (auto a = find_int("general.alignment")) alignment = static_cast<uint64_t>(*a);
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    fail_load(path, "general.alignment {} is not a power of two", alignment);
  data_offset_ = (c.pos() + alignment - 1) / alignment * alignment;
  for (const auto& info : tensors_) check_tensor_extent(info, data_offset_, *file_);
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

std::optional<int64_t> GgufFile::find_int(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (!is_integer(v->type) && v->type != GgufType::F32 && v->type != GgufType::F64)
    fail_load(path(), "metadata '{}' is not a number", key);
  return v->int_value;
}

std::optional<double> GgufFile::find_float(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (!is_integer(v->type) && v->type != GgufType::F32 && v->type != GgufType::F64)
    fail_load(path(), "metadata '{}' is not a number", key);
  return v->float_value;
}

std::optional<std::string> GgufFile::find_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (v->type != GgufType::STRING) fail_load(path(), "metadata '{}' is not a string", key);
  return std::string(v->string_value);
}

std::string GgufFile::get_string(std::string_view key) const {
  auto v = find_string(key);
  if (!v) fail_load(path(), "missing metadata '{}'", key);
  return *v;
}

int64_t GgufFile::get_int(std::string_view key) const {
  auto v = find_int(key);
  if (!v) fail_load(path(), "missing metadata '{}'", key);
  return *v;
}

double GgufFile::get_float(std::string_view key) const {
  auto v = find_float(key);
  if (!v) fail_load(path(), "missing metadata '{}'", key);
  return *v;
}

std::vector<std::string_view> GgufFile::get_string_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) fail_load(path(), "missing metadata '{}'", key);
  if (v->type != GgufType::ARRAY || v->array_type != GgufType::STRING)
    fail_load(path(), "metadata '{}' is not an array of strings", key);
  std::vector<std::string_view> out;
  out.reserve(v->array_count);
  Cursor c(*file_, static_cast<size_t>(v->array_data - file_->data()));
  for (uint64_t i = 0; i < v->array_count; ++i) out.push_back(c.string("array string"));
  return out;
}

std::vector<float> GgufFile::get_float_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) fail_load(path(), "missing metadata '{}'", key);
  if (v->type != GgufType::ARRAY || v->array_type == GgufType::STRING || v->array_type == GgufType::ARRAY)
    fail_load(path(), "metadata '{}' is not a numeric array", key);
  std::vector<float> out(v->array_count);
  const size_t es = scalar_size(v->array_type);
  for (uint64_t i = 0; i < v->array_count; ++i) {
    int64_t iv = 0;
    double fv = 0;
    read_number(v->array_data + i * es, v->array_type, &iv, &fv);
    out[i] = static_cast<float>(fv);
  }
  return out;
}

std::vector<int64_t> GgufFile::get_int_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) fail_load(path(), "missing metadata '{}'", key);
  if (v->type != GgufType::ARRAY || v->array_type == GgufType::STRING || v->array_type == GgufType::ARRAY)
    fail_load(path(), "metadata '{}' is not a numeric array", key);
  std::vector<int64_t> out(v->array_count);
  const size_t es = scalar_size(v->array_type);
  for (uint64_t i = 0; i < v->array_count; ++i) {
    double fv = 0;
    read_number(v->array_data + i * es, v->array_type, &out[i], &fv);
  }
  return out;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

Tensor GgufFile::tensor(const GgufTensorInfo& info) const {
  Tensor t;
  const DType* dtype = dtype_of_ggml(info.ggml_type);
  if (!dtype)
    fail_load(path(), "tensor '{}' has type {}, which minfer does not support (supported: {})", info.name,
              ggml_type_name(info.ggml_type), supported_ggml_types());
  t.dtype = *dtype;
  t.shape = info.shape;
  t.data = file_->data() + data_offset_ + info.offset;
  t.owner = file_;
  return t;
}

}  // namespace minfer
