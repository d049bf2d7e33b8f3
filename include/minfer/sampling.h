// Sampling parameters of one request (the vLLM / OpenAI set).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace minfer {

// Structured outputs (vLLM's StructuredOutputsParams): the output is constrained to a formal language, token by
// token, with llguidance. Each step the engine computes the set of tokens that keep the text a prefix of a
// string of the language (while the forward pass runs) and samples only among them; the request stops when the
// language allows nothing more.
struct StructuredOutputs {
  enum class Kind : uint8_t {
    kJsonSchema,  // spec: a JSON schema (JSON text)
    kJsonObject,  // any JSON object; spec unused
    kRegex,       // spec: a regular expression (Rust regex syntax)
    kChoice,      // spec: a JSON array of strings, one of which is the output
    kGrammar,     // spec: a grammar in llguidance's Lark syntax
  };
  Kind kind = Kind::kJsonObject;
  std::string spec;
};

struct SamplingParams {
  float temperature = 1.0f;         // 0 = greedy (argmax, ties to the lowest id); below 1e-5 counts as 0
  int32_t top_k = 0;                // 0 or -1 = off (vLLM uses -1)
  float top_p = 1.0f;               // 1 = off
  float min_p = 0.0f;               // 0 = off; drops tokens with prob < min_p * the largest prob
  float repetition_penalty = 1.0f;  // 1 = off; >1 divides positive logits of seen tokens (CTRL/HF style)
  float presence_penalty = 0.0f;    // OpenAI: minus this once for every token already generated
  float frequency_penalty = 0.0f;   // OpenAI: minus this times the count of each generated token
  std::optional<uint64_t> seed;     // same seed + same inputs = same tokens
  int32_t max_tokens = 16;
  std::vector<int32_t> stop_token_ids;
  std::vector<std::string> stop;  // stop strings
  bool ignore_eos = false;
  // The output text leaves out special tokens (vLLM's skip_special_tokens); false keeps their text (gpt-oss's harmony
  // markers, which its chat parsing reads).
  bool skip_special_tokens = true;
  // EOS and stop_token_ids cannot end the output, and stop strings are not matched, before this many tokens
  // (vLLM's min_tokens). Must be <= max_tokens.
  int32_t min_tokens = 0;
  // Added to the logits of these token ids before sampling (OpenAI's logit_bias: -100 bans, 100 forces).
  std::vector<std::pair<int32_t, float>> logit_bias;
  std::optional<StructuredOutputs> structured_outputs;
  // -1 = off; n in [0, 20]: each output token's log-probability and the n most likely tokens (RequestOutput).
  int32_t logprobs = -1;
  // Return the logits of every prompt position (RequestOutput.prompt_logits): for evaluation (perplexity,
  // quantization error, calibration). Each prompt position then samples, so the prefill costs more.
  bool prompt_logits = false;

  // Throws minfer::Error naming the field and its allowed range when a value is out of range:
  // temperature >= 0, top_p in (0, 1], top_k >= -1, min_p in [0, 1], repetition_penalty > 0,
  // presence_penalty and frequency_penalty in [-2, 2], max_tokens >= 1, logprobs in [-1, 20],
  // min_tokens in [0, max_tokens], logit_bias values in [-100, 100].
  void validate() const;
};

// The model's own sampling defaults (Hugging Face generation_config.json; a GGUF file's general.sampling.* keys):
// what a request that names no sampling field is sampled with where the API says so (vLLM's
// --generation-config auto). Each is absent where the checkpoint does not set it.
struct SamplingDefaults {
  std::optional<float> temperature;
  std::optional<float> top_p;
  std::optional<int32_t> top_k;
  std::optional<float> min_p;
  std::optional<float> repetition_penalty;
};

}  // namespace minfer
