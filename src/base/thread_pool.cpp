#include "base/thread_pool.h"

#include <immintrin.h>

namespace minfer {

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = static_cast<int>(std::thread::hardware_concurrency());
  num_threads_ = num_threads > 0 ? num_threads : 1;
  workers_.reserve(static_cast<size_t>(num_threads_ - 1));
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_guarded(int index) {
  try {
    (*job_)(index, num_threads_);
  } catch (...) {
    bool expected = false;
    if (has_error_.compare_exchange_strong(expected, true)) error_ = std::current_exception();
  }
}

void ThreadPool::run(const Job& job) {
  if (num_threads_ == 1) {
    job(0, 1);
    return;
  }
  job_ = &job;
  has_error_.store(false, std::memory_order_relaxed);
  error_ = nullptr;
  pending_.store(num_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  run_guarded(0);
  // Workers finish within microseconds for kernel-sized jobs: spin, then yield.
  for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins < 4096) {
      _mm_pause();
    } else {
      std::this_thread::yield();
    }
  }
  job_ = nullptr;
  if (has_error_.load(std::memory_order_acquire)) std::rethrow_exception(error_);
}

void ThreadPool::parallel_for(size_t n, size_t grain, const std::function<void(size_t, size_t)>& body) {
  if (grain == 0) grain = 1;
  run([&](int index, int count) {
    auto [begin, end] = split_range(n, grain, index, count);
    if (begin < end) body(begin, end);
  });
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;  // the generation when the pool was built: a run may start before this thread does
  for (;;) {
    // Spin briefly for back-to-back kernel launches, then sleep on the generation counter.
    uint64_t now = seen;
    for (int spins = 0; spins < 20000; ++spins) {
      now = generation_.load(std::memory_order_acquire);
      if (now != seen) break;
      _mm_pause();
    }
    if (now == seen) {
      generation_.wait(seen, std::memory_order_acquire);
      now = generation_.load(std::memory_order_acquire);
    }
    seen = now;
    if (stop_.load(std::memory_order_acquire)) return;
    run_guarded(index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace minfer
