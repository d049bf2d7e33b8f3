// AVX-512 (16 lanes, 32 registers: 32-key slots, 8-row score groups, 6-row value groups) paged attention:
// x86/attention_impl.h over avx512::Vec.
#include "kernels/x86/attention_impl.h"
#include "kernels/x86/vec_avx512.h"
#include "kernels/x86/x86_kernels.h"

namespace minfer::kernels::avx512 {

void attention_span(const KvLayerView& cache, const AttentionSpan& sp, float* scratch) {
  if (cache.dtype == DType::BF16) {
    x86::attention_span<Vec, Bf16W>(cache, sp, scratch);
  } else {
    x86::attention_span<Vec, F32W>(cache, sp, scratch);
  }
}

}  // namespace minfer::kernels::avx512
