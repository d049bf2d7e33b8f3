// Expert parallel (MindIE's all2all, vLLM's --enable-expert-parallel): each rank holds a block of a MoE layer's
// experts whole. Every rank has the layer's input rows (attention is tensor-parallel before it); rank r routes its
// own slice of them, sends each (row, chosen expert) to the rank holding the expert (all-to-all), runs its experts
// over what it received as grouped GEMMs, sends the results back (all-to-all), combines its rows as the
// single-process kernel does, and the slices are gathered so every rank has every row again (all-gather).
#pragma once

#include <cstdint>
#include <vector>

#include "base/thread_pool.h"
#include "dist/communicator.h"
#include "kernels/moe.h"

namespace minfer::dist {

// The block of experts rank `rank` of `ranks` holds: [begin, end) of `experts`, ceil(experts / ranks) per rank
// (the last ranks may hold fewer, or none).
struct ExpertRange {
  int64_t begin = 0, end = 0;
};
ExpertRange expert_range(int64_t experts, int rank, int ranks);
// The rank whose expert_range holds `expert`.
int expert_owner(int64_t expert, int64_t experts, int ranks);

// Buffers a call grows once to the largest batch and then reuses.
struct ExpertParallelScratch {
  std::vector<float> send_x, recv_x, recv_y, back_y, slot_out, local_out, xe, ye;
  std::vector<int32_t> send_expert, recv_expert, slot_of_item, by_expert;
  std::vector<int> send_items, recv_items, send_counts, send_displs, recv_counts, recv_displs, gather_counts,
      gather_displs;
};

// out [rows, hidden] on every rank = the mixture of experts of x [rows, hidden] (the same rows on every rank);
// moe.router is the whole router, moe.experts this rank's experts from expert_begin (expert_range).
void moe_ffn_expert_parallel(const float* x, int64_t rows, int64_t hidden, const kernels::MoeWeights& moe,
                             int64_t expert_begin, float* out, ThreadPool& pool, kernels::MoeScratch& moe_scratch,
                             ExpertParallelScratch& scratch, Communicator& comm);

}  // namespace minfer::dist
