// The architecture hyper-parameters of a decoder-only transformer, read from config.json, GGUF metadata or a
// llama2.c header, in one form for the graph builder.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/moe.h"
#include "tensor/dtype.h"

namespace minfer {

// The MLP's activation: down(act(gate(x)) * up(x)), or with ModelConfig::mlp_gated false down(act(up(x)))
// (Nemotron-H's squared ReLU).
enum class Activation : uint8_t { kSilu, kGeluTanh, kRelu2 };

// A layer's token mixer: attention over the KV cache, one that keeps a fixed-size recurrent state per sequence
// (kernels/mixers.h; kv/state_pool.h holds the states), or none (Nemotron-H's MLP-only layers).
enum class LayerMixer : uint8_t { kAttention, kGatedDeltaNet, kShortConv, kMamba2, kNone };
const char* layer_mixer_name(LayerMixer mixer);

// Gated DeltaNet layers (Qwen3.5 / Qwen3.6, Qwen3-Next): q and k heads of k_dim, v heads of v_dim (v_heads a
// multiple of k_heads), a causal convolution of conv_kernel taps over q | k | v.
struct LinearAttentionShape {
  int64_t k_heads = 0, v_heads = 0, k_dim = 0, v_dim = 0, conv_kernel = 0;
  // llama.cpp's GGUF files store the value heads tiled over the key heads (value head h reads key head
  // h % k_heads) where Hugging Face groups them (h / (v_heads / k_heads)).
  bool tiled_heads = false;
  int64_t conv_channels() const { return 2 * k_heads * k_dim + v_heads * v_dim; }
};

// Mamba2 layers (Granite 4.0-H, Nemotron-H): heads of head_dim over an inner width heads x head_dim, groups sharing
// B and C of `state` each, a causal convolution (conv_kernel taps, with a bias when conv_bias) over x | B | C.
struct MambaShape {
  int64_t heads = 0, head_dim = 0, groups = 0, state = 0, conv_kernel = 0;
  bool conv_bias = false;
  int64_t inner() const { return heads * head_dim; }
  int64_t conv_channels() const { return inner() + 2 * groups * state; }
};

struct RopeScaling {
  // "none", "linear" (every frequency divided by factor) or "llama3" (Llama 3.1/3.2 frequency-dependent scaling,
  // as HF transformers' _compute_llama3_parameters).
  std::string type = "none";
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
  // GGUF's rope_freqs.weight (llama.cpp's converter bakes Llama 3 scaling into it): head_dim / 2 divisors applied to
  // the inverse frequencies after `type`. Empty when absent.
  std::vector<float> freq_factors;
  // "longrope" (Phi-3 / 3.5, transformers' _compute_longrope_parameters): rotary_dim / 2 divisors of the inverse
  // frequencies, the long ones when the engine's context exceeds original_max_position_embeddings (for every
  // position, as llama.cpp and vLLM choose them), else the short ones; cos and sin are scaled by attention_factor.
  std::vector<float> long_factor, short_factor;
  // cos and sin are scaled by this (longrope's, YaRN's mscale); 1 = not at all.
  double attention_factor = 1.0;
  // "yarn" (transformers' _compute_yarn_parameters; Qwen2.5/Qwen3 long context, gpt-oss, ...): per frequency a blend
  // of the original (extrapolated) and factor-divided (interpolated) one, ramped between the dimensions that turn
  // beta_fast and beta_slow times over original_max_position_embeddings (rounded outwards when truncate).
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  bool truncate = true;
};

struct ModelConfig {
  // The family (model/families/family.h: Family::name): "llama", "qwen3", "gemma3", "gpt-oss", ...
  std::string arch = "llama";
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;    // usually hidden_size / num_heads
  int64_t rotary_dim = 0;  // the leading dims of each head RoPE rotates (partial_rotary_factor); 0 = head_dim
  int64_t max_position_embeddings = 2048;
  double rms_norm_eps = 1e-5;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  kernels::RopeStyle rope_style = kernels::RopeStyle::kNeox;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v projections have a bias (Qwen2)
  bool o_bias = false;          // the output projection has one too (gpt-oss)
  // gpt-oss: each head has a learned logit ("sink") that joins its softmax's denominator and contributes no value,
  // layers.{i}.sinks [num_heads].
  bool attention_sinks = false;
  bool qk_norm = false;  // RMSNorm over each head of q and k before RoPE, one [head_dim] weight each (Qwen3)
  Activation hidden_act = Activation::kSilu;
  bool mlp_gated = true;  // false: down(act(up(x))), no gate projection (Nemotron-H)
  // Gemma: the embeddings are multiplied by this (sqrt(hidden_size)); 0 = not at all.
  float embedding_scale = 0.0f;
  // Gemma 2/3: each block's output is RMSNorm-ed before its residual add (layers.{i}.post_attn_norm and
  // post_ffn_norm), and every norm weight w of a Hugging Face checkpoint multiplies by (1 + w): the HF loader adds
  // the 1 once at load (GGUF files store 1 + w already), so the graph's RMSNorm is the same for every family.
  bool sandwich_norms = false;
  bool norm_weight_plus_one = false;
  // Post-norm blocks: no norm before attention or the MLP, only the post norms of sandwich_norms (post_attn_norm,
  // post_ffn_norm), and q_norm / k_norm over the whole projection (num_heads * head_dim wide) rather than per head.
  bool post_norms_only = false;
  bool qk_norm_full_width = false;
  double attention_scale = 0.0;  // scores are scaled by this; 0 = 1/sqrt(head_dim) (Gemma: query_pre_attn_scalar^-1/2)
  double attn_softcap = 0.0;     // attn_logit_softcapping (Gemma 2 style); 0 = none
  // Granite: each block's output (o, down) times residual_multiplier and the logits divided by logits_scaling,
  // folded into those weights and the final norm at load (loaders/output_scales.cpp).
  double residual_multiplier = 1.0;
  double logits_scaling = 1.0;
  double final_softcap = 0.0;  // final_logit_softcapping; 0 = none
  // Sliding-window attention: layers marked in layer_sliding (all of them when it is empty) see the last
  // sliding_window positions only; 0 = no window anywhere.
  int64_t sliding_window = 0;
  std::vector<bool> layer_sliding;
  // Mixture of experts (Qwen3-MoE, Mixtral): each MoE layer's MLP is num_experts gated MLPs of
  // moe_intermediate_size, of which a softmax router picks num_experts_per_tok per token, their outputs summed with
  // the router's probabilities (renormalised over the chosen ones with norm_topk_prob). Layers marked in layer_dense
  // (Qwen3-MoE's mlp_only_layers) keep a dense MLP of intermediate_size. num_experts 0: a dense model.
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  bool norm_topk_prob = true;
  std::vector<bool> layer_dense;
  // Qwen3.5-MoE: each MoE layer also runs one shared expert (a gated MLP of this width, layers.{i}.shared.*) on every
  // token, scaled by sigmoid(shared_gate . x) and added to the routed experts' sum; 0 = none.
  int64_t shared_expert_intermediate_size = 0;
  bool shared_expert_gated = true;  // false: the shared expert is added as is (Granite 4.0-H's shared_mlp)
  // gpt-oss: the router and every expert projection have biases (router_bias, experts.{j}.b_gate / b_up / b_down),
  // and experts gate with kernels::MoeActivation::kSwigluOai instead of SiLU.
  bool moe_bias = false;
  bool moe_swiglu_oai = false;
  // LFM2-MoE: sigmoid router scores, layers.{i}.expert_bias [experts] added to choose (not to weigh) the experts, and
  // the chosen weights times routed_scaling_factor (kernels::MoeRouting).
  kernels::MoeGating moe_gating = kernels::MoeGating::kSoftmax;
  bool moe_selection_bias = false;
  double routed_scaling_factor = 1.0;
  bool is_moe(int64_t layer) const {
    return num_experts > 0 && (layer_dense.empty() || !layer_dense[static_cast<size_t>(layer)]);
  }
  // The sliding layers' own RoPE base (Gemma 3's rope_local_base_freq, without rope_scaling); 0 = they rotate as the
  // global ones do.
  double rope_local_theta = 0.0;
  // Layers that rotate q and k (SmolLM3's no_rope_layers: 1 = RoPE, 0 = no positional encoding, "NoPE"); empty =
  // every layer rotates.
  std::vector<bool> layer_rope;
  // Hybrid models: each layer's mixer (empty: attention everywhere), and the linear-attention layers' shape.
  std::vector<LayerMixer> layer_mixers;
  std::vector<bool> layer_mlp;  // layers with an MLP (empty: all)
  LinearAttentionShape linear;
  // Qwen3.5: q_proj yields a sigmoid gate per head beside the query (split at load into wq and wq_gate); the
  // attention output is multiplied by it before o_proj.
  bool attn_output_gate = false;
  MambaShape mamba;
  // LFM2's gated short convolution layers: a causal depthwise conv of this many taps over hidden_size channels.
  int64_t short_conv_kernel = 0;
  // Its channels: hidden_size, or under tensor parallel the rank's share of them (0: hidden_size).
  int64_t short_conv_channels = 0;
  int64_t conv_channels() const { return short_conv_channels > 0 ? short_conv_channels : hidden_size; }
  // Multi-token-prediction blocks after the trunk (Qwen3.5 / Qwen3-Next: mtp_num_hidden_layers, GGUF's
  // nextn_predict_layers): loaded and checked as mtp.{j}.* (loaders/weight_names.cpp), not run by the decoder.
  int64_t mtp_layers = 0;
  DType dtype = DType::F32;  // the dtype the weights are stored in
  int32_t bos_token_id = -1;
  std::vector<int32_t> eos_token_ids;

  // Inverse frequencies for RoPE (rotary_dim / 2 of them): theta^(-2i/rotary_dim), with rope_scaling applied
  // (longrope's factors chosen by max_model_len); for local = true, the sliding layers' table (rope_local_theta,
  // unscaled).
  std::vector<float> rope_inv_freq(bool local = false, int64_t max_model_len = 0) const;
  int64_t rotary_dims() const { return rotary_dim > 0 ? rotary_dim : head_dim; }
  // Whether layer i attends through the sliding window.
  bool is_sliding(int64_t layer) const {
    return sliding_window > 0 && (layer_sliding.empty() || layer_sliding[static_cast<size_t>(layer)]);
  }
  LayerMixer mixer(int64_t layer) const {
    return layer_mixers.empty() ? LayerMixer::kAttention : layer_mixers[static_cast<size_t>(layer)];
  }
  // Layers whose memory is a per-sequence state; layers that attend over KV pages. A layer without a mixer is
  // neither.
  bool is_recurrent(int64_t layer) const {
    const LayerMixer m = mixer(layer);
    return m != LayerMixer::kAttention && m != LayerMixer::kNone;
  }
  bool attends(int64_t layer) const { return mixer(layer) == LayerMixer::kAttention; }
  // Layers with a KV cache (the others keep recurrent state, or nothing).
  int64_t num_attention_layers() const {
    int64_t n = 0;
    for (int64_t i = 0; i < num_layers; ++i) n += attends(i) ? 1 : 0;
    return n;
  }
  // Whether layer i has an MLP (or experts) after its mixer: Nemotron-H's mixer layers have none.
  bool has_mlp(int64_t layer) const { return layer_mlp.empty() || layer_mlp[static_cast<size_t>(layer)]; }
  bool has_recurrent_layers() const {
    for (int64_t i = 0; i < num_layers; ++i)
      if (is_recurrent(i)) return true;
    return false;
  }
  // The floats of one sequence's state in a recurrent layer: the convolution's past inputs, then the recurrent
  // state (0 and 0 for attention layers).
  int64_t conv_state_floats(int64_t layer) const;
  int64_t ssm_state_floats(int64_t layer) const;
  // Whether sliding layers use their own RoPE table (a second one beside the global layers').
  bool has_local_rope() const { return sliding_window > 0 && rope_local_theta > 0.0; }
  bool uses_rope(int64_t layer) const { return layer_rope.empty() || layer_rope[static_cast<size_t>(layer)]; }
  bool has_nope_layers() const {
    for (bool r : layer_rope)
      if (!r) return true;
    return false;
  }
  // The RoPE table layer i rotates with, in the order rope_tables() (model/decoder_graph.h) builds them: 0 the
  // global one; 1 the sliding layers' own where has_local_rope(); last, for NoPE layers, an identity table (zero
  // frequencies: cos 1 and sin 0, so the rotation returns its input bit for bit), which keeps those layers' q/k/v in
  // the fused QKV GEMM instead of a graph of their own.
  int32_t rope_table(int64_t layer) const {
    if (!uses_rope(layer)) return has_local_rope() ? 2 : 1;
    return is_sliding(layer) && has_local_rope() ? 1 : 0;
  }
  float attention_score_scale() const {
    return static_cast<float>(attention_scale > 0 ? attention_scale : 1.0 / std::sqrt(static_cast<double>(head_dim)));
  }
  // Throws LoadError(source, ...) naming the inconsistent field (e.g. kv heads not dividing heads).
  void validate(const std::string& source) const;
  const std::string& arch_name() const { return arch; }
};

}  // namespace minfer
