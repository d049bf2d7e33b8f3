// Where one kv head's keys and values of an attention span lie in the paged KV pool, for the x86 attention
// leaves. Everything here has internal linkage (anonymous namespace): each ISA's translation unit compiles its
// own copy, so the linker never picks one built for another instruction set.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/leaf.h"

namespace minfer::kernels::x86 {
namespace {

// Requests the cache lines of [p, p + bytes). Written as inline asm because GCC deletes a loop whose only
// statements are __builtin_prefetch calls (it has no visible effect).
inline void prefetch_bytes(const void* p, int64_t bytes) {
  const auto begin = reinterpret_cast<uintptr_t>(p) & ~uintptr_t{63};
  const auto end = reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(bytes);
  for (uintptr_t a = begin; a < end; a += 64) asm volatile("prefetcht0 %0" : : "m"(*reinterpret_cast<const char*>(a)));
}

// The keys a span reads: [ctx_begin, keys_end(sp)), its causal context cut to its range.
inline int64_t keys_end(const AttentionSpan& sp) { return std::min(sp.ctx_end, sp.first_pos + sp.ntok); }

// One kv head's keys and values of a span, page by page through its block table.
template <class Elem>
struct HeadPages {
  const KvLayerView& cache;
  const Elem* k;  // cache.k, cache.v
  const Elem* v;
  const int32_t* block_table;
  int64_t kv_head, ps, hd;
  int page_shift;  // page sizes are powers of two (EngineConfig): a shift and a mask per key, not a division

  HeadPages(const KvLayerView& c, const AttentionSpan& sp)
      : cache(c),
        k(static_cast<const Elem*>(c.k)),
        v(static_cast<const Elem*>(c.v)),
        block_table(sp.block_table),
        kv_head(sp.kv_head),
        ps(c.page_size),
        hd(c.head_dim),
        page_shift(__builtin_ctzll(static_cast<unsigned long long>(c.page_size))) {}
  // Offset of the head's block in the page holding `key`, and the key's place in that page.
  int64_t block(int64_t key) const { return cache.head_block(block_table[key >> page_shift], kv_head); }
  int64_t in_page(int64_t key) const { return key & (ps - 1); }
  // Element d of `key` is at key_row(key)[d * ps] (keys transposed); its value starts at v + value_offset(key).
  const Elem* key_row(int64_t key) const { return k + block(key) + in_page(key); }
  int64_t value_offset(int64_t key) const { return block(key) + in_page(key) * hd; }
  // Requests keys and/or values [b, e), a page at a time (each a contiguous run, or hd runs for a part of a
  // page's transposed keys).
  void prefetch(int64_t b, int64_t e, bool keys, bool values) const {
    const auto bytes = static_cast<int64_t>(sizeof(Elem));
    while (b < e) {
      const int64_t at = block(b), t0 = in_page(b), n = std::min(e - b, ps - t0);
      if (keys && n == ps) {
        prefetch_bytes(k + at, ps * hd * bytes);
      } else if (keys) {
        for (int64_t d = 0; d < hd; ++d) prefetch_bytes(k + at + d * ps + t0, n * bytes);
      }
      if (values) prefetch_bytes(v + at + t0 * hd, n * hd * bytes);
      b += n;
    }
  }
};

}  // namespace
}  // namespace minfer::kernels::x86
