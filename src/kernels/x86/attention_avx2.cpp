// AVX2 (8 lanes, 16 registers: 16-key slots, 4-row score and value groups) paged attention: x86/attention_impl.h over
// avx2::Vec.
#include "kernels/x86/attention_impl.h"
#include "kernels/x86/vec_avx2.h"
#include "kernels/x86/x86_kernels.h"

namespace minfer::kernels::avx2 {

void attention_span(const KvLayerView& cache, const AttentionSpan& sp, float* scratch) {
  if (cache.dtype == DType::BF16) {
    x86::attention_span<Vec, Bf16W>(cache, sp, scratch);
  } else {
    x86::attention_span<Vec, F32W>(cache, sp, scratch);
  }
}

}  // namespace minfer::kernels::avx2
