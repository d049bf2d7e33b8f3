// What the engine reports for a request: a RequestOutput each step the request produced something
// (streaming), and a CompletionOutput per prompt from the blocking generate().
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace minfer {

using RequestId = uint64_t;

// Why a request finished (vLLM / OpenAI finish_reason).
enum class FinishReason : uint8_t {
  kNone,    // still running
  kLength,  // max_tokens reached, or the context (max_model_len) is full
  kStop,    // EOS, a stop token id, or a stop string
  kAbort,   // aborted by the caller, or the engine failed (error is set)
};

const char* finish_reason_name(FinishReason reason);  // "length", "stop", "abort" ("" for kNone)

// Log-probabilities of one sampled token, when SamplingParams.logprobs >= 0: log-softmax of the model's raw
// logits (before penalties and temperature, as vLLM's default), and the `logprobs` most likely tokens.
struct TokenLogprobs {
  float logprob = 0.0f;                        // of the sampled token
  std::vector<std::pair<int32_t, float>> top;  // (id, logprob), most likely first
};

// Speculative decoding over a request so far (EngineConfig::speculative): checks run, draft tokens checked, and
// of them accepted. Acceptance rate = accepted_tokens / draft_tokens; mean accepted length (tokens a check
// yields, the sampled one included) = 1 + accepted_tokens / num_drafts.
struct SpecDecodeUsage {
  int64_t num_drafts = 0;
  int64_t draft_tokens = 0;
  int64_t accepted_tokens = 0;

  // One check of `drafted` tokens that kept `accepted`.
  void add_check(int64_t drafted, int64_t accepted) {
    ++num_drafts;
    draft_tokens += drafted;
    accepted_tokens += accepted;
  }
  double acceptance_rate() const {
    return draft_tokens > 0 ? static_cast<double>(accepted_tokens) / static_cast<double>(draft_tokens) : 0.0;
  }
  double mean_accepted_length() const {
    return 1.0 + (num_drafts > 0 ? static_cast<double>(accepted_tokens) / static_cast<double>(num_drafts) : 0.0);
  }
};

struct RequestOutput {
  RequestId id = 0;
  std::vector<int32_t> new_token_ids;   // tokens generated since the previous output of this request
  std::vector<TokenLogprobs> logprobs;  // one per new_token_ids entry when SamplingParams.logprobs >= 0
  std::string text_delta;               // text that became final since the previous output (see below)
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  std::string stop_reason;  // the stop string that matched, if one did
  std::string error;        // set when the engine failed the request
  // With error: the engine can serve nothing more (a tensor-parallel rank died or a link dropped), not a bug; the
  // server answers 503.
  bool error_unavailable = false;
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;  // generated so far, including new_token_ids
  int64_t cached_tokens = 0;  // prompt tokens served from the prefix cache at admission
  SpecDecodeUsage spec_decode;
  // With SamplingParams.prompt_logits: the logits of every prompt position, [prompt_tokens, vocab] row-major (row
  // i predicts prompt token i + 1), in the output that carries the first generated token.
  std::vector<float> prompt_logits;
  // EngineTask::kEmbed: the prompt's pooled embedding [hidden_size] (in the one, finished output).
  std::vector<float> embedding;
};
// Text: detokenized incrementally with special tokens skipped. Text that could be the start of a stop
// string is held back until it cannot be; a matched stop string is not part of the text, and no text is
// ever sent twice. EOS and stop token ids appear in the token ids but not in the text.

// A request's outputs folded together (RequestState::result()): everything generated so far, final once
// finish_reason is set.
struct CompletionOutput {
  RequestId id = 0;
  std::vector<int32_t> prompt_token_ids;
  std::vector<int32_t> token_ids;
  std::vector<TokenLogprobs> logprobs;  // one per token_ids entry when SamplingParams.logprobs >= 0
  std::string text;
  FinishReason finish_reason = FinishReason::kNone;
  std::string stop_reason;
  std::string error;               // set when the engine failed the request (finish_reason is then kAbort)
  bool error_unavailable = false;  // RequestOutput::error_unavailable
  int64_t cached_tokens = 0;
  SpecDecodeUsage spec_decode;
  std::vector<float> prompt_logits;  // with SamplingParams.prompt_logits
  std::vector<float> embedding;      // EngineTask::kEmbed
};

}  // namespace minfer
