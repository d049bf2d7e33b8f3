// The per-ISA kernel tables, the one-time choice among them, and the public entry points of kernels.h.
#include "kernels/dispatch.h"

#include "base/cpu_features.h"
#include "base/error.h"
#include "kernels/leaf.h"
#include "kernels/onednn_gemm.h"
#include "kernels/quant.h"
#include "kernels/ref/ref_kernels.h"

namespace minfer::kernels {
namespace {

// Adapts one leaf set to the signatures of kernels.h: argument checks here, threading in the drivers.
template <const LeafKernels* L>
struct Ops {
  static void gemm(const float* x, int64_t m, int64_t k, const Tensor& w, const float* bias, float* y,
                   ThreadPool& pool) {
    run_gemm(*L, x, m, k, w, bias, y, pool);
  }
  static void rmsnorm(const float* x, const Tensor& weight, float eps, float* y, int64_t rows, int64_t dim) {
    if (weight.numel() != dim) fail("rmsnorm: weight of shape {} for rows of {}", weight.shape_string(), dim);
    L->rmsnorm(x, weight.data, weight.dtype, eps, y, rows, dim);
  }
  static void rope(float* x, const float* cos, const float* sin, int64_t tokens, int64_t heads, int64_t head_dim,
                   int64_t half_rot, RopeStyle style) {
    if (half_rot < 0 || 2 * half_rot > head_dim) fail("rope: {} rotated pairs in a head of {}", half_rot, head_dim);
    L->rope(x, cos, sin, tokens, heads, head_dim, half_rot, style);
  }
  static void embedding(const int32_t* ids, int64_t n, const Tensor& table, float* out) {
    if (table.rank() != 2) fail("embedding: table of shape {} is not 2-D", table.shape_string());
    for (int64_t t = 0; t < n; ++t) {
      if (ids[t] < 0 || ids[t] >= table.dim(0)) fail("embedding: token id {} outside vocab {}", ids[t], table.dim(0));
    }
    if (is_quantized(table)) return embedding_quantized(ids, n, table, out);  // int8 / Q8_0 tables
    L->embedding(ids, n, table.data, table.dtype, table.dim(1), out);
  }
  static void paged_attention(const float* q, float* out, int64_t heads, const KvLayerView& cache,
                              const AttentionBatch& batch, const AttentionParams& params, ThreadPool& pool) {
    run_paged_attention(L->attention_span, q, out, heads, cache, batch, params, pool);
  }
  static KernelTable table(Isa isa) {
    // kv_write only stores (K scattered by the transposed layout, V a copy): one implementation serves every ISA.
    return KernelTable{.isa = isa,
                       .name = L->name,
                       .gemm = gemm,
                       .rmsnorm = rmsnorm,
                       .rope = rope,
                       .silu_mul = L->silu_mul,
                       .gelu_tanh_mul = L->gelu_tanh_mul,
                       .swiglu_oai = L->swiglu_oai,
                       .sigmoid_mul = L->sigmoid_mul,
                       .add = L->add,
                       .softmax = L->softmax,
                       .embedding = embedding,
                       .kv_write = ref::kv_write,
                       .paged_attention = paged_attention,
                       .leaves = L,
                       .mixers = isa == Isa::kScalar ? &kRefMixers
                                 : isa == Isa::kAvx2 ? &kAvx2Mixers
                                                     : &kAvx512Mixers};
  }
};

bool supported(Isa isa) {
  const CpuFeatures& f = cpu_features();
  switch (isa) {
    case Isa::kScalar: return true;
    case Isa::kAvx2: return f.has_avx2_fma();
    // The AVX-512 files are also built with AVX2/FMA/F16C; only gemm_bf16_avx512.cpp uses BF16 instructions
    // (the kAvx512Bf16 table), so AVX-512 CPUs without that extension (Skylake-X) qualify for kAvx512.
    case Isa::kAvx512: return f.has_avx512() && f.has_avx2_fma();
    case Isa::kAvx512Bf16: return f.has_avx512() && f.has_avx2_fma() && f.avx512_bf16;
  }
  return false;
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
    case Isa::kAvx512Bf16: return "avx512_bf16";
  }
  return "unknown";
}

const KernelTable* kernel_table(Isa isa) {
  static const KernelTable tables[] = {
      Ops<&kRefLeaves>::table(Isa::kScalar),
      Ops<&kAvx2Leaves>::table(Isa::kAvx2),
      Ops<&kAvx512Leaves>::table(Isa::kAvx512),
      Ops<&kAvx512Bf16Leaves>::table(Isa::kAvx512Bf16),
  };
  return supported(isa) ? &tables[static_cast<int>(isa)] : nullptr;
}

const KernelTable& active_kernels() {
  static const KernelTable& chosen = []() -> const KernelTable& {
    for (Isa isa : {Isa::kAvx512Bf16, Isa::kAvx512, Isa::kAvx2}) {
      if (const KernelTable* t = kernel_table(isa)) return *t;
    }
    return *kernel_table(Isa::kScalar);
  }();
  return chosen;
}

void gemm(const float* x, int64_t m, int64_t k, const Tensor& w, const float* bias, float* y, ThreadPool& pool) {
  active_kernels().gemm(x, m, k, w, bias, y, pool);
}
void rmsnorm(const float* x, const Tensor& weight, float eps, float* y, int64_t rows, int64_t dim) {
  active_kernels().rmsnorm(x, weight, eps, y, rows, dim);
}
void rope(float* x, const float* cos, const float* sin, int64_t tokens, int64_t heads, int64_t head_dim,
          int64_t half_rot, RopeStyle style) {
  active_kernels().rope(x, cos, sin, tokens, heads, head_dim, half_rot, style);
}
void rope_angles(const int32_t* positions, int64_t tokens, const float* inv_freq, int64_t half_rot, float* cos,
                 float* sin) {
  ref::rope_angles(positions, tokens, inv_freq, half_rot, cos, sin);
}
void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  active_kernels().silu_mul(gate, up, out, n);
}
void sigmoid_mul(const float* gate, const float* x, float* out, int64_t n) {
  active_kernels().sigmoid_mul(gate, x, out, n);
}
const MixerLeaves& active_mixers() { return *active_kernels().mixers; }
void mul(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] * b[i];
}
void relu2(const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float r = x[i] > 0.0f ? x[i] : 0.0f;
    out[i] = r * r;
  }
}
void gelu_tanh_mul(const float* gate, const float* up, float* out, int64_t n) {
  active_kernels().gelu_tanh_mul(gate, up, out, n);
}
void gelu_tanh(const float* x, float* out, int64_t n) { active_kernels().leaves->gelu_tanh(x, out, n); }
void layernorm(const float* x, const float* weight, const float* bias, float eps, float* y, int64_t rows, int64_t dim) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    float sum = 0.0f;
    for (int64_t i = 0; i < dim; ++i) sum += xr[i];
    const float mean = sum / static_cast<float>(dim);
    float var = 0.0f;
    for (int64_t i = 0; i < dim; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    const float inv = 1.0f / std::sqrt(var / static_cast<float>(dim) + eps);
    for (int64_t i = 0; i < dim; ++i) yr[i] = (xr[i] - mean) * inv * weight[i] + bias[i];
  }
}
void swiglu_oai(const float* gate, const float* up, float* out, int64_t n) {
  active_kernels().swiglu_oai(gate, up, out, n);
}
void add(const float* a, const float* b, float* out, int64_t n) { active_kernels().add(a, b, out, n); }
void softmax(float* x, int64_t rows, int64_t cols) { active_kernels().softmax(x, rows, cols); }
void embedding(const int32_t* ids, int64_t n, const Tensor& table, float* out) {
  active_kernels().embedding(ids, n, table, out);
}
void kv_write(const KvLayerView& cache, const float* k, const float* v, const int64_t* slot_mapping, int64_t tokens) {
  active_kernels().kv_write(cache, k, v, slot_mapping, tokens);
}
void kv_write_head(const KvLayerView& cache, int64_t kv_head, const float* k, const float* v, int64_t slot) {
  ref::kv_write_head(cache, kv_head, k, v, slot);  // stores only: one implementation serves every ISA
}
void paged_attention(const float* q, float* out, int64_t heads, const KvLayerView& cache, const AttentionBatch& batch,
                     const AttentionParams& params, ThreadPool& pool) {
  active_kernels().paged_attention(q, out, heads, cache, batch, params, pool);
}
const char* active_isa() { return active_kernels().name; }

std::string kernels_summary() {
  std::string summary = active_isa();
  if (gemm_prefers_bf16_blocked()) {
    const char* impl = onednn_gemm_impl(128, 1024, 1024);
    if (onednn_takes_rows(kOwnBatchedMinRows)) {
      summary += fmt::format(" (bf16 matmul for {}+ rows: oneDNN {})", kOneDnnMinRows, impl);
    } else {
      summary += fmt::format(" (bf16 matmul for {}-{} and {}+ rows: oneDNN {})", kOneDnnMinRows, kOwnBatchedMinRows - 1,
                             kOwnBatchedMaxRows + 1, impl);
    }
  }
  return summary;
}

}  // namespace minfer::kernels
