// The processes of a tensor- or expert-parallel group and the collectives the executor runs between them, on Open
// MPI. Every collective is started non-blocking and then polled against a deadline, so a rank that died or a link
// that dropped surfaces as a CommError naming the operation and the wait (never a hang); the caller then stops the
// group (abort_group) and, on rank 0, answers 503.
//
// One process without mpirun is a group of one: every collective is then a copy or nothing, and MPI is never
// initialised.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "base/error.h"

namespace minfer::dist {

// A collective did not complete within the group's timeout, or MPI reported an error: the group is broken.
class CommError : public Error {
 public:
  explicit CommError(const std::string& message) : Error(message, ErrorCode::kUnavailable) {}
};

// Element type of a reduced buffer: f32, or bf16 (summed in f32, rounded to nearest even), half the bytes.
enum class CommDtype : uint8_t { kF32, kBf16 };

// What the group has sent, per collective kind (for BENCHMARKS and `minfer bench --tensor-parallel-size`).
struct CommStats {
  struct Op {
    int64_t calls = 0;
    int64_t bytes = 0;   // payload bytes this rank contributed (its send buffer), summed over calls
    double seconds = 0;  // wall time from start to completion, summed over calls
  };
  Op all_reduce, all_gather, gather, all_to_all, broadcast;
};

class Communicator {
 public:
  // The group mpirun started (MPI_COMM_WORLD), initialised by init(); a group of one otherwise.
  static Communicator& world();
  // Initialises MPI when this process was started by mpirun (Open MPI's OMPI_COMM_WORLD_SIZE is set); a no-op
  // otherwise. Call once, from main, before any other thread starts.
  static void init(int* argc, char*** argv);
  // Whether mpirun started this process (init() initialised MPI).
  static bool under_mpirun();
  // How many ranks of the group run on this machine (1 without mpirun).
  static int local_size();
  // Ends MPI at exit: MPI_Finalize when `ok` (every rank reaches it), else abort_group (the others may be waiting).
  static void finalize(bool ok);

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool distributed() const { return size_ > 1; }

  // How long a collective may wait for the other ranks before CommError. Steps run in lockstep, so a healthy wait
  // is the imbalance between ranks: the default (60 s) is far above it.
  void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  // data[n] <- the sum over ranks of data[n] (in place). bf16 data is uint16 bits.
  void all_reduce_sum(void* data, int64_t n, CommDtype dtype = CommDtype::kF32);
  // recv[size * bytes] <- every rank's send[bytes], in rank order.
  void all_gather(const void* send, int64_t bytes, void* recv);
  // recv <- rank r's send[counts[r] bytes] at displacements[r], on every rank.
  void all_gather_v(const void* send, int64_t bytes, void* recv, std::span<const int> counts,
                    std::span<const int> displacements);
  // On rank 0: recv[size * bytes] <- every rank's send[bytes], in rank order (recv unused elsewhere).
  void gather_to_root(const void* send, int64_t bytes, void* recv);
  // Personalised exchange: this rank sends send_counts[r] bytes from send + send_displs[r] to rank r and receives
  // recv_counts[r] bytes at recv + recv_displs[r] from it.
  void all_to_all_v(const void* send, std::span<const int> send_counts, std::span<const int> send_displs, void* recv,
                    std::span<const int> recv_counts, std::span<const int> recv_displs);
  // Exchanges one int per pair of ranks: recv[r] <- what rank r put in send[this rank].
  void all_to_all_counts(std::span<const int> send, std::span<int> recv);
  // data[bytes] <- rank 0's data[bytes]. idle = true: this rank waits for work with no deadline (a worker between
  // steps; rank 0 may be idle for hours).
  void broadcast(void* data, int64_t bytes, bool idle = false);

  // Makes every wait of this rank throw CommError(reason) from now on (thread-safe: the server's signal handler
  // calls it while the step thread waits).
  void interrupt(const std::string& reason);
  bool interrupted() const { return interrupted_.load(); }

  // Waits until every rank reaches it. idle = true: no deadline (ranks loading a model at start).
  void barrier(bool idle = false);

  const CommStats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }

  // Ends every rank of the group with `exit_code` (MPI_Abort; mpirun exits with it). Never returns.
  [[noreturn]] void abort_group(int exit_code) const;

 private:
  Communicator() = default;
  // Polls `request` (an MPI_Request) until it completes; throws CommError past the timeout unless idle.
  void wait(void* request, const char* what, int64_t bytes, bool idle);
  void check(int rc, const char* what) const;
  // An f32 all-reduce from kScatterGatherBytes on: a reduce-scatter (all-to-all, then the sum) and an all-gather.
  static constexpr int64_t kScatterGatherBytes = 64 << 10;
  void all_reduce_scatter_gather(float* data, int64_t n);

  int rank_ = 0;
  int size_ = 1;
  std::chrono::milliseconds timeout_{60000};
  CommStats stats_;
  std::vector<int> rs_counts_, rs_displs_;
  std::vector<float> rs_scratch_;
  std::atomic<bool> interrupted_{false};
  std::mutex reason_mu_;
  std::string interrupt_reason_;
};

// bf16 sum of two buffers of uint16 bits (the MPI reduction of CommDtype::kBf16; exposed for tests).
void bf16_sum(const uint16_t* in, uint16_t* inout, int64_t n);

}  // namespace minfer::dist
