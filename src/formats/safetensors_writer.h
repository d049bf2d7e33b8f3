// Writer for safetensors files and Hugging Face checkpoints (one model.safetensors, or shards
// model-0000i-of-0000n.safetensors plus model.safetensors.index.json). Tensor data is streamed in chunks from a
// fill callback, so multi-GB checkpoints are written without holding them in memory.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace minfer {

struct SafetensorsEntry {
  // Fills `count` elements starting at element `first` into dst (dtype-sized elements, little-endian).
  // `first` is always a multiple of SafetensorsEntry::kChunkElements, so a fill may seed per chunk.
  using Fill = std::function<void(void* dst, int64_t first, int64_t count)>;
  static constexpr int64_t kChunkElements = 1 << 22;

  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  Fill fill;

  int64_t numel() const;
  uint64_t nbytes() const { return dtype_bytes(dtype, static_cast<size_t>(numel())); }
  // An entry whose data is copied from an existing tensor.
  static SafetensorsEntry from_tensor(std::string name, const Tensor& tensor);
};

struct SafetensorsWriteOptions {
  std::map<std::string, std::string> metadata;  // written as "__metadata__"
  // Writes the header and a sparse all-zero data section without calling the fill callbacks: a full-size file that
  // costs no disk space or time, for tests of layout and loading.
  bool skip_data = false;
};

// Writes one safetensors file. Tensors are laid out by descending element size, then name, so every tensor is
// aligned to its element size (the header is padded with spaces to a multiple of 64 bytes). Throws Error naming
// the path on an I/O failure.
void write_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& entries,
                       const SafetensorsWriteOptions& options = {});

// Writes `entries` into `dir` in the Hugging Face layout. shard_bytes == 0: a single model.safetensors. Otherwise
// tensors are packed in order into shards of at most shard_bytes data each (a larger tensor gets its own shard),
// named model-00001-of-0000N.safetensors, with model.safetensors.index.json mapping each tensor to its shard.
// Returns the file names written.
std::vector<std::string> write_safetensors_checkpoint(const std::string& dir,
                                                      const std::vector<SafetensorsEntry>& entries,
                                                      uint64_t shard_bytes,
                                                      const SafetensorsWriteOptions& options = {});

}  // namespace minfer
