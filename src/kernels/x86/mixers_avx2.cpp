// The AVX2 recurrent-mixer leaves (mixers_impl.h over avx2::Vec, 8 lanes).
#include "kernels/x86/mixers_impl.h"
#include "kernels/x86/vec_avx2.h"

namespace minfer::kernels::avx2 {
namespace {

void conv1d(const Conv1dSpan& span, int64_t c0, int64_t c1) { x86::conv1d<Vec>(span, c0, c1); }
void delta_net_head(const DeltaNetHead& head, float* scratch) { x86::delta_net_head<Vec>(head, scratch); }
void ssm_head(const SsmHead& head, float* scratch) { x86::ssm_head<Vec>(head, scratch); }

}  // namespace
}  // namespace minfer::kernels::avx2

namespace minfer::kernels {

constinit const MixerLeaves kAvx2Mixers = {
    .conv1d = avx2::conv1d, .delta_net_head = avx2::delta_net_head, .ssm_head = avx2::ssm_head};

}  // namespace minfer::kernels
