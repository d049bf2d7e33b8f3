// The pass list `auto` runs, and the per-pass switches.
#include <algorithm>

#include "base/error.h"
#include "graph/passes/fusion_passes.h"

namespace minfer::graph {

const std::vector<FusionPass>& fusion_passes() {
  static const std::vector<FusionPass> passes = {
      {"qkv", "q/k/v GEMMs + bias + RoPE + KV write -> one GEMM with an epilogue", fuse_qkv},
      {"gate-up", "gate/up GEMMs + SiLU*up -> one GEMM with an epilogue", fuse_gate_up},
      {"residual", "GEMM + residual add -> GEMM with the add in its epilogue", fuse_residual},
      {"add-rmsnorm", "residual add + RMSNorm -> one row-wise pass", fuse_add_rmsnorm},
      {"norm-gemm", "RMSNorm + the GEMM reading it -> GEMM with the norm in its prologue", fuse_norm_gemm},
      {"lm-head-rows", "gather of the sampled rows + lm_head -> GEMM gathering in its prologue", fuse_lm_head_rows},
  };
  return passes;
}

FusionReport run_fusion_passes(Graph& graph, const FusionOptions& options) {
  const auto& passes = fusion_passes();
  for (const std::string& name : options.disabled_passes) {
    if (std::none_of(passes.begin(), passes.end(), [&](const FusionPass& p) { return name == p.name; })) {
      std::string known;
      for (const FusionPass& p : passes) known += std::string(known.empty() ? "" : ", ") + p.name;
      fail("unknown fusion pass '{}' (passes: {})", name, known);
    }
  }
  FusionReport report;
  if (options.strategy == FusionStrategy::kNone) return report;
  for (const FusionPass& p : passes) {
    if (std::find(options.disabled_passes.begin(), options.disabled_passes.end(), p.name) !=
        options.disabled_passes.end())
      continue;
    report.rewrites.emplace_back(p.name, p.run(graph));
    graph.verify();
  }
  return report;
}

}  // namespace minfer::graph
