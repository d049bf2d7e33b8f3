// oneDNN matmul over blocked bf16 weights. Per calling thread: one oneDNN stream, the prepared primitives by
// shape (rows, k, columns), and scratch for the dense result, so a steady-state call creates nothing: it sets
// the data handles and executes. oneDNN 2.6's brgemm matmul needs dense src and dst, hence the dense result
// buffer copied into the column range of y (with the bias) afterwards: m x columns floats against k
// multiply-adds per element.
#include "kernels/onednn_gemm.h"

#include <omp.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <dnnl.hpp>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/cpu_features.h"
#include "base/error.h"
#include "kernels/leaf.h"

namespace minfer::kernels {
namespace {

using dnnl::memory;

// oneDNN detects the CPU itself; capped here to what minfer detected, so that MINFER_ISA (and an AMX state the
// kernel did not grant) hold for oneDNN's kernels too. Must run before oneDNN compiles its first kernel: every
// use of oneDNN goes through this engine.
void cap_onednn_isa() {
  const CpuFeatures& f = cpu_features();
  dnnl::cpu_isa cap = dnnl::cpu_isa::all;
  if (!f.amx_bf16) cap = dnnl::cpu_isa::avx512_core_bf16;
  if (!f.avx512_bf16) cap = dnnl::cpu_isa::avx512_core_vnni;
  if (!f.avx512_vnni) cap = dnnl::cpu_isa::avx512_core;
  if (!f.has_avx512()) cap = dnnl::cpu_isa::avx2;
  if (!f.has_avx2_fma()) cap = dnnl::cpu_isa::sse41;
  if (cap != dnnl::cpu_isa::all && dnnl::set_max_cpu_isa(cap) != dnnl::status::success)
    spdlog::warn("oneDNN: could not cap its instruction set to what minfer detected");
}

dnnl::engine& cpu_engine() {
  static dnnl::engine engine = [] {
    cap_onednn_isa();
    return dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
  return engine;
}

// The descriptors of one call: X [rows, kp] dense, W^T [kp, cols] blocked, Y [rows, cols] dense f32.
dnnl::matmul::primitive_desc describe(int64_t rows, int64_t kp, int64_t cols) {
  const memory::desc src({rows, kp}, memory::data_type::bf16, memory::format_tag::ab);
  const memory::desc weights({kp, cols}, memory::data_type::bf16, memory::format_tag::BA16a64b2a);
  const memory::desc dst({rows, cols}, memory::data_type::f32, memory::format_tag::ab);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // each thread's own scratchpad: no shared state
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, weights, dst), attr, cpu_engine());
}

struct Shape {
  int64_t rows, kp, cols;
  bool operator==(const Shape&) const = default;
};
struct ShapeHash {
  size_t operator()(const Shape& s) const { return std::hash<int64_t>()((s.rows * 1000003 + s.kp) * 1000003 + s.cols); }
};

// A primitive with its memory objects; a call only swaps their data handles.
struct Prepared {
  explicit Prepared(const dnnl::matmul::primitive_desc& pd)
      : matmul(pd),
        src(pd.src_desc(), cpu_engine(), DNNL_MEMORY_NONE),
        weights(pd.weights_desc(), cpu_engine(), DNNL_MEMORY_NONE),
        dst(pd.dst_desc(), cpu_engine(), DNNL_MEMORY_NONE),
        scratchpad(pd.scratchpad_desc(), cpu_engine()),
        args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}, {DNNL_ARG_SCRATCHPAD, scratchpad}} {
  }
  dnnl::matmul matmul;
  memory src, weights, dst, scratchpad;
  std::unordered_map<int, memory> args;
};

struct ThreadState {
  ThreadState() {
    // oneDNN (Debian's build) runs on OpenMP; the engine's pool already gives each thread its own columns, so
    // a call must not start a team of its own.
    omp_set_num_threads(1);
  }
  dnnl::stream stream{cpu_engine()};
  std::unordered_map<Shape, std::unique_ptr<Prepared>, ShapeHash> prepared;
  std::vector<float> result;  // the dense [rows, cols] result; grows to the largest call
};

ThreadState& thread_state() {
  thread_local ThreadState state;
  return state;
}

Prepared& prepare(ThreadState& state, const Shape& shape) {
  auto& slot = state.prepared[shape];
  if (!slot) {
    try {
      const auto pd = describe(shape.rows, shape.kp, shape.cols);
      // oneDNN falls back to its reference loops where no optimised implementation takes the shape (strided
      // operands did in oneDNN 2.6): correct but far slower, so say so once instead of running slow in silence.
      static std::atomic<bool> warned{false};
      if (std::string_view(pd.impl_info_str()).starts_with("ref") && !warned.exchange(true)) {
        spdlog::warn("oneDNN runs its reference matmul ({}) for {} x {} x {} bf16: expect slow prefill",
                     pd.impl_info_str(), shape.rows, shape.kp, shape.cols);
      }
      slot = std::make_unique<Prepared>(pd);
    } catch (const dnnl::error& e) {
      fail("oneDNN matmul {} x {} x {} (bf16, blocked weights): {}", shape.rows, shape.kp, shape.cols, e.what());
    }
  }
  return *slot;
}

}  // namespace

int64_t onednn_rows(int64_t m) {
  if (m <= 64) return m;
  if (m <= 512) return (m + 15) / 16 * 16;
  return (m + 63) / 64 * 64;
}

void onednn_gemm_bf16_blocked_cols(const uint16_t* xb, int64_t ldxb, int64_t m, int64_t k, const uint16_t* w, int64_t n,
                                   const float* bias, float* y, int64_t n0, int64_t n1) {
  const int64_t kp = bf16_row_stride(k);
  MINFER_CHECK(ldxb == kp && n0 % 64 == 0 && n0 < n1 && n1 <= n, "columns [{}, {}) of {}, ldxb {}", n0, n1, n, ldxb);
  const Shape shape{onednn_rows(m), kp, n1 - n0};
  ThreadState& state = thread_state();
  Prepared& p = prepare(state, shape);
  const auto need = static_cast<size_t>(shape.rows * shape.cols);
  if (state.result.size() < need) state.result.resize(need);
  // Block n0 / 64 of the weights starts at row n0 of the [n, kp] padded matrix.
  p.src.set_data_handle(const_cast<uint16_t*>(xb));
  p.weights.set_data_handle(const_cast<uint16_t*>(w + n0 * kp));
  p.dst.set_data_handle(state.result.data());
  p.matmul.execute(state.stream, p.args);
  state.stream.wait();
  const float* result = state.result.data();
  for (int64_t i = 0; i < m; ++i) {
    const float* from = result + i * shape.cols;
    float* to = y + i * n + n0;
    if (bias) {
      for (int64_t j = 0; j < shape.cols; ++j) to[j] = from[j] + bias[n0 + j];
    } else {
      for (int64_t j = 0; j < shape.cols; ++j) to[j] = from[j];
    }
  }
}

bool onednn_takes_rows(int64_t m) {
  static const bool amx = cpu_features().amx_bf16;
  return onednn_takes_rows(m, amx);
}

const char* onednn_gemm_impl(int64_t m, int64_t k, int64_t n) {
  thread_local std::string name;
  name = describe(onednn_rows(m), bf16_row_stride(k), n).impl_info_str();
  return name.c_str();
}

}  // namespace minfer::kernels
