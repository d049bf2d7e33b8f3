// The architecture hyper-parameters of a decoder-only transformer, read from config.json, GGUF metadata or a
// llama2.c header, in one form for the graph builder.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "tensor/dtype.h"

namespace minfer {

enum class Architecture : uint8_t { kLlama, kQwen2, kQwen3 };

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
};

struct ModelConfig {
  Architecture arch = Architecture::kLlama;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;  // usually hidden_size / num_heads
  int64_t max_position_embeddings = 2048;
  double rms_norm_eps = 1e-5;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  kernels::RopeStyle rope_style = kernels::RopeStyle::kNeox;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v projections have a bias (Qwen2)
  bool qk_norm = false;         // RMSNorm over each head of q and k before RoPE, one [head_dim] weight each (Qwen3)
  DType dtype = DType::F32;     // the dtype the weights are stored in
  int32_t bos_token_id = -1;
  std::vector<int32_t> eos_token_ids;

  // Inverse frequencies for RoPE (head_dim / 2 of them): theta^(-2i/head_dim), with rope_scaling applied.
  std::vector<float> rope_inv_freq() const;
  // Throws LoadError(source, ...) naming the inconsistent field (e.g. kv heads not dividing heads).
  void validate(const std::string& source) const;
  std::string arch_name() const {
    switch (arch) {
      case Architecture::kLlama: return "llama";
      case Architecture::kQwen2: return "qwen2";
      case Architecture::kQwen3: return "qwen3";
    }
    return "?";
  }
};

}  // namespace minfer
