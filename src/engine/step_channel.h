// What rank 0 of a tensor-parallel group tells the other ranks (engine/tp_worker.h): per engine it makes, the
// engine's set-up (the model, the compiled graph's options, the KV pools rank 0 planned, so every rank's pages
// match), each step's chunks (tokens, positions, page tables: the scheduler runs on rank 0 only) and the engine's
// end; then the end of the run (a command such as `bench` makes several engines in turn). Each message is a
// broadcast of its length, then of its bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "engine/model_runner.h"
#include "kv/kv_cache.h"
#include "kv/state_pool.h"
#include "minfer/config.h"

namespace minfer {

struct WorkerSetup {
  EngineConfig config;  // model_path, fusion, quantization, task, max_model_len as rank 0 resolved them
  std::optional<KvCacheShape> full, window;  // the KV pools (num_pages included)
  std::vector<uint8_t> window_layers;        // ModelRunner's local_layers
  // The recurrent layers' state pool (models with some): slots, snapshots and history slots per slot.
  int64_t state_slots = 0, state_snapshots = 0, state_history = 0;
};

// One step as the other ranks receive it: the chunks view `storage`.
struct ReceivedStep {
  std::vector<int32_t> storage;
  std::vector<SequenceChunk> chunks;
  std::vector<StateOp> state_ops;  // to apply to the state pool before the step
};

class StepChannel {
 public:
  explicit StepChannel(dist::Communicator& comm) : comm_(comm) {}

  // Rank 0.
  void send_setup(const WorkerSetup& setup);
  void send_step(std::span<const SequenceChunk> chunks, std::span<const StateOp> state_ops = {});
  void send_end_engine();
  void send_end_run();

  // The other ranks. receive_setup returns nullopt at the end of the run, receive_step false at the engine's end.
  std::optional<WorkerSetup> receive_setup();
  bool receive_step(ReceivedStep& step);

 private:
  void send(std::span<const int32_t> words);
  // Waits for rank 0's next message (no deadline: rank 0 may be idle).
  std::vector<int32_t> receive();

  dist::Communicator& comm_;
  std::vector<int32_t> words_;
};

}  // namespace minfer
