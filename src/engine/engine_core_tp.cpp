// The EngineCore's side of tensor parallel (engine/tp_worker.h runs the other ranks): this rank's shard, the
// set-up and every step sent to the other ranks, and the engine's end.
#include <spdlog/spdlog.h>

#include <chrono>

#include "base/error.h"
#include "engine/engine_core.h"
#include "model/shard_weights.h"

namespace minfer {

// Checks the group mpirun started matches the config, and takes this rank's shard of the weights.
void EngineCore::start_tensor_parallel() {
  dist::Communicator& comm = dist::Communicator::world();
  if (config_.tensor_parallel_size == 1 && !comm.distributed()) return;
  if (comm.size() != config_.tensor_parallel_size)
    fail(
        "--tensor-parallel-size {} but this group has {} process(es): start it as `mpirun -np {} minfer ...` (minfer "
        "serve, generate and bench start mpirun themselves when run without it)",
        config_.tensor_parallel_size, comm.size(), config_.tensor_parallel_size);
  MINFER_CHECK(comm.rank() == 0, "the engine runs on rank 0; rank {} runs the worker loop", comm.rank());
  comm.set_timeout(std::chrono::milliseconds(static_cast<int64_t>(config_.distributed_timeout_s * 1000)));
  shard_ = std::make_unique<ModelWeights>(shard_weights(weights_, 0, comm.size(), config_.enable_expert_parallel));
  channel_ = std::make_unique<StepChannel>(comm);
}

// The other ranks build the same pools (their pages are the ones this rank's scheduler hands out).
void EngineCore::send_worker_setup() {
  WorkerSetup setup{.config = config_, .window_layers = window_layers_};
  if (full_.cache) setup.full = full_.cache->shape();
  if (window_.cache) setup.window = window_.cache->shape();
  if (states_) {
    setup.state_slots = states_->num_slots();
    setup.state_snapshots = states_->num_snapshots();
    setup.state_history = states_->history_per_slot();
  }
  channel_->send_setup(setup);
  spdlog::info("tensor parallel: rank 0 of {} ({} of {} heads, {} KV heads per rank{}); waiting for the other ranks",
               config_.tensor_parallel_size, runner_weights().config.num_heads, weights_.config.num_heads,
               runner_weights().config.num_kv_heads, config_.enable_expert_parallel ? ", experts spread" : "");
}

// The other ranks on this machine plan the same pages from the same memory.
void EngineCore::share_kv_budget(KvPoolRequest& request) const {
  const int local = dist::Communicator::local_size();
  if (!channel_ || local <= 1) return;
  request.budget_bytes /= local;
  request.budget_source += fmt::format(", shared by {} ranks on this machine", local);
}

// The step's chunks to the other ranks, which run the same graph on their shards.
void EngineCore::broadcast_step() {
  if (!channel_) return;
  const std::vector<StateOp> ops = states_ ? states_->take_ops() : std::vector<StateOp>{};
  channel_->send_step(chunks_, ops);
}

void EngineCore::end_tensor_parallel() {
  if (!channel_) return;
  try {
    channel_->send_end_engine();
  } catch (const std::exception& e) {
    spdlog::warn("tensor parallel: could not end the other ranks' run: {}", e.what());
  }
}

}  // namespace minfer
