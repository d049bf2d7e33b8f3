// The block layouts (bytes, in order) follow ggml's structs:
//   Q4_0  d:f16 qs[16]            Q4_1  d:f16 m:f16 qs[16]      Q8_0  d:f16 qs[32]:i8
//   Q5_0  d:f16 qh[4] qs[16]      Q5_1  d:f16 m:f16 qh[4] qs[16]
//   Q4_K  d:f16 dmin:f16 scales[12] qs[128]
//   Q5_K  d:f16 dmin:f16 scales[12] qh[32] qs[128]
//   Q6_K  ql[128] qh[64] scales[16]:i8 d:f16
// The arithmetic is written in the order llama.cpp's reference uses, in plain f32, so that ties and near-ties round
// the same way.
#include "model/quant/gguf_block_quantizer.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "base/half.h"
#include "kernels/gguf_blocks.h"  // k_scale_min: the 6-bit scales read back as the decoders read them

namespace minfer {
namespace {

constexpr int kSuper = 256;  // elements of a K-quant super-block

// Round to nearest, ties to even (llama.cpp's nearest_int adds 1.5 * 2^23, which rounds the same way).
int nearest_int(float v) { return static_cast<int>(std::lrintf(v)); }

void put_f16(uint8_t* p, float v) {
  const uint16_t h = f32_to_f16(v);
  std::memcpy(p, &h, 2);
}
float get_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

// The element of largest magnitude (the first one on ties), signed.
float signed_max(const float* x, int n) {
  float amax = 0, max = 0;
  for (int j = 0; j < n; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

void q8_0_block(const float* x, uint8_t* out) {
  float amax = 0;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  put_f16(out, d);
  for (int j = 0; j < 32; ++j) out[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(std::round(x[j] * id)));
}

// Q4_0 and Q5_0: d = max / -(2^(bits-1)), q = x / d + 2^(bits-1) truncated after adding one half.
template <int kBits>
void symmetric_block(const float* x, uint8_t* out) {
  constexpr int kHalf = 1 << (kBits - 1), kTop = (1 << kBits) - 1;
  const float d = signed_max(x, 32) / -kHalf;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  put_f16(out, d);
  uint8_t* qs = out + (kBits == 5 ? 6 : 2);
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    const uint8_t lo =
        static_cast<uint8_t>(std::min(kTop, static_cast<int>(static_cast<int8_t>(x[j] * id + (kHalf + 0.5f)))));
    const uint8_t hi =
        static_cast<uint8_t>(std::min(kTop, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + (kHalf + 0.5f)))));
    qs[j] = static_cast<uint8_t>((lo & 0x0F) | ((hi & 0x0F) << 4));
    qh |= static_cast<uint32_t>((lo & 0x10u) >> 4) << j;
    qh |= static_cast<uint32_t>((hi & 0x10u) >> 4) << (j + 16);
  }
  if (kBits == 5) std::memcpy(out + 2, &qh, 4);
}

// Q4_1 and Q5_1: d = (max - min) / (2^bits - 1), m = min.
template <int kBits>
void affine_block(const float* x, uint8_t* out) {
  constexpr int kTop = (1 << kBits) - 1;
  float min = FLT_MAX, max = -FLT_MAX;
  for (int j = 0; j < 32; ++j) {
    min = std::min(min, x[j]);
    max = std::max(max, x[j]);
  }
  const float d = (max - min) / kTop;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  put_f16(out, d);
  put_f16(out + 2, min);
  uint8_t* qs = out + (kBits == 5 ? 8 : 4);
  // llama.cpp truncates Q4_1's levels through int8 and clamps them, and Q5_1's through uint8 unclamped.
  auto level = [](float v) {
    return kBits == 4 ? std::min(15, static_cast<int>(static_cast<int8_t>(v)))
                      : static_cast<int>(static_cast<uint8_t>(v));
  };
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    const int lo = level((x[j] - min) * id + 0.5f), hi = level((x[j + 16] - min) * id + 0.5f);
    qs[j] = static_cast<uint8_t>((lo & 0x0F) | ((hi & 0x0F) << 4));
    qh |= static_cast<uint32_t>((lo & 0x10) >> 4) << j;
    qh |= static_cast<uint32_t>((hi & 0x10) >> 4) << (j + 16);
  }
  if (kBits == 5) std::memcpy(out + 4, &qh, 4);
}

// make_qkx2_quants: scale and (negated) minimum for n values in [0, nmax] minimising the weighted squared error,
// searched over nstep + 1 candidate scales around nmax / (max - min). L receives the levels.
float scale_min_search(int n, int nmax, const float* x, const float* w, uint8_t* L, float* the_min, float rmin,
                       float rdelta, int nstep) {
  float min = x[0], max = x[0];
  float sum_w = w[0], sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    std::fill(L, L + n, uint8_t{0});
    *the_min = -min;
    return 0.f;
  }
  float iscale = nmax / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<uint8_t>(std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax));
    const float diff = scale * L[i] + min - x[i];
    best_error += w[i] * (diff * diff);
  }
  uint8_t aux[32];
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * is + nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax);
      aux[i] = static_cast<uint8_t>(l);
      sum_l += w[i] * l;
      sum_l2 += w[i] * l * l;
      sum_xl += w[i] * l * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D <= 0) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
    if (this_min > 0) {
      this_min = 0;
      this_scale = sum_xl / sum_l2;
    }
    float error = 0;
    for (int i = 0; i < n; ++i) {
      const float diff = this_scale * aux[i] + this_min - x[i];
      error += w[i] * (diff * diff);
    }
    if (error < best_error) {
      std::copy(aux, aux + n, L);
      best_error = error;
      scale = this_scale;
      min = this_min;
    }
  }
  *the_min = -min;
  return scale;
}

// Q4_K / Q5_K's 12 bytes of eight 6-bit scales and eight 6-bit mins.
void pack_scales_mins(const uint8_t* ls, const uint8_t* lm, uint8_t* s) {
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      s[j] = ls[j];
      s[j + 4] = lm[j];
    } else {
      s[j + 4] = static_cast<uint8_t>((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
      s[j - 4] |= static_cast<uint8_t>((ls[j] >> 4) << 6);
      s[j] |= static_cast<uint8_t>((lm[j] >> 4) << 6);
    }
  }
}

// Levels L[256] in [0, 2^bits - 1] of a Q4_K / Q5_K super-block; writes d, dmin and the scales at `head`.
template <int kBits>
void k_affine_levels(const float* x, uint8_t* head, uint8_t* L) {
  constexpr int kTop = (1 << kBits) - 1;
  float scales[8], mins[8], weights[32];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xs[l]);
    scales[j] = scale_min_search(32, kTop, xs, weights, L + 32 * j, &mins[j], kBits == 4 ? -1.f : -0.5f, 0.1f,
                                 kBits == 4 ? 20 : 15);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  uint8_t ls[8], lm[8];
  for (int j = 0; j < 8; ++j) {
    ls[j] = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_scale * scales[j])));
    lm[j] = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_min * mins[j])));
  }
  std::memset(head + 4, 0, 12);
  pack_scales_mins(ls, lm, head + 4);
  put_f16(head, max_scale / 63.f);
  put_f16(head + 2, max_min / 63.f);
  // The levels again, against the scales as rounded into the file.
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    kernels::gguf::k_scale_min(head + 4, j, &sc, &m);
    const float d = get_f16(head) * sc;
    if (d == 0) continue;
    const float dm = get_f16(head + 2) * m;
    for (int i = 0; i < 32; ++i)
      L[32 * j + i] = static_cast<uint8_t>(std::clamp(nearest_int((x[32 * j + i] + dm) / d), 0, kTop));
  }
}

void q4_k_block(const float* x, uint8_t* out) {
  uint8_t L[kSuper];
  k_affine_levels<4>(x, out, L);
  uint8_t* q = out + 16;
  for (int j = 0; j < kSuper; j += 64, q += 32)
    for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
}

void q5_k_block(const float* x, uint8_t* out) {
  uint8_t L[kSuper];
  k_affine_levels<5>(x, out, L);
  uint8_t* qh = out + 16;
  uint8_t* ql = out + 48;
  std::memset(qh, 0, 32);
  uint8_t m1 = 1, m2 = 2;
  for (int n = 0; n < kSuper; n += 64, ql += 32) {
    for (int j = 0; j < 32; ++j) {
      int l1 = L[n + j], l2 = L[n + j + 32];
      if (l1 > 15) {
        l1 -= 16;
        qh[j] |= m1;
      }
      if (l2 > 15) {
        l2 -= 16;
        qh[j] |= m2;
      }
      ql[j] = static_cast<uint8_t>(l1 | (l2 << 4));
    }
    m1 = static_cast<uint8_t>(m1 << 2);
    m2 = static_cast<uint8_t>(m2 << 2);
  }
}

// make_qx_quants with x^2 weights: a signed scale for 16 values in [-nmax, nmax - 1], searched over 19 candidates.
float signed_scale_search(int n, int nmax, const float* x, int8_t* L) {
  const float max = signed_max(x, n);
  if (std::fabs(max) < 1e-15f) {
    std::fill(L, L + n, int8_t{0});
    return 0.f;
  }
  auto level = [&](float iscale, int i) { return std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1); };
  float iscale = -nmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = level(iscale, i);
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax + 0.1f * is) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = level(iscale, i);
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(nmax + level(iscale, i));
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

void q6_k_block(const float* x, uint8_t* out) {
  uint8_t* ql = out;
  uint8_t* qh = out + 128;
  int8_t* sc = reinterpret_cast<int8_t*>(out + 192);
  int8_t L[kSuper];
  float scales[16];
  float max_scale = 0, max_abs_scale = 0;
  for (int ib = 0; ib < 16; ++ib) {
    scales[ib] = signed_scale_search(16, 32, x + 16 * ib, L + 16 * ib);
    if (std::fabs(scales[ib]) > max_abs_scale) {
      max_abs_scale = std::fabs(scales[ib]);
      max_scale = scales[ib];
    }
  }
  if (max_abs_scale < 1e-15f) {
    std::memset(out, 0, 210);
    return;
  }
  const float iscale = -128.f / max_scale;
  put_f16(out + 208, 1 / iscale);
  for (int ib = 0; ib < 16; ++ib) sc[ib] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
  for (int j = 0; j < 16; ++j) {
    const float d = get_f16(out + 208) * sc[j];
    if (d == 0) continue;
    for (int i = 0; i < 16; ++i)
      L[16 * j + i] = static_cast<int8_t>(std::clamp(nearest_int(x[16 * j + i] / d), -32, 31) + 32);
  }
  for (int j = 0; j < kSuper; j += 128, ql += 64, qh += 32) {
    for (int l = 0; l < 32; ++l) {
      const int q1 = L[j + l] & 0xF, q2 = L[j + l + 32] & 0xF, q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
      ql[l] = static_cast<uint8_t>(q1 | (q3 << 4));
      ql[l + 32] = static_cast<uint8_t>(q2 | (q4 << 4));
      qh[l] = static_cast<uint8_t>((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
                                   ((L[j + l + 96] >> 4) << 6));
    }
  }
}

using BlockQuantizer = void (*)(const float*, uint8_t*);

BlockQuantizer block_quantizer(DType type) {
  switch (type) {
    case DType::Q8_0: return q8_0_block;
    case DType::Q4_0: return symmetric_block<4>;
    case DType::Q5_0: return symmetric_block<5>;
    case DType::Q4_1: return affine_block<4>;
    case DType::Q5_1: return affine_block<5>;
    case DType::Q4_K: return q4_k_block;
    case DType::Q5_K: return q5_k_block;
    case DType::Q6_K: return q6_k_block;
    default: return nullptr;
  }
}

}  // namespace

bool gguf_quantizer_supports(DType type) {
  return type == DType::F32 || type == DType::F16 || type == DType::BF16 || block_quantizer(type) != nullptr;
}

void quantize_gguf_row(DType type, const float* x, int64_t n, uint8_t* out) {
  if (type == DType::F32) {
    std::memcpy(out, x, static_cast<size_t>(n) * 4);
    return;
  }
  if (type == DType::F16 || type == DType::BF16) {
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t h = type == DType::F16 ? f32_to_f16(x[i]) : f32_to_bf16(x[i]);
      std::memcpy(out + 2 * i, &h, 2);
    }
    return;
  }
  const BlockQuantizer quantize = block_quantizer(type);
  if (!quantize) fail("no GGUF quantizer for {}", dtype_name(type));
  const BlockShape block = dtype_block(type);
  if (n % block.elements != 0) fail("{} values are not whole {} blocks of {}", n, dtype_name(type), block.elements);
  for (int64_t b = 0; b < n / block.elements; ++b) quantize(x + b * block.elements, out + b * block.bytes);
}

}  // namespace minfer
