#include <cmath>

#include "base/error.h"
#include "kernels/page_geometry.h"
#include "minfer/config.h"
#include "minfer/outputs.h"

namespace minfer {

void EngineConfig::validate() const {
  if (model_path.empty()) fail("EngineConfig.model_path is empty: give a model directory or file");
  if (max_image_pixels <= 0) fail("EngineConfig.max_image_pixels must be positive, got {}", max_image_pixels);
  if (max_num_encoder_tokens < 0)
    fail("EngineConfig.max_num_encoder_tokens must be >= 0 (0: max_num_batched_tokens), got {}",
         max_num_encoder_tokens);
  // The power-of-two rule the kernels rely on is PageGeometry's; a page of fewer than 8 tokens would spend more
  // on page tables than it saves.
  if (state_snapshot_pages < 0 || state_snapshot_pages > 4096)
    fail("EngineConfig.state_snapshot_pages must be in [0, 4096], got {}", state_snapshot_pages);
  if (page_size < 8 || !PageGeometry::valid(page_size))
    fail("EngineConfig.page_size must be a power of two in [8, 256], got {}", page_size);
  if (kv_cache_memory < 0) fail("EngineConfig.kv_cache_memory must be >= 0 bytes (0 = a fraction of free memory)");
  if (!(kv_cache_memory_fraction > 0.0 && kv_cache_memory_fraction <= 1.0))
    fail("EngineConfig.kv_cache_memory_fraction must be in (0, 1], got {}", kv_cache_memory_fraction);
  if (kv_offload_ram < 0)
    fail("EngineConfig.kv_offload_ram must be >= 0 bytes (0 = no RAM tier), got {}", kv_offload_ram);
  if (!kv_cache_dir.empty() && kv_cache_dir_size < (int64_t{1} << 20))
    fail("EngineConfig.kv_cache_dir_size must be at least 1 MiB, got {} bytes", kv_cache_dir_size);
  if (max_model_len < 0) fail("EngineConfig.max_model_len must be >= 0 (0 = the model's), got {}", max_model_len);
  if (max_num_seqs < 1) fail("EngineConfig.max_num_seqs must be >= 1, got {}", max_num_seqs);
  if (max_num_batched_tokens < 1)
    fail("EngineConfig.max_num_batched_tokens must be >= 1, got {}", max_num_batched_tokens);
  if (num_threads < 0) fail("EngineConfig.num_threads must be >= 0 (0 = all cores), got {}", num_threads);
  if (tensor_parallel_size < 1 || tensor_parallel_size > 1024)
    fail("EngineConfig.tensor_parallel_size must be in [1, 1024], got {}", tensor_parallel_size);
  if (enable_expert_parallel && tensor_parallel_size < 2)
    fail("EngineConfig.enable_expert_parallel needs tensor_parallel_size >= 2 (the experts are spread over its ranks)");
  if (!(distributed_timeout_s > 0.0))
    fail("EngineConfig.distributed_timeout_s must be > 0 seconds, got {}", distributed_timeout_s);
  const SpeculativeConfig& spec = speculative;
  if (spec.num_speculative_tokens < 1 || spec.num_speculative_tokens > 32)
    fail("EngineConfig.speculative.num_speculative_tokens must be in [1, 32], got {}", spec.num_speculative_tokens);
  if (spec.prompt_lookup_min < 1 || spec.prompt_lookup_max < spec.prompt_lookup_min || spec.prompt_lookup_max > 64)
    fail("EngineConfig.speculative: need 1 <= prompt_lookup_min <= prompt_lookup_max <= 64, got {} and {}",
         spec.prompt_lookup_min, spec.prompt_lookup_max);
  if (spec.disable_by_batch_size < 0)
    fail("EngineConfig.speculative.disable_by_batch_size must be >= 0 (0 = never), got {}", spec.disable_by_batch_size);
  if ((spec.method == SpeculativeMethod::kDraftModel) != !spec.model.empty())
    fail("EngineConfig.speculative: method draft_model and a draft model path (speculative.model) go together");
  if (spec.method == SpeculativeMethod::kDraftModel && tensor_parallel_size > 1)
    fail("EngineConfig.speculative: a draft model is not supported with tensor_parallel_size > 1");
  if (spec.enabled() && task == EngineTask::kEmbed)
    fail("EngineConfig.speculative needs task generate: an embedding engine samples no tokens");
}

bool parse_speculative_method(std::string_view name, SpeculativeMethod* out) {
  if (name == "none") {
    *out = SpeculativeMethod::kNone;
  } else if (name == "ngram") {
    *out = SpeculativeMethod::kNgram;
  } else if (name == "draft_model") {
    *out = SpeculativeMethod::kDraftModel;
  } else {
    return false;
  }
  return true;
}

const char* speculative_method_name(SpeculativeMethod method) {
  switch (method) {
    case SpeculativeMethod::kNgram: return "ngram";
    case SpeculativeMethod::kDraftModel: return "draft_model";
    case SpeculativeMethod::kNone: break;
  }
  return "none";
}

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength: return "length";
    case FinishReason::kStop: return "stop";
    case FinishReason::kAbort: return "abort";
    case FinishReason::kNone: break;
  }
  return "";
}

}  // namespace minfer
