// A loaded checkpoint: its config, its weights under canonical names, and where its tokenizer lives.
//
// Canonical weight names (shapes as [rows, cols], Linear weights as [out_features, in_features]):
//   embed                  [vocab, hidden]
//   layers.{i}.attn_norm   [hidden]
//   layers.{i}.wq          [heads * head_dim, hidden]      layers.{i}.bq [heads * head_dim]     (bias: Qwen2)
//   layers.{i}.wk          [kv_heads * head_dim, hidden]   layers.{i}.bk [kv_heads * head_dim]
//   layers.{i}.wv          [kv_heads * head_dim, hidden]   layers.{i}.bv [kv_heads * head_dim]
//   layers.{i}.q_norm      [head_dim]   layers.{i}.k_norm [head_dim]                            (Qwen3)
//   layers.{i}.wo          [hidden, heads * head_dim]
//   layers.{i}.ffn_norm    [hidden]
//   layers.{i}.w_gate      [intermediate, hidden]
//   layers.{i}.w_up        [intermediate, hidden]
//   layers.{i}.w_down      [hidden, intermediate]
//   final_norm             [hidden]
//   lm_head                [vocab, hidden]   (absent when tie_word_embeddings: embed is used)
// Q and K rows are in the order the config's rope_style expects (HF checkpoints: kNeox; GGUF llama and
// llama2.c: kInterleaved), so no loader permutes weights.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "minfer/config.h"
#include "model/model_config.h"
#include "tensor/tensor.h"

namespace minfer {

namespace vision {
struct VisionModel;
}

enum class CheckpointFormat : uint8_t { kHuggingFace, kGguf, kLlama2c };

struct TokenizerSource {
  // Exactly one is set: a tokenizer.json (+ optional tokenizer_config.json), a GGUF file with tokenizer.ggml.*
  // metadata, or a llama2.c tokenizer .bin (e.g. tok512.bin).
  std::string hf_tokenizer_json;
  std::string hf_tokenizer_config_json;
  std::string gguf_path;
  std::string llama2c_tokenizer_bin;
};

// This process's part of a tensor-parallel group's weights (model/shard_weights.h). size 1: the whole model.
struct WeightShard {
  int rank = 0;
  int size = 1;
  bool expert_parallel = false;  // MoE layers hold whole experts [expert_begin, ...) instead of slices of all
  int64_t vocab_begin = 0;       // embed and lm_head hold vocabulary rows [vocab_begin, vocab_begin + rows)
  int64_t vocab_stride = 0;      // rows per rank (the last rank may hold fewer)
  int64_t expert_begin = 0, expert_end = 0;
  bool sharded() const { return size > 1; }
};

struct ModelWeights {
  CheckpointFormat format = CheckpointFormat::kHuggingFace;
  std::string path;  // the directory or file given by the user
  ModelConfig config;
  std::map<std::string, Tensor> tensors;
  TokenizerSource tokenizer;
  // How the weights are quantized (model/quant/): disabled for float weights (and for GGUF Q8_0 run as is).
  QuantConfig quant;
  WeightShard shard;
  // A multimodal checkpoint's vision tower and projector (vision/vision_model.h); null for a text-only model.
  std::shared_ptr<const vision::VisionModel> vision;

  // Throws Error naming the missing weight and the checkpoint.
  const Tensor& get(const std::string& name) const;
  const Tensor* find(const std::string& name) const;
};

// Loads any supported checkpoint: a Hugging Face directory (config.json + *.safetensors), a .gguf file, or a
// llama2.c .bin (tokenizer: tokenizer.bin or tok*.bin beside it). Validates every tensor's shape and dtype
// against the config. Throws LoadError naming the file and the problem.
ModelWeights load_model(const std::string& path);

}  // namespace minfer
