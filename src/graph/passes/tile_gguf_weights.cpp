// 4- to 6-bit GGUF GEMM weights (Q4_0, Q4_1, IQ4_NL, Q4_K, IQ4_XS, Q5_0, Q5_1, Q5_K, Q6_K) ->
// TensorLayout::kGgufTiles16 where the kernels in use read it: 16 rows' nibbles interleaved by 4 columns, unpacked in
// registers into vpdpbusd operands, instead of each row decoded into a scratch buffer and multiplied row by row
// (docs/DESIGN.md, "GGUF block types").
#include "graph/passes/fusion_passes.h"
#include "graph/passes/graph_rewrite.h"
#include "kernels/gguf_tiles.h"
#include "kernels/quant.h"

namespace minfer::graph {

int tile_gguf_weights(Graph& graph, ThreadPool* pool) {
  if (!kernels::gguf_tiles_preferred()) return 0;
  return relayout_weights(graph, kernels::gguf_tiles_hold, kernels::to_gguf_tiles, pool);
}

}  // namespace minfer::graph
