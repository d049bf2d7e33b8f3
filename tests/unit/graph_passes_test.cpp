// Each fusion pass on its own, on the decoder graph of a small Qwen2-shaped model (q/k/v bias, GQA): the
// layer's node list before and after, and the pipeline's totals.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "base/error.h"
#include "graph/passes/fusion_passes.h"
#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "model/decoder_graph.h"
#include "model/model_weights.h"
#include "model/test_model_writer.h"

namespace minfer::graph {
namespace {

namespace fs = std::filesystem;

class Passes : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("minfer_passes_" + std::to_string(::getpid()));
    TestModelOptions o;
    o.preset = "tiny-qwen2";
    o.out_dir = dir_.string();
    o.dtype = DType::F32;
    write_test_model(o);
    weights_ = new ModelWeights(load_model(dir_.string()));
    o.out_dir = (dir_ / "bf16").string();
    o.dtype = DType::BF16;
    write_test_model(o);
    bf16_weights_ = new ModelWeights(load_model(o.out_dir));
  }
  static void TearDownTestSuite() {
    delete weights_;
    delete bf16_weights_;
    fs::remove_all(dir_);
  }
  // Labels of layer 0's nodes (those writing a layers.0. value, and layer 0's kv_write).
  static std::vector<std::string> layer0(const Graph& g) {
    std::vector<std::string> out;
    for (const Node& n : g.nodes()) {
      const bool named = n.output != kNoValue && g.value(n.output).name.starts_with("layers.0.");
      if (named || (n.output == kNoValue && n.layer == 0)) out.push_back(node_label(n));
    }
    return out;
  }
  // Labels of the nodes after the last layer.
  static std::vector<std::string> tail(const Graph& g) {
    std::vector<std::string> out;
    const std::string last = "layers." + std::to_string(weights_->config.num_layers - 1) + ".";
    bool after = false;
    for (const Node& n : g.nodes()) {
      if (after) out.push_back(node_label(n));
      if (n.output != kNoValue && g.value(n.output).name == last + "x_out") after = true;
    }
    return out;
  }
  static inline fs::path dir_;
  static inline ModelWeights* weights_ = nullptr;       // f32
  static inline ModelWeights* bf16_weights_ = nullptr;  // the same preset in bf16
};

using Labels = std::vector<std::string>;
const Labels kUnfusedLayer = {"rmsnorm", "matmul", "matmul",  "matmul", "rope",   "rope",     "kv_write", "attention",
                              "matmul",  "add",    "rmsnorm", "matmul", "matmul", "silu_mul", "matmul",   "add"};

TEST_F(Passes, UnfusedGraphIsSixteenPrimitivesPerLayer) {
  const Graph g = build_decoder_graph(*weights_);
  EXPECT_EQ(layer0(g), kUnfusedLayer);
  EXPECT_EQ(tail(g), (Labels{"gather_rows", "rmsnorm", "matmul"}));
  Graph none = build_decoder_graph(*weights_);
  const FusionReport r = run_fusion_passes(none, FusionOptions{FusionStrategy::kNone, {}});
  // Only the layout passes run (f32 weights: nothing to re-lay).
  EXPECT_EQ(r.rewrites,
            (std::vector<std::pair<std::string, int>>{{"bf16-blocked", 0}, {"gguf-tiles", 0}, {"q8_0-tiles", 0}}));
  EXPECT_EQ(none.nodes().size(), g.nodes().size());
}

TEST_F(Passes, QkvMergesProjectionsRopeAndKvWrite) {
  Graph g = build_decoder_graph(*weights_);
  EXPECT_EQ(fuse_qkv(g), weights_->config.num_layers);
  g.verify();
  EXPECT_EQ(layer0(g), (Labels{"rmsnorm", "fused_matmul[gemm+bias+rope+kv_write]", "attention", "matmul", "add",
                               "rmsnorm", "matmul", "matmul", "silu_mul", "matmul", "add"}));
  const ModelConfig& c = weights_->config;
  for (const Node& n : g.nodes()) {
    if (n.kind != OpKind::kFusedMatMul) continue;
    EXPECT_EQ(n.weight->dim(0), (c.num_heads + 2 * c.num_kv_heads) * c.head_dim);
    EXPECT_EQ(n.bias->numel(), n.weight->dim(0));
  }
  EXPECT_EQ(fuse_qkv(g), 0);  // nothing left to match
}

TEST_F(Passes, GateUpMergesWithSiluMul) {
  Graph g = build_decoder_graph(*weights_);
  EXPECT_EQ(fuse_gate_up(g), weights_->config.num_layers);
  g.verify();
  EXPECT_EQ(layer0(g), (Labels{"rmsnorm", "matmul", "matmul", "matmul", "rope", "rope", "kv_write", "attention",
                               "matmul", "add", "rmsnorm", "fused_matmul[gemm+silu_mul]", "matmul", "add"}));
}

TEST_F(Passes, ResidualMovesTheAddIntoTheGemm) {
  Graph g = build_decoder_graph(*weights_);
  EXPECT_EQ(fuse_residual(g), 2 * weights_->config.num_layers);
  g.verify();
  EXPECT_EQ(layer0(g), (Labels{"rmsnorm", "matmul", "matmul", "matmul", "rope", "rope", "kv_write", "attention",
                               "fused_matmul[gemm+residual]", "rmsnorm", "matmul", "matmul", "silu_mul",
                               "fused_matmul[gemm+residual]"}));
}

TEST_F(Passes, AddRmsNormTakesTheAddsLeft) {
  Graph g = build_decoder_graph(*weights_);
  // Each layer's two adds are followed by a norm, except the last layer's second (the final norm reads the
  // gathered rows).
  EXPECT_EQ(fuse_add_rmsnorm(g), 2 * weights_->config.num_layers - 1);
  g.verify();
  EXPECT_EQ(layer0(g), (Labels{"rmsnorm", "matmul", "matmul", "matmul", "rope", "rope", "kv_write", "attention",
                               "matmul", "add_rmsnorm", "matmul", "matmul", "silu_mul", "matmul"}));
  // (Layer 0's second add + layer 1's first norm writes layers.1.attn_in, so it counts in layer 1.)
  // After the residual pass there is nothing left for it.
  Graph h = build_decoder_graph(*weights_);
  fuse_residual(h);
  EXPECT_EQ(fuse_add_rmsnorm(h), 0);
}

TEST_F(Passes, NormGemmFoldsNormsIntoTheirOnlyGemm) {
  Graph g = build_decoder_graph(*weights_);
  // Alone, a norm feeding three (or two) GEMMs cannot fold; only the final norm's single lm_head can.
  EXPECT_EQ(fuse_norm_gemm(g), 1);
  EXPECT_EQ(tail(g), (Labels{"gather_rows", "fused_matmul[rmsnorm+gemm]"}));
  Graph h = build_decoder_graph(*weights_);
  fuse_qkv(h);
  fuse_gate_up(h);
  EXPECT_EQ(fuse_norm_gemm(h), 2 * weights_->config.num_layers + 1);
  h.verify();
  EXPECT_EQ(layer0(h), (Labels{"fused_matmul[rmsnorm+gemm+bias+rope+kv_write]", "attention", "matmul", "add",
                               "fused_matmul[rmsnorm+gemm+silu_mul]", "matmul", "add"}));
}

TEST_F(Passes, LmHeadRowsGathersInThePrologue) {
  Graph g = build_decoder_graph(*weights_);
  EXPECT_EQ(fuse_lm_head_rows(g), 0);  // the final norm sits between the gather and the lm_head
  fuse_norm_gemm(g);
  EXPECT_EQ(fuse_lm_head_rows(g), 1);
  g.verify();
  EXPECT_EQ(tail(g), (Labels{"fused_matmul[gather+rmsnorm+gemm]"}));
}

TEST_F(Passes, AutoPipelineLeavesFiveNodesPerLayer) {
  Graph g = build_decoder_graph(*weights_);
  const FusionReport r = run_fusion_passes(g, FusionOptions{});
  const int64_t layers = weights_->config.num_layers;
  EXPECT_EQ(layer0(g),
            (Labels{"fused_matmul[rmsnorm+gemm+bias+rope+kv_write]", "attention", "fused_matmul[gemm+residual]",
                    "fused_matmul[rmsnorm+gemm+silu_mul]", "fused_matmul[gemm+residual]"}));
  EXPECT_EQ(tail(g), (Labels{"fused_matmul[gather+rmsnorm+gemm]"}));
  EXPECT_EQ(static_cast<int64_t>(g.nodes().size()), 5 * layers + 2);
  ASSERT_EQ(r.rewrites.size(), fusion_passes().size() + layout_passes().size());
  EXPECT_EQ(r.rewrites[0], (std::pair<std::string, int>{"qkv", static_cast<int>(layers)}));
  EXPECT_EQ(r.rewrites.back().first, "q8_0-tiles");
}

// bf16 GEMM weights are re-laid out (when the kernels read the blocked layout) under any strategy; the embedding keeps
// the original; disabling the pass by name keeps every weight row-major.
TEST_F(Passes, Bf16BlockedForEveryGemmWeight) {
  for (FusionStrategy strategy : {FusionStrategy::kAuto, FusionStrategy::kNone}) {
    for (bool disabled : {false, true}) {
      Graph g = build_decoder_graph(*bf16_weights_);
      FusionOptions options{strategy, {}};
      if (disabled) options.disabled_passes = {"bf16-blocked"};
      const FusionReport r = run_fusion_passes(g, options);
      const bool blocked = !disabled && kernels::gemm_prefers_bf16_blocked();
      int gemms = 0;
      for (const Node& n : g.nodes()) {
        if (n.kind == OpKind::kEmbedding) {
          EXPECT_EQ(n.weight->layout, TensorLayout::kRowMajor);
        }
        if (n.kind != OpKind::kMatMul && n.kind != OpKind::kFusedMatMul) continue;
        ++gemms;
        EXPECT_EQ(n.weight->layout, blocked ? TensorLayout::kBf16Blocked64 : TensorLayout::kRowMajor) << node_label(n);
      }
      EXPECT_GT(gemms, 0);
      const auto entry =
          std::find_if(r.rewrites.begin(), r.rewrites.end(), [](const auto& e) { return e.first == "bf16-blocked"; });
      EXPECT_EQ(entry == r.rewrites.end() ? 0 : entry->second, blocked ? gemms : 0);
      EXPECT_EQ(entry == r.rewrites.end(), disabled);
    }
  }
}

// GGUF Q8_0 GEMM weights go to 16-row tiles under any strategy: the GGUF tiles (int8 activations) where the kernels
// read them, else the Q8_0 tiles (int16 activations), which also take them when gguf-tiles is disabled; the embedding
// table keeps GGUF's row-major blocks; disabling both passes keeps every weight as stored.
TEST_F(Passes, Q8_0TilesForEveryGemmWeight) {
  ModelWeights q8 = *weights_;
  for (auto& [name, t] : q8.tensors) {
    if (t.rank() == 2 && t.dim(1) % 32 == 0) t = Tensor::allocate(DType::Q8_0, t.shape);  // zero blocks: layout only
  }
  const bool preferred = kernels::gguf_tiles_preferred();
  for (FusionStrategy strategy : {FusionStrategy::kAuto, FusionStrategy::kNone}) {
    for (const std::vector<std::string>& disabled :
         std::vector<std::vector<std::string>>{{}, {"gguf-tiles"}, {"q8_0-tiles"}, {"gguf-tiles", "q8_0-tiles"}}) {
      const bool gguf = preferred && std::find(disabled.begin(), disabled.end(), "gguf-tiles") == disabled.end();
      const bool q8_tiles = std::find(disabled.begin(), disabled.end(), "q8_0-tiles") == disabled.end();
      const TensorLayout want = gguf       ? TensorLayout::kGgufTiles16
                                : q8_tiles ? TensorLayout::kQ8_0Tiles16
                                           : TensorLayout::kRowMajor;
      Graph g = build_decoder_graph(q8);
      run_fusion_passes(g, FusionOptions{strategy, disabled});
      int tiled = 0;
      for (const Node& n : g.nodes()) {
        if (n.weight == nullptr || n.weight->dtype != DType::Q8_0) continue;
        const bool gemm = n.kind == OpKind::kMatMul || n.kind == OpKind::kFusedMatMul;
        EXPECT_EQ(n.weight->layout, gemm ? want : TensorLayout::kRowMajor) << node_label(n);
        tiled += n.weight->layout != TensorLayout::kRowMajor;
      }
      EXPECT_EQ(tiled > 0, want != TensorLayout::kRowMajor);
    }
  }
}

// 4- to 6-bit GGUF GEMM weights are tiled where the kernels in use read the tiles (AVX-512 VNNI, the scalar
// reference), under any strategy; the embedding keeps the original; disabling the pass keeps every weight row-major.
TEST_F(Passes, GgufTilesForEveryGemmWeight) {
  ModelWeights q4 = *weights_;
  for (auto& [name, t] : q4.tensors) {
    if (t.rank() == 2 && t.dim(1) % 32 == 0) t = Tensor::allocate(DType::Q4_1, t.shape);  // zero blocks: layout only
  }
  const bool preferred = kernels::gguf_tiles_preferred();
  for (FusionStrategy strategy : {FusionStrategy::kAuto, FusionStrategy::kNone}) {
    for (bool disabled : {false, true}) {
      Graph g = build_decoder_graph(q4);
      FusionOptions options{strategy, {}};
      if (disabled) options.disabled_passes = {"gguf-tiles"};
      run_fusion_passes(g, options);
      int tiled = 0;
      for (const Node& n : g.nodes()) {
        if (n.weight == nullptr || n.weight->dtype != DType::Q4_1) continue;
        const bool gemm = n.kind == OpKind::kMatMul || n.kind == OpKind::kFusedMatMul;
        EXPECT_EQ(n.weight->layout,
                  gemm && !disabled && preferred ? TensorLayout::kGgufTiles16 : TensorLayout::kRowMajor)
            << node_label(n);
        tiled += n.weight->layout == TensorLayout::kGgufTiles16;
      }
      EXPECT_EQ(tiled > 0, !disabled && preferred);
    }
  }
}

TEST_F(Passes, DisabledPassIsSkippedAndUnknownNamesRejected) {
  Graph g = build_decoder_graph(*weights_);
  run_fusion_passes(g, FusionOptions{FusionStrategy::kAuto, {"residual"}});
  // The adds stay; add-rmsnorm takes those followed by a norm.
  EXPECT_EQ(layer0(g), (Labels{"fused_matmul[rmsnorm+gemm+bias+rope+kv_write]", "attention", "matmul", "add_rmsnorm",
                               "fused_matmul[gemm+silu_mul]", "matmul"}));
  Graph h = build_decoder_graph(*weights_);
  EXPECT_THROW(run_fusion_passes(h, FusionOptions{FusionStrategy::kAuto, {"qkvv"}}), Error);
}

}  // namespace
}  // namespace minfer::graph
