// Reader for safetensors files (8-byte little-endian header length, a JSON header, then the raw tensor data),
// over a memory map, and for the model.safetensors.index.json of sharded checkpoints.
// Every offset is checked against the file; a truncated or inconsistent file raises LoadError naming the file.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/mapped_file.h"
#include "tensor/tensor.h"

namespace minfer {

struct SafetensorsTensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offsets into the data section (after the header)
  uint64_t end = 0;
};

class SafetensorsFile {
 public:
  // Maps and parses the file. Supported dtypes: F32, F16, BF16, I8, I32; others raise LoadError naming the tensor.
  static std::shared_ptr<SafetensorsFile> open(const std::string& path);

  const std::string& path() const { return file_->path(); }
  // In header order.
  const std::vector<SafetensorsTensorInfo>& tensors() const { return tensors_; }
  const SafetensorsTensorInfo* find(std::string_view name) const;
  // A tensor viewing the mapped data (kept alive by Tensor::owner). Data that is not aligned to its element size
  // (legal in the format, rare in practice) is copied into an aligned buffer so kernels never read misaligned.
  Tensor tensor(const SafetensorsTensorInfo& info) const;
  uint64_t data_offset() const { return data_offset_; }

 private:
  explicit SafetensorsFile(std::shared_ptr<MappedFile> file) : file_(std::move(file)) {}
  void parse();

  std::shared_ptr<MappedFile> file_;
  uint64_t data_offset_ = 0;
  std::vector<SafetensorsTensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> by_name_;
};

// Parses model.safetensors.index.json: tensor name -> shard file name (relative to the index's directory).
// Throws LoadError naming the index when it is not valid JSON or has no "weight_map" object of strings.
std::map<std::string, std::string> read_safetensors_index(const std::string& index_path);

}  // namespace minfer
