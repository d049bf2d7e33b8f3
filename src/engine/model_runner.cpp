#include "engine/model_runner.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "base/error.h"
#include "model/decoder_graph.h"

namespace minfer {
namespace {

// The graph, with the time its passes took (weight packing and re-layout: most of a model's start-up after the
// files are mapped) in the log.
graph::Graph compile_logged(const ModelWeights& weights, const graph::FusionOptions& fusion, ThreadPool& pool) {
  const auto start = std::chrono::steady_clock::now();
  graph::Graph g = compile_decoder_graph(weights, fusion, nullptr, &pool);
  spdlog::info("model graph compiled in {:.2f} s ({} threads)",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), pool.size());
  return g;
}

}  // namespace

ModelRunner::ModelRunner(const ModelWeights& weights, ThreadPool& pool, const graph::FusionOptions& fusion,
                         int64_t max_model_len)
    : config_(weights.config), graph_(compile_logged(weights, fusion, pool)) {
  executor_ = std::make_unique<graph::Executor>(graph_, pool, rope_tables(config_, max_model_len));
}

std::span<const float> ModelRunner::execute(std::span<const SequenceChunk> chunks, const KvCache& cache) {
  const int64_t page_size = cache.shape().page_size;
  tokens_.clear();
  positions_.clear();
  slots_.clear();
  sample_rows_.clear();
  q_start_.clear();
  q_len_.clear();
  context_len_.clear();
  size_t max_blocks = 1;
  for (const SequenceChunk& c : chunks) max_blocks = std::max(max_blocks, c.block_table.size());
  block_tables_.assign(chunks.size() * max_blocks, 0);

  for (size_t s = 0; s < chunks.size(); ++s) {
    const SequenceChunk& c = chunks[s];
    MINFER_CHECK(!c.tokens.empty(), "chunk {} has no tokens", s);
    const int64_t end = c.start_position + static_cast<int64_t>(c.tokens.size());
    MINFER_CHECK(static_cast<int64_t>(c.block_table.size()) * page_size >= end,
                 "chunk {}: {} pages cannot hold {} tokens", s, c.block_table.size(), end);
    q_start_.push_back(static_cast<int32_t>(tokens_.size()));
    q_len_.push_back(static_cast<int32_t>(c.tokens.size()));
    context_len_.push_back(static_cast<int32_t>(end));
    std::copy(c.block_table.begin(), c.block_table.end(), block_tables_.begin() + static_cast<int64_t>(s * max_blocks));
    for (size_t i = 0; i < c.tokens.size(); ++i) {
      const int64_t pos = c.start_position + static_cast<int64_t>(i);
      tokens_.push_back(c.tokens[i]);
      positions_.push_back(static_cast<int32_t>(pos));
      slots_.push_back(static_cast<int64_t>(c.block_table[static_cast<size_t>(pos / page_size)]) * page_size +
                       pos % page_size);
    }
    if (c.sample) sample_rows_.push_back(static_cast<int32_t>(tokens_.size() - 1));
  }
  for (int32_t t : tokens_)
    if (t < 0 || t >= config_.vocab_size)
      fail("token id {} is outside the vocabulary (size {})", t, config_.vocab_size);

  graph::StepInputs step;
  step.tokens = tokens_;
  step.positions = positions_;
  step.slot_mapping = slots_;
  step.sample_rows = sample_rows_;
  step.attention.num_seqs = static_cast<int64_t>(chunks.size());
  step.attention.q_start = q_start_.data();
  step.attention.q_len = q_len_.data();
  step.attention.context_len = context_len_.data();
  step.attention.block_tables = block_tables_.data();
  step.attention.max_blocks_per_seq = static_cast<int64_t>(max_blocks);
  const float* logits = executor_->run(step, cache.layers());
  return {logits, sample_rows_.size() * static_cast<size_t>(vocab_size())};
}

}  // namespace minfer
