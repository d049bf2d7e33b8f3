// Runs the compiled model for one step of a batch: turns per-sequence chunks (tokens to compute, where they
// start, the sequence's pages) into the flat arrays the graph executor takes, and returns the logits of the
// chunks that sample.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/thread_pool.h"
#include "engine/seq_image.h"
#include "graph/executor.h"
#include "graph/graph.h"
#include "graph/passes/fusion_passes.h"
#include "kv/kv_cache.h"
#include "kv/state_pool.h"
#include "model/decoder_graph.h"
#include "model/model_weights.h"

namespace minfer {

struct SequenceChunk {
  std::span<const int32_t> tokens;      // the tokens to compute this step
  int32_t start_position = 0;           // position of tokens[0] (= tokens already in the cache)
  std::span<const int32_t> page_table;  // the sequence's pages, covering start_position + tokens.size()
  bool sample = true;                   // return logits for the chunk's last token
  bool sample_all = false;              // return a row for every token of the chunk (mean pooling)
  // Its pages in the local KV group (sliding-window layers; pages behind every window are the null page 0).
  std::span<const int32_t> local_page_table;
  // Its state slot in the recurrent layers' pool (-1: the model has none), and for a verification chunk the first of
  // the slots that keep the state after each of its tokens (-1: none).
  int32_t state_slot = -1;
  int32_t state_history = -1;
  // The sequence's images (engine/seq_image.h): their encoded rows replace the embeddings of the chunk's positions
  // that are image tokens; with bidirectional_images each image token also sees the image's later tokens.
  std::span<const SeqImage> images;
  bool bidirectional_images = false;
};

// The KV pools a step reads: the full-attention layers' and, where the engine frees pages behind sliding windows,
// the sliding layers' (each pool holds only its own layers; ModelRunner maps layers to them).
struct KvPools {
  const KvCache* full = nullptr;
  const KvCache* local = nullptr;
  const StatePool* states = nullptr;  // the recurrent layers' (models with some)
};

class ModelRunner {
 public:
  // The weights must outlive the runner. `fusion` picks the fusion passes the graph is compiled with.
  // max_model_len: the engine's context (longrope picks its RoPE factors by it; 0 = the model's short ones).
  // local_layers: [num_layers] 1 for the layers whose KV lives in the local pool (empty: none; all in the full pool).
  // head: kHiddenStates for an embedding engine (rows of final-normed hidden states instead of logits).
  // comm: the group a sharded model's collectives run in (null: the process's). In a tensor-parallel group every
  // rank runs the same steps; only rank 0's rows are the logits.
  ModelRunner(const ModelWeights& weights, ThreadPool& pool, const graph::FusionOptions& fusion = {},
              int64_t max_model_len = 0, std::vector<uint8_t> local_layers = {},
              DecoderHead head = DecoderHead::kLogits, dist::Communicator* comm = nullptr);

  // Rows [sampled rows, output_width()] (logits, or hidden states), in chunk order; valid until the next call.
  // A chunk gives one row (its last token's) when it samples, or one per token with sample_all.
  std::span<const float> execute(std::span<const SequenceChunk> chunks, const KvPools& pools);
  std::span<const float> execute(std::span<const SequenceChunk> chunks, const KvCache& cache) {
    return execute(chunks, KvPools{&cache, nullptr});
  }

  const ModelConfig& config() const { return config_; }
  int64_t vocab_size() const { return executor_->output_width(); }
  int64_t output_width() const { return executor_->output_width(); }
  int64_t dispatches_per_step() const { return executor_->dispatches_per_step(); }
  int64_t dispatches_total() const { return executor_->dispatches_total(); }
  const graph::Graph& graph() const { return graph_; }
  // The token a multimodal model's image positions are embedded as (before their rows are replaced).
  void set_image_token_id(int32_t id) { image_token_id_ = id; }
  graph::Executor& executor() { return *executor_; }

 private:
  // The image rows and key limits of chunk s, whose first row is `row0` (execute).
  void add_image_rows(const SequenceChunk& c, int32_t row0);
  void place_images(std::span<const SequenceChunk> chunks);

  ModelConfig config_;
  graph::Graph graph_;
  std::unique_ptr<graph::Executor> executor_;
  // Flat step arrays, reused across steps.
  std::vector<int32_t> tokens_, positions_, sample_rows_, q_start_, q_len_, context_len_, page_tables_,
      local_page_tables_, state_slots_, state_history_;
  std::vector<int64_t> slots_, local_slots_;
  // The rows of image tokens (their flat row, their embedding) and the keys each row sees (bidirectional images).
  std::vector<int32_t> given_rows_, key_limit_;
  std::vector<float> input_rows_;
  int32_t image_token_id_ = 0;
  std::vector<uint8_t> local_layers_;
  std::vector<kernels::KvLayerView> views_;  // per layer, from its pool
};

}  // namespace minfer
