// The KV cache's codes, written and read one value at a time: the quantization of every KvCacheDtype as a token's
// K and V are stored (the only writer, for every ISA: it runs once per token and kv head), and the decoding the
// reference attention reads them with. Layout: KvLayerView (kernels.h).
#include <algorithm>
#include <cmath>
#include <vector>

#include "base/error.h"
#include "base/half.h"
#include "kernels/ref/ref_kernels.h"

namespace minfer::kernels::ref {
namespace {

// OCP e4m3 ("e4m3fn") of x, |x| <= 448, rounded to nearest even: S.EEEE.MMM, bias 7, subnormals below 2^-6.
uint8_t fp8_e4m3_code(float x) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  const float a = std::min(std::fabs(x), kFp8E4m3Max);
  if (a < 0.015625f) return static_cast<uint8_t>(sign | static_cast<int>(std::nearbyint(a * 512.0f)));  // m * 2^-9
  int e2 = 0;
  const float f = std::frexp(a, &e2);  // a = f 2^e2, f in [0.5, 1): exponent e2 - 1, mantissa 2f - 1
  int exp = e2 - 1 + 7;
  int mant = static_cast<int>(std::nearbyint((2.0f * f - 1.0f) * 8.0f));
  if (mant == 8) mant = 0, ++exp;
  return static_cast<uint8_t>(sign | (exp << 3) | mant);  // 448 = 0x7e is the largest a can round to
}

float fp8_e4m3_value(uint8_t c) {
  const int exp = (c >> 3) & 15, mant = c & 7;
  const float a = exp == 0 ? std::ldexp(static_cast<float>(mant), -9) : std::ldexp(1.0f + mant / 8.0f, exp - 7);
  return (c & 0x80) ? -a : a;
}

// Where element d of a key or value of token t lives: its code's byte (or element) index and, for q4_0, nibble.
struct CodeAt {
  int64_t index;
  bool high = false;
};
CodeAt key_code(const KvLayerView& c, int64_t block, int64_t t, int64_t d) {
  const int64_t ps = c.page.size();
  if (c.dtype == KvCacheDtype::kQ4_0) return {block / 2 + (d / 2) * ps + t, (d & 1) != 0};
  return {block + d * ps + t};
}
CodeAt value_code(const KvLayerView& c, int64_t block, int64_t t, int64_t d) {
  if (c.dtype == KvCacheDtype::kQ4_0)
    return {(block + t * c.head_dim) / 2 + (d / kKvBlockDims) * 16 + d % 16, d % kKvBlockDims >= 16};
  return {block + t * c.head_dim + d};
}

float scale_at(const KvLayerView& c, const void* pool, int64_t i) {
  return kv_is_blocked(c.dtype) ? f16_to_f32(static_cast<const uint16_t*>(pool)[i])
                                : static_cast<const float*>(pool)[i];
}
void set_scale(const KvLayerView& c, void* pool, int64_t i, float s) {
  if (kv_is_blocked(c.dtype)) {
    static_cast<uint16_t*>(pool)[i] = f32_to_f16(s);
  } else {
    static_cast<float*>(pool)[i] = s;
  }
}

// The code of x at `at` in pool (the scale's inverse already applied for the quantized types).
void put_code(const KvLayerView& c, void* pool, CodeAt at, float x) {
  switch (c.dtype) {
    case KvCacheDtype::kF32: static_cast<float*>(pool)[at.index] = x; return;
    case KvCacheDtype::kBf16: static_cast<uint16_t*>(pool)[at.index] = f32_to_bf16(x); return;
    case KvCacheDtype::kF16: static_cast<uint16_t*>(pool)[at.index] = f32_to_f16(x); return;
    case KvCacheDtype::kInt8:
      static_cast<int8_t*>(pool)[at.index] = static_cast<int8_t>(std::clamp(std::nearbyint(x), -127.0f, 127.0f));
      return;
    case KvCacheDtype::kFp8E4m3: static_cast<uint8_t*>(pool)[at.index] = fp8_e4m3_code(x); return;
    case KvCacheDtype::kQ8_0: static_cast<int8_t*>(pool)[at.index] = static_cast<int8_t>(std::round(x)); return;
    case KvCacheDtype::kQ4_0: {
      // llama.cpp's quantize_row_q4_0_ref: x * id + 8.5 truncated, at most 15.
      const int q = std::min(15, static_cast<int>(static_cast<int8_t>(x + 8.5f)));
      uint8_t& byte = static_cast<uint8_t*>(pool)[at.index];
      byte = at.high ? static_cast<uint8_t>((byte & 0x0f) | (q << 4)) : static_cast<uint8_t>((byte & 0xf0) | q);
      return;
    }
    case KvCacheDtype::kAuto: break;
  }
  fail("kv_write: KV cache of type {}", kv_cache_dtype_name(c.dtype));
}

float code_value(const KvLayerView& c, const void* pool, CodeAt at) {
  switch (c.dtype) {
    case KvCacheDtype::kF32: return static_cast<const float*>(pool)[at.index];
    case KvCacheDtype::kBf16: return bf16_to_f32(static_cast<const uint16_t*>(pool)[at.index]);
    case KvCacheDtype::kF16: return f16_to_f32(static_cast<const uint16_t*>(pool)[at.index]);
    case KvCacheDtype::kInt8:
    case KvCacheDtype::kQ8_0: return static_cast<const int8_t*>(pool)[at.index];
    case KvCacheDtype::kFp8E4m3: return fp8_e4m3_value(static_cast<const uint8_t*>(pool)[at.index]);
    case KvCacheDtype::kQ4_0: {
      const uint8_t byte = static_cast<const uint8_t*>(pool)[at.index];
      return static_cast<float>((at.high ? byte >> 4 : byte & 15) - 8);
    }
    case KvCacheDtype::kAuto: break;
  }
  return 0.0f;
}

// The scale of a group of `n` values x (0 when all are zero) and its inverse (0 then), each type's rule:
// amax / 127 (int8, q8_0), amax / 448 (fp8), the value of largest magnitude / -8 (q4_0, llama.cpp's).
std::pair<float, float> group_scale(KvCacheDtype dtype, const float* x, int64_t n) {
  float amax = 0.0f, extreme = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), extreme = x[i];
  }
  const float s = dtype == KvCacheDtype::kQ4_0      ? extreme / -8.0f
                  : dtype == KvCacheDtype::kFp8E4m3 ? amax / kFp8E4m3Max
                                                    : amax / 127.0f;
  return {s, s != 0.0f ? 1.0f / s : 0.0f};
}

// Stores one head's vector x (head_dim values) of token t: its codes at code(d) and, for the scaled types, each
// group's scale at scale_index(group).
template <class CodeFn, class ScaleIndexFn>
void store_vector(const KvLayerView& c, void* codes, void* scales, const float* x, CodeFn code,
                  ScaleIndexFn scale_index) {
  const int64_t hd = c.head_dim, groups = c.scale_groups();
  if (groups == 0) {
    for (int64_t d = 0; d < hd; ++d) put_code(c, codes, code(d), x[d]);
    return;
  }
  const int64_t dims = hd / groups;
  for (int64_t b = 0; b < groups; ++b) {
    const auto [s, inv] = group_scale(c.dtype, x + b * dims, dims);
    set_scale(c, scales, scale_index(b), s);
    for (int64_t d = b * dims; d < (b + 1) * dims; ++d) put_code(c, codes, code(d), x[d] * inv);
  }
}

}  // namespace

void kv_write_head(const KvLayerView& cache, int64_t kv_head, const float* k, const float* v, int64_t slot) {
  MINFER_CHECK(cache.code_bits() > 0, "kv_write: KV cache of type {}", kv_cache_dtype_name(cache.dtype));
  if (slot < 0) return;
  thread_local std::vector<float> rotated;
  if (kv_rotated(cache.dtype, cache.head_dim)) {  // the 8- and 4-bit types store H k and H v (kv_format.h)
    rotated.assign(k, k + cache.head_dim);
    rotated.insert(rotated.end(), v, v + cache.head_dim);
    hadamard_rows(rotated.data(), 2, cache.head_dim);
    k = rotated.data();
    v = rotated.data() + cache.head_dim;
  }
  const int64_t ps = cache.page.size(), t = cache.page.slot_in_page(slot), page = cache.page.page_of(slot);
  const int64_t block = cache.head_block(page, kv_head), sblock = cache.scale_block(page, kv_head);
  const int64_t groups = cache.scale_groups();
  store_vector(
      cache, cache.k, cache.k_scale, k, [&](int64_t d) { return key_code(cache, block, t, d); },
      [&](int64_t b) { return sblock + b * ps + t; });
  store_vector(
      cache, cache.v, cache.v_scale, v, [&](int64_t d) { return value_code(cache, block, t, d); },
      [&](int64_t b) { return sblock + t * groups + b; });
}

void kv_write(const KvLayerView& cache, const float* k, const float* v, const int64_t* slot_mapping, int64_t tokens) {
  const int64_t hd = cache.head_dim, row = cache.kv_heads * hd;
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t g = 0; g < cache.kv_heads; ++g)
      ref::kv_write_head(cache, g, k + t * row + g * hd, v + t * row + g * hd, slot_mapping[t]);
  }
}

float kv_key_at(const KvLayerView& cache, int64_t page, int64_t g, int64_t t, int64_t d) {
  const float code = code_value(cache, cache.k, key_code(cache, cache.head_block(page, g), t, d));
  const int64_t groups = cache.scale_groups();
  if (groups == 0) return code;
  const int64_t b = d / (cache.head_dim / groups);
  return code * scale_at(cache, cache.k_scale, cache.scale_block(page, g) + b * cache.page.size() + t);
}

float kv_value_at(const KvLayerView& cache, int64_t page, int64_t g, int64_t t, int64_t d) {
  const float code = code_value(cache, cache.v, value_code(cache, cache.head_block(page, g), t, d));
  const int64_t groups = cache.scale_groups();
  if (groups == 0) return code;
  const int64_t b = d / (cache.head_dim / groups);
  return code * scale_at(cache, cache.v_scale, cache.scale_block(page, g) + t * groups + b);
}

}  // namespace minfer::kernels::ref
