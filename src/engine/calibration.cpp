#include "engine/calibration.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "base/error.h"
#include "engine/generator.h"

namespace minfer {

ActivationRanges calibrate_activation_ranges(const ModelWeights& weights, const std::vector<int32_t>& tokens,
                                             int64_t window, int threads) {
  if (weights.quant.enabled()) fail("{}: calibrate the float model, not a quantized one", weights.path);
  if (tokens.empty()) fail("calibration: no tokens");
  window = std::clamp<int64_t>(window, 1, std::min<int64_t>(weights.config.max_position_embeddings, 8192));
  GeneratorOptions options;
  options.num_threads = threads;
  options.max_seq_len = window + 1;
  options.fusion.strategy = FusionStrategy::kNone;
  Generator generator(weights, options);

  std::unordered_map<const Tensor*, const std::string*> name_of;
  for (const auto& [name, t] : weights.tensors) name_of[&t] = &name;
  ActivationRanges ranges;
  generator.runner().executor().set_matmul_observer(
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
    generator.generate(chunk, params, {}, [](int32_t) { return false; });
  }
  return ranges;
}

}  // namespace minfer
