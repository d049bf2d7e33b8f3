#include "base/thread_pool.h"

#include <immintrin.h>

#include <algorithm>

namespace minfer {
namespace {

constexpr uint64_t kSharedBit = 1;    // low bit of the generation: the job is a `share` job
constexpr uint32_t kOpen = 1u << 31;  // share_state_: the caller is still in the job
constexpr uint32_t kJoinedMask = kOpen - 1;
// Pauses a worker spins for the next job before sleeping, and the caller for its helpers before sleeping:
// back-to-back kernel launches find the workers awake, an idle or oversubscribed pool does not burn cores.
constexpr int kWorkerSpins = 2000;
constexpr int kCallerSpins = 4096;

}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = static_cast<int>(std::thread::hardware_concurrency());
  num_threads_ = num_threads > 0 ? num_threads : 1;
  workers_.reserve(static_cast<size_t>(num_threads_ - 1));
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(2, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::record_error() {
  bool expected = false;
  if (has_error_.compare_exchange_strong(expected, true)) error_ = std::current_exception();
}

void ThreadPool::run_guarded(int index) {
  try {
    (*job_)(index, num_threads_);
  } catch (...) {
    record_error();
  }
}

void ThreadPool::run_shared_guarded() {
  try {
    (*shared_job_)();
  } catch (...) {
    record_error();
  }
}

void ThreadPool::publish(uint64_t kind) {
  const uint64_t g = generation_.load(std::memory_order_relaxed);
  generation_.store(((g | kSharedBit) + 1) | kind, std::memory_order_release);  // next even value, plus the kind
  generation_.notify_all();
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
  publish(0);
  run_guarded(0);
  // Workers usually finish within microseconds of the caller: spin briefly, then sleep on the counter so a
  // descheduled worker (busy machine) does not have the caller burning the core it needs.
  for (int spins = 0; spins < kCallerSpins && pending_.load(std::memory_order_acquire) != 0; ++spins) _mm_pause();
  for (int left = pending_.load(std::memory_order_acquire); left != 0;
       left = pending_.load(std::memory_order_acquire)) {
    pending_.wait(left, std::memory_order_acquire);
  }
  job_ = nullptr;
  if (has_error_.load(std::memory_order_acquire)) std::rethrow_exception(error_);
}

void ThreadPool::share(const SharedJob& job) {
  if (num_threads_ == 1) {
    job();
    return;
  }
  shared_job_ = &job;
  has_error_.store(false, std::memory_order_relaxed);
  error_ = nullptr;
  // fetch_or, not store: a late worker may be between its join attempt on a closed job and its undo.
  share_state_.fetch_or(kOpen, std::memory_order_acq_rel);
  publish(kSharedBit);
  run_shared_guarded();
  // The work is all claimed now: close the job so no more workers join, then wait for those who did.
  uint32_t state = share_state_.fetch_and(~kOpen, std::memory_order_acq_rel) & ~kOpen;
  for (int spins = 0; spins < kCallerSpins && (state & kJoinedMask) != 0; ++spins) {
    _mm_pause();
    state = share_state_.load(std::memory_order_acquire);
  }
  while ((state & kJoinedMask) != 0) {
    share_state_.wait(state, std::memory_order_acquire);
    state = share_state_.load(std::memory_order_acquire);
  }
  shared_job_ = nullptr;
  if (has_error_.load(std::memory_order_acquire)) std::rethrow_exception(error_);
}

void ThreadPool::join_shared() {
  // Joining a closed job (the caller finished it, or moved on to a `run`) is undone without touching the job.
  if (share_state_.fetch_add(1, std::memory_order_acq_rel) & kOpen) run_shared_guarded();
  if (share_state_.fetch_sub(1, std::memory_order_acq_rel) == 1) share_state_.notify_all();  // closed, last out
}

void ThreadPool::parallel_for(size_t n, size_t grain, const std::function<void(size_t, size_t)>& body) {
  if (grain == 0) grain = 1;
  // Chunks are claimed from a shared counter rather than fixed per thread, so when the OS deschedules one
  // thread (a shared or oversubscribed machine) the others take over its share instead of waiting for it.
  struct Loop {
    const std::function<void(size_t, size_t)>& body;
    size_t n, chunk;
    std::atomic<size_t> next{0};
  } loop{body, n, dynamic_chunk(n, grain, num_threads_)};
  if (n <= loop.chunk) {  // one chunk: nothing to share
    if (n > 0) body(0, n);
    return;
  }
  share([&loop] {  // one captured reference: the std::function does not allocate
    for (size_t begin = loop.next.fetch_add(loop.chunk); begin < loop.n; begin = loop.next.fetch_add(loop.chunk)) {
      loop.body(begin, std::min(loop.n, begin + loop.chunk));
    }
  });
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;  // the generation when the pool was built: a run may start before this thread does
  for (;;) {
    // Spin briefly for back-to-back kernel launches, then sleep on the generation counter.
    uint64_t now = seen;
    for (int spins = 0; spins < kWorkerSpins; ++spins) {
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
    if (now & kSharedBit) {
      join_shared();
      continue;
    }
    run_guarded(index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

}  // namespace minfer
