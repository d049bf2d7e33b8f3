// The operator graph of a vision tower and its projector, on the decoder's graph and executor: the same GEMM kernels
// (every weight type), unmasked attention within each image as GEMMs (kernels::encoder_attention), and dispatch
// counts. Rows are an image's patches; the projector's pooled rows are the
// graph's sampled rows (its output: tokens_per_image rows of text_hidden per image).
#pragma once

#include "graph/graph.h"
#include "vision/vision_model.h"

namespace minfer::vision {

// SigLIP (pre-LN ViT: patch embedding + learned positions, layers of LayerNorm -> attention -> residual, LayerNorm ->
// fc1 -> GELU(tanh) -> fc2 -> residual, post LayerNorm), then Gemma 3's projector (average pool, RMSNorm(1 + w),
// linear). The model must outlive the graph.
graph::Graph build_vision_graph(const VisionModel& model);

}  // namespace minfer::vision
