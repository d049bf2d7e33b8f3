#include "base/thread_pool.h"

#include <immintrin.h>

#include <algorithm>

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
  // Workers usually finish within microseconds of the caller: spin briefly, then sleep on the counter so a
  // descheduled worker (busy machine) does not have the caller burning the core it needs.
  for (int spins = 0; spins < 4096 && pending_.load(std::memory_order_acquire) != 0; ++spins) _mm_pause();
  for (int left = pending_.load(std::memory_order_acquire); left != 0; left = pending_.load(std::memory_order_acquire)) {
    pending_.wait(left, std::memory_order_acquire);
  }
  job_ = nullptr;
  if (has_error_.load(std::memory_order_acquire)) std::rethrow_exception(error_);
}

void ThreadPool::parallel_for(size_t n, size_t grain, const std::function<void(size_t, size_t)>& body) {
  if (grain == 0) grain = 1;
  // Chunks are claimed from a shared counter rather than fixed per thread, so when the OS deschedules one
  // thread (a shared or oversubscribed machine) the others take over its share instead of waiting for it.
  const size_t chunk = dynamic_chunk(n, grain, num_threads_);
  std::atomic<size_t> next{0};
  run([&](int, int) {
    for (size_t begin = next.fetch_add(chunk); begin < n; begin = next.fetch_add(chunk)) {
      body(begin, std::min(n, begin + chunk));
    }
  });
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;  // the generation when the pool was built: a run may start before this thread does
  for (;;) {
    // Spin briefly for back-to-back kernel launches, then sleep on the generation counter.
    uint64_t now = seen;
    for (int spins = 0; spins < 2000; ++spins) {
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
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

}  // namespace minfer
