// What the engine-layer unit tests share: one engine fixture (a small config over a model file or over
// weights already loaded), greedy generation and prompt logits through the Engine.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine_access.h"
#include "minfer/engine.h"
#include "model/model_weights.h"
#include "model/test_model_writer.h"
#include "test_support.h"

namespace minfer::testing {

// A small engine: `threads` compute threads, a few MiB of f32 KV, the model's context (or max_model_len).
inline EngineConfig small_engine_config(const std::string& model = kStoriesBin, int threads = 1,
                                        int64_t max_model_len = 0) {
  EngineConfig c;
  c.model_path = model;
  c.num_threads = threads;
  c.max_model_len = max_model_len;
  c.kv_cache_memory = int64_t{8} << 20;
  c.kv_cache_dtype = KvCacheDtype::kF32;
  return c;
}

// A tiny HF-layout model of a make-test-model preset (f32, random weights from `seed`), written once into the temp
// directory. The sliding-window families get a 24-position window, so sequences of a hundred tokens run well past it.
inline std::string tiny_model_dir(const std::string& preset, uint64_t seed = 7) {
  const std::string name = preset + (seed == 7 ? "" : "-seed" + std::to_string(seed));
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("minfer_engine_test_" + name);
  if (!std::filesystem::exists(dir / "config.json")) {
    TestModelOptions o;
    o.preset = preset;
    o.out_dir = dir.string();
    o.dtype = DType::F32;
    o.seed = seed;
    if (preset == "tiny-gemma3" || preset == "tiny-mistral" || preset == "tiny-phi3") o.sliding_window = 24;
    write_test_model(o);
  }
  return dir.string();
}

// The KV type a model is tested with beside f32 and bf16: one of the quantized ones (or f16), chosen from the model's
// name so that the presets cover every type (llama.cpp's blocks only where head_dim is a multiple of 32).
inline KvCacheDtype quantized_kv_for(const std::string& name, int64_t head_dim) {
  size_t h = 0;
  for (char ch : name) h = h * 31 + static_cast<unsigned char>(ch);
  const KvCacheDtype blocked[] = {KvCacheDtype::kQ8_0, KvCacheDtype::kQ4_0, KvCacheDtype::kInt8, KvCacheDtype::kFp8E4m3,
                                  KvCacheDtype::kF16};
  const KvCacheDtype per_token[] = {KvCacheDtype::kInt8, KvCacheDtype::kFp8E4m3, KvCacheDtype::kF16};
  return head_dim % 32 == 0 ? blocked[h % 5] : per_token[h % 3];
}

// Greedy sampling of up to max_tokens (EOS ignored unless stop_at_eos).
inline SamplingParams greedy(int32_t max_tokens, bool stop_at_eos = false) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = max_tokens;
  p.ignore_eos = !stop_at_eos;
  return p;
}

// An engine over weights already loaded (config.model_path is ignored).
inline std::unique_ptr<Engine> engine_over(const ModelWeights& w, EngineConfig config) {
  config.model_path = w.path;
  return EngineAccess::from_weights(config, w);
}

// Greedy continuation of `prompt` by n tokens (EOS ignored), one sequence on 2 threads.
inline std::vector<int32_t> greedy_ids(const ModelWeights& w, const std::vector<int32_t>& prompt, int32_t n) {
  auto engine = engine_over(w, small_engine_config(w.path, 2));
  return engine->generate(std::vector<std::vector<int32_t>>{prompt}, greedy(n))[0].token_ids;
}

// Logits of every position of `tokens`: [tokens.size(), vocab].
inline std::vector<float> prompt_logits(const ModelWeights& w, const std::vector<int32_t>& tokens,
                                        EngineConfig config) {
  auto engine = engine_over(w, config);
  SamplingParams p = greedy(1);
  p.prompt_logits = true;
  return engine->generate(std::vector<std::vector<int32_t>>{tokens}, p)[0].prompt_logits;
}
inline std::vector<float> prompt_logits(const ModelWeights& w, const std::vector<int32_t>& tokens) {
  return prompt_logits(w, tokens, small_engine_config(w.path, 2));
}

}  // namespace minfer::testing
