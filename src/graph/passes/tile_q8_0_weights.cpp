// GGUF Q8_0 GEMM weights -> TensorLayout::kQ8_0Tiles16, which every quantized GEMM leaf reads: 16 rows
// interleaved by column pair, for int16 x int8 dot products over one contiguous stream (rows of 34-byte blocks left
// the decode GEMV at about half the bf16 GEMV's bandwidth and prefill on the f32 GEMM).
#include "graph/passes/fusion_passes.h"
#include "graph/passes/graph_rewrite.h"
#include "kernels/quant.h"

namespace minfer::graph {

int tile_q8_0_weights(Graph& graph, ThreadPool* pool) {
  return relayout_weights(
      graph,
      [](const Tensor& w) {
        return w.dtype == DType::Q8_0 && w.layout == TensorLayout::kRowMajor && w.dim(1) % 32 == 0;
      },
      kernels::to_q8_0_tiles, pool);
}

}  // namespace minfer::graph
