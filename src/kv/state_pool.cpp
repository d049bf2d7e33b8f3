#include "kv/state_pool.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"

namespace minfer {
namespace {

// Each layer's slot: the conv state, then the recurrent state from a 64-byte boundary.
int64_t ssm_offset(const ModelConfig& c, int64_t layer) { return (c.conv_state_floats(layer) + 15) / 16 * 16; }
int64_t slot_floats(const ModelConfig& c, int64_t layer) {
  return c.is_recurrent(layer) ? ssm_offset(c, layer) + (c.ssm_state_floats(layer) + 15) / 16 * 16 : 0;
}

}  // namespace

int64_t StatePool::slot_bytes(const ModelConfig& config) {
  int64_t floats = 0;
  for (int64_t i = 0; i < config.num_layers; ++i) floats += slot_floats(config, i);
  return floats * static_cast<int64_t>(sizeof(float));
}

StatePool::StatePool(const ModelConfig& config, int64_t num_slots, int64_t num_snapshots, int64_t history_per_slot)
    : num_slots_(num_slots), num_snapshot_slots_(num_snapshots), history_per_slot_(history_per_slot) {
  MINFER_CHECK(num_slots >= 1 && num_snapshots >= 0 && history_per_slot >= 0 &&
                   num_slots * (1 + history_per_slot) + num_snapshots < (int64_t{1} << 30),
               "state pool of {} slots, {} snapshots, {} history slots each", num_slots, num_snapshots,
               history_per_slot);
  const int64_t all = num_slots * (1 + history_per_slot) + num_snapshots;
  slot_bytes_ = slot_bytes(config);
  floats_ = static_cast<size_t>(slot_bytes_ / static_cast<int64_t>(sizeof(float)) * all);
  data_.reset(new float[floats_ + 16]);
  float* base = data_.get() + (16 - reinterpret_cast<uintptr_t>(data_.get()) / sizeof(float) % 16) % 16;
  for (int64_t i = 0; i < config.num_layers; ++i) {
    kernels::StateLayerView v;
    if (config.is_recurrent(i)) {
      v = {base, slot_floats(config, i), ssm_offset(config, i)};
      base += v.slot_floats * all;
    }
    views_.push_back(v);
  }
  for (int64_t s = num_slots - 1; s >= 0; --s) free_.push_back(static_cast<int32_t>(s));
  snapshot_keys_.assign(static_cast<size_t>(num_snapshots), 0);
  snapshot_used_.assign(static_cast<size_t>(num_snapshots), 0);
}

void StatePool::copy_slot(int32_t from, int32_t to) {
  for (const kernels::StateLayerView& v : views_)
    if (v.base) std::copy(v.conv(from), v.conv(from) + v.slot_floats, v.conv(to));
  if (recording_) ops_.push_back({from, to});
}

void StatePool::copy_slot_out(int32_t slot, unsigned char* dst) const {
  for (const kernels::StateLayerView& v : views_) {
    if (!v.base) continue;
    std::memcpy(dst, v.conv(slot), static_cast<size_t>(v.slot_floats) * sizeof(float));
    dst += v.slot_floats * static_cast<int64_t>(sizeof(float));
  }
}

void StatePool::copy_slot_in(int32_t slot, const unsigned char* src) {
  for (const kernels::StateLayerView& v : views_) {
    if (!v.base) continue;
    std::memcpy(v.conv(slot), src, static_cast<size_t>(v.slot_floats) * sizeof(float));
    src += v.slot_floats * static_cast<int64_t>(sizeof(float));
  }
}

void StatePool::zero_slot(int32_t slot) {
  for (const kernels::StateLayerView& v : views_)
    if (v.base) std::fill(v.conv(slot), v.conv(slot) + v.slot_floats, 0.0f);
  if (recording_) ops_.push_back({-1, slot});
}

void StatePool::apply_ops(std::span<const StateOp> ops) {
  const int64_t all = num_slots_ * (1 + history_per_slot_) + num_snapshot_slots_;
  for (const StateOp& op : ops) {
    MINFER_CHECK(op.to >= 0 && op.to < all && op.from >= -1 && op.from < all, "state op {} -> {} of {} slots", op.from,
                 op.to, all);
    if (op.from < 0) {
      zero_slot(op.to);
    } else {
      copy_slot(op.from, op.to);
    }
  }
}

int32_t StatePool::history_of(RequestId seq) const {
  const int32_t slot = slot_of(seq);
  if (history_per_slot_ == 0 || slot < 0) return -1;
  return static_cast<int32_t>(num_slots_ + num_snapshot_slots_ + slot * history_per_slot_);
}

void StatePool::keep_history(RequestId seq, int64_t index) {
  const int32_t first = history_of(seq);
  MINFER_CHECK(first >= 0 && index >= 0 && index < history_per_slot_, "history {} of sequence {}", index, seq);
  copy_slot(static_cast<int32_t>(first + index), slot_of(seq));
}

void StatePool::save_snapshot(RequestId seq, uint64_t key) {
  const int32_t slot = slot_of(seq);
  MINFER_CHECK(slot >= 0 && key != 0, "snapshot of sequence {} (slot {}) under key {}", seq, slot, key);
  if (num_snapshot_slots_ == 0 || has_snapshot(key)) return;
  // The least recently used (or a free) snapshot slot.
  const size_t victim =
      static_cast<size_t>(std::min_element(snapshot_used_.begin(), snapshot_used_.end()) - snapshot_used_.begin());
  if (snapshot_keys_[victim] != 0) snapshots_.erase(snapshot_keys_[victim]);
  const auto at = static_cast<int32_t>(num_slots_ + static_cast<int64_t>(victim));
  copy_slot(slot, at);
  snapshot_keys_[victim] = key;
  snapshot_used_[victim] = ++clock_;
  snapshots_[key] = at;
}

void StatePool::restore_snapshot(RequestId seq, uint64_t key) {
  const int32_t slot = slot_of(seq);
  const auto it = snapshots_.find(key);
  MINFER_CHECK(slot >= 0 && it != snapshots_.end(), "no snapshot {} for sequence {}", key, seq);
  copy_slot(it->second, slot);
  snapshot_used_[static_cast<size_t>(it->second - num_slots_)] = ++clock_;
}

bool StatePool::acquire(RequestId seq) {
  MINFER_CHECK(owner_.count(seq) == 0, "sequence {} already holds a state slot", seq);
  if (free_.empty()) return false;
  const int32_t slot = free_.back();
  free_.pop_back();
  owner_[seq] = slot;
  zero_slot(slot);
  return true;
}

void StatePool::release(RequestId seq) {
  auto it = owner_.find(seq);
  if (it == owner_.end()) return;
  free_.push_back(it->second);
  owner_.erase(it);
}

int32_t StatePool::slot_of(RequestId seq) const {
  auto it = owner_.find(seq);
  return it == owner_.end() ? -1 : it->second;
}

}  // namespace minfer
