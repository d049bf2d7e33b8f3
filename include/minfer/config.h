// Engine configuration (the vLLM EngineArgs a CPU engine needs).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace minfer {

// How KV memory is handed to sequences. kContiguous reserves max_model_len per sequence up front, as an
// engine without paging must; it exists only to measure what paging gains.
enum class KvLayout : uint8_t { kPaged, kContiguous };

// Element type of the KV cache (vLLM's --kv-cache-dtype, llama.cpp's -ctk/-ctv type names). kAuto = a 16-bit type
// for models whose weights are 16-bit or quantized (the one this CPU reads fastest), f32 for f32 models. Values are
// quantized once, as they are written into a page; attention reads the pages as stored, computing in f32:
//  kInt8: int8 with an f32 scale per token and kv head (MindIE's and xFasterTransformer's layout);
//  kFp8E4m3: OCP e4m3 with an f32 scale per token and kv head;
//  kQ8_0 / kQ4_0: llama.cpp's blocks of 32 along the head dimension, an f16 scale each (8.5 / 4.5 bits a value).
enum class KvCacheDtype : uint8_t { kAuto, kF32, kBf16, kF16, kInt8, kFp8E4m3, kQ8_0, kQ4_0 };
// "auto", "f32", "bf16", "f16", "int8", "fp8_e4m3" (also "fp8"), "q8_0", "q4_0" (and the long spellings
// "float32", "bfloat16", "float16"); false for anything else.
bool parse_kv_cache_dtype(std::string_view name, KvCacheDtype* out);
const char* kv_cache_dtype_name(KvCacheDtype dtype);

// Operator fusion applied when the model graph is compiled. kAuto runs every fusion pass; kNone runs each
// op on its own (the reference the fused graph is checked against).
enum class FusionStrategy : uint8_t { kAuto, kNone };

// Weight/activation quantization applied at load (or read from a quantized checkpoint).
// weight_bits 16 = weights as stored (no quantization); 8 = int8 weights with scales.
// activation_bits 16 = activations stay f32/bf16 (W8A16); 8 = per-token dynamic int8 activations (W8A8).
// group_size 0 = one scale per output channel; otherwise 32, 64 or 128 input elements share a scale.
struct QuantConfig {
  int weight_bits = 16;
  int activation_bits = 16;
  bool symmetric = true;
  int group_size = 0;

  bool enabled() const { return weight_bits < 16; }
};

// What the engine computes per request. kGenerate: tokens (the default). kEmbed: one embedding of the prompt,
// pooled from the final-normed hidden states (vLLM's pooling runner, `--task embed`); no lm_head, no sampling.
enum class EngineTask : uint8_t { kGenerate, kEmbed };
// kEmbed's pooling: the last position's hidden state (decoder embedding models: e5-mistral, Qwen3-Embedding), or
// the mean over every prompt position.
enum class PoolingType : uint8_t { kLast, kMean };

// Speculative decoding (vLLM's speculative_config): each step proposes up to num_speculative_tokens draft tokens
// per decoding sequence and checks them in the same forward pass as the token it computes anyway, so an accepted
// draft is a token without a step of its own. kNgram: prompt lookup (the tokens that followed the latest earlier
// occurrence of the sequence's last prompt_lookup_max..prompt_lookup_min tokens). Outputs are the target model's
// exactly: greedy ones equal, sampled ones drawn from the same distribution (engine/speculative.h). kDraftModel:
// `model`, a smaller model with the same vocabulary, drafts greedily on its own KV pages (engine/draft_model.h).
enum class SpeculativeMethod : uint8_t { kNone, kNgram, kDraftModel };
// "none", "ngram", "draft_model"; false for anything else.
bool parse_speculative_method(std::string_view name, SpeculativeMethod* out);
const char* speculative_method_name(SpeculativeMethod method);

struct SpeculativeConfig {
  SpeculativeMethod method = SpeculativeMethod::kNone;
  int num_speculative_tokens = 4;  // drafts per step at most (a sequence's own k adapts below it)
  int prompt_lookup_min = 2;       // kNgram: shortest suffix looked up
  int prompt_lookup_max = 4;       // kNgram: longest (a longer match is tried first)
  std::string model;               // kDraftModel: the draft's checkpoint (any format the engine loads)
  // No drafts in a step that runs this many sequences or more (vLLM's disable_by_batch_size): a large batch is
  // compute-bound, where checking drafts costs about what they save. 0 = never disabled.
  int64_t disable_by_batch_size = 0;
  bool enabled() const { return method != SpeculativeMethod::kNone; }
};

struct EngineConfig {
  std::string model_path;  // Hugging Face directory, .gguf file, or llama2.c .bin
  int num_threads = 0;     // 0 = one per hardware thread
  FusionStrategy fusion_strategy = FusionStrategy::kAuto;
  // Debugging: fusion passes to skip under kAuto (names as `minfer bench ops` lists them, e.g. "qkv").
  std::vector<std::string> disabled_fusion_passes;
  QuantConfig quant;
  EngineTask task = EngineTask::kGenerate;
  PoolingType pooling = PoolingType::kLast;  // kEmbed
  bool normalize_embeddings = true;          // kEmbed: L2-normalised, as vLLM's embed pooler

  // KV cache. page_size: tokens per page, a power of two in [8, 256].
  int64_t page_size = 16;
  // Bytes for the KV pool. 0 = kv_cache_memory_fraction of the memory available after the model is
  // loaded, less an estimate of the activations at the largest batch.
  int64_t kv_cache_memory = 0;
  double kv_cache_memory_fraction = 0.5;
  KvLayout kv_layout = KvLayout::kPaged;
  // Resolved to kF32 or kBf16 by the engine (Engine::config() shows which).
  KvCacheDtype kv_cache_dtype = KvCacheDtype::kAuto;
  bool enable_prefix_caching = true;  // automatic prefix caching (paged layout only)
  // Tiers behind the prefix cache (src/kv/kv_tiers.h): bytes of host RAM for the pages it evicts (0 = none), and a
  // folder that keeps pages across restarts (empty = none; every computed prompt page is written through to it),
  // bounded by kv_cache_dir_size bytes.
  int64_t kv_offload_ram = 0;
  std::string kv_cache_dir;
  int64_t kv_cache_dir_size = int64_t{8} << 30;
  // Models with recurrent layers (Qwen3.5, ...): their prefix cache restores a copy of the recurrent state taken every
  // this many pages of a prompt (prefills are cut at those boundaries); 0 = their prefixes are never reused.
  int64_t state_snapshot_pages = 32;

  // Images a request carries (multimodal models): larger ones are refused from their header (vLLM's and PIL's
  // decompression-bomb guard; the default is PIL's MAX_IMAGE_PIXELS).
  int64_t max_image_pixels = 89'478'485;
  // Image tokens the vision encoder may encode in one step (vLLM's encoder budget); 0 = max_num_batched_tokens.
  int64_t max_num_encoder_tokens = 0;
  // A llama.cpp projector GGUF (llama-server's --mmproj) giving a GGUF language model its vision tower.
  std::string mmproj;

  // Context length per request (prompt + output). 0 = the model's max_position_embeddings, cut to what the KV budget
  // holds for one sequence (the start-up log says so).
  int64_t max_model_len = 0;

  // Scheduling: at most max_num_seqs sequences run at once, and one step computes at most
  // max_num_batched_tokens tokens (prefills are chunked to fit).
  int64_t max_num_seqs = 256;
  int64_t max_num_batched_tokens = 2048;
  // true: admit waiting requests every step (continuous batching); false: run a batch to completion
  // before forming the next (static batching, kept to measure the difference).
  bool enable_continuous_batching = true;

  // Tensor parallel (vLLM's --tensor-parallel-size): the model split over this many processes started by mpirun,
  // rank 0 scheduling and serving; 1 = one process. enable_expert_parallel: MoE layers hold whole experts per rank
  // and exchange tokens by all-to-all instead of splitting every expert. distributed_timeout_s: how long a rank
  // waits for the others in a collective before the group is declared broken.
  int tensor_parallel_size = 1;
  bool enable_expert_parallel = false;
  double distributed_timeout_s = 60.0;

  SpeculativeConfig speculative;

  // Seed of the requests that give none: each then gets seed + its request id, so a run is repeatable while
  // requests still differ (vLLM's --seed). Unset: such requests draw from the OS's entropy.
  std::optional<uint64_t> seed;

  // Throws minfer::Error naming the field and its allowed range.
  void validate() const;
};

}  // namespace minfer
