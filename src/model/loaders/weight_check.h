// The canonical weights a ModelConfig implies (names and shapes, see model/model_weights.h), and the check every
// loader runs on what it mapped: each expected tensor present, with its shape and a supported dtype, and nothing
// else.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "model/model_weights.h"

namespace minfer {

// Canonical name -> expected shape. lm_head only when the embeddings are untied; bq/bk/bv only with attention_bias;
// q_norm/k_norm only with qk_norm.
std::map<std::string, std::vector<int64_t>> expected_weight_shapes(const ModelConfig& config);

// Where a weight lives in the checkpoint, for error messages: the file and the tensor's name there.
struct WeightOrigin {
  std::string file;
  std::string name;
};

// Splits the fused projections some families store (Phi-3's layers.{i}.wqkv into wq, wk, wv and w_gate_up into
// w_gate, w_up; GGUF's stacked experts layers.{i}.experts.w_gate into experts.{j}.w_gate, ...) into row views of the
// same data (no copy); each part keeps the fused tensor's origin. A fused
// tensor whose rows do not add up is a LoadError naming it.
void split_fused_projections(ModelWeights& weights, std::map<std::string, WeightOrigin>& origins);
// gpt-oss's HF experts under layer prefix `prefix` (loaders/gpt_oss_experts.cpp): the stacked, transposed,
// gate/up-interleaved tensors (or their MXFP4 blocks and scales) -> each expert's matrices and biases, copied.
void split_gpt_oss_experts(ModelWeights& weights, std::map<std::string, WeightOrigin>& origins,
                           const std::string& prefix);

// Throws LoadError naming the file and the tensor: a missing tensor (file_name_of maps a canonical name to the
// checkpoint's own name, and `checkpoint` is the path to blame), a shape mismatch (expected vs actual) or an
// unsupported dtype. Also sets weights.config.dtype to the dtype of layers.0.wq.
void check_weights(ModelWeights& weights, const std::map<std::string, WeightOrigin>& origins,
                   const std::string& checkpoint, const std::function<std::string(const std::string&)>& file_name_of);

// transformers 5's stacked gate/up experts, layers.{i}.experts.w_gate_up [experts, 2 width, hidden] (each expert's gate
// rows, then its up rows; HF's gate_up_proj or input_linear, named `hf_name` in errors), as each expert's w_gate and
// w_up (views). `p` is the layer prefix; no-op when the layer has no such tensor.
void split_stacked_gate_up(ModelWeights& w, const std::string& p, const char* hf_name);

// Canonical weight `canonical`'s name in w's checkpoint (Hugging Face's or GGUF's), for errors raised while adapting
// the weights.
std::string checkpoint_name(const ModelWeights& w, const std::string& canonical);

// A fused tensor the family splits at load (Mamba2's in_proj, ...): present, or already split into `first_part`;
// else a LoadError naming the checkpoint's tensor (its parts have no names of their own to report).
void require_fused(const ModelWeights& w, const std::string& fused, const std::string& first_part);

// The recurrent mixers' forms in a Hugging Face checkpoint, brought to the graph's (what GGUF stores): a depthwise
// conv kernel [channels, 1, taps] as f32 [channels, taps], and A_log as the decay coefficients -exp(A_log) in f32.
// No-ops for a tensor that is absent or already in that form (the conv).
void squeeze_conv_kernel(ModelWeights& w, const std::string& name);
void decay_from_a_log(ModelWeights& w, const std::string& name);

// The rows [begin, end) of each range of `t` in turn, copied into one tensor (row bytes of any element or block
// type): the parts of a projection whose checkpoint interleaves them (Qwen3.5's per-head query / gate rows,
// Qwen3-Next's per-key-head q | k | v | z groups).
Tensor gather_row_ranges(const Tensor& t, const std::vector<std::pair<int64_t, int64_t>>& ranges);

}  // namespace minfer
