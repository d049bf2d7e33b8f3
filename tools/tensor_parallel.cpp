#include "tools/tensor_parallel.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "base/error.h"
#include "dist/communicator.h"
#include "engine/step_channel.h"
#include "engine/tp_worker.h"

namespace minfer::tools {
namespace {

std::vector<std::string> g_args;

// mpirun -np N, this binary and the same arguments. One machine: no binding (each rank's threads spread over the
// cores), oversubscription allowed (more ranks than cores is slow, not wrong), and 10 s between mpirun's SIGTERM and
// its SIGKILL when a rank dies, so rank 0 can answer its running requests with 503 first.
[[noreturn]] void relaunch(int ranks) {
  std::vector<std::string> args = {"mpirun",
                                   "-np",
                                   std::to_string(ranks),
                                   "--oversubscribe",
                                   "--bind-to",
                                   "none",
                                   "--mca",
                                   "odls_base_sigkill_timeout",
                                   "10"};
  if (::geteuid() == 0) args.emplace_back("--allow-run-as-root");
  args.push_back(std::filesystem::read_symlink("/proc/self/exe").string());
  args.insert(args.end(), g_args.begin() + 1, g_args.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  spdlog::info("--tensor-parallel-size {}: starting {} ranks under mpirun", ranks, ranks);
  ::execvp("mpirun", argv.data());
  fail(
      "--tensor-parallel-size {}: cannot start mpirun ({}): install Open MPI (Debian: openmpi-bin) or start the ranks "
      "with mpirun yourself",
      ranks, std::strerror(errno));
}

}  // namespace

void set_command_line(int argc, char** argv) { g_args.assign(argv, argv + argc); }

bool take_tensor_parallel_role(const EngineConfig& config) {
  dist::Communicator& comm = dist::Communicator::world();
  if (config.tensor_parallel_size > 1 && !dist::Communicator::under_mpirun()) relaunch(config.tensor_parallel_size);
  if (!comm.distributed()) return false;
  if (comm.size() != config.tensor_parallel_size)
    fail("mpirun started {} ranks but --tensor-parallel-size is {}: give the same number to both", comm.size(),
         config.tensor_parallel_size);
  if (comm.rank() == 0) return false;
  run_tensor_parallel_worker(config);
  return true;
}

void end_tensor_parallel_run() {
  dist::Communicator& comm = dist::Communicator::world();
  if (comm.distributed() && comm.rank() == 0 && !comm.interrupted()) StepChannel(comm).send_end_run();
}

}  // namespace minfer::tools
