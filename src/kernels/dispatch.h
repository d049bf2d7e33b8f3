// Run-time choice of kernel variants. Each instruction set has a table with the signatures of kernels.h;
// the public entry points forward to the table chosen once from cpu_features() (MINFER_ISA caps it).
// Tests and benchmarks use kernel_table() to run every variant the CPU supports side by side.
#pragma once

#include <cstdint>

#include "kernels/kernels.h"
#include "kernels/leaf.h"
#include "kernels/mixers.h"

namespace minfer::kernels {

// kAvx512Bf16: the AVX-512 kernels plus the AVX-512-BF16 GEMM, which rounds the activations of bf16-weight
// GEMMs to bf16 (f32 and f16 weights, and every other kernel, compute exactly as kAvx512).
enum class Isa : uint8_t { kScalar, kAvx2, kAvx512, kAvx512Bf16 };
inline constexpr Isa kAllIsas[] = {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16};

const char* isa_name(Isa isa);

struct KernelTable {
  Isa isa;
  const char* name;
  void (*gemm)(const float* x, int64_t m, int64_t k, const Tensor& w, const float* bias, float* y, ThreadPool& pool);
  void (*rmsnorm)(const float* x, const Tensor& weight, float eps, float* y, int64_t rows, int64_t dim);
  void (*rope)(float* x, const float* cos, const float* sin, int64_t tokens, int64_t heads, int64_t head_dim,
               int64_t half_rot, RopeStyle style);
  void (*silu_mul)(const float* gate, const float* up, float* out, int64_t n);
  void (*gelu_tanh_mul)(const float* gate, const float* up, float* out, int64_t n);
  void (*swiglu_oai)(const float* gate, const float* up, float* out, int64_t n);
  void (*sigmoid_mul)(const float* gate, const float* x, float* out, int64_t n);
  void (*add)(const float* a, const float* b, float* out, int64_t n);
  void (*softmax)(float* x, int64_t rows, int64_t cols);
  void (*embedding)(const int32_t* ids, int64_t n, const Tensor& table, float* out);
  void (*kv_write)(const KvLayerView& cache, const float* k, const float* v, const int64_t* slot_mapping,
                   int64_t tokens);
  void (*paged_attention)(const float* q, float* out, int64_t heads, const KvLayerView& cache,
                          const AttentionBatch& batch, const AttentionParams& params, ThreadPool& pool);
  // The leaf set behind this table, for fused operators that compose leaves (kernels/fused/).
  const LeafKernels* leaves;
  // The recurrent mixers' leaves of the same instruction set (kernels/mixers.h).
  const MixerLeaves* mixers;
};

// The table of one instruction set, or null when this CPU (as capped by MINFER_ISA) cannot run it.
const KernelTable* kernel_table(Isa isa);
// The table the public entry points use: the widest the CPU supports.
const KernelTable& active_kernels();

}  // namespace minfer::kernels
