// A tensor: dtype, shape (row-major, contiguous) and a pointer to its data. The data is either borrowed
// from a memory-mapped checkpoint (kept alive by `owner`) or owned by `owner` itself.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensor/dtype.h"

namespace minfer {

struct QuantParams;  // tensor/quant_params.h

// How the elements of a 2-D weight [N, K] sit in `data`.
enum class TensorLayout : uint8_t {
  kRowMajor,
  // bf16 only: oneDNN's blocked weight format BA16a64b2a for the matrix W^T [K, N]. Columns of W^T (rows of W) in
  // blocks of 64; block b holds ceil(Kp / 16) sub-blocks of [8 k-pairs][64 rows][2], Kp = K rounded up to 32;
  // zero past N and K. oneDNN's matmul (prefill, batched decode) reads it directly, and the decode GEMV streams
  // each block front to back, so one copy serves both (docs/DESIGN.md, "Weight layout"). Made by
  // kernels::to_bf16_blocked for the AVX-512-BF16 GEMM, the only kernel that reads it.
  kBf16Blocked64,
  // Q8_0 only: rows in tiles of 16 (the last padded with zero rows), each tile stored block by block with its
  // rows' weights interleaved by column pair (tensor/q8_0_tiles.h), for the int16 x int8 dot products of the
  // quantized GEMM. Made by kernels::to_q8_0_tiles; the embedding keeps the row-major original.
  kQ8_0Tiles16,
  // The 4-bit GGUF types (Q4_0, Q4_1, IQ4_NL, Q4_K, IQ4_XS): rows in tiles of 16, each 32-column block's nibbles
  // interleaved by 4 columns for vpdpbusd, the file's scales beside them (tensor/gguf_tiles.h). Made by
  // kernels::to_gguf_tiles; the embedding keeps the row-major original.
  kGgufTiles16,
};

struct Tensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  std::shared_ptr<const void> owner;  // keeps `data` alive (a MappedFile or an owned buffer)
  // Set for int8 weights: their scales, zero points and layout (then `data` is the int8 payload).
  std::shared_ptr<const QuantParams> quant;
  TensorLayout layout = TensorLayout::kRowMajor;

  int64_t numel() const;
  // Bytes of `data` (with the padding of a tiled layout).
  size_t nbytes() const;
  int64_t dim(int i) const { return shape.at(static_cast<size_t>(i < 0 ? i + static_cast<int>(shape.size()) : i)); }
  int rank() const { return static_cast<int>(shape.size()); }
  bool empty() const { return data == nullptr; }
  template <typename T>
  const T* as() const {
    return static_cast<const T*>(data);
  }
  std::string shape_string() const;

  // A new tensor that owns a zero-initialised buffer of the given type and shape: 64-byte aligned, or from 2 MiB on
  // on a 2 MiB boundary in fresh pages with transparent huge pages requested (weights re-laid out at load).
  static Tensor allocate(DType dtype, std::vector<int64_t> shape);
  // Mutable access to an owned buffer created by allocate().
  template <typename T>
  T* mutable_as() {
    return static_cast<T*>(const_cast<void*>(data));
  }
};

// A shape as "[a, b, c]", for messages.
std::string shape_string(const std::vector<int64_t>& shape);

// Rows [begin, end) of a row-major 2-D tensor (any element or block type), viewing the same data.
Tensor row_slice(const Tensor& t, int64_t begin, int64_t end);

// Columns [begin, end) of a row-major 2-D tensor, copied into a new tensor of the same type. For a block type,
// begin and end must fall on block boundaries (the caller checks: Error otherwise).
Tensor column_slice(const Tensor& t, int64_t begin, int64_t end);
// Elements [begin, end) of a 1-D tensor of a float type, viewing the same data.
Tensor vector_slice(const Tensor& t, int64_t begin, int64_t end);

// Converts any float tensor (f32/f16/bf16) to a new f32 tensor; used by references and tests.
Tensor to_f32(const Tensor& t);
// Converts an f32 tensor to f32, f16 or bf16 (round to nearest even).
Tensor convert(const Tensor& t, DType dtype);

}  // namespace minfer
