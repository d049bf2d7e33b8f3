// Runs a vision tower's graph (vision/vision_graph.h) on preprocessed images: patches cut from the pixel values, each
// image's patches one sequence of the step (its encoder attention and pooling stay within it), the projector's output
// the language model's embeddings of the image's tokens.
#pragma once

#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "graph/executor.h"
#include "graph/passes/fusion_passes.h"
#include "media/image_processor.h"
#include "vision/vision_model.h"

namespace minfer::vision {

class VisionEncoder {
 public:
  // fusion: the engine's fusion options (its --fusion-strategy and disabled passes apply to the tower too).
  VisionEncoder(std::shared_ptr<const VisionModel> model, ThreadPool& pool, const graph::FusionOptions& fusion = {});

  const VisionConfig& config() const { return model_->config; }
  // The embeddings of the images' tokens, [images * tokens_per_image, text_hidden] row-major, image after image.
  // Each image must have the tower's size (media::preprocess_image with config().processor).
  std::vector<float> encode(std::span<const media::PixelValues> images);
  int64_t dispatches_last() const { return executor_.dispatches_last_step(); }
  // Opt-in: the wall time of each node is added up (graph::Executor's profiling), by node label.
  void set_profiling(bool on) { executor_.set_profiling(on); }
  std::map<std::string, double> seconds_by_op() const;
  const graph::Graph& graph() const { return graph_; }

 private:
  // The image's patches as rows of channels x patch x patch, the Conv2d kernel's order.
  void patchify(const media::PixelValues& px, float* rows) const;

  std::shared_ptr<const VisionModel> model_;
  graph::Graph graph_;
  graph::Executor executor_;
  std::vector<float> patches_;
};

}  // namespace minfer::vision
