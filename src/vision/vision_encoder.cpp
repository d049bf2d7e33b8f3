#include "vision/vision_encoder.h"

#include "base/error.h"
#include "graph/passes/fusion_passes.h"
#include "vision/vision_graph.h"

namespace minfer::vision {
namespace {

// The tower's graph through the decoder's passes: the residual adds go into the GEMMs' epilogues, and bf16 weights
// take the kernels' blocked layout (the passes that match decoder patterns, q/k/v with RoPE or gated MLPs, find none).
graph::Graph compile_vision_graph(const VisionModel& model, const graph::FusionOptions& fusion, ThreadPool& pool) {
  graph::Graph g = build_vision_graph(model);
  graph::run_fusion_passes(g, fusion, &pool);
  return g;
}

}  // namespace

VisionEncoder::VisionEncoder(std::shared_ptr<const VisionModel> model, ThreadPool& pool,
                             const graph::FusionOptions& fusion)
    : model_(std::move(model)), graph_(compile_vision_graph(*model_, fusion, pool)), executor_(graph_, pool, {}) {}

std::map<std::string, double> VisionEncoder::seconds_by_op() const {
  std::map<std::string, double> out;
  const std::vector<double>& seconds = executor_.node_seconds();
  for (size_t i = 0; i < seconds.size() && i < graph_.nodes().size(); ++i)
    out[graph::node_label(graph_.nodes()[i])] += seconds[i];
  return out;
}

void VisionEncoder::patchify(const media::PixelValues& px, float* rows) const {
  const VisionConfig& c = model_->config;
  const int64_t p = c.patch_size, side = c.patches_per_side(), plane = px.height * px.width;
  for (int64_t py = 0; py < side; ++py)
    for (int64_t pxi = 0; pxi < side; ++pxi) {
      float* row = rows + (py * side + pxi) * c.channels * p * p;
      for (int64_t ch = 0; ch < c.channels; ++ch)
        for (int64_t ky = 0; ky < p; ++ky)
          for (int64_t kx = 0; kx < p; ++kx)
            *row++ = px.data[static_cast<size_t>(ch * plane + (py * p + ky) * px.width + pxi * p + kx)];
    }
}

std::vector<float> VisionEncoder::encode(std::span<const media::PixelValues> images) {
  const VisionConfig& c = model_->config;
  const auto n = static_cast<int64_t>(images.size());
  if (n == 0) return {};
  const int64_t patches = c.patches(), width = c.channels * c.patch_size * c.patch_size, tokens = n * patches;
  patches_.resize(static_cast<size_t>(tokens * width));
  // Each image is one sequence of the step's attention batch (the encoder attention and the pooling read its rows).
  std::vector<int32_t> positions(static_cast<size_t>(tokens)), q_start(static_cast<size_t>(n)),
      q_len(static_cast<size_t>(n), static_cast<int32_t>(patches)),
      sample_rows(static_cast<size_t>(n * c.tokens_per_image), 0);
  const std::vector<int64_t> no_slots(static_cast<size_t>(tokens), -1);
  for (int64_t s = 0; s < n; ++s) {
    const media::PixelValues& px = images[static_cast<size_t>(s)];
    MINFER_CHECK(px.height == c.image_size && px.width == c.image_size, "vision encoder: a {}x{} image for a {} tower",
                 px.width, px.height, c.image_size);
    patchify(px, patches_.data() + s * patches * width);
    q_start[static_cast<size_t>(s)] = static_cast<int32_t>(s * patches);
    for (int64_t t = 0; t < patches; ++t) positions[static_cast<size_t>(s * patches + t)] = static_cast<int32_t>(t);
  }
  graph::StepInputs step;
  step.tokens = positions;
  step.positions = positions;
  step.slot_mapping = no_slots;
  step.attention = {n, q_start.data(), q_len.data(), q_len.data(), nullptr, 0};
  step.sample_rows = sample_rows;
  step.input_rows = patches_;
  const float* out = executor_.run(step, {});
  return {out, out + n * c.tokens_per_image * c.text_hidden};
}

}  // namespace minfer::vision
