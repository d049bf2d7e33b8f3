#include "kv/state_pool.h"

#include <algorithm>

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

StatePool::StatePool(const ModelConfig& config, int64_t num_slots) : num_slots_(num_slots) {
  MINFER_CHECK(num_slots >= 1 && num_slots < (int64_t{1} << 30), "state pool of {} slots", num_slots);
  floats_ = static_cast<size_t>(slot_bytes(config) / static_cast<int64_t>(sizeof(float)) * num_slots);
  data_.reset(new float[floats_ + 16]);
  float* base = data_.get() + (16 - reinterpret_cast<uintptr_t>(data_.get()) / sizeof(float) % 16) % 16;
  for (int64_t i = 0; i < config.num_layers; ++i) {
    kernels::StateLayerView v;
    if (config.is_recurrent(i)) {
      v = {base, slot_floats(config, i), ssm_offset(config, i)};
      base += v.slot_floats * num_slots;
    }
    views_.push_back(v);
  }
  for (int64_t s = num_slots - 1; s >= 0; --s) free_.push_back(static_cast<int32_t>(s));
}

bool StatePool::acquire(RequestId seq) {
  MINFER_CHECK(owner_.count(seq) == 0, "sequence {} already holds a state slot", seq);
  if (free_.empty()) return false;
  const int32_t slot = free_.back();
  free_.pop_back();
  owner_[seq] = slot;
  for (const kernels::StateLayerView& v : views_)
    if (v.base) std::fill(v.conv(slot), v.conv(slot) + v.slot_floats, 0.0f);
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
