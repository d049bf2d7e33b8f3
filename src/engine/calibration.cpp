#include "engine/calibration.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "base/error.h"
#include "engine/engine_access.h"

namespace minfer {

ActivationRanges calibrate_activation_ranges(const ModelWeights& weights, const std::vector<int32_t>& tokens,
                                             int64_t window, int threads) {
  if (weights.quant.enabled()) fail("{}: calibrate the float model, not a quantized one", weights.path);
  if (tokens.empty()) fail("calibration: no tokens");
  window = std::clamp<int64_t>(window, 1, std::min<int64_t>(weights.config.max_position_embeddings - 1, 8191));
  // One sequence at a time, every op on its own (the observer sees each projection's own input).
  EngineConfig config;
  config.model_path = weights.path;
  config.num_threads = threads;
  config.max_model_len = window + 1;
  config.max_num_seqs = 1;
  config.max_num_batched_tokens = std::min<int64_t>(window, 2048);
  config.enable_prefix_caching = false;
  config.fusion_strategy = FusionStrategy::kNone;
  config.kv_cache_dtype = KvCacheDtype::kF32;
  std::unique_ptr<Engine> engine = EngineAccess::from_weights(config, weights);
  EngineCore& core = EngineAccess::core(*engine);

  std::unordered_map<const Tensor*, const std::string*> name_of;
  for (const auto& [name, t] : core.weights().tensors) name_of[&t] = &name;
  ActivationRanges ranges;
  core.runner().executor().set_matmul_observer(
      [&](const graph::Node& node, const float* x, int64_t rows, int64_t width) {
        auto it = name_of.find(node.weight);
        if (it == name_of.end()) return;
        std::vector<float>& r = ranges[*it->second];
        r.resize(static_cast<size_t>(width), 0.0f);
        for (int64_t t = 0; t < rows; ++t)
          for (int64_t j = 0; j < width; ++j)
            r[static_cast<size_t>(j)] = std::max(r[static_cast<size_t>(j)], std::fabs(x[t * width + j]));
      });

  SamplingParams params;
  params.temperature = 0.0f;
  params.max_tokens = 1;
  params.ignore_eos = true;
  for (size_t begin = 0; begin < tokens.size(); begin += static_cast<size_t>(window)) {
    const size_t end = std::min(tokens.size(), begin + static_cast<size_t>(window));
    const std::vector<int32_t> chunk(tokens.begin() + static_cast<std::ptrdiff_t>(begin),
                                     tokens.begin() + static_cast<std::ptrdiff_t>(end));
    engine->generate(std::vector<std::vector<int32_t>>{chunk}, params);
  }
  return ranges;
}

}  // namespace minfer
