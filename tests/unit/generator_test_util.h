// What the engine-layer tests of whole models share: greedy generation and the logits of every prompt
// position, from a Generator on 2 threads.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/generator.h"
#include "model/model_weights.h"

namespace minfer::testing {

// Greedy continuation of `prompt` by n tokens (EOS ignored).
inline std::vector<int32_t> greedy(const ModelWeights& w, const std::vector<int32_t>& prompt, int32_t n) {
  GeneratorOptions o;
  o.num_threads = 2;
  Generator g(w, o);
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = n;
  p.ignore_eos = true;
  return g.generate(prompt, p, {}, [](int32_t) { return true; }).token_ids;
}

// Logits of every position of `tokens`: [tokens.size(), vocab].
inline std::vector<float> prompt_logits(const ModelWeights& w, const std::vector<int32_t>& tokens) {
  GeneratorOptions o;
  o.num_threads = 2;
  Generator g(w, o);
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = 1;
  std::vector<float> out;
  g.generate(
      tokens, p, {}, [](int32_t) { return false; }, &out);
  return out;
}

}  // namespace minfer::testing
