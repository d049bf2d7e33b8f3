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
graph::Graph compile_logged(const ModelWeights& weights, const graph::FusionOptions& fusion, ThreadPool& pool,
                            DecoderHead head) {
  const auto start = std::chrono::steady_clock::now();
  graph::Graph g = compile_decoder_graph(weights, fusion, nullptr, &pool, head);
  spdlog::info("model graph compiled in {:.2f} s ({} threads)",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), pool.size());
  return g;
}

}  // namespace

ModelRunner::ModelRunner(const ModelWeights& weights, ThreadPool& pool, const graph::FusionOptions& fusion,
                         int64_t max_model_len, std::vector<uint8_t> local_layers, DecoderHead head,
                         dist::Communicator* comm)
    : config_(weights.config),
      graph_(compile_logged(weights, fusion, pool, head)),
      local_layers_(std::move(local_layers)) {
  MINFER_CHECK(local_layers_.empty() || static_cast<int64_t>(local_layers_.size()) == config_.num_layers,
               "local layer flags for {} of {} layers", local_layers_.size(), config_.num_layers);
  executor_ = std::make_unique<graph::Executor>(graph_, pool, rope_tables(config_, max_model_len), comm);
}

namespace {

// One KV group's flat arrays for a step: each chunk's page table padded to the longest, and each token's slot
// (-1 where the group has no pool: kv_write skips it).
void group_tables(std::span<const SequenceChunk> chunks, bool local, const PageGeometry& page, bool has_pool,
                  std::vector<int32_t>& tables, std::vector<int64_t>& slots, size_t& max_pages) {
  auto table_of = [local](const SequenceChunk& c) { return local ? c.local_page_table : c.page_table; };
  max_pages = 1;
  for (const SequenceChunk& c : chunks) max_pages = std::max(max_pages, table_of(c).size());
  tables.assign(chunks.size() * max_pages, 0);
  slots.clear();
  for (size_t s = 0; s < chunks.size(); ++s) {
    const SequenceChunk& c = chunks[s];
    const std::span<const int32_t> table = table_of(c);
    const int64_t end = c.start_position + static_cast<int64_t>(c.tokens.size());
    MINFER_CHECK(!has_pool || static_cast<int64_t>(table.size()) * page.size() >= end,
                 "chunk {}: {} pages cannot hold {} tokens", s, table.size(), end);
    std::copy(table.begin(), table.end(), tables.begin() + static_cast<int64_t>(s * max_pages));
    for (int64_t pos = c.start_position; pos < end; ++pos) {
      const int32_t page_id = has_pool ? table[static_cast<size_t>(page.page_of(pos))] : -1;
      MINFER_CHECK(!has_pool || page_id > 0, "chunk {}: position {} has no page (released?)", s, pos);
      slots.push_back(has_pool ? (static_cast<int64_t>(page_id) << page.shift()) + page.slot_in_page(pos) : -1);
    }
  }
}

}  // namespace

void ModelRunner::add_image_rows(const SequenceChunk& c, int32_t row0) {
  const int64_t begin = c.start_position, end = begin + static_cast<int64_t>(c.tokens.size());
  const int64_t hidden = config_.hidden_size;
  for (const SeqImage& img : c.images) {
    const int64_t from = std::max(begin, img.start), to = std::min(end, img.end());
    if (from >= to) continue;
    MINFER_CHECK(img.embeddings && static_cast<int64_t>(img.embeddings->size()) == img.length * hidden,
                 "the image at position {} is not encoded", img.start);
    for (int64_t pos = from; pos < to; ++pos) {
      given_rows_.push_back(row0 + static_cast<int32_t>(pos - begin));
      const float* row = img.embeddings->data() + (pos - img.start) * hidden;
      input_rows_.insert(input_rows_.end(), row, row + hidden);
      if (c.bidirectional_images) key_limit_[static_cast<size_t>(row0 + pos - begin)] = static_cast<int32_t>(img.end());
    }
  }
}

// The step's image rows and key limits (add_image_rows per chunk), and the flat tokens' image ids mapped to the
// model's image token, every id then checked against the vocabulary.
void ModelRunner::place_images(std::span<const SequenceChunk> chunks) {
  given_rows_.clear();
  input_rows_.clear();
  key_limit_.clear();
  const bool bidirectional =
      std::any_of(chunks.begin(), chunks.end(), [](const SequenceChunk& c) { return c.bidirectional_images; });
  for (size_t s = 0; s < chunks.size(); ++s) {
    if (bidirectional)
      for (int32_t t = 0; t < q_len_[s]; ++t) key_limit_.push_back(chunks[s].start_position + t + 1);
    if (!chunks[s].images.empty()) add_image_rows(chunks[s], q_start_[s]);
  }
  for (int32_t& t : tokens_) {
    if (t < 0) t = image_token_id_;  // an image's content-keyed id (seq_image.h); its row is replaced
    if (t < 0 || t >= config_.vocab_size)
      fail("token id {} is outside the vocabulary (size {})", t, config_.vocab_size);
  }
}

std::span<const float> ModelRunner::execute(std::span<const SequenceChunk> chunks, const KvPools& pools) {
  MINFER_CHECK(pools.full || pools.local, "no KV pool");
  MINFER_CHECK((pools.local != nullptr) == !local_layers_.empty(), "a local KV pool exactly when layers use one");
  const PageGeometry& page = (pools.full ? pools.full : pools.local)->shape().page;
  tokens_.clear();
  positions_.clear();
  sample_rows_.clear();
  q_start_.clear();
  q_len_.clear();
  context_len_.clear();
  state_slots_.clear();
  state_history_.clear();
  for (size_t s = 0; s < chunks.size(); ++s) {
    const SequenceChunk& c = chunks[s];
    MINFER_CHECK(!c.tokens.empty(), "chunk {} has no tokens", s);
    MINFER_CHECK(!pools.states || (c.state_slot >= 0 && c.state_slot < pools.states->num_slots()),
                 "chunk {}: state slot {} of a pool of {}", s, c.state_slot,
                 pools.states ? pools.states->num_slots() : 0);
    state_slots_.push_back(c.state_slot);
    state_history_.push_back(c.state_history);
    q_start_.push_back(static_cast<int32_t>(tokens_.size()));
    q_len_.push_back(static_cast<int32_t>(c.tokens.size()));
    context_len_.push_back(static_cast<int32_t>(c.start_position + static_cast<int64_t>(c.tokens.size())));
    for (size_t i = 0; i < c.tokens.size(); ++i) {
      tokens_.push_back(c.tokens[i]);
      positions_.push_back(static_cast<int32_t>(c.start_position + static_cast<int64_t>(i)));
    }
    if (c.sample_all) {
      for (size_t i = 0; i < c.tokens.size(); ++i)
        sample_rows_.push_back(static_cast<int32_t>(tokens_.size() - c.tokens.size() + i));
    } else if (c.sample) {
      sample_rows_.push_back(static_cast<int32_t>(tokens_.size() - 1));
    }
  }
  place_images(chunks);

  size_t max_pages = 1, local_max_pages = 1;
  group_tables(chunks, false, page, pools.full != nullptr, page_tables_, slots_, max_pages);
  graph::StepInputs step;
  step.tokens = tokens_;
  step.positions = positions_;
  step.slot_mapping = slots_;
  step.sample_rows = sample_rows_;
  step.given_rows = given_rows_;
  step.input_rows = input_rows_;
  const int32_t* key_limit = key_limit_.empty() ? nullptr : key_limit_.data();
  const auto batch = [&](const std::vector<int32_t>& tables, size_t blocks) {
    return kernels::AttentionBatch{
        static_cast<int64_t>(chunks.size()), q_start_.data(), q_len_.data(), context_len_.data(), tables.data(),
        static_cast<int64_t>(blocks),        key_limit};
  };
  step.attention = batch(page_tables_, max_pages);
  if (pools.local) {
    group_tables(chunks, true, page, true, local_page_tables_, local_slots_, local_max_pages);
    step.local_layers = local_layers_;
    step.local_slot_mapping = local_slots_;
    step.local_attention = batch(local_page_tables_, local_max_pages);
  }
  if (pools.states) {
    step.states = pools.states->layers();
    step.state_slots = state_slots_;
    step.state_history = state_history_;
  }
  // Each attention layer's view of its pool (a pool holds its own layers in order); recurrent layers have none.
  views_.clear();
  int64_t full_index = 0, local_index = 0;
  for (int64_t l = 0; l < config_.num_layers; ++l) {
    if (!config_.attends(l)) {
      views_.emplace_back();
      continue;
    }
    const bool local = !local_layers_.empty() && local_layers_[static_cast<size_t>(l)] != 0;
    const KvCache* pool = local ? pools.local : pools.full;
    MINFER_CHECK(pool != nullptr, "layer {} has no KV pool", l);
    views_.push_back(pool->layers()[static_cast<size_t>(local ? local_index++ : full_index++)]);
  }
  const float* logits = executor_->run(step, views_);
  return {logits, sample_rows_.size() * static_cast<size_t>(output_width())};
}

}  // namespace minfer
