// The AVX-512 leaves (leaves_isa.inc over avx512::Vec: 16 lanes, 32 registers, so attention_impl.h takes 32-key
// slots, 8-row score groups and 6-row value groups) and the AVX-512 leaf tables.
#include "kernels/x86/attention_impl.h"
#include "kernels/x86/leaves_impl.h"
#include "kernels/x86/vec_avx512.h"
#include "kernels/x86/x86_kernels.h"

namespace minfer::kernels::avx512 {
#include "kernels/x86/leaves_isa.inc"

namespace {

// The table plus the AVX-512-BF16 GEMMs (gemm_bf16_avx512.cpp).
constexpr LeafKernels with_bf16_gemm(LeafKernels leaves) {
  leaves.bf16_round_rows = bf16_round_rows;
  leaves.gemm_bf16_cols = gemm_bf16_cols;
  leaves.gemm_bf16_blocked_cols = gemm_bf16_blocked_cols;
  return leaves;
}

}  // namespace
}  // namespace minfer::kernels::avx512

namespace minfer::kernels {

constinit const LeafKernels kAvx512Leaves = avx512::leaf_table("avx512");
// Chosen only where the CPU has AVX-512-BF16 (dispatch.cpp); the same leaves otherwise.
constinit const LeafKernels kAvx512Bf16Leaves = avx512::with_bf16_gemm(avx512::leaf_table("avx512_bf16"));

}  // namespace minfer::kernels
