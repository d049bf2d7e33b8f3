// One request inside the engine. Scheduling is by counters, not phases (vLLM v1): a sequence has tokens
// (prompt, then output) and num_computed of them have KV in the cache; each step hands it tokens to
// close the gap. A prefill, a chunk of one, a decode, a prefix hit and a recompute after preemption are
// all the same thing: num_computed < tokens.size().
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/sampler.h"
#include "engine/seq_image.h"
#include "engine/stop_checker.h"
#include "engine/structured_output.h"
#include "minfer/outputs.h"
#include "minfer/sampling.h"

namespace minfer {

enum class SeqStatus : uint8_t { kWaiting, kRunning, kFinished };

// Speculative decoding (engine/speculative.h), per sequence: how many drafts it gets and how they fared.
struct SpecDecodeState {
  int k = 0;              // drafts proposed at most next step (adapts within [1, num_speculative_tokens]; 0 = not set)
  int misses = 0;         // consecutive checks that accepted nothing
  int cooldown = 0;       // steps left without proposing (after too many misses)
  SpecDecodeUsage usage;  // the request's checks, drafted and accepted tokens
  // Draft model (engine/draft_model.h): its KV holds tokens [0, draft_computed) of the sequence, then the draft
  // tokens it was fed after them (kept until the target's check shows how many of them are the sequence's).
  int64_t draft_computed = 0;
  std::vector<int32_t> draft_fed;
};

struct Sequence {
  RequestId id = 0;
  std::vector<int32_t> tokens;  // prompt, then the generated tokens
  int64_t prompt_len = 0;
  int64_t num_computed = 0;   // tokens whose KV is in the cache
  int64_t cached_tokens = 0;  // prompt tokens found in the prefix cache at first admission
  bool admitted_before = false;
  // > 0 while pages of a KV tier (kv/kv_tiers.h) are being copied into the sequence's pool pages: num_computed
  // becomes this when they are in. kv_load_first: the load belongs to the first admission (it counts as cached).
  int64_t kv_load_until = 0;
  bool kv_load_first = false;
  SeqStatus status = SeqStatus::kWaiting;
  uint64_t admit_order = 0;  // larger = admitted more recently (preemption picks the largest)
  int64_t batch = -1;        // static batching: the batch the sequence belongs to

  SamplingParams params;
  std::unique_ptr<Sampler> sampler;  // per request, so a seed gives the same tokens in any batch
  std::unique_ptr<StopChecker> stop;
  FinishReason finish_reason = FinishReason::kNone;
  // params.structured_outputs: the grammar's state and this step's mask of allowed tokens.
  std::unique_ptr<GrammarMatcher> grammar;
  std::vector<uint32_t> grammar_mask;
  bool every_prompt_row = false;  // no prefix-cache hit may skip a prompt position (each gives a row)
  std::vector<float> pooled;      // EngineTask::kEmbed: the rows pooled so far
  // params.prompt_logits: the logits of the prompt positions computed so far ([rows, vocab]).
  std::vector<float> prompt_logits;
  int64_t prompt_logit_rows = 0;

  // Speculative decoding: the drafts proposed to follow the last token this step, and the chunk that checks them
  // ([last token, drafts...]: one forward pass gives the logits after each).
  std::vector<int32_t> draft;
  std::vector<int32_t> verify_tokens;
  SpecDecodeState spec;

  // The prompt's images, in order (engine/seq_image.h). bidirectional_images: the model's attention sees an image's
  // tokens both ways (Gemma 3), so no chunk ends inside an image.
  std::vector<SeqImage> images;
  bool bidirectional_images = false;

  int64_t num_tokens() const { return static_cast<int64_t>(tokens.size()); }
  int64_t num_output() const { return num_tokens() - prompt_len; }
  int64_t tokens_to_compute() const { return num_tokens() - num_computed; }
};

}  // namespace minfer
