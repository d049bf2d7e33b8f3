// The collectives of dist/communicator.h and the expert-parallel MoE (dist/expert_parallel.h) across real MPI
// processes: ctest runs this binary under `mpirun -np 2` and `-np 3` (tests/CMakeLists.txt). Every rank checks its
// own results against a reference it computes alone: sums, gathers and exchanges of awkward sizes; the bf16 sum;
// the expert-parallel MoE against the one-process kernel on the same random weights (uneven expert blocks included);
// and a collective that a peer joins late failing with CommError at the deadline instead of hanging.
#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <thread>

#include "base/half.h"
#include "dist/communicator.h"
#include "dist/expert_parallel.h"
#include "kernels/moe.h"
#include "kernels_test_util.h"

namespace minfer::dist {
namespace {

using kernels::testing::make_tensor;
using kernels::testing::random_floats;

Communicator& comm() { return Communicator::world(); }

// Rank r's value i: distinct per rank and element, exact in f32.
float value(int rank, int64_t i) { return static_cast<float>(rank * 1000) + 0.5f * static_cast<float>(i % 977); }

TEST(Collectives, RunsUnderMpirun) {
  ASSERT_TRUE(Communicator::under_mpirun()) << "run this test with mpirun -np N (ctest does)";
  ASSERT_GE(comm().size(), 2);
}

TEST(Collectives, AllReduceSumsF32) {
  for (int64_t n : {1, 7, 1037, 65536 + 3}) {
    std::vector<float> data(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) data[static_cast<size_t>(i)] = value(comm().rank(), i);
    comm().all_reduce_sum(data.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      float want = 0;
      for (int r = 0; r < comm().size(); ++r) want += value(r, i);
      ASSERT_EQ(data[static_cast<size_t>(i)], want) << "n " << n << " element " << i;
    }
  }
}

TEST(Collectives, AllReduceSumsBf16WithinItsRounding) {
  const int64_t n = 999;
  std::mt19937 rng(static_cast<unsigned>(7 + comm().rank()));
  std::vector<float> mine = random_floats(rng, static_cast<size_t>(n));
  std::vector<uint16_t> bits(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) bits[static_cast<size_t>(i)] = f32_to_bf16(mine[static_cast<size_t>(i)]);
  comm().all_reduce_sum(bits.data(), n, CommDtype::kBf16);
  for (int64_t i = 0; i < n; ++i) {
    double want = 0, scale = 0;
    for (int r = 0; r < comm().size(); ++r) {
      std::mt19937 other(static_cast<unsigned>(7 + r));
      const float v = bf16_to_f32(f32_to_bf16(random_floats(other, static_cast<size_t>(n))[static_cast<size_t>(i)]));
      want += v;
      scale += std::fabs(v);
    }
    // Each of the size - 1 additions rounds to bf16 (8 bits of mantissa).
    ASSERT_NEAR(bf16_to_f32(bits[static_cast<size_t>(i)]), want, scale * comm().size() / 256.0) << i;
  }
}

TEST(Collectives, GathersAndExchangesBytes) {
  const int p = comm().size(), me = comm().rank();
  const int64_t n = 13;
  std::vector<float> mine(n);
  for (int64_t i = 0; i < n; ++i) mine[static_cast<size_t>(i)] = value(me, i);
  std::vector<float> all(static_cast<size_t>(p * n), -1.0f);
  comm().all_gather(mine.data(), n * 4, all.data());
  for (int r = 0; r < p; ++r)
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(all[static_cast<size_t>(r * n + i)], value(r, i));

  // Rank r contributes r + 1 floats.
  std::vector<int> counts(static_cast<size_t>(p)), displs(static_cast<size_t>(p));
  for (int r = 0, at = 0; r < p; at += counts[static_cast<size_t>(r)], ++r)
    counts[static_cast<size_t>(r)] = (r + 1) * 4, displs[static_cast<size_t>(r)] = at;
  std::vector<float> varied(static_cast<size_t>(p * (p + 1) / 2), -1.0f);
  comm().all_gather_v(mine.data(), (me + 1) * 4, varied.data(), counts, displs);
  for (int r = 0, at = 0; r < p; at += r + 1, ++r)
    for (int i = 0; i <= r; ++i) ASSERT_EQ(varied[static_cast<size_t>(at + i)], value(r, i));

  std::vector<float> root(static_cast<size_t>(p * n), -1.0f);
  comm().gather_to_root(mine.data(), n * 4, root.data());
  if (me == 0) {
    EXPECT_EQ(root, all);
  }

  // All-to-all: rank me sends (me + d) % 3 floats to rank d, valued me * 100 + d.
  auto amount = [](int from, int to) { return (from + to) % 3; };
  std::vector<int> send_counts(static_cast<size_t>(p)), send_displs(static_cast<size_t>(p)),
      recv_items(static_cast<size_t>(p)), recv_counts(static_cast<size_t>(p)), recv_displs(static_cast<size_t>(p));
  std::vector<float> send;
  std::vector<int> send_items(static_cast<size_t>(p));
  for (int d = 0; d < p; ++d) {
    send_items[static_cast<size_t>(d)] = amount(me, d);
    send_displs[static_cast<size_t>(d)] = static_cast<int>(send.size() * 4);
    send_counts[static_cast<size_t>(d)] = amount(me, d) * 4;
    for (int i = 0; i < amount(me, d); ++i) send.push_back(static_cast<float>(me * 100 + d));
  }
  comm().all_to_all_counts(send_items, recv_items);
  int at = 0;
  for (int s = 0; s < p; ++s) {
    ASSERT_EQ(recv_items[static_cast<size_t>(s)], amount(s, me));
    recv_counts[static_cast<size_t>(s)] = recv_items[static_cast<size_t>(s)] * 4;
    recv_displs[static_cast<size_t>(s)] = at;
    at += recv_counts[static_cast<size_t>(s)];
  }
  std::vector<float> recv(static_cast<size_t>(at / 4) + 1, -1.0f);
  comm().all_to_all_v(send.data(), send_counts, send_displs, recv.data(), recv_counts, recv_displs);
  for (int s = 0, i = 0; s < p; ++s)
    for (int k = 0; k < amount(s, me); ++k, ++i)
      ASSERT_EQ(recv[static_cast<size_t>(i)], static_cast<float>(s * 100 + me));

  int64_t word = me == 0 ? 424242 : 0;
  comm().broadcast(&word, sizeof(word));
  EXPECT_EQ(word, 424242);
  EXPECT_GT(comm().stats().all_reduce.calls, 0);
}

// The expert-parallel MoE equals the one-process kernel on the same weights (every rank draws them from one seed).
TEST(ExpertParallel, EqualsOneProcessMoe) {
  for (const auto& [experts, top_k, rows] : {std::tuple{8, 2, 1}, {8, 2, 7}, {6, 3, 33}, {5, 1, 2}}) {
    const int64_t hidden = 24, ff = 20;
    std::mt19937 rng(1234);
    const Tensor router =
        make_tensor(random_floats(rng, static_cast<size_t>(experts * hidden)), {experts, hidden}, DType::F32);
    std::vector<Tensor> mats;
    for (int64_t e = 0; e < experts; ++e) {
      mats.push_back(
          make_tensor(random_floats(rng, static_cast<size_t>(ff * hidden), -0.3f, 0.3f), {ff, hidden}, DType::F32));
      mats.push_back(
          make_tensor(random_floats(rng, static_cast<size_t>(ff * hidden), -0.3f, 0.3f), {ff, hidden}, DType::F32));
      mats.push_back(
          make_tensor(random_floats(rng, static_cast<size_t>(ff * hidden), -0.3f, 0.3f), {hidden, ff}, DType::F32));
    }
    const std::vector<float> x = random_floats(rng, static_cast<size_t>(rows * hidden));
    std::vector<const Tensor*> all;
    for (const Tensor& t : mats) all.push_back(&t);
    ThreadPool pool(1);
    kernels::MoeScratch ms;
    std::vector<float> want(static_cast<size_t>(rows * hidden));
    kernels::moe_ffn(x.data(), rows, hidden, kernels::MoeWeights{&router, all, top_k, true, 0}, want.data(), pool, ms);

    const ExpertRange mine = expert_range(experts, comm().rank(), comm().size());
    std::vector<const Tensor*> local(all.begin() + 3 * mine.begin, all.begin() + 3 * mine.end);
    ExpertParallelScratch eps;
    std::vector<float> got(static_cast<size_t>(rows * hidden), -7.0f);
    moe_ffn_expert_parallel(x.data(), rows, hidden, kernels::MoeWeights{&router, local, top_k, true, 0}, mine.begin,
                            got.data(), pool, ms, eps, comm());
    kernels::testing::expect_close(got, want, 1e-5f, 1e-6f,
                                   "experts " + std::to_string(experts) + " rows " + std::to_string(rows));
  }
}

TEST(Collectives, LatePeerFailsAtTheDeadlineNotAHang) {
  // Rank 0's buffer outlives the abandoned collective (it completes in the background once the peers join).
  static std::vector<float> data(64, 1.0f);
  comm().set_timeout(std::chrono::milliseconds(300));
  if (comm().rank() != 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    comm().all_reduce_sum(data.data(), 64);
  } else {
    const auto t0 = std::chrono::steady_clock::now();
    try {
      comm().all_reduce_sum(data.data(), 64);
      ADD_FAILURE() << "the all-reduce completed without the late ranks";
    } catch (const CommError& e) {
      EXPECT_NE(std::string(e.what()).find("waited"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("a rank died or a link dropped"), std::string::npos) << e.what();
      EXPECT_EQ(e.code(), ErrorCode::kUnavailable);
    }
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(1400));
  }
  comm().set_timeout(std::chrono::milliseconds(60000));
  comm().barrier();  // the late ranks' all-reduce matches rank 0's pending one; then everyone meets here
}

}  // namespace
}  // namespace minfer::dist

int main(int argc, char** argv) {
  minfer::dist::Communicator::init(&argc, &argv);
  testing::InitGoogleTest(&argc, argv);
  const int failed = RUN_ALL_TESTS();
  minfer::dist::Communicator::finalize(true);
  return failed;
}
