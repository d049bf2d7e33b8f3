// The storage of each KV cache type (KvCacheDtype) in numbers: bits of a value's code, scales per token and kv
// head, bytes of a scale. The page layout they describe is KvLayerView's (kernels.h); the KV cache sizes its pools
// by them, the budget counts them, and the kernels address codes and scales with them.
#pragma once

#include <cstdint>

#include "minfer/config.h"
#include "tensor/dtype.h"

namespace minfer {

constexpr int kv_code_bits(KvCacheDtype d) {
  switch (d) {
    case KvCacheDtype::kF32: return 32;
    case KvCacheDtype::kBf16:
    case KvCacheDtype::kF16: return 16;
    case KvCacheDtype::kInt8:
    case KvCacheDtype::kFp8E4m3:
    case KvCacheDtype::kQ8_0: return 8;
    case KvCacheDtype::kQ4_0: return 4;
    case KvCacheDtype::kAuto: break;
  }
  return 0;
}

// llama.cpp's q8_0 / q4_0 blocks: 32 values along the head dimension share an f16 scale.
inline constexpr int64_t kKvBlockDims = 32;

constexpr bool kv_is_blocked(KvCacheDtype d) { return d == KvCacheDtype::kQ8_0 || d == KvCacheDtype::kQ4_0; }
constexpr bool kv_is_token_scaled(KvCacheDtype d) { return d == KvCacheDtype::kInt8 || d == KvCacheDtype::kFp8E4m3; }

// Scales per token and kv head (for each of K and V): 0 for the float types, 1 for int8 and fp8_e4m3,
// head_dim / 32 for q8_0 and q4_0.
constexpr int64_t kv_scale_groups(KvCacheDtype d, int64_t head_dim) {
  return kv_is_blocked(d) ? head_dim / kKvBlockDims : kv_is_token_scaled(d) ? 1 : 0;
}
// Bytes of one scale: f32 for int8 / fp8_e4m3, f16 for llama.cpp's blocks.
constexpr int64_t kv_scale_bytes(KvCacheDtype d) { return kv_is_blocked(d) ? 2 : 4; }

// Bytes one token's K (or V) takes for one kv head, codes and scales.
constexpr int64_t kv_head_bytes(KvCacheDtype d, int64_t head_dim) {
  return head_dim * kv_code_bits(d) / 8 + kv_scale_groups(d, head_dim) * kv_scale_bytes(d);
}

// Whether the integer types (int8, q8_0, q4_0) store each K and V vector rotated by the orthonormal Hadamard matrix H
// of the head dimension (a power of two): H spreads a head's outlier channels over all of them, so a scale per token
// or block fits its values better, while q . k = (Hq) . (Hk) leaves the scores as they are and the attention output
// of rotated values is H times the true one (H = H^T = H^-1). llama.cpp rotates its quantized caches the same way.
// Measured (BENCHMARKS, "KV cache types"): q4_0's KL from f32 2.7x lower on SmolLM2, int8's 2.3x on Gemma 3; fp8,
// a float grid that already follows outliers, measured worse rotated on Gemma 3 and is stored as it is.
constexpr bool kv_rotated(KvCacheDtype d, int64_t head_dim) {
  return kv_code_bits(d) <= 8 && d != KvCacheDtype::kFp8E4m3 && head_dim >= 2 && (head_dim & (head_dim - 1)) == 0;
}

// The largest finite e4m3 value (OCP FP8 E4M3, "e4m3fn": no infinities, S.1111.111 is NaN).
inline constexpr float kFp8E4m3Max = 448.0f;

namespace kernels {
// x [rows, n] <- each row times H / sqrt(n) (n a power of two), the fast Walsh-Hadamard transform in place.
void hadamard_rows(float* x, int64_t rows, int64_t n);
}  // namespace kernels

// What --kv-cache-dtype auto becomes for weights of this type on this CPU: bf16 for 16-bit and quantized weights,
// f32 for f32 weights and for the scalar kernels (docs/DESIGN.md, "KV cache").
KvCacheDtype auto_kv_cache_dtype(DType weights);

}  // namespace minfer
