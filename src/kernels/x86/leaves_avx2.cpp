// The AVX2 leaves (leaves_isa.inc over avx2::Vec: 8 lanes, 16 registers, so attention_impl.h takes 16-key slots
// and 4-row score and value groups) and the AVX2 leaf table.
#include "kernels/x86/attention_impl.h"
#include "kernels/x86/leaves_impl.h"
#include "kernels/x86/vec_avx2.h"
#include "kernels/x86/x86_kernels.h"

namespace minfer::kernels::avx2 {
#include "kernels/x86/leaves_isa.inc"
}  // namespace minfer::kernels::avx2

namespace minfer::kernels {

constinit const LeafKernels kAvx2Leaves = avx2::leaf_table("avx2");

}  // namespace minfer::kernels
