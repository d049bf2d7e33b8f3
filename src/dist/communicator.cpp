#include "dist/communicator.h"

#include <mpi.h>
#include <sched.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "base/half.h"

namespace minfer::dist {
namespace {

using Clock = std::chrono::steady_clock;

bool g_initialised = false;
MPI_Op g_bf16_sum = MPI_OP_NULL;

void bf16_sum_op(void* in, void* inout, int* len, MPI_Datatype*) {
  bf16_sum(static_cast<const uint16_t*>(in), static_cast<uint16_t*>(inout), *len);
}

int as_int(int64_t n, const char* what) {
  if (n < 0 || n > INT32_MAX) throw CommError(fmt::format("{}: {} elements do not fit one MPI call", what, n));
  return static_cast<int>(n);
}

// Times one collective into its stats entry.
struct Timed {
  CommStats::Op& op;
  Clock::time_point start = Clock::now();
  Timed(CommStats::Op& o, int64_t bytes) : op(o) {
    ++op.calls;
    op.bytes += bytes;
  }
  ~Timed() { op.seconds += std::chrono::duration<double>(Clock::now() - start).count(); }
};

}  // namespace

void bf16_sum(const uint16_t* in, uint16_t* inout, int64_t n) {
  for (int64_t i = 0; i < n; ++i) inout[i] = f32_to_bf16(bf16_to_f32(in[i]) + bf16_to_f32(inout[i]));
}

Communicator& Communicator::world() {
  static Communicator comm;
  return comm;
}

bool Communicator::under_mpirun() { return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr; }

int Communicator::local_size() {
  const char* n = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  return n ? std::max(1, std::atoi(n)) : 1;
}

void Communicator::init(int* argc, char*** argv) {
  if (g_initialised || !under_mpirun()) return;
  // The engine's step thread makes every MPI call, but not the thread that initialised MPI: SERIALIZED.
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
  g_initialised = true;
  if (provided < MPI_THREAD_SERIALIZED)
    spdlog::warn("MPI gives thread level {} (want SERIALIZED); collectives run from the step thread anyway", provided);
  // Errors come back as return codes (a CommError), not MPI's default abort without a word of ours.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  Communicator& w = world();
  MPI_Comm_rank(MPI_COMM_WORLD, &w.rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &w.size_);
  MPI_Op_create(&bf16_sum_op, /*commute=*/1, &g_bf16_sum);
}

void Communicator::finalize(bool ok) {
  if (!g_initialised) return;
  if (!ok && world().size_ > 1) world().abort_group(1);
  MPI_Op_free(&g_bf16_sum);
  MPI_Finalize();
  g_initialised = false;
}

void Communicator::abort_group(int exit_code) const {
  if (g_initialised) MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);
}

void Communicator::check(int rc, const char* what) const {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw CommError(fmt::format("rank {} of {}: {} failed: {}", rank_, size_, what, std::string(text, len)));
}

// Spins briefly (a healthy peer is microseconds behind), then yields, then sleeps, checking the deadline: the
// waiting rank's cores go back to the others on an oversubscribed machine.
void Communicator::wait(void* request, const char* what, int64_t bytes, bool idle) {
  auto* req = static_cast<MPI_Request*>(request);
  const Clock::time_point start = Clock::now();
  for (int polls = 0;; ++polls) {
    int done = 0;
    check(MPI_Test(req, &done, MPI_STATUS_IGNORE), what);
    if (done) return;
    if (interrupted_.load()) {
      std::lock_guard<std::mutex> lock(reason_mu_);
      throw CommError(fmt::format("rank {} of {}: {} stopped: {}", rank_, size_, what, interrupt_reason_));
    }
    if (polls < 256) continue;
    const Clock::duration waited = Clock::now() - start;
    if (!idle && waited > timeout_) {
      throw CommError(fmt::format(
          "rank {} of {}: {} ({} bytes) waited {:.1f} s for the other ranks (--distributed-timeout): a rank died or "
          "a link dropped",
          rank_, size_, what, bytes, std::chrono::duration<double>(waited).count()));
    }
    if (waited < std::chrono::milliseconds(2))
      sched_yield();
    else
      std::this_thread::sleep_for(idle ? std::chrono::microseconds(500) : std::chrono::microseconds(50));
  }
}

void Communicator::all_reduce_sum(void* data, int64_t n, CommDtype dtype) {
  const int64_t bytes = n * (dtype == CommDtype::kF32 ? 4 : 2);
  if (size_ == 1) return;
  Timed t(stats_.all_reduce, bytes);
  if (dtype == CommDtype::kF32 && bytes >= kScatterGatherBytes)
    return all_reduce_scatter_gather(static_cast<float*>(data), n);
  MPI_Request req;
  if (dtype == CommDtype::kF32)
    check(MPI_Iallreduce(MPI_IN_PLACE, data, as_int(n, "all_reduce"), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req),
          "all_reduce");
  else
    check(MPI_Iallreduce(MPI_IN_PLACE, data, as_int(n, "all_reduce"), MPI_UINT16_T, g_bf16_sum, MPI_COMM_WORLD, &req),
          "all_reduce");
  wait(&req, "all_reduce", bytes, false);
}

// Rank r sums slice r of every rank's buffer (an all-to-all brings them), in rank order, then the sums are
// all-gathered: 2 (N-1)/N of the bytes each way, as a ring all-reduce moves, where libnbc's MPI_Iallreduce is about
// half as fast at these sizes (BENCHMARKS, "Tensor parallel"). The order of the sum is fixed, so every rank gets the
// same bits.
void Communicator::all_reduce_scatter_gather(float* data, int64_t n) {
  const int p = size_;
  std::vector<int>& counts = rs_counts_;
  std::vector<int>& displs = rs_displs_;
  counts.resize(static_cast<size_t>(p));
  displs.resize(static_cast<size_t>(p));
  for (int r = 0; r < p; ++r) {
    const int64_t begin = n * r / p, end = n * (r + 1) / p;
    counts[static_cast<size_t>(r)] = static_cast<int>((end - begin) * 4);
    displs[static_cast<size_t>(r)] = static_cast<int>(begin * 4);
  }
  const int64_t mine = counts[static_cast<size_t>(rank_)] / 4;
  rs_scratch_.resize(static_cast<size_t>(mine * p));
  std::vector<int> recv_counts(static_cast<size_t>(p), static_cast<int>(mine * 4)), recv_displs(static_cast<size_t>(p));
  for (int r = 0; r < p; ++r) recv_displs[static_cast<size_t>(r)] = static_cast<int>(r * mine * 4);
  MPI_Request req;
  check(MPI_Ialltoallv(data, counts.data(), displs.data(), MPI_BYTE, rs_scratch_.data(), recv_counts.data(),
                       recv_displs.data(), MPI_BYTE, MPI_COMM_WORLD, &req),
        "all_reduce");
  wait(&req, "all_reduce", n * 4, false);
  float* out = data + displs[static_cast<size_t>(rank_)] / 4;
  for (int64_t i = 0; i < mine; ++i) {
    float sum = rs_scratch_[static_cast<size_t>(i)];
    for (int r = 1; r < p; ++r) sum += rs_scratch_[static_cast<size_t>(r * mine + i)];
    out[i] = sum;
  }
  check(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_BYTE, data, counts.data(), displs.data(), MPI_BYTE, MPI_COMM_WORLD, &req),
        "all_reduce");
  wait(&req, "all_reduce", n * 4, false);
}

void Communicator::all_gather(const void* send, int64_t bytes, void* recv) {
  if (size_ == 1) {
    std::memcpy(recv, send, static_cast<size_t>(bytes));
    return;
  }
  Timed t(stats_.all_gather, bytes);
  MPI_Request req;
  const int n = as_int(bytes, "all_gather");
  check(MPI_Iallgather(send, n, MPI_BYTE, recv, n, MPI_BYTE, MPI_COMM_WORLD, &req), "all_gather");
  wait(&req, "all_gather", bytes, false);
}

void Communicator::all_gather_v(const void* send, int64_t bytes, void* recv, std::span<const int> counts,
                                std::span<const int> displacements) {
  if (size_ == 1) {
    std::memcpy(static_cast<char*>(recv) + displacements[0], send, static_cast<size_t>(bytes));
    return;
  }
  Timed t(stats_.all_gather, bytes);
  MPI_Request req;
  check(MPI_Iallgatherv(send, as_int(bytes, "all_gather"), MPI_BYTE, recv, counts.data(), displacements.data(),
                        MPI_BYTE, MPI_COMM_WORLD, &req),
        "all_gather");
  wait(&req, "all_gather", bytes, false);
}

void Communicator::gather_to_root(const void* send, int64_t bytes, void* recv) {
  if (size_ == 1) {
    std::memcpy(recv, send, static_cast<size_t>(bytes));
    return;
  }
  Timed t(stats_.gather, bytes);
  MPI_Request req;
  const int n = as_int(bytes, "gather");
  check(MPI_Igather(send, n, MPI_BYTE, recv, n, MPI_BYTE, 0, MPI_COMM_WORLD, &req), "gather");
  wait(&req, "gather", bytes, false);
}

void Communicator::all_to_all_v(const void* send, std::span<const int> send_counts, std::span<const int> send_displs,
                                void* recv, std::span<const int> recv_counts, std::span<const int> recv_displs) {
  int64_t bytes = 0;
  for (int c : send_counts) bytes += c;
  if (size_ == 1) {
    std::memcpy(static_cast<char*>(recv) + recv_displs[0], static_cast<const char*>(send) + send_displs[0],
                static_cast<size_t>(send_counts[0]));
    return;
  }
  Timed t(stats_.all_to_all, bytes);
  MPI_Request req;
  check(MPI_Ialltoallv(send, send_counts.data(), send_displs.data(), MPI_BYTE, recv, recv_counts.data(),
                       recv_displs.data(), MPI_BYTE, MPI_COMM_WORLD, &req),
        "all_to_all");
  wait(&req, "all_to_all", bytes, false);
}

void Communicator::all_to_all_counts(std::span<const int> send, std::span<int> recv) {
  if (size_ == 1) {
    recv[0] = send[0];
    return;
  }
  Timed t(stats_.all_to_all, static_cast<int64_t>(send.size() * sizeof(int)));
  MPI_Request req;
  check(MPI_Ialltoall(send.data(), 1, MPI_INT, recv.data(), 1, MPI_INT, MPI_COMM_WORLD, &req), "all_to_all");
  wait(&req, "all_to_all", static_cast<int64_t>(send.size() * sizeof(int)), false);
}

void Communicator::broadcast(void* data, int64_t bytes, bool idle) {
  if (size_ == 1) return;
  MPI_Request req;
  check(MPI_Ibcast(data, as_int(bytes, "broadcast"), MPI_BYTE, 0, MPI_COMM_WORLD, &req), "broadcast");
  if (idle) return wait(&req, "broadcast", bytes, idle);  // a worker's wait for work is not communication time
  Timed t(stats_.broadcast, rank_ == 0 ? bytes : 0);
  wait(&req, "broadcast", bytes, idle);
}

void Communicator::interrupt(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(reason_mu_);
    interrupt_reason_ = reason;
  }
  interrupted_.store(true);
}

void Communicator::barrier(bool idle) {
  if (size_ == 1) return;
  MPI_Request req;
  check(MPI_Ibarrier(MPI_COMM_WORLD, &req), "barrier");
  wait(&req, "barrier", 0, idle);
}

}  // namespace minfer::dist
