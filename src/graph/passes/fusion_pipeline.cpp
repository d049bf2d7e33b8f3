// The pass list `auto` runs, and the per-pass switches.
#include <algorithm>

#include "base/error.h"
#include "graph/passes/fusion_passes.h"

namespace minfer::graph {
namespace {

// A fusion pass in the pipeline's signature: the rewrites copy nothing large, so they take no pool.
template <int (*Pass)(Graph&)>
int graph_only(Graph& graph, ThreadPool*) {
  return Pass(graph);
}

}  // namespace

const std::vector<FusionPass>& fusion_passes() {
  static const std::vector<FusionPass> passes = {
      {"qkv", "q/k/v GEMMs + bias + RoPE + KV write -> one GEMM with an epilogue", graph_only<fuse_qkv>},
      {"gate-up", "gate/up GEMMs + SiLU*up -> one GEMM with an epilogue", graph_only<fuse_gate_up>},
      {"gated-norm", "RMSNorm + SiLU gate (either order) -> one row-wise pass", graph_only<fuse_gated_norm>},
      {"conv-gates", "input gate + causal conv + output gate -> one conv pass per channel block",
       graph_only<fuse_conv_gates>},
      {"residual", "GEMM + residual add -> GEMM with the add in its epilogue", graph_only<fuse_residual>},
      {"add-rmsnorm", "residual add + RMSNorm -> one row-wise pass", graph_only<fuse_add_rmsnorm>},
      {"norm-gemm", "RMSNorm + the GEMM reading it -> GEMM with the norm in its prologue", graph_only<fuse_norm_gemm>},
      {"lm-head-rows", "gather of the sampled rows + lm_head -> GEMM gathering in its prologue",
       graph_only<fuse_lm_head_rows>},
  };
  return passes;
}

const std::vector<FusionPass>& layout_passes() {
  static const std::vector<FusionPass> passes = {
      {"bf16-blocked", "bf16 GEMM weights in oneDNN's blocked layout (oneDNN matmul + one stream per GEMV)",
       block_bf16_weights},
      // gguf-tiles first: where the kernels read them it takes Q8_0 too (int8 activations, vpdpbusd); q8_0-tiles
      // (int16 activations) gets what is left.
      {"gguf-tiles", "GGUF GEMM weights in 16-row tiles (nibbles unpacked in registers for vpdpbusd; Q8_0 as bytes)",
       tile_gguf_weights},
      {"q8_0-tiles", "GGUF Q8_0 GEMM weights in 16-row tiles (one stream per decode GEMV tile)", tile_q8_0_weights},
  };
  return passes;
}

std::vector<std::string> pass_names() {
  std::vector<std::string> names;
  for (const auto* list : {&fusion_passes(), &layout_passes()})
    for (const FusionPass& p : *list) names.emplace_back(p.name);
  return names;
}

FusionReport run_fusion_passes(Graph& graph, const FusionOptions& options, ThreadPool* pool) {
  const std::vector<std::string> known = pass_names();
  for (const std::string& name : options.disabled_passes) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      std::string list;
      for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
      fail("unknown fusion pass '{}' (passes: {})", name, list);
    }
  }
  auto enabled = [&](const FusionPass& p) {
    return std::find(options.disabled_passes.begin(), options.disabled_passes.end(), p.name) ==
           options.disabled_passes.end();
  };
  FusionReport report;
  if (options.strategy != FusionStrategy::kNone) {
    for (const FusionPass& p : fusion_passes()) {
      if (!enabled(p)) continue;
      report.rewrites.emplace_back(p.name, p.run(graph, pool));
      graph.verify();
    }
  }
  for (const FusionPass& p : layout_passes()) {
    if (enabled(p)) report.rewrites.emplace_back(p.name, p.run(graph, pool));
  }
  return report;
}

}  // namespace minfer::graph
