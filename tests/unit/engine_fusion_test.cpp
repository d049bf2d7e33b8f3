// Fusion auto vs none on every test model: identical greedy tokens, logits within 1e-4 relative (f32
// checkpoints; bf16 ones must agree just as closely, since fused and unfused do the same arithmetic), and the
// dispatch counts of both graphs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "base/error.h"
#include "engine_test_support.h"
#include "graph/passes/fusion_passes.h"
#include "model/decoder_graph.h"
#include "model/model_weights.h"
#include "model/quant/quantize_model.h"
#include "model/test_model_writer.h"

namespace minfer {
namespace {

namespace fs = std::filesystem;

const std::string kStories = std::string(MINFER_SHARED_DIR) + "/models/stories260K/";

struct GenerationRun {
  std::vector<int32_t> tokens;
  std::vector<float> prompt_logits;
  int64_t dispatches_per_step = 0;
};

GenerationRun generate(const ModelWeights& weights, const graph::FusionOptions& fusion,
                       const std::vector<int32_t>& prompt) {
  EngineConfig config = testing::small_engine_config(weights.path, 2, 256);
  config.max_num_batched_tokens = 7;  // several prefill chunks, each a multi-row step
  config.fusion_strategy = fusion.strategy;
  config.disabled_fusion_passes = fusion.disabled_passes;
  config.enable_prefix_caching = false;
  auto engine = testing::engine_over(weights, config);
  // Greedy tokens, and the logits of every prompt position (every row samples: many sequences in one step).
  SamplingParams params = testing::greedy(24);
  GenerationRun run;
  run.tokens = engine->generate(std::vector<std::vector<int32_t>>{prompt}, params)[0].token_ids;
  params.prompt_logits = true;
  run.prompt_logits = engine->generate(std::vector<std::vector<int32_t>>{prompt}, params)[0].prompt_logits;
  run.dispatches_per_step = EngineAccess::core(*engine).runner().dispatches_per_step();
  return run;
}

// Same greedy tokens, logits within 1e-4 relative.
void expect_same_results(const GenerationRun& fused, const GenerationRun& none) {
  EXPECT_EQ(fused.tokens, none.tokens);
  ASSERT_EQ(fused.prompt_logits.size(), none.prompt_logits.size());
  ASSERT_FALSE(none.prompt_logits.empty());
  float max_abs = 0.0f;
  for (float v : none.prompt_logits) max_abs = std::max(max_abs, std::fabs(v));
  int misses = 0;
  for (size_t i = 0; i < none.prompt_logits.size(); ++i) {
    const float want = none.prompt_logits[i];
    if (std::fabs(fused.prompt_logits[i] - want) > 1e-4f * std::max(std::fabs(want), 1e-2f * max_abs) && ++misses <= 5)
      ADD_FAILURE() << "logit " << i << ": fused " << fused.prompt_logits[i] << " unfused " << want;
  }
  EXPECT_EQ(misses, 0);
}

void expect_fused_matches_unfused(const ModelWeights& weights, const std::vector<int32_t>& prompt) {
  const GenerationRun none = generate(weights, {FusionStrategy::kNone, {}}, prompt);
  const GenerationRun fused = generate(weights, {FusionStrategy::kAuto, {}}, prompt);
  expect_same_results(fused, none);
  // 16 primitive nodes per layer (18 with q/k norms) + embedding, gather, final norm, lm_head; fused: 5 per layer +
  // embedding and one gather+norm+lm_head GEMM.
  const int64_t layers = weights.config.num_layers;
  EXPECT_EQ(none.dispatches_per_step, (weights.config.qk_norm ? 18 : 16) * layers + 4);
  EXPECT_EQ(fused.dispatches_per_step, 5 * layers + 2);
}

// For blocks other than Llama's: fused == unfused, with the given dispatches per layer plus the given fixed ones.
struct DispatchCounts {
  int64_t per_layer, fixed;
};
void expect_fused_matches_unfused(const ModelWeights& weights, const std::vector<int32_t>& prompt, DispatchCounts none,
                                  DispatchCounts fused) {
  const GenerationRun unfused_run = generate(weights, {FusionStrategy::kNone, {}}, prompt);
  const GenerationRun fused_run = generate(weights, {FusionStrategy::kAuto, {}}, prompt);
  expect_same_results(fused_run, unfused_run);
  const int64_t layers = weights.config.num_layers;
  EXPECT_EQ(unfused_run.dispatches_per_step, none.per_layer * layers + none.fixed);
  EXPECT_EQ(fused_run.dispatches_per_step, fused.per_layer * layers + fused.fixed);
}

void expect_fused_matches_unfused(const std::string& path, const std::vector<int32_t>& prompt) {
  SCOPED_TRACE(path);
  expect_fused_matches_unfused(load_model(path), prompt);
}

class FusionOnTestModels : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("minfer_fusion_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& preset, DType dtype, int64_t sliding_window = 0) {
    TestModelOptions o;
    o.preset = preset;
    o.out_dir = (dir_ / (preset + "_" + std::string(dtype_name(dtype)))).string();
    o.dtype = dtype;
    o.seed = 3;
    o.sliding_window = sliding_window;
    write_test_model(o);
    return o.out_dir;
  }
  fs::path dir_;
};

const std::vector<int32_t> kPrompt = {1, 45, 7, 130, 12, 99, 3, 140, 17, 8, 61, 5, 150, 33, 2, 90, 41};

TEST(FusionStories260K, LlamaCBinMatchesUnfused) {
  expect_fused_matches_unfused(kStories + "stories260K.bin", kPrompt);
}
TEST(FusionStories260K, GgufMatchesUnfused) { expect_fused_matches_unfused(kStories + "stories260K.gguf", kPrompt); }

TEST_F(FusionOnTestModels, TinyLlamaF32) { expect_fused_matches_unfused(write("tiny-llama", DType::F32), kPrompt); }
TEST_F(FusionOnTestModels, TinyLlamaBf16) { expect_fused_matches_unfused(write("tiny-llama", DType::BF16), kPrompt); }
TEST_F(FusionOnTestModels, TinyQwen2F32) { expect_fused_matches_unfused(write("tiny-qwen2", DType::F32), kPrompt); }
TEST_F(FusionOnTestModels, TinyQwen2Bf16) { expect_fused_matches_unfused(write("tiny-qwen2", DType::BF16), kPrompt); }
// Qwen3: the per-head q/k norms between the projections and RoPE fold into the QKV GEMM's epilogue (unfused: two
// more nodes per layer; fused: the same five).
TEST_F(FusionOnTestModels, TinyQwen3F32) { expect_fused_matches_unfused(write("tiny-qwen3", DType::F32), kPrompt); }
// Mistral: a sliding window (8 positions, shorter than the prompt) on every layer. Phi-3: fused qkv / gate_up weights
// split at load into views, partial rotary embedding and longrope, a window too.
TEST_F(FusionOnTestModels, TinyMistralF32) {
  expect_fused_matches_unfused(write("tiny-mistral", DType::F32, 8), kPrompt);
}
TEST_F(FusionOnTestModels, TinyPhi3F32) { expect_fused_matches_unfused(write("tiny-phi3", DType::F32, 8), kPrompt); }
TEST_F(FusionOnTestModels, TinyPhi3Bf16) { expect_fused_matches_unfused(write("tiny-phi3", DType::BF16, 8), kPrompt); }

// Mixture of experts: the experts stay one node (router, grouped expert GEMMs, combine) in both graphs. Unfused, the
// MLP's four nodes become that one (13 a layer, 15 with Qwen3's q/k norms); fused, 5 a layer: QKV, attention,
// o + residual, the FFN norm, the experts, whose residual add the next layer's norm takes (the last one's stays).
void expect_moe_fused_matches_unfused(const ModelWeights& weights) {
  const GenerationRun none = generate(weights, {FusionStrategy::kNone, {}}, kPrompt);
  const GenerationRun fused = generate(weights, {FusionStrategy::kAuto, {}}, kPrompt);
  expect_same_results(fused, none);
  const int64_t layers = weights.config.num_layers;
  EXPECT_EQ(none.dispatches_per_step, (weights.config.qk_norm ? 15 : 13) * layers + 4);
  EXPECT_EQ(fused.dispatches_per_step, 5 * layers + 4);
}
TEST_F(FusionOnTestModels, TinyQwen3MoeF32) {
  expect_moe_fused_matches_unfused(load_model(write("tiny-qwen3-moe", DType::F32)));
}
TEST_F(FusionOnTestModels, TinyMixtralF32) {
  expect_moe_fused_matches_unfused(load_model(write("tiny-mixtral", DType::F32)));
}
// gpt-oss: attention sinks, an o-proj bias (kept by the o + residual GEMM), and biased experts with the clamped
// SwiGLU, whose gate and up stay two GEMMs inside the one moe node: the same counts as the other MoE families.
TEST_F(FusionOnTestModels, TinyGptOssF32) {
  expect_moe_fused_matches_unfused(load_model(write("tiny-gpt-oss", DType::F32)));
}
TEST_F(FusionOnTestModels, TinyGptOssBf16) {
  expect_moe_fused_matches_unfused(load_model(write("tiny-gpt-oss", DType::BF16)));
}
TEST_F(FusionOnTestModels, TinyMixtralBf16) {
  expect_moe_fused_matches_unfused(load_model(write("tiny-mixtral", DType::BF16)));
}

// Gemma 3: sandwich norms, GELU(tanh), scaled embeddings, sliding-window layers with their own RoPE table.
// Unfused, 20 a layer: the Llama block's 18 (q/k norms included) and the two output norms. Fused, 9 a layer:
// [add + attention norm], [QKV + q/k norms + rope + kv write], attention, o, post-attention norm, [add + ffn
// norm], [gate/up + gelu], down, post-FFN norm (an output norm needs whole rows, so it stays out of the GEMM's
// epilogue and keeps its residual add out of it too). The first layer's attention norm is the QKV GEMM's
// prologue instead and the last layer's add stands alone; then the embedding and the gathered head.
TEST_F(FusionOnTestModels, TinyGemma3F32) {
  expect_fused_matches_unfused(load_model(write("tiny-gemma3", DType::F32, 8)), kPrompt, {20, 4}, {9, 2});
}

// Gemma 2: Gemma 3's block without q/k norms (unfused 18 a layer), fused to the same 9 a layer; its final
// soft-capping is one more dispatch after the head in both graphs.
TEST_F(FusionOnTestModels, TinyGemma2F32) {
  expect_fused_matches_unfused(load_model(write("tiny-gemma2", DType::F32, 8)), kPrompt, {18, 5}, {9, 3});
}

// SmolLM3: its NoPE layers rotate with the identity table, so they fuse as the others do (5 a layer).
TEST_F(FusionOnTestModels, TinySmolLM3F32) { expect_fused_matches_unfused(write("tiny-smollm3", DType::F32), kPrompt); }

// OLMo 2: no pre-norms and q/k norms over the whole projection (unfused 18 a layer). Fused, 16: the QKV pass fuses
// only per-head norms (a whole-row norm cannot run in a GEMM's column-chunk epilogue), so q, k and v stay three GEMMs
// with their norms, rotations and KV write; no norm precedes a GEMM to become its prologue, and each post norm +
// residual add stays two passes (the add-then-norm pass has no add to start from); gate/up + SiLU fuse.
TEST_F(FusionOnTestModels, TinyOlmo2F32) {
  expect_fused_matches_unfused(load_model(write("tiny-olmo2", DType::F32)), kPrompt, {18, 4}, {16, 2});
}

// Granite: its multipliers are scales the Llama graph already has or weights scaled at load, so it fuses as Llama.
TEST_F(FusionOnTestModels, TinyGraniteF32) { expect_fused_matches_unfused(write("tiny-granite", DType::F32), kPrompt); }

// Quantized weights fuse as float ones do (int8 rows packed with their scales, W8A8 panels rebuilt): the same
// 5 dispatches per layer, the same tokens and logits as the unfused quantized graph.
// The recurrent layers' gates fused into the op beside them, once per recurrent layer: Qwen3.5's and Qwen3-Next's
// head norm + gate, Mamba2's gate + group norm (Granite 4.0-H, Nemotron-H), LFM2's gates around the convolution.
void expect_mixer_gates_fused(const ModelWeights& weights, const std::string& label) {
  graph::Graph g = build_decoder_graph(weights);
  graph::run_fusion_passes(g, graph::FusionOptions{});
  int64_t fused = 0, recurrent = 0;
  for (const graph::Node& n : g.nodes()) fused += graph::node_label(n) == label ? 1 : 0;
  for (int64_t i = 0; i < weights.config.num_layers; ++i) recurrent += weights.config.is_recurrent(i) ? 1 : 0;
  EXPECT_GT(recurrent, 0);
  EXPECT_EQ(fused, recurrent) << label;
}

// Hybrids: fused == unfused (chunked prefill, so the state crosses steps), fewer dispatches, the gates fused.
void expect_hybrid_fuses(const ModelWeights& w, const std::string& label) {
  const GenerationRun none = generate(w, {FusionStrategy::kNone, {}}, kPrompt);
  const GenerationRun fused = generate(w, {FusionStrategy::kAuto, {}}, kPrompt);
  expect_same_results(fused, none);
  std::printf("%s dispatches per step: %ld unfused, %ld fused\n", w.config.arch_name().c_str(),
              static_cast<long>(none.dispatches_per_step), static_cast<long>(fused.dispatches_per_step));
  EXPECT_LT(fused.dispatches_per_step, none.dispatches_per_step);
  expect_mixer_gates_fused(w, label);
}

const std::string kGatedHeadNorm = "fused_rmsnorm[rmsnorm+silu_mul]";
const std::string kGatedGroupNorm = "fused_rmsnorm[silu_mul+rmsnorm]";

// Qwen3.5's hybrid: the delta-rule layers (conv and delta rule with their state, which the fusion passes leave alone)
// beside the gated attention layer. Unfused: 17 nodes per delta-rule layer (norm, four projections, conv, delta rule,
// head norm, gate, out projection, add, then the MLP's six), 20 for the attention layer (Qwen3's 18 plus the gate's
// projection and sigmoid), and the 4 fixed ones.
TEST_F(FusionOnTestModels, TinyQwen35F32) {
  const ModelWeights w = load_model(write("tiny-qwen3.5", DType::F32));
  const GenerationRun none = generate(w, {FusionStrategy::kNone, {}}, kPrompt);
  const GenerationRun fused = generate(w, {FusionStrategy::kAuto, {}}, kPrompt);
  expect_same_results(fused, none);
  EXPECT_EQ(none.dispatches_per_step, 3 * 17 + 20 + 4);
  EXPECT_EQ(fused.dispatches_per_step, 3 * 11 + 8 + 2);
  std::printf("tiny-qwen3.5 dispatches per step: %ld unfused, %ld fused\n", static_cast<long>(none.dispatches_per_step),
              static_cast<long>(fused.dispatches_per_step));
  EXPECT_LT(fused.dispatches_per_step, none.dispatches_per_step);
  // Fused: 11 per delta-rule layer (the gated head norm one pass, out + residual, norm + gate/up, down + residual),
  // 8 for the attention layer.
  expect_mixer_gates_fused(w, kGatedHeadNorm);
}

// LFM2: the convolution layers (three projections, two gates and the conv) beside an attention layer.
TEST_F(FusionOnTestModels, TinyLfm2F32) {
  expect_hybrid_fuses(load_model(write("tiny-lfm2", DType::F32)), "fused_conv1d[mul+conv1d+mul]");
}
TEST_F(FusionOnTestModels, TinyLfm2MoeF32) {
  expect_hybrid_fuses(load_model(write("tiny-lfm2-moe", DType::F32)), "fused_conv1d[mul+conv1d+mul]");
}

// Granite 4.0-H: Mamba2 layers (three projections, conv, scan, gated group norm) and experts beside the shared MLP.
TEST_F(FusionOnTestModels, TinyGraniteHybridF32) {
  expect_hybrid_fuses(load_model(write("tiny-granite-4.0-h", DType::F32)), kGatedGroupNorm);
}
TEST_F(FusionOnTestModels, TinyNemotronHF32) {
  expect_hybrid_fuses(load_model(write("tiny-nemotron-h", DType::F32)), kGatedGroupNorm);
}
TEST_F(FusionOnTestModels, TinyQwen3NextF32) {
  expect_hybrid_fuses(load_model(write("tiny-qwen3-next", DType::F32)), kGatedHeadNorm);
}

TEST_F(FusionOnTestModels, QuantizedWeightsFuseToo) {
  const ModelWeights base = load_model(write("tiny-qwen2", DType::F32));
  for (const QuantConfig& q : {parse_quantization("w8a16"), parse_quantization("w8a16", 32, false),
                               parse_quantization("w8a8"), parse_quantization("w8a8", 64, false)}) {
    SCOPED_TRACE(quantization_name(q));
    ModelWeights weights = base;
    quantize_model(weights, q, 2);
    expect_fused_matches_unfused(weights, kPrompt);
  }
}

// bf16 weights in the blocked layout (the layout pass: own GEMV and oneDNN's matmul) vs row-major (own GEMMs):
// the same exact products, summed in another order. Every GEMM rounds its input activations to bf16, so an f32
// difference in the last bit can flip a rounding (2^-9 of that element) and the layers amplify it: the same tokens,
// every logit within 2e-3 of the largest (measured: 7.5e-4 on tiny-qwen2, 4e-7 on tiny-llama).
TEST_F(FusionOnTestModels, Bf16BlockedMatchesRowMajor) {
  for (const char* preset : {"tiny-qwen2", "tiny-llama"}) {
    SCOPED_TRACE(preset);
    const ModelWeights weights = load_model(write(preset, DType::BF16));
    for (FusionStrategy strategy : {FusionStrategy::kAuto, FusionStrategy::kNone}) {
      const GenerationRun blocked = generate(weights, {strategy, {}}, kPrompt);
      const GenerationRun rows = generate(weights, {strategy, {"bf16-blocked"}}, kPrompt);
      EXPECT_EQ(blocked.tokens, rows.tokens);
      ASSERT_EQ(blocked.prompt_logits.size(), rows.prompt_logits.size());
      float max_abs = 0.0f, max_diff = 0.0f;
      for (size_t i = 0; i < rows.prompt_logits.size(); ++i) {
        max_abs = std::max(max_abs, std::fabs(rows.prompt_logits[i]));
        max_diff = std::max(max_diff, std::fabs(blocked.prompt_logits[i] - rows.prompt_logits[i]));
      }
      EXPECT_LE(max_diff, 2e-3f * max_abs);
    }
  }
}

TEST(FusionOptions, UnknownPassIsAnError) {
  const ModelWeights weights = load_model(kStories + "stories260K.bin");
  EngineConfig config = testing::small_engine_config(weights.path);
  config.disabled_fusion_passes = {"no-such-pass"};
  try {
    testing::engine_over(weights, config);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown fusion pass 'no-such-pass'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace minfer
