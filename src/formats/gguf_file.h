// Reader for GGUF (v2 and v3) files: metadata key/values and tensor descriptors, over a memory map.
// Every read is bounds-checked; a truncated or inconsistent file raises LoadError naming the file.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/mapped_file.h"
#include "tensor/tensor.h"

namespace minfer {

enum class GgufType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};

// One metadata value. Scalars are decoded; arrays keep their element type, count and raw bytes in the map.
struct GgufValue {
  GgufType type = GgufType::U8;
  // Scalars: numbers as both integer and double, strings as a view into the mapped file.
  int64_t int_value = 0;
  double float_value = 0;
  std::string_view string_value;
  // Arrays.
  GgufType array_type = GgufType::U8;
  uint64_t array_count = 0;
  const uint8_t* array_data = nullptr;
  // The value's bytes as the file stores them after its type (for an array: element type, count, elements), so
  // that a writer can copy it unchanged.
  std::string_view encoded;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> shape;  // row-major, outermost first (GGUF stores ne[] innermost first)
  uint32_t ggml_type = 0;
  uint64_t offset = 0;  // from the start of the data section
};

class GgufFile {
 public:
  // Opens and parses the header, metadata and tensor descriptors. Throws LoadError.
  static std::shared_ptr<GgufFile> open(const std::string& path);

  const std::string& path() const { return file_->path(); }
  uint32_t version() const { return version_; }
  const std::map<std::string, GgufValue, std::less<>>& metadata() const { return metadata_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }

  bool has(std::string_view key) const { return metadata_.find(key) != metadata_.end(); }
  const GgufValue* find(std::string_view key) const;
  // Typed getters: throw LoadError naming the key when it is missing or of the wrong kind.
  std::string get_string(std::string_view key) const;
  int64_t get_int(std::string_view key) const;
  double get_float(std::string_view key) const;
  std::optional<int64_t> find_int(std::string_view key) const;
  std::optional<double> find_float(std::string_view key) const;
  std::optional<std::string> find_string(std::string_view key) const;
  std::vector<std::string_view> get_string_array(std::string_view key) const;
  std::vector<float> get_float_array(std::string_view key) const;
  std::vector<int64_t> get_int_array(std::string_view key) const;

  // A tensor viewing the mapped data (F32, F16, BF16, Q8_0; others raise LoadError naming the tensor).
  Tensor tensor(const GgufTensorInfo& info) const;
  const GgufTensorInfo* find_tensor(std::string_view name) const;

 private:
  explicit GgufFile(std::shared_ptr<MappedFile> file) : file_(std::move(file)) {}
  void parse();

  std::shared_ptr<MappedFile> file_;
  uint32_t version_ = 0;
  uint64_t data_offset_ = 0;
  std::map<std::string, GgufValue, std::less<>> metadata_;
  std::vector<GgufTensorInfo> tensors_;
};

// The ggml type id of a dtype GGUF files hold (F32, F16, BF16 and the block types); nullopt for the others.
std::optional<uint32_t> ggml_type_of(DType dtype);

// Name of a ggml tensor type (e.g. "Q4_K") for error messages.
std::string ggml_type_name(uint32_t type);

}  // namespace minfer
