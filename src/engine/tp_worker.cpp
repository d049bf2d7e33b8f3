#include "engine/tp_worker.h"

#include <spdlog/spdlog.h>

#include <memory>

#include "dist/communicator.h"
#include "engine/model_runner.h"
#include "engine/step_channel.h"
#include "kv/state_pool.h"
#include "model/quant/quantize_model.h"
#include "model/shard_weights.h"

namespace minfer {

namespace {

// One engine of rank 0's: this rank's shard and KV pools, then every step until the engine ends.
void serve_engine(const WorkerSetup& setup, const EngineConfig& own, dist::Communicator& comm, StepChannel& channel) {
  const EngineConfig& c = setup.config;
  const ModelWeights full = load_model(c.model_path);
  ModelWeights shard = shard_weights(full, comm.rank(), comm.size(), c.enable_expert_parallel);
  ThreadPool pool(own.num_threads);
  if (c.quant.enabled()) quantize_model(shard, c.quant, pool.size());
  std::unique_ptr<KvCache> full_kv = setup.full ? std::make_unique<KvCache>(*setup.full) : nullptr;
  std::unique_ptr<KvCache> window_kv = setup.window ? std::make_unique<KvCache>(*setup.window) : nullptr;
  std::unique_ptr<StatePool> states =
      setup.state_slots > 0
          ? std::make_unique<StatePool>(shard.config, setup.state_slots, setup.state_snapshots, setup.state_history)
          : nullptr;
  ModelRunner runner(shard, pool, graph::FusionOptions{c.fusion_strategy, c.disabled_fusion_passes}, c.max_model_len,
                     setup.window_layers,
                     c.task == EngineTask::kEmbed ? DecoderHead::kHiddenStates : DecoderHead::kLogits, &comm);
  spdlog::info("rank {} of {}: {} heads, {} KV heads, {} threads; ready", comm.rank(), comm.size(),
               shard.config.num_heads, shard.config.num_kv_heads, pool.size());
  comm.barrier(/*idle=*/true);  // rank 0 starts stepping once every rank has its model

  ReceivedStep step;
  int64_t steps = 0;
  while (channel.receive_step(step)) {
    if (states) states->apply_ops(step.state_ops);
    runner.execute(step.chunks, KvPools{full_kv.get(), window_kv.get(), states.get()});
    ++steps;
  }
  spdlog::debug("rank {}: {} steps, the engine ended", comm.rank(), steps);
}

}  // namespace

void run_tensor_parallel_worker(const EngineConfig& own) {
  dist::Communicator& comm = dist::Communicator::world();
  comm.set_timeout(std::chrono::milliseconds(static_cast<int64_t>(own.distributed_timeout_s * 1000)));
  StepChannel channel(comm);
  while (const std::optional<WorkerSetup> setup = channel.receive_setup()) serve_engine(*setup, own, comm, channel);
}

}  // namespace minfer
