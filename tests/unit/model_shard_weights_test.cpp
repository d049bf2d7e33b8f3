// Tensor-parallel weight sharding (model/shard_weights.h) on real test checkpoints: the ranks' slices put back
// together are the full tensors (q/k/v and gate/up by rows, o and down by columns, embed and lm_head by vocab rows,
// experts whole under expert parallel), KV heads replicate when the ranks outnumber them, and every split that
// cannot be made is refused naming the field or the tensor.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>

#include "base/error.h"
#include "model/model_weights.h"
#include "model/shard_weights.h"
#include "model/test_model_writer.h"
#include "tensor/tensor.h"

namespace minfer {
namespace {

namespace fs = std::filesystem;

ModelWeights load_preset(const std::string& preset) {
  const fs::path dir = fs::temp_directory_path() / ("minfer_shard_" + std::to_string(::getpid()) + "_" + preset);
  fs::remove_all(dir);
  write_test_model({.preset = preset, .out_dir = dir.string(), .dtype = DType::F32});
  ModelWeights w = load_model(dir.string());  // the tensors are mapped: the files may go
  fs::remove_all(dir);
  return w;
}

// Row r, columns [c0, c0 + n) of an f32 tensor.
std::vector<float> row(const Tensor& t, int64_t r, int64_t c0, int64_t n) {
  const float* p = t.as<float>() + r * t.dim(1) + c0;
  return {p, p + n};
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ShardWeights, SlicesPutBackTogetherAreTheModel) {
  const ModelWeights full = load_preset("tiny-qwen2");  // 4 heads, 2 KV heads, biases, vocab 634
  const ModelConfig& c = full.config;
  const int ranks = 2;
  for (int r = 0; r < ranks; ++r) {
    const ModelWeights s = shard_weights(full, r, ranks, false);
    EXPECT_EQ(s.config.num_heads, c.num_heads / 2);
    EXPECT_EQ(s.config.num_kv_heads, c.num_kv_heads / 2);
    EXPECT_EQ(s.config.intermediate_size, c.intermediate_size / 2);
    EXPECT_EQ(s.config.vocab_size, c.vocab_size);  // the graph's gathered logits are full width
    EXPECT_EQ(s.shard.vocab_begin, r * 317);
    const int64_t hd = c.head_dim, q = s.config.num_heads * hd, kv = s.config.num_kv_heads * hd;
    const int64_t ff = s.config.intermediate_size;
    for (int64_t i = 0; i < q; ++i)
      ASSERT_EQ(row(s.get("layers.1.wq"), i, 0, c.hidden_size),
                row(full.get("layers.1.wq"), r * q + i, 0, c.hidden_size));
    for (int64_t i = 0; i < kv; ++i)
      ASSERT_EQ(row(s.get("layers.0.wv"), i, 0, c.hidden_size),
                row(full.get("layers.0.wv"), r * kv + i, 0, c.hidden_size));
    EXPECT_EQ(0, std::memcmp(s.get("layers.0.bk").as<float>(), full.get("layers.0.bk").as<float>() + r * kv, kv * 4));
    for (int64_t i = 0; i < c.hidden_size; ++i) {
      ASSERT_EQ(row(s.get("layers.0.wo"), i, 0, q), row(full.get("layers.0.wo"), i, r * q, q));
      ASSERT_EQ(row(s.get("layers.1.w_down"), i, 0, ff), row(full.get("layers.1.w_down"), i, r * ff, ff));
    }
    EXPECT_EQ(s.get("layers.1.w_up").dim(0), ff);
    EXPECT_EQ(s.get("embed").dim(0), r == 0 ? 317 : 634 - 317);
    EXPECT_EQ(s.get("embed").data, full.get("embed").as<float>() + r * 317 * c.hidden_size);  // a view, no copy
    EXPECT_EQ(s.get("layers.0.attn_norm").data, full.get("layers.0.attn_norm").data);         // replicated
  }
}

TEST(ShardWeights, KvHeadsReplicateWhenRanksOutnumberThem) {
  const ModelWeights full = load_preset("tiny-llama");  // 4 heads, 2 KV heads: ranks 0-1 share KV head 0, 2-3 head 1
  const int64_t hd = full.config.head_dim, h = full.config.hidden_size;
  for (int r = 0; r < 4; ++r) {
    const ModelWeights s = shard_weights(full, r, 4, false);
    EXPECT_EQ(s.config.num_heads, 1);
    EXPECT_EQ(s.config.num_kv_heads, 1);
    for (int64_t i = 0; i < hd; ++i)
      ASSERT_EQ(row(s.get("layers.0.wk"), i, 0, h), row(full.get("layers.0.wk"), (r / 2) * hd + i, 0, h)) << r;
  }
}

TEST(ShardWeights, ExpertParallelHoldsWholeExperts) {
  const ModelWeights full = load_preset("tiny-qwen3-moe");  // 8 experts
  for (int r = 0; r < 4; ++r) {
    const ModelWeights s = shard_weights(full, r, 4, true);
    const int64_t begin = r * 2, end = begin + 2;
    EXPECT_EQ(s.shard.expert_begin, begin);
    EXPECT_EQ(s.shard.expert_end, end);
    for (int64_t e = 0; e < 8; ++e) {
      const std::string name = "layers.0.experts." + std::to_string(e) + ".w_down";
      ASSERT_EQ(s.find(name) != nullptr, e >= begin && e < end) << name;
      if (s.find(name)) {
        EXPECT_EQ(s.get(name).data, full.get(name).data);
      }
    }
    EXPECT_EQ(s.config.moe_intermediate_size, full.config.moe_intermediate_size);
  }
  // Tensor-parallel experts: a slice of every one.
  const ModelWeights s = shard_weights(full, 1, 2, false);
  EXPECT_EQ(s.get("layers.0.experts.7.w_gate").dim(0), full.config.moe_intermediate_size / 2);
  EXPECT_EQ(s.get("layers.0.experts.7.w_down").dim(1), full.config.moe_intermediate_size / 2);
}

TEST(ShardWeights, RefusesSplitsThatCannotBeMade) {
  ModelWeights full = load_preset("tiny-llama");
  EXPECT_NE(error_of([&] { shard_weights(full, 0, 3, false); }).find("4 attention heads, which do not divide among 3"),
            std::string::npos);
  EXPECT_NE(error_of([&] { shard_weights(full, 0, 2, true); }).find("needs a mixture-of-experts model"),
            std::string::npos);
  // A Q8_0 o-proj (32-element blocks) over 64 columns: 2 ranks split on a block boundary, 4 would cut blocks.
  Tensor q8 = Tensor::allocate(DType::Q8_0, {full.config.hidden_size, 64});
  full.tensors["layers.0.wo"] = q8;
  EXPECT_EQ(error_of([&] { shard_weights(full, 1, 2, false); }), "");
  const std::string cut = error_of([&] { shard_weights(full, 1, 4, false); });
  EXPECT_NE(cut.find("layers.0.wo (q8_0 [64, 64]) would be split at column 16"), std::string::npos) << cut;
  EXPECT_NE(cut.find("32-element blocks"), std::string::npos) << cut;
  full.quant.weight_bits = 8;
  EXPECT_NE(error_of([&] { shard_weights(full, 0, 2, false); }).find("int8 weights quantized ahead of time"),
            std::string::npos);
  // OLMo's q/k norms span every head: a rank holding half of them cannot compute them.
  const std::string olmo = error_of([] { shard_weights(load_preset("tiny-olmo2"), 0, 2, false); });
  EXPECT_NE(olmo.find("(olmo2) norms q and k over all heads at once"), std::string::npos) << olmo;
}

}  // namespace
}  // namespace minfer
