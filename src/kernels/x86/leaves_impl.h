// The row-wise leaf kernels of both x86 ISAs, written once over a vector-traits type V (avx2::Vec in
// vec_avx2.h, avx512::Vec in vec_avx512.h): RMSNorm, RoPE, SiLU / GELU(tanh) gated products, addition, row
// softmax, embedding rows. Each ISA's leaves_<isa>.cpp includes this after its Vec and instantiates it, so the
// templates compile with that file's instruction-set flags; they have internal linkage (an anonymous
// namespace), so no instantiation is shared between ISAs.
//
// Element-wise arithmetic follows the reference's order (no FMA contraction where ref/ has none), so results
// differ from ref/ only where a sum is reordered (RMSNorm's sum of squares, softmax's sum): whole vectors first,
// then one masked tail.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/ref/ref_kernels.h"
#include "kernels/x86/rope_tables.h"
#include "tensor/dtype.h"

namespace minfer::kernels::x86 {
namespace {

template <class V, class W>
void rmsnorm_rows(const float* x, const typename W::Elem* w, float eps, float* y, int64_t rows, int64_t dim) {
  constexpr int64_t L = V::kWidth;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    typename V::Reg s0 = V::zero(), s1 = V::zero();
    int64_t i = 0;
    for (; i + 2 * L <= dim; i += 2 * L) {
      const typename V::Reg a = V::load(xr + i), b = V::load(xr + i + L);
      s0 = V::fmadd(a, a, s0);
      s1 = V::fmadd(b, b, s1);
    }
    for (; i < dim; i += L) {
      const typename V::Reg a = V::load_tail(xr + i, dim - i);
      s0 = V::fmadd(a, a, s0);
    }
    const float ss = V::reduce_add(V::add(s0, s1));
    const typename V::Reg inv = V::set1(1.0f / std::sqrt(ss / static_cast<float>(dim) + eps));
    for (i = 0; i + L <= dim; i += L)
      V::store(yr + i, V::mul(V::mul(V::load(xr + i), inv), V::template load_weights<W>(w + i)));
    if (i < dim) {
      const int64_t n = dim - i;
      V::store_tail(yr + i, n,
                    V::mul(V::mul(V::load_tail(xr + i, n), inv), V::template load_weights_tail<W>(w + i, V::tail(n))));
    }
  }
}

template <class V, class W>
void embedding_rows(const int32_t* ids, int64_t n, const typename W::Elem* table, int64_t dim, float* out) {
  constexpr int64_t L = V::kWidth;
  for (int64_t t = 0; t < n; ++t) {
    const typename W::Elem* row = table + static_cast<int64_t>(ids[t]) * dim;
    float* o = out + t * dim;
    int64_t i = 0;
    for (; i + L <= dim; i += L) V::store(o + i, V::template load_weights<W>(row + i));
    if (i < dim) V::store_tail(o + i, dim - i, V::template load_weights_tail<W>(row + i, V::tail(dim - i)));
  }
}

// RMSNorm and embedding rows for the weights' element type.
template <class V, class F32W, class F16W, class Bf16W>
struct Rows {
  static void rmsnorm(const float* x, const void* weight, DType wtype, float eps, float* y, int64_t rows, int64_t dim) {
    switch (wtype) {
      case DType::F16: return rmsnorm_rows<V, F16W>(x, static_cast<const uint16_t*>(weight), eps, y, rows, dim);
      case DType::BF16: return rmsnorm_rows<V, Bf16W>(x, static_cast<const uint16_t*>(weight), eps, y, rows, dim);
      default: return rmsnorm_rows<V, F32W>(x, static_cast<const float*>(weight), eps, y, rows, dim);
    }
  }
  static void embedding(const int32_t* ids, int64_t n, const void* table, DType dtype, int64_t dim, float* out) {
    switch (dtype) {
      case DType::F16: return embedding_rows<V, F16W>(ids, n, static_cast<const uint16_t*>(table), dim, out);
      case DType::BF16: return embedding_rows<V, Bf16W>(ids, n, static_cast<const uint16_t*>(table), dim, out);
      default: return embedding_rows<V, F32W>(ids, n, static_cast<const float*>(table), dim, out);
    }
  }
};

// Neox rotates pair (i, i + half_rot) by the table's row as is; interleaved pairs (2i, 2i + 1) by cs/sn
// (interleaved_rope_row).
template <class V>
void rope(float* x, const float* cos, const float* sin, int64_t tokens, int64_t heads, int64_t head_dim,
          int64_t half_rot, RopeStyle style) {
  constexpr int64_t L = V::kWidth;
  if (half_rot > kMaxRopeHalfRot) return ref::rope(x, cos, sin, tokens, heads, head_dim, half_rot, style);
  alignas(64) float cs[2 * kMaxRopeHalfRot];
  alignas(64) float sn[2 * kMaxRopeHalfRot];
  const bool neox = style == RopeStyle::kNeox;
  for (int64_t t = 0; t < tokens; ++t) {
    const float* ct = cos + t * half_rot;
    const float* st = sin + t * half_rot;
    if (!neox) interleaved_rope_row(ct, st, half_rot, cs, sn);
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x + (t * heads + h) * head_dim;
      if (neox) {
        for (int64_t i = 0; i < half_rot; i += L) {
          const int64_t n = half_rot - i;
          const typename V::Reg c = V::load_tail(ct + i, n), s = V::load_tail(st + i, n);
          const typename V::Reg x0 = V::load_tail(v + i, n), x1 = V::load_tail(v + half_rot + i, n);
          V::store_tail(v + i, n, V::sub(V::mul(x0, c), V::mul(x1, s)));
          V::store_tail(v + half_rot + i, n, V::add(V::mul(x1, c), V::mul(x0, s)));
        }
      } else {
        for (int64_t i = 0; i < 2 * half_rot; i += L) {
          const int64_t n = 2 * half_rot - i;
          const typename V::Reg xv = V::load_tail(v + i, n);
          V::store_tail(
              v + i, n,
              V::add(V::mul(xv, V::load_tail(cs + i, n)), V::mul(V::swap_pairs(xv), V::load_tail(sn + i, n))));
        }
      }
    }
  }
}

// g / (1 + exp(-g)) * up.
template <class V>
void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  const typename V::Reg one = V::set1(1.0f);
  for (int64_t i = 0; i < n; i += V::kWidth) {
    const typename V::Reg g = V::load_tail(gate + i, n - i);
    const typename V::Reg e = V::exp(V::sub(V::zero(), g));
    V::store_tail(out + i, n - i, V::mul(V::div(g, V::add(one, e)), V::load_tail(up + i, n - i)));
  }
}

// x / (1 + exp(-g)): the sigmoid output gate of Qwen3.5's attention (gate, then the gated values).
template <class V>
void sigmoid_mul(const float* gate, const float* x, float* out, int64_t n) {
  const typename V::Reg one = V::set1(1.0f);
  for (int64_t i = 0; i < n; i += V::kWidth) {
    const typename V::Reg e = V::exp(V::sub(V::zero(), V::load_tail(gate + i, n - i)));
    V::store_tail(out + i, n - i, V::div(V::load_tail(x + i, n - i), V::add(one, e)));
  }
}

// g / (1 + exp(-z)) * up with z = 2 sqrt(2/pi) (g + 0.044715 g^3): GELU(tanh) as ref::gelu_tanh_mul writes it.
template <class V>
void gelu_tanh_mul(const float* gate, const float* up, float* out, int64_t n) {
  const typename V::Reg one = V::set1(1.0f), c1 = V::set1(-1.5957691216057308f), c3 = V::set1(0.044715f);
  for (int64_t i = 0; i < n; i += V::kWidth) {
    const typename V::Reg g = V::load_tail(gate + i, n - i);
    const typename V::Reg inner = V::fmadd(V::mul(c3, g), V::mul(g, g), g);
    const typename V::Reg e = V::exp(V::mul(c1, inner));
    V::store_tail(out + i, n - i, V::mul(V::div(g, V::add(one, e)), V::load_tail(up + i, n - i)));
  }
}

// gelu_tanh_mul without the product (a vision encoder's fc1 -> GELU -> fc2).
template <class V>
void gelu_tanh(const float* x, float* out, int64_t n) {
  const typename V::Reg one = V::set1(1.0f), c1 = V::set1(-1.5957691216057308f), c3 = V::set1(0.044715f);
  for (int64_t i = 0; i < n; i += V::kWidth) {
    const typename V::Reg g = V::load_tail(x + i, n - i);
    const typename V::Reg inner = V::fmadd(V::mul(c3, g), V::mul(g, g), g);
    V::store_tail(out + i, n - i, V::div(g, V::add(one, V::exp(V::mul(c1, inner)))));
  }
}

// gpt-oss's clamped SwiGLU as ref::swiglu_oai writes it: g = min(gate, 7), u = clamp(up, -7, 7),
// g / (1 + exp(-1.702 g)) * (u + 1).
template <class V>
void swiglu_oai(const float* gate, const float* up, float* out, int64_t n) {
  const typename V::Reg one = V::set1(1.0f), limit = V::set1(ref::kSwigluOaiLimit),
                        low = V::set1(-ref::kSwigluOaiLimit);
  const typename V::Reg minus_alpha = V::set1(-ref::kSwigluOaiAlpha);
  for (int64_t i = 0; i < n; i += V::kWidth) {
    const typename V::Reg g = V::min(V::load_tail(gate + i, n - i), limit);
    const typename V::Reg u = V::min(V::max(V::load_tail(up + i, n - i), low), limit);
    const typename V::Reg e = V::exp(V::mul(minus_alpha, g));
    V::store_tail(out + i, n - i, V::mul(V::div(g, V::add(one, e)), V::add(u, one)));
  }
}

template <class V>
void add(const float* a, const float* b, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + V::kWidth <= n; i += V::kWidth) V::store(out + i, V::add(V::load(a + i), V::load(b + i)));
  if (i < n) V::store_tail(out + i, n - i, V::add(V::load_tail(a + i, n - i), V::load_tail(b + i, n - i)));
}

template <class V>
void softmax(float* x, int64_t rows, int64_t cols) {
  constexpr int64_t L = V::kWidth;
  const int64_t full = cols / L * L, tail = cols - full;
  for (int64_t r = 0; r < rows; ++r) {
    float* v = x + r * cols;
    typename V::Reg mx = V::set1(-INFINITY);
    for (int64_t i = 0; i < full; i += L) mx = V::max(mx, V::load(v + i));
    if (tail > 0) mx = V::max(mx, V::load_tail_or_min(v + full, tail));
    const typename V::Reg vmax = V::set1(V::reduce_max(mx));
    typename V::Reg sum = V::zero();
    for (int64_t i = 0; i < full; i += L) {
      const typename V::Reg e = V::exp(V::sub(V::load(v + i), vmax));
      sum = V::add(sum, e);
      V::store(v + i, e);
    }
    if (tail > 0) {
      // Lanes past the row end are exp(0 - max) of zero-filled loads: kept out of the sum.
      const typename V::Reg e = V::keep_first(V::exp(V::sub(V::load_tail(v + full, tail), vmax)), tail);
      sum = V::add(sum, e);
      V::store_tail(v + full, tail, e);
    }
    const typename V::Reg inv = V::set1(1.0f / V::reduce_add(sum));
    for (int64_t i = 0; i < full; i += L) V::store(v + i, V::mul(V::load(v + i), inv));
    if (tail > 0) V::store_tail(v + full, tail, V::mul(V::load_tail(v + full, tail), inv));
  }
}

}  // namespace
}  // namespace minfer::kernels::x86
