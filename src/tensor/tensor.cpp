#include "tensor/tensor.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <new>

#include "base/error.h"
#include "base/half.h"
#include "tensor/gguf_tiles.h"
#include "tensor/q8_0_tiles.h"

namespace minfer {

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

size_t Tensor::nbytes() const {
  if (layout == TensorLayout::kBf16Blocked64) {
    const int64_t rows = (dim(0) + 63) / 64 * 64, cols = (dim(1) + 31) / 32 * 32;
    return dtype_bytes(dtype, static_cast<size_t>(rows * cols));
  }
  if (layout == TensorLayout::kQ8_0Tiles16) return static_cast<size_t>(Q80Tiles{dim(0), dim(1)}.bytes());
  if (layout == TensorLayout::kGgufTiles16) return static_cast<size_t>(GgufTiles{dtype, dim(0), dim(1)}.bytes());
  return dtype_bytes(dtype, static_cast<size_t>(numel()));
}

Tensor row_slice(const Tensor& t, int64_t begin, int64_t end) {
  MINFER_CHECK(
      t.rank() == 2 && t.layout == TensorLayout::kRowMajor && !t.quant && 0 <= begin && begin <= end && end <= t.dim(0),
      "row_slice [{}, {}) of a {} tensor", begin, end, t.shape_string());
  Tensor out = t;
  out.shape = {end - begin, t.dim(1)};
  out.data = static_cast<const unsigned char*>(t.data) + dtype_bytes(t.dtype, static_cast<size_t>(begin * t.dim(1)));
  return out;
}

Tensor column_slice(const Tensor& t, int64_t begin, int64_t end) {
  const int64_t block = dtype_block(t.dtype).elements;
  MINFER_CHECK(t.rank() == 2 && t.layout == TensorLayout::kRowMajor && !t.quant && 0 <= begin && begin <= end &&
                   end <= t.dim(1) && begin % block == 0 && end % block == 0,
               "column_slice [{}, {}) of a {} {} tensor", begin, end, dtype_name(t.dtype), t.shape_string());
  Tensor out = Tensor::allocate(t.dtype, {t.dim(0), end - begin});
  const size_t row = dtype_bytes(t.dtype, static_cast<size_t>(t.dim(1)));
  const size_t skip = dtype_bytes(t.dtype, static_cast<size_t>(begin));
  const size_t take = dtype_bytes(t.dtype, static_cast<size_t>(end - begin));
  const auto* src = static_cast<const unsigned char*>(t.data);
  auto* dst = out.mutable_as<unsigned char>();
  for (int64_t r = 0; r < t.dim(0); ++r)
    std::memcpy(dst + static_cast<size_t>(r) * take, src + static_cast<size_t>(r) * row + skip, take);
  return out;
}

Tensor vector_slice(const Tensor& t, int64_t begin, int64_t end) {
  MINFER_CHECK(t.rank() == 1 && !is_block_type(t.dtype) && !t.quant && 0 <= begin && begin <= end && end <= t.dim(0),
               "vector_slice [{}, {}) of a {} tensor", begin, end, t.shape_string());
  Tensor out = t;
  out.shape = {end - begin};
  out.data = static_cast<const unsigned char*>(t.data) + dtype_bytes(t.dtype, static_cast<size_t>(begin));
  return out;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string Tensor::shape_string() const { return minfer::shape_string(shape); }

namespace {

constexpr size_t kHugePage = size_t{2} << 20;

// A buffer of `bytes` (a multiple of 2 MiB) on a 2 MiB boundary, from fresh anonymous pages: the kernel hands
// them out zeroed, so nothing is written here and each page is first touched by whoever fills it (the weight
// copies at load, split across threads); a memset would fault and clear every page once more, serially.
std::shared_ptr<const void> map_zeroed_huge(size_t bytes) {
  const size_t mapped = bytes + kHugePage;
  void* base = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) throw std::bad_alloc();
  const auto start = reinterpret_cast<uintptr_t>(base);
  const uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
  const size_t head = aligned - start, tail = mapped - head - bytes;
  if (head > 0) ::munmap(base, head);
  if (tail > 0) ::munmap(reinterpret_cast<void*>(aligned + bytes), tail);
  void* p = reinterpret_cast<void*>(aligned);
  ::madvise(p, bytes, MADV_HUGEPAGE);  // advice only: ignored where THP is off
  return {p, [bytes](const void* q) { ::munmap(const_cast<void*>(q), bytes); }};
}

}  // namespace

Tensor Tensor::allocate(DType dtype, std::vector<int64_t> shape) {
  Tensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  // Buffers of 2 MiB and more (weights re-laid out at load) sit on 2 MiB boundaries and ask for transparent
  // huge pages: a decode step streams every weight once, and 4 KiB pages cost a TLB miss every 64 cache lines.
  if (t.nbytes() >= kHugePage) {
    t.owner = map_zeroed_huge((t.nbytes() + kHugePage - 1) / kHugePage * kHugePage);
  } else {
    const size_t bytes = (t.nbytes() + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, bytes == 0 ? 64 : bytes);
    if (p == nullptr) throw std::bad_alloc();
    std::memset(p, 0, bytes == 0 ? 64 : bytes);
    t.owner = std::shared_ptr<const void>(p, [](const void* q) { std::free(const_cast<void*>(q)); });
  }
  t.data = t.owner.get();
  return t;
}

Tensor to_f32(const Tensor& t) {
  Tensor out = Tensor::allocate(DType::F32, t.shape);
  float* dst = out.mutable_as<float>();
  const size_t n = static_cast<size_t>(t.numel());
  switch (t.dtype) {
    case DType::F32: std::memcpy(dst, t.data, n * 4); break;
    case DType::F16:
      for (size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(t.as<uint16_t>()[i]);
      break;
    case DType::BF16:
      for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(t.as<uint16_t>()[i]);
      break;
    default: fail("to_f32: unsupported dtype {}", dtype_name(t.dtype));
  }
  return out;
}

Tensor convert(const Tensor& t, DType dtype) {
  Tensor src = t.dtype == DType::F32 ? t : to_f32(t);
  if (dtype == DType::F32) return src.data == t.data ? to_f32(t) : src;
  Tensor out = Tensor::allocate(dtype, t.shape);
  const size_t n = static_cast<size_t>(t.numel());
  uint16_t* dst = out.mutable_as<uint16_t>();
  const float* s = src.as<float>();
  switch (dtype) {
    case DType::F16:
      for (size_t i = 0; i < n; ++i) dst[i] = f32_to_f16(s[i]);
      break;
    case DType::BF16:
      for (size_t i = 0; i < n; ++i) dst[i] = f32_to_bf16(s[i]);
      break;
    default: fail("convert: unsupported target dtype {}", dtype_name(dtype));
  }
  return out;
}

}  // namespace minfer
