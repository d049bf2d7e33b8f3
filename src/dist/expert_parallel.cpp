#include "dist/expert_parallel.h"

#include <algorithm>

#include "base/error.h"
#include "kernels/kernels.h"

namespace minfer::dist {
namespace {

template <typename T>
T* grow(std::vector<T>& v, int64_t n) {
  if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
  return v.data();
}

// Byte counts and displacements of `items` per rank, each item `item_bytes` long.
void byte_layout(const std::vector<int>& items, int64_t item_bytes, std::vector<int>& counts,
                 std::vector<int>& displs) {
  counts.resize(items.size());
  displs.resize(items.size());
  int64_t at = 0;
  for (size_t r = 0; r < items.size(); ++r) {
    counts[r] = static_cast<int>(items[r] * item_bytes);
    displs[r] = static_cast<int>(at);
    at += counts[r];
  }
}

// Runs this rank's experts over the items it received (grouped by expert: each expert's weights read once) into
// s.recv_y, in the order received.
void run_local_experts(const kernels::MoeWeights& moe, int64_t expert_begin, int64_t local_experts, int64_t items,
                       int64_t hidden, ThreadPool& pool, kernels::MoeScratch& ms, ExpertParallelScratch& s) {
  std::vector<int64_t> offsets(static_cast<size_t>(local_experts + 1), 0);
  for (int64_t i = 0; i < items; ++i) {
    const int64_t e = s.recv_expert[static_cast<size_t>(i)] - expert_begin;
    MINFER_CHECK(e >= 0 && e < local_experts, "expert parallel: received expert {} outside this rank's [{}, {})",
                 e + expert_begin, expert_begin, expert_begin + local_experts);
    ++offsets[static_cast<size_t>(e + 1)];
  }
  for (int64_t e = 0; e < local_experts; ++e) offsets[static_cast<size_t>(e + 1)] += offsets[static_cast<size_t>(e)];
  int32_t* by_expert = grow(s.by_expert, items);
  std::vector<int64_t> next(offsets.begin(), offsets.end() - 1);
  for (int64_t i = 0; i < items; ++i)
    by_expert[next[static_cast<size_t>(s.recv_expert[static_cast<size_t>(i)] - expert_begin)]++] =
        static_cast<int32_t>(i);
  float* y = grow(s.recv_y, items * hidden);
  for (int64_t e = 0; e < local_experts; ++e) {
    const int64_t begin = offsets[static_cast<size_t>(e)], n = offsets[static_cast<size_t>(e + 1)] - begin;
    if (n == 0) continue;
    float* xe = grow(s.xe, n * hidden);
    for (int64_t i = 0; i < n; ++i) {
      const float* src = s.recv_x.data() + by_expert[begin + i] * hidden;
      std::copy(src, src + hidden, xe + i * hidden);
    }
    float* ye = grow(s.ye, n * hidden);
    kernels::moe_expert_ffn(moe, e, xe, n, hidden, ye, pool, ms);
    for (int64_t i = 0; i < n; ++i)
      std::copy(ye + i * hidden, ye + (i + 1) * hidden, y + by_expert[begin + i] * hidden);
  }
}

}  // namespace

namespace {

// Experts per rank: the same ceil(experts / ranks) for every rank's block, the last ones short.
int64_t experts_per_rank(int64_t experts, int ranks) { return (experts + ranks - 1) / ranks; }

}  // namespace

ExpertRange expert_range(int64_t experts, int rank, int ranks) {
  const int64_t per = experts_per_rank(experts, ranks);
  return {std::min(experts, rank * per), std::min(experts, (rank + 1) * per)};
}

int expert_owner(int64_t expert, int64_t experts, int ranks) {
  return static_cast<int>(expert / experts_per_rank(experts, ranks));
}

void moe_ffn_expert_parallel(const float* x, int64_t rows, int64_t hidden, const kernels::MoeWeights& moe,
                             int64_t expert_begin, float* out, ThreadPool& pool, kernels::MoeScratch& ms,
                             ExpertParallelScratch& s, Communicator& comm) {
  const int ranks = comm.size(), me = comm.rank();
  const int64_t experts = moe.router->dim(0), k = moe.top_k;
  const int64_t local_experts = static_cast<int64_t>(moe.experts.size()) / (moe.gate_up_block > 0 ? 2 : 3);
  const int64_t row_bytes = hidden * static_cast<int64_t>(sizeof(float));
  // This rank's rows, and its routing of them.
  const int64_t r0 = rows * me / ranks, n = rows * (me + 1) / ranks - r0;
  float* logits = grow(ms.logits, n * experts);
  if (n > 0)
    kernels::gemm(x + r0 * hidden, n, hidden, *moe.router, moe.router_bias ? moe.router_bias->as<float>() : nullptr,
                  logits, pool);
  int32_t* choice = grow(ms.choice, n * k);
  float* prob = grow(ms.prob, n * k);
  kernels::moe_route(logits, n, experts, moe.routing(), choice, prob);

  // Dispatch: the (row, slot) items grouped by the rank holding their expert.
  s.send_items.assign(static_cast<size_t>(ranks), 0);
  for (int64_t i = 0; i < n * k; ++i) ++s.send_items[static_cast<size_t>(expert_owner(choice[i], experts, ranks))];
  std::vector<int> next(static_cast<size_t>(ranks), 0);
  for (int r = 1; r < ranks; ++r) next[static_cast<size_t>(r)] = next[r - 1] + s.send_items[static_cast<size_t>(r - 1)];
  int32_t* slot_of_item = grow(s.slot_of_item, n * k);
  int32_t* send_expert = grow(s.send_expert, n * k);
  float* send_x = grow(s.send_x, n * k * hidden);
  for (int64_t i = 0; i < n * k; ++i) {
    const int item = next[static_cast<size_t>(expert_owner(choice[i], experts, ranks))]++;
    slot_of_item[item] = static_cast<int32_t>(i);
    send_expert[item] = choice[i];
    std::copy(x + (r0 + i / k) * hidden, x + (r0 + i / k + 1) * hidden, send_x + item * hidden);
  }
  s.recv_items.assign(static_cast<size_t>(ranks), 0);
  comm.all_to_all_counts(s.send_items, s.recv_items);
  int64_t received = 0;
  for (int c : s.recv_items) received += c;
  byte_layout(s.send_items, sizeof(int32_t), s.send_counts, s.send_displs);
  byte_layout(s.recv_items, sizeof(int32_t), s.recv_counts, s.recv_displs);
  comm.all_to_all_v(send_expert, s.send_counts, s.send_displs, grow(s.recv_expert, received), s.recv_counts,
                    s.recv_displs);
  byte_layout(s.send_items, row_bytes, s.send_counts, s.send_displs);
  byte_layout(s.recv_items, row_bytes, s.recv_counts, s.recv_displs);
  comm.all_to_all_v(send_x, s.send_counts, s.send_displs, grow(s.recv_x, received * hidden), s.recv_counts,
                    s.recv_displs);

  run_local_experts(moe, expert_begin, local_experts, received, hidden, pool, ms, s);

  // Combine: the results go back the way they came, then each of this rank's rows sums its experts in order.
  float* back = grow(s.back_y, n * k * hidden);
  comm.all_to_all_v(s.recv_y.data(), s.recv_counts, s.recv_displs, back, s.send_counts, s.send_displs);
  float* slot_out = grow(s.slot_out, n * k * hidden);
  for (int64_t item = 0; item < n * k; ++item)
    std::copy(back + item * hidden, back + (item + 1) * hidden, slot_out + slot_of_item[item] * hidden);
  float* local = grow(s.local_out, std::max<int64_t>(1, n) * hidden);
  kernels::moe_combine(n, k, hidden, choice, prob, slot_out, local, pool);

  s.gather_counts.resize(static_cast<size_t>(ranks));
  s.gather_displs.resize(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    const int64_t first = rows * r / ranks, count = rows * (r + 1) / ranks - first;
    s.gather_counts[static_cast<size_t>(r)] = static_cast<int>(count * row_bytes);
    s.gather_displs[static_cast<size_t>(r)] = static_cast<int>(first * row_bytes);
  }
  comm.all_gather_v(local, n * row_bytes, out, s.gather_counts, s.gather_displs);
}

}  // namespace minfer::dist
