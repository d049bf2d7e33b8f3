// `mpirun -np N minfer bench comm`: latency and bandwidth of the collectives tensor and expert parallel run
// (dist/communicator.h), at the sizes a step moves: one all-reduce of [tokens, hidden] per row-parallel projection,
// an all-to-all of the routed rows per MoE layer. Rank 0 prints the table; every rank times the same calls.
#include <fmt/format.h>
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "dist/communicator.h"
#include "tools/commands.h"

namespace minfer::tools {
namespace {

struct CommArgs {
  std::vector<int64_t> floats = {576, 640, 4096, 8192, 32 * 576, 32 * 4096, 512 * 640, 512 * 4096};
  int repeat = 200;
};

// Median microseconds of `repeat` calls of op() (after a tenth as many untimed), the same on every rank.
template <typename Op>
double median_us(int repeat, Op op) {
  for (int i = 0; i < std::max(2, repeat / 10); ++i) op();
  std::vector<double> us;
  for (int i = 0; i < repeat; ++i) {
    dist::Communicator::world().barrier();
    const auto t0 = std::chrono::steady_clock::now();
    op();
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

void run_bench_comm(const CommArgs& a) {
  dist::Communicator& comm = dist::Communicator::world();
  if (!comm.distributed())
    fail("bench comm measures collectives between ranks: run it as `mpirun -np N minfer bench comm`");
  const int p = comm.size();
  if (comm.rank() == 0) {
    std::printf(
        "%d ranks; median of %d calls; all-reduce bus bandwidth = 2 (N-1)/N x bytes / time, all-to-all = (N-1)/N x "
        "bytes / time\n\n| floats | bytes | all_reduce f32 us | GB/s | blocking MPI_Allreduce us | all_reduce "
        "bf16 us | all_gather us | all_to_all us | GB/s |\n|---|---|---|---|---|---|---|---|---|\n",
        p, a.repeat);
  }
  for (int64_t n : a.floats) {
    std::vector<float> data(static_cast<size_t>(n), 1.0f), gathered(static_cast<size_t>(n * p));
    std::vector<uint16_t> half(static_cast<size_t>(n), 0x3f80);
    const double ar = median_us(a.repeat, [&] { comm.all_reduce_sum(data.data(), n); });
    const double ar16 = median_us(a.repeat, [&] { comm.all_reduce_sum(half.data(), n, dist::CommDtype::kBf16); });
    // The same sum through Open MPI's blocking MPI_Allreduce (its tuned algorithms; no deadline possible): what the
    // deadline-polled non-blocking form costs.
    const double blocking = median_us(a.repeat, [&] {
      MPI_Allreduce(MPI_IN_PLACE, data.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    });
    const int64_t slice = n / p;  // all-gather and all-to-all: each rank's share of the n floats
    const double ag = median_us(a.repeat, [&] { comm.all_gather(data.data(), slice * 4, gathered.data()); });
    std::vector<int> counts(static_cast<size_t>(p), static_cast<int>(slice * 4)), displs(static_cast<size_t>(p));
    for (int r = 0; r < p; ++r) displs[static_cast<size_t>(r)] = static_cast<int>(r * slice * 4);
    const double a2a =
        median_us(a.repeat, [&] { comm.all_to_all_v(data.data(), counts, displs, gathered.data(), counts, displs); });
    if (comm.rank() != 0) continue;
    const double bytes = static_cast<double>(n) * 4, share = static_cast<double>(p - 1) / p;
    std::printf("| %ld | %.0f | %.1f | %.2f | %.1f | %.1f | %.1f | %.1f | %.2f |\n", static_cast<long>(n), bytes, ar,
                2 * share * bytes / ar * 1e-3, blocking, ar16, ag, a2a, share * bytes / a2a * 1e-3);
    std::fflush(stdout);
  }
}

}  // namespace

void add_bench_comm_command(CLI::App& bench) {
  auto args = std::make_shared<CommArgs>();
  CLI::App* cmd = bench.add_subcommand(
      "comm",
      "Collective latency and bandwidth between ranks (run under mpirun -np N): all-reduce, all-gather, "
      "all-to-all at the sizes tensor and expert parallel move");
  cmd->add_option("--floats", args->floats, "Message sizes in f32 elements")->delimiter(',')->capture_default_str();
  cmd->add_option("--repeat", args->repeat, "Timed calls per size")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->callback([args] { run_bench_comm(*args); });
}

}  // namespace minfer::tools
