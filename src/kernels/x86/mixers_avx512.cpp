// The AVX512 recurrent-mixer leaves (mixers_impl.h over avx512::Vec, 16 lanes).
#include "kernels/x86/mixers_impl.h"
#include "kernels/x86/vec_avx512.h"

namespace minfer::kernels::avx512 {
namespace {

void conv1d(const Conv1dSpan& span, int64_t c0, int64_t c1) { x86::conv1d<Vec>(span, c0, c1); }
void delta_net_head(const DeltaNetHead& head, float* scratch) { x86::delta_net_head<Vec>(head, scratch); }
void ssm_head(const SsmHead& head, float* scratch) { x86::ssm_head<Vec>(head, scratch); }

}  // namespace
}  // namespace minfer::kernels::avx512

namespace minfer::kernels {

constinit const MixerLeaves kAvx512Mixers = {
    .conv1d = avx512::conv1d, .delta_net_head = avx512::delta_net_head, .ssm_head = avx512::ssm_head};

}  // namespace minfer::kernels
