// The recurrent layers' memory (vLLM v1's mamba spec, llama.cpp's recurrent memory): a fixed-size slot per running
// sequence per recurrent layer, holding the convolution's past inputs and the layer's recurrent state
// (kernels::StateLayerView). A sequence takes a slot when it is admitted (zeroed: no history) and gives it back when
// it finishes or is preempted (recomputed later from its tokens). Attention layers keep their KV in the page pools.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kernels/mixers.h"
#include "minfer/outputs.h"  // RequestId
#include "model/model_config.h"

namespace minfer {

// A slot operation, as the other ranks of a tensor-parallel group replay it on their pools (same slots, their shards
// of the layers): copy slot `from` into slot `to`, or with from = -1 zero `to`.
struct StateOp {
  int32_t from = -1;
  int32_t to = 0;
};

class StatePool {
 public:
  // num_slots slots for every recurrent layer of `config`, num_snapshots more for prefix caching's copies, and with
  // history_per_slot > 0 that many per slot for speculative decoding (the state after each token of a verification).
  StatePool(const ModelConfig& config, int64_t num_slots, int64_t num_snapshots = 0, int64_t history_per_slot = 0);
  // Bytes one sequence's slot takes across the model's recurrent layers.
  static int64_t slot_bytes(const ModelConfig& config);

  // A zeroed slot for `seq`; false (nothing changed) when every slot is taken.
  bool acquire(RequestId seq);
  // Gives the slot of `seq` back (no-op for a sequence without one).
  void release(RequestId seq);
  int32_t slot_of(RequestId seq) const;  // -1: none
  bool has_slot(RequestId seq) const { return owner_.count(seq) != 0; }

  // Prefix caching: a copy of the state of `seq` (which has just computed a page-aligned prefix) kept under `key`
  // (the prefix cache's registration of the page that ends the prefix), evicting the least recently used copy; and
  // that copy restored into the slot of another sequence starting from the same prefix.
  void save_snapshot(RequestId seq, uint64_t key);
  bool has_snapshot(uint64_t key) const { return snapshots_.count(key) != 0; }
  void restore_snapshot(RequestId seq, uint64_t key);
  int64_t num_snapshots() const { return num_snapshot_slots_; }
  // A slot's state across the recurrent layers as one buffer of slot_bytes(config) (the KV tiers keep snapshots
  // beyond the pool's copies, kv_tiers.h): copied out of a slot, and into one.
  int64_t bytes_per_slot() const { return slot_bytes_; }
  void copy_slot_out(int32_t slot, unsigned char* dst) const;
  void copy_slot_in(int32_t slot, const unsigned char* src);

  // Speculative decoding: the first of the history_per_slot slots of `seq` that a verification chunk fills with the
  // state after each of its tokens (-1: no history), and the state after its `index`-th token (the last accepted
  // draft) made the sequence's.
  int32_t history_of(RequestId seq) const;
  void keep_history(RequestId seq, int64_t index);

  // [num_layers]: each recurrent layer's view, an empty one for attention layers.
  std::span<const kernels::StateLayerView> layers() const { return views_; }
  int64_t num_slots() const { return num_slots_; }
  int64_t num_free() const { return static_cast<int64_t>(free_.size()); }
  int64_t bytes() const { return static_cast<int64_t>(floats_ * sizeof(float)); }
  int64_t history_per_slot() const { return history_per_slot_; }

  // Tensor parallel: rank 0's pool records every slot zeroing and copy (record_ops), sends them with the next step
  // (take_ops), and the other ranks apply them in order before running it (apply_ops).
  void record_ops() { recording_ = true; }
  std::vector<StateOp> take_ops() { return std::exchange(ops_, {}); }
  void apply_ops(std::span<const StateOp> ops);

 private:
  void copy_slot(int32_t from, int32_t to);
  void zero_slot(int32_t slot);

  int64_t num_slots_;
  int64_t num_snapshot_slots_;
  int64_t history_per_slot_;
  std::unordered_map<uint64_t, int32_t> snapshots_;  // key -> snapshot slot
  std::vector<uint64_t> snapshot_keys_;              // per snapshot slot (index - num_slots_), 0 = free
  std::vector<uint64_t> snapshot_used_;              // per snapshot slot, the use clock
  uint64_t clock_ = 0;
  size_t floats_ = 0;
  int64_t slot_bytes_ = 0;
  std::unique_ptr<float[]> data_;  // uninitialised; a slot is zeroed when it is acquired
  std::vector<kernels::StateLayerView> views_;
  std::vector<int32_t> free_;
  std::unordered_map<RequestId, int32_t> owner_;
  bool recording_ = false;
  std::vector<StateOp> ops_;
};

}  // namespace minfer
