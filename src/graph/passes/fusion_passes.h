// The fusion passes that turn the primitive decoder graph into fused dispatches, and the pipeline that runs
// them when a model is compiled. Each pass is in its own file, rewrites every match it finds, and returns how
// many it rewrote; the graph verifies after each one.
#pragma once

#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "graph/graph.h"
#include "minfer/config.h"

namespace minfer::graph {

struct FusionPass {
  const char* name;     // for --disable-pass
  const char* summary;  // one line for reports
  // The pool, when given, is the engine's: the layout passes split their copies across it (load time).
  int (*run)(Graph& graph, ThreadPool* pool);
};

// matmul q, k, v of one input + rope q, rope k + kv_write -> one GEMM (weights packed [k v per head | q]) with
// bias, RoPE and the paged KV write in its epilogue.
int fuse_qkv(Graph& graph);
// matmul gate, matmul up of one input + silu_mul -> one GEMM (gate/up rows interleaved) with SiLU * up.
int fuse_gate_up(Graph& graph);
// matmul + add of a value computed earlier -> the GEMM adds it in its epilogue (o-proj, down-proj).
int fuse_residual(Graph& graph);
// add + rmsnorm of the sum -> add_rmsnorm (the sum stays an output for the residual stream).
int fuse_add_rmsnorm(Graph& graph);
// rmsnorm whose only reader is a GEMM -> the GEMM normalises its input rows in its prologue.
int fuse_norm_gemm(Graph& graph);
// rmsnorm + silu_mul gate, in either order (Qwen3.5's and Mamba2's gated norms) -> one gated rmsnorm node.
int fuse_gated_norm(Graph& graph);
// mul + conv1d + mul (LFM2's gated short convolution) -> one conv1d node with its two gates.
int fuse_conv_gates(Graph& graph);
// gather of the sampled rows whose only reader is a GEMM (the lm_head) -> the GEMM gathers in its prologue.
int fuse_lm_head_rows(Graph& graph);

// Every pass, in the order `auto` runs them. The residual epilogue runs before add+rmsnorm: an add absorbed
// into the GEMM that produces its operand costs no memory pass at all, so add+rmsnorm only takes the adds
// that no GEMM can (none in the Llama/Qwen2 graph; it is kept for graphs and debugging runs that have them).
const std::vector<FusionPass>& fusion_passes();

// bf16 GEMM weights -> copies in TensorLayout::kBf16Blocked64 owned by the graph, when the active kernels read that
// layout (kernels::gemm_prefers_bf16_blocked); the embedding keeps reading the row-major original.
int block_bf16_weights(Graph& graph, ThreadPool* pool = nullptr);
// GGUF Q8_0 GEMM weights -> copies in TensorLayout::kQ8_0Tiles16 owned by the graph (every quantized GEMM leaf reads
// it); the embedding keeps reading the row-major original.
int tile_q8_0_weights(Graph& graph, ThreadPool* pool = nullptr);
// 4-bit GGUF GEMM weights (Q4_0, Q4_1, IQ4_NL, Q4_K, IQ4_XS) -> copies in TensorLayout::kGgufTiles16 owned by the
// graph, when the kernels in use read that layout (kernels::gguf_tiles_preferred); the embedding keeps the original.
int tile_gguf_weights(Graph& graph, ThreadPool* pool = nullptr);
// Passes that lay weights out for the kernels rather than rewrite the graph. They run after the fusion passes
// whatever the strategy (so fusion auto vs none compares the fusion alone) and can be disabled the same way.
const std::vector<FusionPass>& layout_passes();
// Every name --disable-pass accepts: the fusion passes, then the layout passes.
std::vector<std::string> pass_names();

struct FusionOptions {
  FusionStrategy strategy = FusionStrategy::kAuto;
  std::vector<std::string> disabled_passes;  // names from fusion_passes()
};

struct FusionReport {
  std::vector<std::pair<std::string, int>> rewrites;  // pass name -> rewrites (passes that ran)
};

// Runs the enabled passes (none for kNone), the layout passes' copies split across `pool` when given. Throws Error
// for an unknown pass name, listing the known ones.
FusionReport run_fusion_passes(Graph& graph, const FusionOptions& options, ThreadPool* pool = nullptr);

}  // namespace minfer::graph
