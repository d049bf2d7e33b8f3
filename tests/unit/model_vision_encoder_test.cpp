// The vision encoder's graph and executor on a small random SigLIP + Gemma 3 projector (under ASan/UBSan in the
// sanitizer build): the graph's ops, each image of a batch equal to the image alone, every image token finite. Its
// agreement with a PyTorch reference is tests/python/test_vision.py's.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "base/thread_pool.h"
#include "vision/vision_encoder.h"
#include "vision/vision_graph.h"

namespace minfer::vision {
namespace {

Tensor random_f32(std::mt19937& rng, std::vector<int64_t> shape, float std_dev, float mean = 0.0f) {
  Tensor t = Tensor::allocate(DType::F32, std::move(shape));
  std::normal_distribution<float> dist(mean, std_dev);
  for (int64_t i = 0; i < t.numel(); ++i) t.mutable_as<float>()[i] = dist(rng);
  return t;
}

std::shared_ptr<VisionModel> tiny_model() {
  auto m = std::make_shared<VisionModel>();
  VisionConfig& c = m->config;
  c.hidden = 24, c.intermediate = 40, c.layers = 2, c.heads = 3, c.patch_size = 3, c.image_size = 24;
  c.tokens_per_image = 16, c.text_hidden = 20;
  std::mt19937 rng(7);
  const int64_t h = c.hidden;
  m->tensors["v.patch_embd"] = random_f32(rng, {h, 3, 3, 3}, 0.2f);
  m->tensors["v.patch_bias"] = random_f32(rng, {h}, 0.1f);
  m->tensors["v.pos_embd"] = random_f32(rng, {c.patches(), h}, 0.3f);
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string l = "v.layers." + std::to_string(i) + ".";
    for (const char* n : {"wq", "wk", "wv", "wo"}) m->tensors[l + n] = random_f32(rng, {h, h}, 0.2f);
    for (const char* n : {"bq", "bk", "bv", "bo", "ln1_b", "ln2_b", "fc2_b"})
      m->tensors[l + n] = random_f32(rng, {h}, 0.05f);
    for (const char* n : {"ln1_w", "ln2_w"}) m->tensors[l + n] = random_f32(rng, {h}, 0.1f, 1.0f);
    m->tensors[l + "fc1"] = random_f32(rng, {c.intermediate, h}, 0.2f);
    m->tensors[l + "fc1_b"] = random_f32(rng, {c.intermediate}, 0.05f);
    m->tensors[l + "fc2"] = random_f32(rng, {h, c.intermediate}, 0.15f);
  }
  m->tensors["v.post_ln_w"] = random_f32(rng, {h}, 0.1f, 1.0f);
  m->tensors["v.post_ln_b"] = random_f32(rng, {h}, 0.1f);
  m->tensors["mm.norm"] = random_f32(rng, {h}, 0.1f);
  m->tensors["mm.proj"] = random_f32(rng, {h, c.text_hidden}, 0.2f);
  finish_vision_weights(*m);
  return m;
}

media::PixelValues random_image(std::mt19937& rng, int64_t size) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  media::PixelValues px{size, size, std::vector<float>(static_cast<size_t>(3 * size * size))};
  for (float& v : px.data) v = dist(rng);
  return px;
}

TEST(VisionEncoder, GraphHasTheTowerAndProjector) {
  const auto model = tiny_model();
  const graph::Graph g = build_vision_graph(*model);
  // input, patch matmul, positions, add; per layer 2 layernorms, 4 matmuls + encoder attention, 2 adds, fc1, gelu,
  // fc2; post layernorm, avg_pool, rmsnorm, projection.
  EXPECT_EQ(g.nodes().size(), 4u + 2u * 12u + 4u);
  EXPECT_EQ(g.value(g.output()).width, 20);
}

TEST(VisionEncoder, BatchedImagesEqualAlone) {
  const auto model = tiny_model();
  ThreadPool pool(2);
  VisionEncoder encoder(model, pool);
  std::mt19937 rng(8);
  const std::vector<media::PixelValues> images = {random_image(rng, 24), random_image(rng, 24), random_image(rng, 24)};
  const std::vector<float> batch = encoder.encode(images);
  const size_t per_image = 16 * 20;
  ASSERT_EQ(batch.size(), 3 * per_image);
  for (float v : batch) ASSERT_TRUE(std::isfinite(v));
  EXPECT_EQ(encoder.dispatches_last(), static_cast<int64_t>(encoder.graph().nodes().size()));
  // Fused: the residual adds into the o-proj and fc2 GEMMs (two dispatches fewer per layer), the position embeddings'
  // add into the patch GEMM, and the projector's RMSNorm into its GEMM.
  EXPECT_EQ(encoder.graph().nodes().size() + 2u * 2u + 2u, build_vision_graph(*model).nodes().size())
      << encoder.graph().to_string();
  for (size_t i = 0; i < images.size(); ++i) {
    const std::vector<float> alone = encoder.encode(std::span(&images[i], 1));
    for (size_t j = 0; j < per_image; ++j)
      ASSERT_NEAR(alone[j], batch[i * per_image + j], 1e-5f * (1.0f + std::fabs(alone[j]))) << "image " << i;
  }
}

}  // namespace
}  // namespace minfer::vision
