// The Mamba2 mixer shared by the families that have it (Granite 4.0-H, Nemotron-H): its graph, its weights' forms at
// load and its GGUF keys. The checkpoints agree on the layer's tensors; only their names and the config's field names
// differ, which stay in the family files.
#pragma once

#include <string>

#include "graph/graph.h"
#include "model/families/decoder_builder.h"
#include "model/model_weights.h"

namespace minfer {

class GgufFile;
class HfFields;

// Layer `layer`'s Mamba2 mixer from its normalised input h, through the out projection: z, x|B|C and dt from in_proj
// (split at load); the conv (SiLU, optional bias) over x|B|C; the selective scan (kernels/mixers.h); RMSNorm per group
// of y * SiLU(z); out_proj.
graph::ValueId mamba2_mixer(DecoderBuilder& b, int64_t layer, graph::ValueId h);

// Layer prefix p's Mamba2 weights in the forms the graph reads: in_proj [z | x B C | dt] split in three (views), the
// vectors GGUF stores as matrices flattened, HF's conv [C, 1, K] as [C, K], HF's A_log as -exp(A_log).
void adapt_mamba2_weights(ModelWeights& w, const std::string& p);

// llama.cpp's ssm.* keys (conv_kernel, state_size, time_step_rank, group_count, inner_size) and whether the conv
// has a bias (its tensor present).
void read_mamba2_gguf(const GgufFile& g, const std::string& arch, MambaShape& m);

// transformers' time_step_limit: only the default (0, inf), which clamps nothing, is supported.
void check_time_step_limit(const HfFields& f);

}  // namespace minfer
