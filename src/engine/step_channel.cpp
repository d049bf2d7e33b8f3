#include "engine/step_channel.h"

#include <cstring>
#include <nlohmann/json.hpp>

#include "base/error.h"

namespace minfer {
namespace {

enum Message : int32_t { kSetup = 1, kStep = 2, kEndEngine = 3, kEndRun = 4 };

nlohmann::json shape_json(const std::optional<KvCacheShape>& s) {
  if (!s) return nullptr;
  return {{"num_layers", s->num_layers}, {"kv_heads", s->kv_heads},   {"head_dim", s->head_dim},
          {"page", s->page.size()},      {"num_pages", s->num_pages}, {"dtype", static_cast<int>(s->dtype)}};
}

std::optional<KvCacheShape> shape_of(const nlohmann::json& j) {
  if (j.is_null()) return std::nullopt;
  KvCacheShape s;
  s.num_layers = j.at("num_layers");
  s.kv_heads = j.at("kv_heads");
  s.head_dim = j.at("head_dim");
  s.page = PageGeometry::of(j.at("page").get<int64_t>());
  s.num_pages = j.at("num_pages");
  s.dtype = static_cast<KvCacheDtype>(j.at("dtype").get<int>());
  return s;
}

void append(std::vector<int32_t>& words, std::span<const int32_t> values) {
  words.push_back(static_cast<int32_t>(values.size()));
  words.insert(words.end(), values.begin(), values.end());
}

}  // namespace

void StepChannel::send(std::span<const int32_t> words) {
  int64_t n = static_cast<int64_t>(words.size());
  comm_.broadcast(&n, sizeof(n));
  comm_.broadcast(const_cast<int32_t*>(words.data()), n * static_cast<int64_t>(sizeof(int32_t)));
}

std::vector<int32_t> StepChannel::receive() {
  int64_t n = 0;
  comm_.broadcast(&n, sizeof(n), /*idle=*/true);
  std::vector<int32_t> words(static_cast<size_t>(n));
  comm_.broadcast(words.data(), n * static_cast<int64_t>(sizeof(int32_t)));
  MINFER_CHECK(!words.empty(), "an empty message from rank 0");
  return words;
}

void StepChannel::send_setup(const WorkerSetup& setup) {
  const EngineConfig& c = setup.config;
  const nlohmann::json j = {
      {"model_path", c.model_path},
      {"fusion_none", c.fusion_strategy == FusionStrategy::kNone},
      {"disabled_fusion_passes", c.disabled_fusion_passes},
      {"quant", {c.quant.weight_bits, c.quant.activation_bits, c.quant.symmetric, c.quant.group_size}},
      {"embed", c.task == EngineTask::kEmbed},
      {"expert_parallel", c.enable_expert_parallel},
      {"max_model_len", c.max_model_len},
      {"full", shape_json(setup.full)},
      {"window", shape_json(setup.window)},
      {"window_layers", setup.window_layers},
      {"states", {setup.state_slots, setup.state_snapshots, setup.state_history}},
  };
  const std::string text = j.dump();
  words_.assign(1 + (text.size() + 3) / 4, 0);
  words_[0] = kSetup;
  std::memcpy(words_.data() + 1, text.data(), text.size());
  send(words_);
}

std::optional<WorkerSetup> StepChannel::receive_setup() {
  const std::vector<int32_t> words = receive();
  if (words[0] == kEndRun) return std::nullopt;
  MINFER_CHECK(words[0] == kSetup, "rank 0 sent message {} before the set-up", words[0]);
  const char* text = reinterpret_cast<const char*>(words.data() + 1);
  const nlohmann::json j = nlohmann::json::parse(std::string(text, strnlen(text, (words.size() - 1) * 4)));
  WorkerSetup s;
  s.config.model_path = j.at("model_path");
  s.config.fusion_strategy = j.at("fusion_none").get<bool>() ? FusionStrategy::kNone : FusionStrategy::kAuto;
  s.config.disabled_fusion_passes = j.at("disabled_fusion_passes");
  const auto& q = j.at("quant");
  s.config.quant = QuantConfig{q[0], q[1], q[2], q[3]};
  s.config.task = j.at("embed").get<bool>() ? EngineTask::kEmbed : EngineTask::kGenerate;
  s.config.max_model_len = j.at("max_model_len");
  s.config.enable_expert_parallel = j.at("expert_parallel");
  s.full = shape_of(j.at("full"));
  s.window = shape_of(j.at("window"));
  s.window_layers = j.at("window_layers").get<std::vector<uint8_t>>();
  const auto& states = j.at("states");
  s.state_slots = states[0];
  s.state_snapshots = states[1];
  s.state_history = states[2];
  return s;
}

// A step: kStep, the state operations (a count, then from and to of each), the chunk count, then per chunk its start
// position, flags, state slot and history slot, tokens, page table and local page table (each a count and its
// values).
void StepChannel::send_step(std::span<const SequenceChunk> chunks, std::span<const StateOp> state_ops) {
  words_.clear();
  words_.push_back(kStep);
  words_.push_back(static_cast<int32_t>(state_ops.size()));
  for (const StateOp& op : state_ops) words_.insert(words_.end(), {op.from, op.to});
  words_.push_back(static_cast<int32_t>(chunks.size()));
  for (const SequenceChunk& c : chunks) {
    words_.push_back(c.start_position);
    words_.push_back((c.sample ? 1 : 0) | (c.sample_all ? 2 : 0));
    words_.push_back(c.state_slot);
    words_.push_back(c.state_history);
    append(words_, c.tokens);
    append(words_, c.page_table);
    append(words_, c.local_page_table);
  }
  send(words_);
}

void StepChannel::send_end_engine() {
  const int32_t word = kEndEngine;
  send(std::span<const int32_t>(&word, 1));
}

void StepChannel::send_end_run() {
  const int32_t word = kEndRun;
  send(std::span<const int32_t>(&word, 1));
}

bool StepChannel::receive_step(ReceivedStep& step) {
  step.storage = receive();
  if (step.storage[0] == kEndEngine) return false;
  MINFER_CHECK(step.storage[0] == kStep && step.storage.size() >= 2, "rank 0 sent message {} mid-run", step.storage[0]);
  const std::vector<int32_t>& w = step.storage;
  size_t at = 1;
  auto take = [&]() -> std::span<const int32_t> {
    const auto n = static_cast<size_t>(w.at(at));
    MINFER_CHECK(at + 1 + n <= w.size(), "a step message ends early");
    std::span<const int32_t> s(w.data() + at + 1, n);
    at += 1 + n;
    return s;
  };
  const int32_t ops = w.at(at++);
  MINFER_CHECK(ops >= 0 && at + 2 * static_cast<size_t>(ops) < w.size(), "a step message ends early");
  step.state_ops.resize(static_cast<size_t>(ops));
  for (StateOp& op : step.state_ops) {
    op.from = w[at++];
    op.to = w[at++];
  }
  const int32_t count = w.at(at++);
  step.chunks.resize(static_cast<size_t>(count));
  for (SequenceChunk& c : step.chunks) {
    c.start_position = w.at(at++);
    const int32_t flags = w.at(at++);
    c.sample = (flags & 1) != 0;
    c.sample_all = (flags & 2) != 0;
    c.state_slot = w.at(at++);
    c.state_history = w.at(at++);
    c.tokens = take();
    c.page_table = take();
    c.local_page_table = take();
  }
  return true;
}

}  // namespace minfer
