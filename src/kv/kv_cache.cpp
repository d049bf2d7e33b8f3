#include "kv/kv_cache.h"

#include <sys/mman.h>

#include <cstdint>

#include "base/error.h"

namespace minfer {

KvCache::KvCache(const KvCacheShape& shape) : shape_(shape) {
  MINFER_CHECK(shape.num_pages >= 2 && shape.page.size() > 0, "KV cache needs at least one usable page");
  MINFER_CHECK(shape.dtype == DType::F32 || shape.dtype == DType::BF16, "KV cache of {}: f32 or bf16 only",
               dtype_name(shape.dtype));
  const int64_t per_layer =
      shape.num_pages * shape.page.size() * shape.kv_heads * shape.head_dim * shape.element_bytes();  // bytes
  const size_t bytes = static_cast<size_t>(2 * shape.num_layers * per_layer);
  constexpr size_t kHugePage = size_t{2} << 20;
  storage_.bytes = bytes + kHugePage;
  void* base =
      ::mmap(nullptr, storage_.bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED)
    fail("cannot allocate the KV cache: {} MiB ({} pages); lower the KV budget or max_model_len", bytes >> 20,
         shape.num_pages);
  storage_.base = base;
  const auto addr = reinterpret_cast<uintptr_t>(base);
  data_ = static_cast<unsigned char*>(base) + (kHugePage - addr % kHugePage) % kHugePage;
  ::madvise(data_, bytes, MADV_HUGEPAGE);  // advice only: ignored where THP is off
  for (int64_t l = 0; l < shape.num_layers; ++l) {
    kernels::KvLayerView v;
    v.k = data_ + (2 * l) * per_layer;
    v.v = data_ + (2 * l + 1) * per_layer;
    v.page = shape.page;
    v.kv_heads = shape.kv_heads;
    v.head_dim = shape.head_dim;
    v.dtype = shape.dtype;
    views_.push_back(v);
  }
}

KvCache::Mapping::~Mapping() {
  if (base) ::munmap(base, bytes);
}

}  // namespace minfer
