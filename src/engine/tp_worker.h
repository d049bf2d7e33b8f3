// Ranks 1..N-1 of a tensor-parallel group (mpirun -np N minfer serve|generate|bench ...): no scheduler, no
// tokenizer, no HTTP. Each receives rank 0's set-up, loads and shards the same model, builds KV pools of the pages
// rank 0 planned, and then runs every step rank 0 broadcasts (engine/step_channel.h) until rank 0 ends the run.
#pragma once

#include "minfer/config.h"

namespace minfer {

// Serves each engine rank 0 makes in turn; returns when rank 0 ends the run. `own` gives this rank's threads and
// collective timeout (its own command line); everything else comes from rank 0. Throws Error when the model does not
// load or shard here, dist::CommError when the group breaks.
void run_tensor_parallel_worker(const EngineConfig& own);

}  // namespace minfer
