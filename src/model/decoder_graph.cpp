#include "model/decoder_graph.h"

#include "base/error.h"
#include "model/families/family.h"
#include "model/model_weights.h"

namespace minfer {

namespace {

// Cuts the head after the final norm ("x_final", DecoderBuilder::head): its output becomes the graph's.
void end_at_final_norm(graph::Graph& g) {
  std::vector<graph::Node>& nodes = g.mutable_nodes();
  for (size_t i = nodes.size(); i-- > 0;) {
    if (nodes[i].output != graph::kNoValue && g.value(nodes[i].output).name == "x_final") {
      g.set_output(nodes[i].output);
      nodes.erase(nodes.begin() + static_cast<std::ptrdiff_t>(i) + 1, nodes.end());
      return;
    }
  }
  fail("the decoder graph has no final norm to end at");
}

}  // namespace

graph::Graph build_decoder_graph(const ModelWeights& weights, DecoderHead head) {
  graph::Graph g = family_of(weights.config).build_graph(weights);
  if (head == DecoderHead::kHiddenStates) end_at_final_norm(g);
  return g;
}

graph::Graph compile_decoder_graph(const ModelWeights& weights, const graph::FusionOptions& options,
                                   graph::FusionReport* report, ThreadPool* pool, DecoderHead head) {
  graph::Graph g = build_decoder_graph(weights, head);
  graph::FusionReport r = graph::run_fusion_passes(g, options, pool);
  if (report) *report = std::move(r);
  return g;
}

graph::RopeTables rope_tables(const ModelConfig& config, int64_t max_model_len) {
  const auto factor = static_cast<float>(config.rope_scaling.attention_factor);
  graph::RopeTables tables = {graph::RopeTable{config.rope_inv_freq(false, max_model_len), config.rope_style, factor}};
  if (config.has_local_rope()) tables.push_back(graph::RopeTable{config.rope_inv_freq(true), config.rope_style});
  if (config.has_nope_layers())  // the identity (ModelConfig::rope_table)
    tables.push_back(graph::RopeTable{std::vector<float>(tables[0].inv_freq.size(), 0.0f), config.rope_style});
  return tables;
}

}  // namespace minfer
