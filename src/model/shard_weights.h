// Tensor parallel (Megatron-LM's split, as vLLM lays it out): the part of a model one rank of N holds.
//   q/k/v, gate/up      column-parallel: the rank's heads (KV heads replicated when there are fewer than ranks) and
//                       FFN columns, rows of the weight (views of the checkpoint, no copy)
//   o, down             row-parallel: the matching input columns (copied); the graph all-reduces their outputs
//   embed, lm_head      vocab-parallel: rows [vocab_begin, vocab_begin + stride); the embedding is all-reduced, the
//                       logits gathered on rank 0
//   norms, router       replicated
//   experts             sliced as the dense MLP, or with expert_parallel whole, a block of them per rank
//   recurrent mixers    the rank's heads (or conv channels) and their state (model/shard_mixers.h)
// Quantized (GGUF block) weights split on their block boundaries: a split that would cut a block is refused,
// naming the tensor. The shard's config holds the rank's head, KV head and FFN counts.
#pragma once

#include "model/model_weights.h"

namespace minfer {

// The shard of `full` for `rank` of `ranks`; `full` must outlive it (sliced rows view its data). Throws Error
// naming the field or tensor that does not split (heads not divisible by the ranks, a block cut, ...).
ModelWeights shard_weights(const ModelWeights& full, int rank, int ranks, bool expert_parallel);

}  // namespace minfer
