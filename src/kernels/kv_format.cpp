// The KV cache types' names (include/minfer/config.h), here beside their storage (kv_format.h) so the kernels can
// name a type in their errors.
#include "kernels/kv_format.h"

#include <algorithm>
#include <cmath>
#include <string_view>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/leaf.h"

namespace minfer {

namespace {
struct KvDtypeName {
  std::string_view name;
  KvCacheDtype dtype;
};
// The first spelling of each type is its name.
constexpr KvDtypeName kKvDtypeNames[] = {
    {"auto", KvCacheDtype::kAuto},        {"f32", KvCacheDtype::kF32},       {"float32", KvCacheDtype::kF32},
    {"bf16", KvCacheDtype::kBf16},        {"bfloat16", KvCacheDtype::kBf16}, {"f16", KvCacheDtype::kF16},
    {"float16", KvCacheDtype::kF16},      {"half", KvCacheDtype::kF16},      {"int8", KvCacheDtype::kInt8},
    {"fp8_e4m3", KvCacheDtype::kFp8E4m3}, {"fp8", KvCacheDtype::kFp8E4m3},   {"q8_0", KvCacheDtype::kQ8_0},
    {"q4_0", KvCacheDtype::kQ4_0},
};
}  // namespace

bool parse_kv_cache_dtype(std::string_view name, KvCacheDtype* out) {
  for (const KvDtypeName& n : kKvDtypeNames) {
    if (n.name == name) {
      *out = n.dtype;
      return true;
    }
  }
  return false;
}

const char* kv_cache_dtype_name(KvCacheDtype dtype) {
  for (const KvDtypeName& n : kKvDtypeNames)
    if (n.dtype == dtype) return n.name.data();
  return "";
}

namespace kernels {

// Butterflies of doubling width, then the 1 / sqrt(n) that makes H orthonormal (O(n log n) a row: for a 128-wide head,
// under a thousand flops, against its 2 x 128 x 128 of attention per cached token).
void hadamard_rows(float* x, int64_t rows, int64_t n) {
  const float norm = 1.0f / std::sqrt(static_cast<float>(n));
  for (int64_t r = 0; r < rows; ++r) {
    float* v = x + r * n;
    for (int64_t h = 1; h < n; h *= 2) {
      for (int64_t i = 0; i < n; i += 2 * h) {
        for (int64_t j = i; j < i + h; ++j) {
          const float a = v[j], b = v[j + h];
          v[j] = a + b;
          v[j + h] = a - b;
        }
      }
    }
    for (int64_t i = 0; i < n; ++i) v[i] *= norm;
  }
}

const float* rotate_queries(const float* q, int64_t heads, int64_t head_dim, const AttentionBatch& batch) {
  thread_local std::vector<float> rotated;
  int64_t rows = 0;
  for (int64_t s = 0; s < batch.num_seqs; ++s) rows = std::max<int64_t>(rows, batch.q_start[s] + batch.q_len[s]);
  rotated.assign(q, q + rows * heads * head_dim);
  hadamard_rows(rotated.data(), rows * heads, head_dim);
  return rotated.data();
}

void unrotate_outputs(float* out, int64_t heads, int64_t head_dim, const AttentionBatch& batch) {
  for (int64_t s = 0; s < batch.num_seqs; ++s)
    hadamard_rows(out + batch.q_start[s] * heads * head_dim, batch.q_len[s] * heads, head_dim);
}

}  // namespace kernels

// kAuto: bf16 for every model whose weights are 16-bit or quantized: half of f32's bytes, measured as fast as f32 in an
// 8K-token prefill and 1.3-1.5x in decode at that depth, as fast as f16 (docs/BENCHMARKS.md, "KV cache types"), with
// the same KL from f32 on SmolLM2, and f32's range, so no model's outlier K or V can overflow as f16's 65504 can.
// f32 models, and CPUs without AVX2 (whose scalar kernels would widen every value on its own), keep f32.
KvCacheDtype auto_kv_cache_dtype(DType weights) {
  if (weights == DType::F32 || std::string_view(kernels::active_isa()) == "scalar") return KvCacheDtype::kF32;
  return KvCacheDtype::kBf16;
}

}  // namespace minfer
