// What the x86 attention leaves (attention_impl.h, instantiated in leaves_avx2.cpp and leaves_avx512.cpp) share
// besides their arithmetic: where one kv head's keys and values of a span lie in the paged pool, the per-row state in
// the leaf's scratch, which rows see an online-softmax block, the prefetch requests a block issues, and the span's
// final write-out. Everything here has internal linkage (anonymous namespace): each ISA's translation unit compiles its
// own copy, so the linker never picks one built for another instruction set.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>

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
inline int64_t keys_end(const AttentionSpan& sp) { return std::min(sp.ctx_end, seen_end(sp, sp.ntok - 1)); }

// How a KV cache type's codes are read (kernels/kv_format.h): W widens codes to f32 (times 1 / kUnit), Scaling
// says where their scales are and ScaleW loads them (f32 or f16), and q4_0 packs two codes a byte (Q4W's loads
// give both nibbles).
enum class KvScaling { kNone, kPerToken, kPerBlock };
template <class W, KvScaling S, class ScaleW = W, bool Q4 = false>
struct KvCodes {
  using Load = W;
  using Elem = typename W::Elem;
  using ScaleLoad = ScaleW;
  using ScaleElem = typename ScaleW::Elem;
  static constexpr KvScaling kScaling = S;
  static constexpr bool kQ4 = Q4;
  static constexpr int64_t kPerElem = Q4 ? 2 : 1;  // codes per Elem
  static constexpr float kUnit = [] {
    if constexpr (requires { W::kUnit; }) {
      return W::kUnit;
    } else {
      return 1.0f;
    }
  }();
};

// One kv head's keys and values of a span, page by page through its page table: codes and their scales.
template <class K>
struct HeadPages {
  using Elem = typename K::Elem;
  const KvLayerView& cache;
  const Elem* k;  // cache.k, cache.v
  const Elem* v;
  const int32_t* page_table;
  int64_t kv_head, ps, hd;
  int page_shift;  // page sizes are powers of two (EngineConfig): a shift and a mask per key, not a division

  HeadPages(const KvLayerView& c, const AttentionSpan& sp)
      : cache(c),
        k(static_cast<const Elem*>(c.k)),
        v(static_cast<const Elem*>(c.v)),
        page_table(sp.page_table),
        kv_head(sp.kv_head),
        ps(c.page.size()),
        hd(c.head_dim),
        page_shift(c.page.shift()) {}
  // Offset of the head's block in the page holding `key` (in codes), and the key's place in that page.
  int64_t block(int64_t key) const { return cache.head_block(page_table[key >> page_shift], kv_head); }
  int64_t in_page(int64_t key) const { return key & (ps - 1); }
  // Row d of the keys from `key` on is at key_row(key) + d * ps (keys transposed; q4_0: row d / 2 holds dims d and
  // d + 1); its value starts at v + value_offset(key) (in Elems).
  const Elem* key_row(int64_t key) const { return k + block(key) / K::kPerElem + in_page(key); }
  int64_t value_offset(int64_t key) const { return (block(key) + in_page(key) * hd) / K::kPerElem; }
  // The scales of `key` (kernels.h: group b of a key at + b * ps, of a value at + b).
  int64_t scale_block(int64_t key) const { return cache.scale_block(page_table[key >> page_shift], kv_head); }
  int64_t key_scale_offset(int64_t key) const { return scale_block(key) + in_page(key); }
  int64_t value_scale_offset(int64_t key) const { return scale_block(key) + in_page(key) * cache.scale_groups(); }
  // Requests keys and/or values [b, e), a page at a time (each a contiguous run, or hd runs for a part of a
  // page's transposed keys).
  void prefetch(int64_t b, int64_t e, bool keys, bool values) const {
    const int64_t bytes = static_cast<int64_t>(sizeof(Elem)), rows = hd / K::kPerElem;
    while (b < e) {
      const int64_t at = block(b) / K::kPerElem, t0 = in_page(b), n = std::min(e - b, ps - t0);
      if (keys && n == ps) {
        prefetch_bytes(k + at, ps * rows * bytes);
      } else if (keys) {
        for (int64_t d = 0; d < rows; ++d) prefetch_bytes(k + at + d * ps + t0, n * bytes);
      }
      if (values) prefetch_bytes(v + at + t0 * rows, n * rows * bytes);
      b += n;
    }
  }
};

inline int64_t pad16(int64_t v) { return (v + 15) / 16 * 16; }

// A span's per-row state in the leaf's scratch (attention_scratch_floats), rows token-major: running max, sum and
// block correction, the accumulator (rows hdp floats apart, zero-padded) and the block's scores, then weights
// (rows kAttentionBlockKeys apart). `rest` is what the layout leaves free for the leaf's own use.
struct SpanState {
  float* run_max;
  float* run_sum;
  float* corr;
  float* acc;
  float* sc;
  float* rest;
  int64_t rows, hdp;

  SpanState(float* scratch, int64_t rows_, int64_t hdp_) : rows(rows_), hdp(hdp_) {
    run_max = scratch;
    run_sum = run_max + pad16(rows);
    corr = run_sum + pad16(rows);
    acc = corr + pad16(rows);
    sc = acc + pad16(rows) * hdp;
    rest = sc + pad16(rows) * kAttentionBlockKeys;
    for (int64_t r = 0; r < rows; ++r) {
      run_max[r] = -INFINITY;
      run_sum[r] = 0.0f;
      std::fill(acc + r * hdp, acc + (r + 1) * hdp, 0.0f);
    }
  }

  // With attention sinks, each row's softmax starts as if it had seen a key scored its head's sink, with a zero
  // value: running max the sink, running sum exp(0) = 1.
  void start_at_sinks(const AttentionSpan& sp) const {
    if (sp.sinks == nullptr) return;
    const int64_t nh = sp.head_end - sp.head_begin;
    for (int64_t r = 0; r < rows; ++r) {
      run_max[r] = sp.sinks[sp.head_begin + r % nh];
      run_sum[r] = 1.0f;
    }
  }

  // Each row's normalised result to sp.out, or its unnormalised partial (max, sum, accumulator) to sp.partial.
  void write(const AttentionSpan& sp, int64_t hd) const {
    const int64_t nh = sp.head_end - sp.head_begin;
    for (int64_t r = 0; r < rows; ++r) {
      const float* a = acc + r * hdp;
      if (sp.partial) {
        float* part = sp.partial + r * (hd + 2);
        part[0] = run_max[r];
        part[1] = run_sum[r];
        std::copy(a, a + hd, part + 2);
        continue;
      }
      const float inv = 1.0f / run_sum[r];
      float* o = sp.out + ((r / nh) * sp.heads + sp.head_begin + r % nh) * hd;
      for (int64_t d = 0; d < hd; ++d) o[d] = a[d] * inv;
    }
  }
};

// Which rows of a span see the block of keys [b0, b0 + nb): rows from r_first on (their token's position reaches
// b0), each its first seen(r) keys of the block (at least one from r_first on; causal masking is the rest).
// With a sliding window a row also skips the keys before its window: those of [0, first_seen(r)).
struct BlockRows {
  const AttentionSpan& sp;
  int64_t first_pos, nh, b0, nb, r_first;

  BlockRows(const AttentionSpan& sp_, int64_t b0_, int64_t nb_)
      : sp(sp_), first_pos(sp_.first_pos), nh(sp_.head_end - sp_.head_begin), b0(b0_), nb(nb_) {
    if (sp.key_limit) {
      int64_t t = 0;
      while (t < sp.ntok && sp.key_limit[t] <= b0) ++t;
      r_first = t * nh;
    } else {
      r_first = (b0 > first_pos ? b0 - first_pos : 0) * nh;
    }
  }
  int64_t seen(int64_t r) const {
    const int64_t n = (sp.key_limit ? sp.key_limit[r / nh] : first_pos + r / nh + 1) - b0;
    return n < nb ? n : nb;
  }
  int64_t first_seen(int64_t r) const { return std::clamp(window_start(sp, r / nh) - b0, int64_t{0}, nb); }

  // Before a row's softmax step: its keys before the window become -inf, and the rest cap * tanh(s / cap) when the
  // scores are soft-capped. False when the row sees no key of the block: its weights w[0, nb) are then zero, and
  // the caller leaves its running state as it is (correction 1).
  bool window_and_cap(int64_t r, float* w) const {
    const int64_t first = first_seen(r), cnt = seen(r);
    if (first >= cnt) {
      std::fill(w, w + nb, 0.0f);
      return false;
    }
    std::fill(w, w + first, -INFINITY);
    if (sp.softcap > 0.0f)
      for (int64_t j = first; j < cnt; ++j) w[j] = sp.softcap * std::tanh(w[j] / sp.softcap);
    return true;
  }
};

// What a block requests while it computes, a share at a time (a burst of a whole block's requests stalls once
// the core's miss buffers are full): its own values, and the keys of the next block of the span, or after the
// span's last block the first keys of the span this thread runs next (sp.next: its pages lie elsewhere in the
// pool, where no hardware prefetcher would look).
template <class K>
class BlockRequests {
 public:
  BlockRequests(const KvLayerView& cache, const AttentionSpan& sp, const HeadPages<K>& pages, int64_t b0, int64_t nb)
      : pages_(pages), ahead_(&pages), b0_(b0), nb_(nb) {
    const int64_t end = keys_end(sp);
    ahead_begin_ = b0 + nb;
    ahead_end_ = std::min(end, b0 + nb + kAttentionBlockKeys);
    if (ahead_begin_ >= ahead_end_ && sp.next) {
      next_.emplace(cache, *sp.next);
      ahead_ = &*next_;
      ahead_begin_ = sp.next->ctx_begin;
      ahead_end_ = std::min(keys_end(*sp.next), sp.next->ctx_begin + kAttentionBlockKeys);
    }
  }
  BlockRequests(const BlockRequests&) = delete;
  BlockRequests& operator=(const BlockRequests&) = delete;

  // The share of block keys [s0, s0 + keys): those keys' values, and the matching fraction of the ahead block.
  void operator()(int64_t s0, int64_t keys) const {
    pages_.prefetch(b0_ + s0, std::min(b0_ + nb_, b0_ + s0 + keys), false, true);
    const int64_t a0 = ahead_begin_ + s0 * kAttentionBlockKeys / nb_;
    if (a0 < ahead_end_) {
      ahead_->prefetch(a0, std::min(ahead_end_, ahead_begin_ + (s0 + keys) * kAttentionBlockKeys / nb_), true, false);
    }
  }

 private:
  const HeadPages<K>& pages_;
  std::optional<HeadPages<K>> next_;
  const HeadPages<K>* ahead_;
  int64_t b0_, nb_, ahead_begin_ = 0, ahead_end_ = 0;
};

}  // namespace
}  // namespace minfer::kernels::x86
