// Micro-benchmarks of the non-GEMM kernels at Qwen2.5-0.5B shapes, per ISA: paged attention (decode over a
// long context and a prefill chunk), RMSNorm, SiLU*mul, softmax over the vocabulary; and Mamba2's scan of one head
// over a 512-token prompt at Granite 4.0-H's (64 x 128) and Nemotron Nano's (80 x 128) head shapes, in the chunked
// (SSD) form and in the recurrent one (the same leaf fed runs shorter than kSsmChunkedMin).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/mixers.h"
#include "tensor/tensor.h"

namespace minfer::kernels {
namespace {

constexpr int64_t kHeads = 14, kKvHeads = 2, kHeadDim = 64, kPage = 16, kHidden = 896;

// Decode (q_len 1) or a prefill chunk (q_len = chunk) for `seqs` sequences with `ctx` tokens of context each,
// KV of any KvCacheDtype, over `layers` layers of their own KV (24, as in a model step, so that the cache does not
// fit the CPU's caches and streams from memory as it does in the engine).
void BM_Attention(benchmark::State& state, Isa isa, int64_t seqs, int64_t ctx, int64_t q_len, KvCacheDtype kv_dtype,
                  int layers) {
  const KernelTable* t = kernel_table(isa);
  if (!t) return state.SkipWithError("ISA not supported on this CPU");
  ThreadPool pool(static_cast<int>(state.range(0)));
  const int64_t pages_per_seq = (ctx + kPage - 1) / kPage;
  const int64_t slots = seqs * pages_per_seq * kPage * kKvHeads;  // token slots x kv heads, per layer
  const int64_t code_bytes = slots * kHeadDim * kv_code_bits(kv_dtype) / 8;
  const int64_t scale_bytes = slots * kv_scale_groups(kv_dtype, kHeadDim) * kv_scale_bytes(kv_dtype);
  const int64_t layer_bytes = (2 * (code_bytes + scale_bytes) + 63) / 64 * 64;
  // Pools as the engine's KvCache holds them: on transparent huge pages.
  Tensor storage = Tensor::allocate(DType::I8, {layers * layer_bytes});
  auto* base = storage.mutable_as<int8_t>();
  std::vector<int32_t> q_start, q_lens, ctx_lens, tables;
  for (int64_t s = 0; s < seqs; ++s) {
    q_start.push_back(static_cast<int32_t>(s * q_len));
    q_lens.push_back(static_cast<int32_t>(q_len));
    ctx_lens.push_back(static_cast<int32_t>(ctx));
    for (int64_t p = 0; p < pages_per_seq; ++p) tables.push_back(static_cast<int32_t>(s * pages_per_seq + p));
  }
  std::vector<float> q(static_cast<size_t>(seqs * q_len * kHeads * kHeadDim), 0.1f), out(q.size());
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> kv(static_cast<size_t>(seqs * pages_per_seq * kPage * kKvHeads * kHeadDim));
  for (float& x : kv) x = dist(rng);
  std::vector<int64_t> slot_ids(static_cast<size_t>(seqs * pages_per_seq * kPage));
  std::iota(slot_ids.begin(), slot_ids.end(), 0);
  std::vector<KvLayerView> caches;
  for (int l = 0; l < layers; ++l) {
    int8_t* at = base + l * layer_bytes;
    const bool scaled = scale_bytes > 0;
    caches.push_back(KvLayerView{at, at + code_bytes, scaled ? at + 2 * code_bytes : nullptr,
                                 scaled ? at + 2 * code_bytes + scale_bytes : nullptr, PageGeometry::of(kPage),
                                 kKvHeads, kHeadDim, kv_dtype});
    t->kv_write(caches.back(), kv.data(), kv.data(), slot_ids.data(), static_cast<int64_t>(slot_ids.size()));
  }
  const AttentionBatch batch{seqs, q_start.data(), q_lens.data(), ctx_lens.data(), tables.data(), pages_per_seq};
  for (auto _ : state) {
    for (const KvLayerView& cache : caches)
      t->paged_attention(q.data(), out.data(), kHeads, cache, batch, {0.125f}, pool);
    benchmark::DoNotOptimize(out.data());
  }
  // K and V bytes each sequence reads (once per kv-head span; what bounds decode), and the flops (QK^T and PV,
  // causal; what bounds prefill).
  state.SetBytesProcessed(state.iterations() * layers * seqs * ctx * 2 * kKvHeads * kv_head_bytes(kv_dtype, kHeadDim));
  double flops = 0;
  for (int64_t pos = ctx - q_len; pos < ctx; ++pos) flops += 4.0 * kHeads * kHeadDim * static_cast<double>(pos + 1);
  state.counters["GFLOPS"] = benchmark::Counter(static_cast<double>(state.iterations()) * layers * seqs * flops * 1e-9,
                                                benchmark::Counter::kIsRate);
}

void BM_Rmsnorm(benchmark::State& state, Isa isa) {
  const KernelTable* t = kernel_table(isa);
  if (!t) return state.SkipWithError("ISA not supported on this CPU");
  const int64_t rows = state.range(0);
  const Tensor w = Tensor::allocate(DType::BF16, {kHidden});
  std::vector<float> x(static_cast<size_t>(rows * kHidden), 0.5f), y(x.size());
  for (auto _ : state) {
    t->rmsnorm(x.data(), w, 1e-6f, y.data(), rows, kHidden);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetItemsProcessed(state.iterations() * rows);
}

void BM_SiluMul(benchmark::State& state, Isa isa) {
  const KernelTable* t = kernel_table(isa);
  if (!t) return state.SkipWithError("ISA not supported on this CPU");
  const int64_t n = state.range(0);
  std::vector<float> g(static_cast<size_t>(n), 0.3f), u(g.size(), 1.5f), o(g.size());
  for (auto _ : state) {
    t->silu_mul(g.data(), u.data(), o.data(), n);
    benchmark::DoNotOptimize(o.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}

void BM_Softmax(benchmark::State& state, Isa isa) {
  const KernelTable* t = kernel_table(isa);
  if (!t) return state.SkipWithError("ISA not supported on this CPU");
  const int64_t n = state.range(0);
  std::vector<float> src(static_cast<size_t>(n)), x(src.size());
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i % 1000) * 0.01f;
  for (auto _ : state) {
    x = src;
    t->softmax(x.data(), 1, n);
    benchmark::DoNotOptimize(x.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}

void BM_SsmScan(benchmark::State& state, Isa isa, int64_t head_dim, bool chunked) {
  const KernelTable* t = kernel_table(isa);
  if (!t) return state.SkipWithError("ISA not supported on this CPU");
  constexpr int64_t kTokens = 512, kState = 128;
  const int64_t ld = head_dim + 2 * kState;
  std::vector<float> xbc(static_cast<size_t>(kTokens * ld)), dt(kTokens), out(static_cast<size_t>(kTokens * head_dim));
  for (size_t i = 0; i < xbc.size(); ++i) xbc[i] = static_cast<float>(i % 97) * 0.01f - 0.48f;
  for (size_t i = 0; i < dt.size(); ++i) dt[i] = static_cast<float>(i % 7) * 0.3f - 2.0f;
  std::vector<float> st(static_cast<size_t>(head_dim * kState)), scratch(size_t(ssm_scratch_floats(head_dim, kState)));
  const int64_t run = chunked ? kTokens : kSsmChunkedMin - 1;
  for (auto _ : state) {
    std::fill(st.begin(), st.end(), 0.0f);
    for (int64_t t0 = 0; t0 < kTokens; t0 += run) {
      SsmHead h;
      h.x = xbc.data() + t0 * ld;
      h.b = h.x + head_dim;
      h.c = h.b + kState;
      h.ld_x = ld;
      h.dt = dt.data() + t0;
      h.ld_dt = 1;
      h.a = -0.5f;
      h.dt_bias = 0.1f;
      h.d = 1.0f;
      h.out = out.data() + t0 * head_dim;
      h.ld_out = head_dim;
      h.state = st.data();
      h.ntok = std::min(run, kTokens - t0);
      h.head_dim = head_dim;
      h.state_size = kState;
      t->mixers->ssm_head(h, scratch.data());
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * kTokens);
}

// One delta-rule head (Qwen3.5's 128 x 128) over a 512-token prompt: the chunked form, or the recurrent one (runs
// shorter than kDeltaNetChunkedMin).
void BM_DeltaNet(benchmark::State& state, Isa isa, bool chunked) {
  const KernelTable* t = kernel_table(isa);
  if (!t) return state.SkipWithError("ISA not supported on this CPU");
  constexpr int64_t kTokens = 512, kDim = 128, ld = 3 * kDim;
  std::vector<float> qkv(static_cast<size_t>(kTokens * ld)), ab(static_cast<size_t>(2 * kTokens));
  std::vector<float> out(static_cast<size_t>(kTokens * kDim)), st(static_cast<size_t>(kDim * kDim));
  for (size_t i = 0; i < qkv.size(); ++i) qkv[i] = static_cast<float>(i % 89) * 0.01f - 0.44f;
  for (size_t i = 0; i < ab.size(); ++i) ab[i] = static_cast<float>(i % 5) * 0.4f - 1.0f;
  std::vector<float> scratch(static_cast<size_t>(delta_net_scratch_floats(kDim, kDim)));
  const int64_t run = chunked ? kTokens : kDeltaNetChunkedMin - 1;
  for (auto _ : state) {
    std::fill(st.begin(), st.end(), 0.0f);
    for (int64_t t0 = 0; t0 < kTokens; t0 += run) {
      DeltaNetHead h;
      h.q = qkv.data() + t0 * ld;
      h.k = h.q + kDim;
      h.v = h.k + kDim;
      h.ld_qkv = ld;
      h.b = ab.data() + 2 * t0;
      h.a = h.b + 1;
      h.ld_ab = 2;
      h.a_coef = -0.5f;
      h.dt_bias = 0.1f;
      h.out = out.data() + t0 * kDim;
      h.ld_out = kDim;
      h.state = st.data();
      h.ntok = std::min(run, kTokens - t0);
      h.k_dim = kDim;
      h.v_dim = kDim;
      t->mixers->delta_net_head(h, scratch.data());
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * kTokens);
}

int register_all() {
  for (Isa isa : kAllIsas) {
    const std::string s = isa_name(isa);
    for (KvCacheDtype kv : {KvCacheDtype::kF32, KvCacheDtype::kBf16, KvCacheDtype::kF16, KvCacheDtype::kInt8,
                            KvCacheDtype::kFp8E4m3, KvCacheDtype::kQ8_0, KvCacheDtype::kQ4_0}) {
      const std::string d = std::string("_") + kv_cache_dtype_name(kv);
      benchmark::RegisterBenchmark(("attention_decode/" + s + "/seqs1_ctx4096" + d).c_str(), BM_Attention, isa, 1, 4096,
                                   1, kv, 1)
          ->Arg(1)
          ->Arg(2)
          ->UseRealTime()
          ->MinTime(0.1);
      // The engine's batched decode: 32 sequences of a few hundred tokens, 24 layers (from memory).
      benchmark::RegisterBenchmark(("attention_decode/" + s + "/seqs32_ctx400_24layers" + d).c_str(), BM_Attention, isa,
                                   32, 400, 1, kv, 24)
          ->Arg(1)
          ->Arg(2)
          ->UseRealTime()
          ->MinTime(0.1);
      benchmark::RegisterBenchmark(("attention_decode/" + s + "/seqs32_ctx400_1layer" + d).c_str(), BM_Attention, isa,
                                   32, 400, 1, kv, 1)
          ->Arg(1)
          ->UseRealTime()
          ->MinTime(0.1);
      benchmark::RegisterBenchmark(("attention_prefill/" + s + "/chunk256_ctx512" + d).c_str(), BM_Attention, isa, 1,
                                   512, 256, kv, 1)
          ->Arg(2)
          ->UseRealTime()
          ->MinTime(0.1);
    }
    benchmark::RegisterBenchmark(("rmsnorm_896/" + s).c_str(), BM_Rmsnorm, isa)->Arg(1)->Arg(256)->MinTime(0.05);
    benchmark::RegisterBenchmark(("silu_mul/" + s).c_str(), BM_SiluMul, isa)->Arg(4864)->MinTime(0.05);
    benchmark::RegisterBenchmark(("softmax/" + s).c_str(), BM_Softmax, isa)->Arg(151936)->MinTime(0.05);
    for (bool chunked : {false, true})
      benchmark::RegisterBenchmark(("delta_net_512/" + s + "/128x128" + (chunked ? "_chunked" : "_recurrent")).c_str(),
                                   BM_DeltaNet, isa, chunked)
          ->MinTime(0.2);
    for (int64_t p : {64, 80})
      for (bool chunked : {false, true})
        benchmark::RegisterBenchmark(
            ("ssm_scan_512/" + s + "/" + std::to_string(p) + "x128" + (chunked ? "_chunked" : "_recurrent")).c_str(),
            BM_SsmScan, isa, p, chunked)
            ->MinTime(0.2);
  }
  return 0;
}
const int kRegistered = register_all();

}  // namespace
}  // namespace minfer::kernels
