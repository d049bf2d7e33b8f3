// Runs a Graph for one step of a batch on the thread pool. Activation buffers are planned once from value
// lifetimes (a value's buffer is reused after its last reader), so a step allocates nothing once the
// buffers have grown to the largest batch seen. Every node run is one dispatch; the counts are kept.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "base/thread_pool.h"
#include "dist/communicator.h"
#include "dist/expert_parallel.h"
#include "graph/graph.h"
#include "kernels/kernels.h"
#include "kernels/mixers.h"
#include "kernels/moe.h"

namespace minfer::graph {

// What one step computes: a flat batch of tokens from one or more sequences.
struct StepInputs {
  std::span<const int32_t> tokens;        // [T]
  std::span<const int32_t> positions;     // [T] absolute position of each token in its sequence
  std::span<const int64_t> slot_mapping;  // [T] KV-cache slot of each token
  kernels::AttentionBatch attention;      // per-sequence query ranges, context lengths, page tables
  std::span<const int32_t> sample_rows;   // indices into [0, T) of the rows whose logits are wanted
  // Rows given instead of computed, input_width floats each: a vision encoder's patches (the kInput node reads them
  // all, given_rows empty), or in a decoder the embeddings of an image's tokens (row given_rows[i] of the embedding
  // node's output becomes input_rows' row i, after any embedding scale).
  std::span<const float> input_rows;
  std::span<const int32_t> given_rows;
  // The local KV group (sliding-window layers whose pages behind the window are freed; engine_core.h): the layers
  // marked in local_layers read and write its pages through these slots and page tables instead.
  std::span<const uint8_t> local_layers;  // [num_layers] or empty (no local group)
  std::span<const int64_t> local_slot_mapping;
  kernels::AttentionBatch local_attention;
  // Recurrent layers (kernels/mixers.h): each layer's state pool ([num_layers], empty views for attention layers, or
  // empty when the model has none) and the state slot of each sequence of `attention` (its chunks' order).
  std::span<const kernels::StateLayerView> states;
  std::span<const int32_t> state_slots;
  std::span<const int32_t> state_history;  // per sequence: its first history slot, -1: none (or empty)
  kernels::RecurrentBatch recurrent() const {
    return {attention.num_seqs, attention.q_start, attention.q_len, state_slots.data(),
            state_history.empty() ? nullptr : state_history.data()};
  }

  bool is_local(int32_t layer) const { return !local_layers.empty() && local_layers[static_cast<size_t>(layer)] != 0; }
  const int64_t* slots_of(int32_t layer) const {
    return is_local(layer) ? local_slot_mapping.data() : slot_mapping.data();
  }
  const kernels::AttentionBatch& attention_of(int32_t layer) const {
    return is_local(layer) ? local_attention : attention;
  }
};

struct RopeTable {
  std::vector<float> inv_freq;  // half_rot entries
  kernels::RopeStyle style = kernels::RopeStyle::kNeox;
  float attention_factor = 1.0f;  // cos and sin are scaled by it (longrope); 1 = not at all
};
// A model's RoPE tables, indexed by Node::rope: one, or two where local and global layers rotate with their own
// bases (Gemma 3). Every table's angles are computed once per step.
using RopeTables = std::vector<RopeTable>;

class Executor {
 public:
  // comm: the group the graph's collectives run in (a tensor-parallel graph's shards); null: the process's
  // (dist::Communicator::world()).
  Executor(const Graph& graph, ThreadPool& pool, RopeTables ropes, dist::Communicator* comm = nullptr);

  // Runs every node; returns the graph output ([sample_rows.size(), width] f32), valid until the next run;
  // null when the step samples no rows.
  // kv_layers[i] is layer i's cache.
  const float* run(const StepInputs& step, std::span<const kernels::KvLayerView> kv_layers);

  int64_t output_width() const { return graph_.value(graph_.output()).width; }
  int64_t dispatches_last_step() const { return dispatches_last_step_; }
  int64_t dispatches_total() const { return dispatches_total_; }
  // Dispatches of a step that samples, from the graph (equal to what run() counts). A dispatch is one node:
  // one kernel entry call, which is at most one fork-join of the thread pool.
  int64_t dispatches_per_step() const { return static_cast<int64_t>(graph_.nodes().size()); }

  // Opt-in profiling (for `minfer bench ops --profile`): when on, the wall time of every node run is added to
  // node_seconds()[node index]. Off by default: two clock reads per node are not free at batch 1.
  void set_profiling(bool on);
  const std::vector<double>& node_seconds() const { return node_seconds_; }

  // Opt-in observation of the activations that enter each primitive matmul (for SmoothQuant calibration,
  // model/quant/smoothing.h): called before the node runs with its input rows [rows, width]. Fused matmuls
  // are not observed (their input is normalised in the prologue), so calibrate on a graph compiled with
  // fusion_strategy=none. Empty function: off.
  using MatMulObserver = std::function<void(const Node& node, const float* input, int64_t rows, int64_t width)>;
  void set_matmul_observer(MatMulObserver observer) { matmul_observer_ = std::move(observer); }

 private:
  void plan_buffers();
  float* buffer(ValueId id) { return slots_[static_cast<size_t>(slot_of_[static_cast<size_t>(id)])].data(); }
  float* input(const Node& node, size_t i) { return buffer(node.inputs.at(i)); }
  // executor_ops.cpp: a node's kernel. rows: the rows of the value the helper reads or writes this step.
  void run_node(const Node& node, const StepInputs& step, std::span<const kernels::KvLayerView> kv_layers,
                int64_t tokens, int64_t sampled);
  void run_rmsnorm(const Node& node, int64_t rows);
  void run_matmul(const Node& node, int64_t rows);
  void run_rope(const Node& node, int64_t tokens);
  void run_attention(const Node& node, const StepInputs& step, std::span<const kernels::KvLayerView> kv_layers);
  void run_elementwise(const Node& node, int64_t rows);
  void run_add_rmsnorm(const Node& node, int64_t rows);
  void run_row_gate(const Node& node, int64_t rows);
  void run_moe(const Node& node, int64_t rows);
  void run_all_reduce(const Node& node, int64_t rows);
  void run_gather_rows(const Node& node, const StepInputs& step, int64_t tokens, int64_t sampled);
  void run_fused_matmul(const Node& node, const StepInputs& step, std::span<const kernels::KvLayerView> kv_layers,
                        int64_t tokens, int64_t sampled);
  void run_embedding(const Node& node, const StepInputs& step, int64_t tokens);
  void run_gather_vocab(const Node& node, int64_t sampled);
  // executor_vision.cpp: the vision encoders' ops.
  void run_input(const Node& node, const StepInputs& step, int64_t tokens);
  void run_layernorm(const Node& node, int64_t rows);
  void run_avg_pool(const Node& node, const StepInputs& step, int64_t sampled);
  void run_encoder_attention(const Node& node, const StepInputs& step);
  void put_given_rows(const Node& node, const StepInputs& step);
  // executor_mixers.cpp: the recurrent mixers over the step's sequences and their state slots.
  void run_conv1d(const Node& node, const StepInputs& step);
  void run_delta_net(const Node& node, const StepInputs& step);
  void run_ssm_scan(const Node& node, const StepInputs& step);
  // Grows a scratch buffer to at least `floats` (once per new largest batch) and returns it.
  static float* grow(std::vector<float>& scratch, int64_t floats);

  const Graph& graph_;
  ThreadPool& pool_;
  RopeTables ropes_;
  std::vector<int32_t> slot_of_;  // value -> buffer slot
  struct SlotWidth {
    int64_t per_token = 0;    // widest value with a row per token this slot holds
    int64_t per_sampled = 0;  // widest value with a row per sampled row
  };
  std::vector<SlotWidth> slot_width_;
  std::vector<std::vector<float>> slots_;  // grown to rows x width on demand
  // Fused matmuls' scratch, shared by all of them (nodes run one at a time): the gathered/normalised input,
  // and the GEMM result an epilogue reads (gate/up, q/k/v).
  std::vector<float> prologue_scratch_, gemm_scratch_;
  kernels::MoeScratch moe_scratch_;
  dist::Communicator* comm_;
  dist::ExpertParallelScratch ep_scratch_;
  std::vector<float> gather_send_, gather_recv_;  // GatherVocab's padded slices
  // Per RoPE table, cos / sin of the step's angles, [tokens, half_rot] (kernels::rope_angles), made once per step.
  struct RopeAngles {
    std::vector<float> cos, sin;
  };
  std::vector<RopeAngles> angles_;
  int64_t dispatches_last_step_ = 0;
  int64_t dispatches_total_ = 0;
  bool profiling_ = false;
  std::vector<double> node_seconds_;
  MatMulObserver matmul_observer_;
};

}  // namespace minfer::graph
