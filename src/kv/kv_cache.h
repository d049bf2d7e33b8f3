// The paged KV cache pool: for every layer, K and V pools of num_pages pages (each page_size x kv_heads x
// head_dim elements in the layout of kernels::KvLayerView) stored as the shape's KvCacheDtype (with their scales for
// the quantized types; attention still computes in f32), allocated once. Sequences address it through page tables
// of page ids; page 0 is a reserved null page that is never handed out, so a zeroed page table entry can never alias a
// live page.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/kv_format.h"

namespace minfer {

struct KvCacheShape {
  int64_t num_layers = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  PageGeometry page;
  int64_t num_pages = 0;                    // including the null page
  KvCacheDtype dtype = KvCacheDtype::kF32;  // never kAuto

  // Bytes one page takes across all layers (K and V, scales included).
  int64_t bytes_per_page() const { return 2 * num_layers * page.size() * kv_heads * kv_head_bytes(dtype, head_dim); }
};

class KvCache {
 public:
  explicit KvCache(const KvCacheShape& shape);
  const KvCacheShape& shape() const { return shape_; }
  const std::vector<kernels::KvLayerView>& layers() const { return views_; }

  // One page's KV across every layer as one buffer (each layer's K codes, V codes, K scales, V scales), for the tiers
  // beyond the pool (kv_tiers.h): its size, and copies out of and into a page.
  int64_t page_payload_bytes() const { return shape_.num_layers * 2 * (page_code_bytes_ + page_scale_bytes_); }
  void copy_page_out(int32_t page, unsigned char* dst) const;
  void copy_page_in(int32_t page, const unsigned char* src);

 private:
  // The pool's memory: an anonymous mapping, zero-filled by the OS and committed only as pages are first
  // written (a generous budget costs no start-up time and no memory until it is used), on 2 MiB boundaries
  // with transparent huge pages requested: a step's attention reads pages scattered over the whole pool, and
  // with 4 KiB pages every 16-token page of a layer would be a TLB miss (a two-level walk under a hypervisor).
  struct Mapping {
    void* base = nullptr;
    size_t bytes = 0;
    Mapping() = default;
    Mapping(const Mapping&) = delete;
    Mapping& operator=(const Mapping&) = delete;
    ~Mapping();
  };
  KvCacheShape shape_;
  Mapping storage_;
  unsigned char* data_ = nullptr;  // storage_.base rounded up to 2 MiB
  std::vector<kernels::KvLayerView> views_;
  int64_t page_code_bytes_ = 0, page_scale_bytes_ = 0;  // one page of one layer's K (or V) codes, scales
  template <typename Fn>
  void for_each_page_part(int32_t page, Fn fn) const;
};

}  // namespace minfer
