// STREAM-style memory bandwidth on 256 MiB arrays (well past any cache), single thread and all threads of a
// ThreadPool, to state the roofline that decode GEMV (weight streaming) is measured against.
// read: sum of 64-bit words (bytes read / s). copy: dst = src (STREAM counts bytes read + bytes written; the
// write-allocate read of dst is extra traffic not counted). Compiled for baseline x86-64 (SSE2 loads suffice to
// saturate DRAM from one core).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "base/thread_pool.h"

namespace minfer {
namespace {

constexpr size_t kWords = (size_t{256} << 20) / sizeof(uint64_t);

std::vector<uint64_t>& source() {
  static std::vector<uint64_t> v = [] {
    std::vector<uint64_t> s(kWords);
    for (size_t i = 0; i < kWords; ++i) s[i] = i * 2654435761u;
    return s;
  }();
  return v;
}

void BM_Read(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  ThreadPool pool(threads);
  const uint64_t* src = source().data();
  std::vector<uint64_t> partial(static_cast<size_t>(threads) * 8);
  for (auto _ : state) {
    pool.run([&](int t, int n) {
      const auto [b, e] = split_range(kWords, 4096, t, n);
      uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      for (size_t i = b; i + 4 <= e; i += 4) {
        s0 += src[i];
        s1 += src[i + 1];
        s2 += src[i + 2];
        s3 += src[i + 3];
      }
      partial[static_cast<size_t>(t) * 8] = s0 + s1 + s2 + s3;  // one cache line per thread
    });
    benchmark::DoNotOptimize(partial.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(kWords * 8));
}

void BM_Copy(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  ThreadPool pool(threads);
  const uint64_t* src = source().data();
  std::vector<uint64_t> dst(kWords, 1);
  for (auto _ : state) {
    pool.run([&](int t, int n) {
      const auto [b, e] = split_range(kWords, 4096, t, n);
      std::memcpy(dst.data() + b, src + b, (e - b) * sizeof(uint64_t));
    });
    benchmark::DoNotOptimize(dst.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(2 * kWords * 8));
}

BENCHMARK(BM_Read)->Name("bandwidth/read")->Arg(1)->Arg(2)->UseRealTime()->MinTime(0.5);
BENCHMARK(BM_Copy)->Name("bandwidth/copy")->Arg(1)->Arg(2)->UseRealTime()->MinTime(0.5);

}  // namespace
}  // namespace minfer
