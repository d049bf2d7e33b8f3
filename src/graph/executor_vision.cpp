// The vision encoders' ops (Executor::run_node): patches in, LayerNorm, the projector's average pooling, and the
// image embeddings a decoder's embedding node takes in place of its image tokens' rows.
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "graph/executor.h"

namespace minfer::graph {

void Executor::run_input(const Node& node, const StepInputs& step, int64_t tokens) {
  const int64_t w = graph_.value(node.output).width;
  MINFER_CHECK(static_cast<int64_t>(step.input_rows.size()) == tokens * w, "input: {} floats for {} rows of {}",
               step.input_rows.size(), tokens, w);
  std::memcpy(buffer(node.output), step.input_rows.data(), step.input_rows.size() * sizeof(float));
}

void Executor::run_layernorm(const Node& node, int64_t rows) {
  const int64_t w = graph_.value(node.output).width;
  const float* x = input(node, 0);
  float* y = buffer(node.output);
  const float* weight = node.weight->as<float>();
  const float* bias = node.bias->as<float>();
  pool_.parallel_for(static_cast<size_t>(rows), 4, [&](size_t b, size_t e) {
    const auto first = static_cast<int64_t>(b);
    kernels::layernorm(x + first * w, weight, bias, node.eps, y + first * w, static_cast<int64_t>(e - b), w);
  });
}

// Each image (a sequence of the step's attention batch) is a square grid of side g patches, pooled by squares of
// node.block: (g / block)^2 rows per image, row-major, images one after another (torch's AvgPool2d over the
// [hidden, g, g] view that Gemma 3's projector takes).
void Executor::run_avg_pool(const Node& node, const StepInputs& step, int64_t sampled) {
  const int64_t w = graph_.value(node.output).width, k = node.block;
  const float* x = input(node, 0);
  float* y = buffer(node.output);
  const kernels::AttentionBatch& images = step.attention;
  int64_t out_row = 0;
  for (int64_t s = 0; s < images.num_seqs; ++s) {
    const int64_t n = images.q_len[s];
    const auto g = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(n))));
    MINFER_CHECK(g * g == n && g % k == 0, "avg_pool: image {} has {} patches, not a square grid of a multiple of {}",
                 s, n, k);
    const int64_t side = g / k;
    const float* img = x + static_cast<int64_t>(images.q_start[s]) * w;
    float* out = y + out_row * w;
    const float inv = 1.0f / static_cast<float>(k * k);
    pool_.parallel_for(static_cast<size_t>(side * side), 1, [&](size_t b, size_t e) {
      for (auto r = static_cast<int64_t>(b); r < static_cast<int64_t>(e); ++r) {
        float* o = out + r * w;
        std::fill(o, o + w, 0.0f);
        const int64_t oy = r / side, ox = r % side;
        for (int64_t ky = 0; ky < k; ++ky)
          for (int64_t kx = 0; kx < k; ++kx) {
            const float* p = img + ((oy * k + ky) * g + ox * k + kx) * w;
            for (int64_t i = 0; i < w; ++i) o[i] += p[i];
          }
        for (int64_t i = 0; i < w; ++i) o[i] *= inv;
      }
    });
    out_row += side * side;
  }
  MINFER_CHECK(out_row == sampled, "avg_pool: {} pooled rows, the step samples {}", out_row, sampled);
}

// Each image (a sequence of the step's attention batch) attends within itself.
void Executor::run_encoder_attention(const Node& node, const StepInputs& step) {
  const int64_t w = graph_.value(node.output).width;
  const kernels::AttentionBatch& images = step.attention;
  for (int64_t s = 0; s < images.num_seqs; ++s) {
    const int64_t row = images.q_start[s];
    kernels::encoder_attention(input(node, 0) + row * w, input(node, 1) + row * w, input(node, 2) + row * w,
                               buffer(node.output) + row * w, images.q_len[s], node.heads, node.head_dim, node.scale,
                               pool_);
  }
}

void Executor::put_given_rows(const Node& node, const StepInputs& step) {
  const int64_t w = graph_.value(node.output).width;
  MINFER_CHECK(step.input_rows.size() == step.given_rows.size() * static_cast<size_t>(w),
               "embedding: {} given floats for {} rows of {}", step.input_rows.size(), step.given_rows.size(), w);
  float* y = buffer(node.output);
  for (size_t i = 0; i < step.given_rows.size(); ++i)
    std::memcpy(y + static_cast<int64_t>(step.given_rows[i]) * w, step.input_rows.data() + static_cast<int64_t>(i) * w,
                static_cast<size_t>(w) * sizeof(float));
}

}  // namespace minfer::graph
