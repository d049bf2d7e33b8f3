// Writer for GGUF v3 files as llama.cpp reads them: metadata key/values, then tensor descriptors, then the
// tensors' bytes, each aligned to general.alignment (32). Tensor bytes are produced one tensor at a time by the
// caller, so a file larger than memory can be written; the file appears under its name only once complete.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "formats/gguf_file.h"
#include "tensor/dtype.h"

namespace minfer {

class GgufWriter {
 public:
  // Metadata. Setting a key again replaces its value and keeps its place.
  void set_u32(std::string_view key, uint32_t value);
  void set_i32(std::string_view key, int32_t value);
  void set_f32(std::string_view key, float value);
  void set_bool(std::string_view key, bool value);
  void set_string(std::string_view key, std::string_view value);
  void set_string_array(std::string_view key, const std::vector<std::string>& values);
  void set_i32_array(std::string_view key, const std::vector<int32_t>& values);
  void set_bool_array(std::string_view key, const std::vector<bool>& values);
  void set_f32_array(std::string_view key, const std::vector<float>& values);
  // A value read from another GGUF file, copied byte for byte.
  void set_copy(std::string_view key, const GgufValue& value);
  void remove(std::string_view key);
  bool has(std::string_view key) const;

  // Tensors, in file order. shape is outermost first (as GgufTensorInfo); the innermost dimension must be whole
  // blocks of dtype. Returns the tensor's index.
  size_t add_tensor(std::string name, std::vector<int64_t> shape, DType dtype);
  size_t tensor_bytes(size_t index) const { return tensors_[index].bytes; }

  // Called once per tensor, in order, with a buffer of exactly tensor_bytes(index) bytes to fill.
  using FillTensor = std::function<void(size_t index, std::span<uint8_t> out)>;
  // Writes the file (through `path`.tmp, renamed at the end). Throws Error naming the path on I/O failure.
  void write(const std::string& path, const FillTensor& fill) const;

 private:
  struct Tensor {
    std::string name;
    std::vector<int64_t> shape;
    uint32_t ggml_type;
    size_t bytes;
  };
  void set(std::string_view key, GgufType type, std::string encoded);
  std::string header() const;

  std::vector<std::pair<std::string, std::pair<GgufType, std::string>>> metadata_;
  std::vector<Tensor> tensors_;
};

}  // namespace minfer
