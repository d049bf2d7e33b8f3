#include "model/decoder_graph.h"

#include "base/error.h"
#include "model/families/decoder_builder.h"

namespace minfer {

graph::Graph build_decoder_graph(const ModelWeights& weights) {
  switch (weights.config.arch) {
    case Architecture::kLlama:
    case Architecture::kMistral:
    case Architecture::kMixtral:
    case Architecture::kPhi3:
    case Architecture::kQwen2:
    case Architecture::kQwen3:
    case Architecture::kQwen3Moe: return build_llama_graph(weights);
    case Architecture::kGemma3: return build_gemma3_graph(weights);
  }
  fail("no graph builder for architecture {}", weights.config.arch_name());
}

graph::Graph compile_decoder_graph(const ModelWeights& weights, const graph::FusionOptions& options,
                                   graph::FusionReport* report, ThreadPool* pool) {
  graph::Graph g = build_decoder_graph(weights);
  graph::FusionReport r = graph::run_fusion_passes(g, options, pool);
  if (report) *report = std::move(r);
  return g;
}

graph::RopeTables rope_tables(const ModelConfig& config, int64_t max_model_len) {
  const auto factor = static_cast<float>(config.rope_scaling.attention_factor);
  graph::RopeTables tables = {graph::RopeTable{config.rope_inv_freq(false, max_model_len), config.rope_style, factor}};
  if (config.has_local_rope()) tables.push_back(graph::RopeTable{config.rope_inv_freq(true), config.rope_style});
  return tables;
}

}  // namespace minfer
