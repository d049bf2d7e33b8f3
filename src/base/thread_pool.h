// A persistent fork-join pool: `run` executes one function on every thread (the caller is thread 0) and
// returns when all are done. Kernels split their own work by thread index, so there is no task queue and
// nothing is allocated per call. `share` is the form for work claimed from a counter: the caller never waits
// for a worker that has not started, so a descheduled worker (busy machine) costs its share, not a time slice.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

namespace minfer {

class ThreadPool {
 public:
  using Job = std::function<void(int thread_index, int num_threads)>;

  // num_threads <= 0 means one per hardware thread.
  explicit ThreadPool(int num_threads = 0);
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  ~ThreadPool();

  int size() const { return num_threads_; }

  // Runs job(i, size()) for every i in [0, size()) concurrently; rethrows the first exception.
  void run(const Job& job);

  // Runs job() on the calling thread and on every worker that becomes free while the caller is still in it;
  // returns when all who joined are done. The job must claim its work from shared state (a counter), so it is
  // correct with any number of participants, one thread joining twice included. Rethrows the first exception.
  using SharedJob = std::function<void()>;
  void share(const SharedJob& job);

  // Splits [0, n) into chunks (multiples of `grain` except the last) claimed by whichever threads join.
  void parallel_for(size_t n, size_t grain, const std::function<void(size_t begin, size_t end)>& body);

 private:
  void worker_loop(int index);
  void run_guarded(int index);
  void run_shared_guarded();
  void join_shared();
  void publish(uint64_t kind);
  void record_error();

  int num_threads_;
  std::vector<std::thread> workers_;
  const Job* job_ = nullptr;
  const SharedJob* shared_job_ = nullptr;
  // Advances by 2 per job; the low bit says which kind (kSharedBit: `share`, else `run`), so a worker reads
  // the job's generation and kind in one load.
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  // `share`: kOpen while the caller is still in the job (workers may join), plus the number of joined workers.
  std::atomic<uint32_t> share_state_{0};
  std::atomic<bool> stop_{false};
  std::exception_ptr error_;
  std::atomic<bool> has_error_{false};
};

// pool->parallel_for, or the whole range on the calling thread when there is no pool (code that runs both at
// load, with the engine's pool, and in tests or tools without one).
inline void parallel_for(ThreadPool* pool, size_t n, size_t grain, const std::function<void(size_t, size_t)>& body) {
  if (pool) {
    pool->parallel_for(n, grain, body);
  } else if (n > 0) {
    body(0, n);
  }
}

// Splits n items into `parts` contiguous ranges aligned to `grain`; returns [begin, end) of range `part`.
inline std::pair<size_t, size_t> split_range(size_t n, size_t grain, int part, int parts) {
  const size_t units = (n + grain - 1) / grain;
  const size_t per = units / static_cast<size_t>(parts);
  const size_t extra = units % static_cast<size_t>(parts);
  const size_t p = static_cast<size_t>(part);
  const size_t begin_unit = p * per + (p < extra ? p : extra);
  const size_t end_unit = begin_unit + per + (p < extra ? 1 : 0);
  const size_t begin = begin_unit * grain < n ? begin_unit * grain : n;
  const size_t end = end_unit * grain < n ? end_unit * grain : n;
  return {begin, end};
}

// Chunk size for work claimed dynamically from a shared counter: about 8 chunks per thread (enough to
// rebalance when a thread stalls, few enough that claiming costs nothing), a multiple of `grain`.
inline size_t dynamic_chunk(size_t n, size_t grain, int threads) {
  const size_t target = n / (static_cast<size_t>(threads) * 8);
  const size_t units = std::max<size_t>(1, (target + grain / 2) / grain);
  return units * grain;
}

// Work claimed from a shared counter in shrinking ("guided") chunks, as OpenMP's schedule(guided): each claim
// takes what is left / threads, rounded down to a multiple of `grain`, at least one grain. The first chunks are
// long, so a thread streams one contiguous run of weights and a kernel's prefetch of its next block stays inside
// its own chunk; the last are single grains, so a thread the OS deschedules leaves little behind. For the GEMM
// column split this measured faster than fixed chunks of n / (8 threads) at every batch size (docs/BENCHMARKS.md,
// "Block-major GEMM for batched decode").
class GuidedChunks {
 public:
  GuidedChunks(size_t n, size_t grain, int threads)
      : n_(n), grain_(grain == 0 ? 1 : grain), threads_(static_cast<size_t>(threads < 1 ? 1 : threads)) {}
  // [begin, end) of the next chunk; begin == end == n once everything is claimed.
  std::pair<size_t, size_t> claim() {
    size_t begin = next_.load(std::memory_order_relaxed);
    while (begin < n_) {
      const size_t size = std::max(grain_, (n_ - begin) / threads_ / grain_ * grain_);
      if (next_.compare_exchange_weak(begin, begin + size, std::memory_order_relaxed)) {
        return {begin, std::min(n_, begin + size)};
      }
    }
    return {n_, n_};
  }

 private:
  size_t n_, grain_, threads_;
  std::atomic<size_t> next_{0};
};

}  // namespace minfer
