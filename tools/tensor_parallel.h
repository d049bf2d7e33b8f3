// How a command that runs the engine takes part in a tensor-parallel group (--tensor-parallel-size N).
//   under mpirun (`mpirun -np N minfer serve ... --tensor-parallel-size N`): rank 0 runs the command (HTTP,
//     tokenization, scheduling); every other rank runs the worker loop (engine/tp_worker.h) instead;
//   without mpirun: the command runs itself again under mpirun, N ranks on this machine, so the one-line start
//     (`minfer serve --tensor-parallel-size 2`) works.
#pragma once

#include "minfer/config.h"

namespace minfer::tools {

// Keeps the command line (from main) for the relaunch under mpirun.
void set_command_line(int argc, char** argv);

// Returns true when this process has done its part and the command must return (it was a worker rank); false when
// the command goes on (one process, or rank 0). Without mpirun and with N > 1 it replaces this process with mpirun
// and does not return.
bool take_tensor_parallel_role(const EngineConfig& config);

// At the end of a command on rank 0: tells the worker ranks the run is over (they return from their loop).
void end_tensor_parallel_run();

}  // namespace minfer::tools
