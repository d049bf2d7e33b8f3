// The recurrent mixers (kernels/mixers.h): the chunked delta rule against the per-token recurrence, every ISA's
// leaves against the scalar reference on awkward sizes, state carried across calls (a prompt in pieces == in one),
// and a batch of sequences == each alone.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/ref/ref_kernels.h"
#include "kernels_test_util.h"

namespace minfer::kernels {
namespace {

using testing::available_tables;
using testing::expect_close;
using testing::random_floats;

struct DeltaInputs {
  int64_t ntok, k_dim, v_dim;
  std::vector<float> qkv, b, a, state;  // one head: q | k | v per row
  float a_coef = -0.7f, dt_bias = 0.3f;
};

DeltaInputs delta_inputs(std::mt19937& rng, int64_t ntok, int64_t k_dim, int64_t v_dim) {
  DeltaInputs in{ntok,
                 k_dim,
                 v_dim,
                 random_floats(rng, static_cast<size_t>(ntok * (2 * k_dim + v_dim))),
                 random_floats(rng, static_cast<size_t>(ntok), -2.0f, 2.0f),
                 random_floats(rng, static_cast<size_t>(ntok), -3.0f, 1.0f),
                 random_floats(rng, static_cast<size_t>(k_dim * v_dim), -0.5f, 0.5f)};
  return in;
}

DeltaNetHead head_of(const DeltaInputs& in, std::vector<float>& state, std::vector<float>& out) {
  DeltaNetHead h;
  h.q = in.qkv.data();
  h.k = h.q + in.k_dim;
  h.v = h.k + in.k_dim;
  h.ld_qkv = 2 * in.k_dim + in.v_dim;
  h.b = in.b.data();
  h.a = in.a.data();
  h.ld_ab = 1;
  h.a_coef = in.a_coef;
  h.dt_bias = in.dt_bias;
  out.assign(static_cast<size_t>(in.ntok * in.v_dim), NAN);
  h.out = out.data();
  h.ld_out = in.v_dim;
  state = in.state;
  h.state = state.data();
  h.ntok = in.ntok;
  h.k_dim = in.k_dim;
  h.v_dim = in.v_dim;
  return h;
}

constexpr int64_t kTokenCounts[] = {1, 2, 7, 8, 9, 63, 64, 65, 130, 200};

TEST(KernelsMixers, ChunkedDeltaRuleEqualsRecurrence) {
  std::mt19937 rng(11);
  for (int64_t dk : {16, 24, 128})
    for (int64_t dv : {16, 40, 128})
      for (int64_t ntok : kTokenCounts) {
        const DeltaInputs in = delta_inputs(rng, ntok, dk, dv);
        std::vector<float> s_rec, o_rec, s_chunk, o_chunk;
        ref::delta_net_head_recurrent(head_of(in, s_rec, o_rec));
        ref::delta_net_head(head_of(in, s_chunk, o_chunk), nullptr);
        const std::string what =
            "dk " + std::to_string(dk) + " dv " + std::to_string(dv) + " tokens " + std::to_string(ntok);
        expect_close(o_chunk, o_rec, 2e-4f, 2e-5f, "out " + what);
        expect_close(s_chunk, s_rec, 2e-4f, 2e-5f, "state " + what);
      }
}

TEST(KernelsMixers, DeltaRuleLeavesMatchReference) {
  std::mt19937 rng(12);
  for (int64_t dk : {16, 24, 128})
    for (int64_t dv : {16, 40, 128})
      for (int64_t ntok : kTokenCounts) {
        const DeltaInputs in = delta_inputs(rng, ntok, dk, dv);
        std::vector<float> s_ref, o_ref;
        ref::delta_net_head(head_of(in, s_ref, o_ref), nullptr);
        for (const KernelTable* t : available_tables()) {
          std::vector<float> s, o, scratch(static_cast<size_t>(delta_net_scratch_floats(dk, dv)));
          t->mixers->delta_net_head(head_of(in, s, o), scratch.data());
          const std::string what = std::string(t->name) + " dk " + std::to_string(dk) + " dv " + std::to_string(dv) +
                                   " tokens " + std::to_string(ntok);
          expect_close(o, o_ref, 2e-4f, 2e-5f, "out " + what);
          expect_close(s, s_ref, 2e-4f, 2e-5f, "state " + what);
        }
      }
}

TEST(KernelsMixers, Conv1dLeavesMatchReferenceAndCarryState) {
  std::mt19937 rng(13);
  for (int64_t channels : {1, 7, 16, 37, 100})
    for (int64_t kernel : {2, 3, 4})
      for (int64_t ntok : {1, 2, 3, 5, 33}) {
        const auto x = random_floats(rng, static_cast<size_t>(ntok * channels));
        const auto w = random_floats(rng, static_cast<size_t>(channels * kernel));
        const auto bias = random_floats(rng, static_cast<size_t>(channels));
        const auto state0 = random_floats(rng, static_cast<size_t>((kernel - 1) * channels));
        for (bool silu : {false, true}) {
          auto run = [&](const MixerLeaves& m, int64_t t0, int64_t t1, std::vector<float>& state,
                         std::vector<float>& y) {
            Conv1dSpan s{x.data() + t0 * channels,
                         channels,
                         y.data() + t0 * channels,
                         channels,
                         t1 - t0,
                         w.data(),
                         silu ? bias.data() : nullptr,
                         kernel,
                         channels,
                         state.data(),
                         silu};
            m.conv1d(s, 0, channels);
          };
          std::vector<float> want(x.size()), want_state = state0;
          run(kRefMixers, 0, ntok, want_state, want);
          for (const KernelTable* t : available_tables()) {
            // In two pieces: the state carries the first piece's last inputs into the second.
            std::vector<float> y(x.size(), NAN), state = state0;
            const int64_t cut = ntok / 2;
            if (cut > 0) run(*t->mixers, 0, cut, state, y);
            run(*t->mixers, cut, ntok, state, y);
            const std::string what = std::string(t->name) + " channels " + std::to_string(channels) + " kernel " +
                                     std::to_string(kernel) + " tokens " + std::to_string(ntok);
            expect_close(y, want, 1e-5f, 1e-6f, "conv " + what);
            expect_close(state, want_state, 0.0f, 0.0f, "conv state " + what);
          }
        }
      }
}

// Mamba2's scan: the reference's chunked (SSD) form and every ISA's leaf (chunked from kSsmChunkedMin tokens on)
// against the reference's recurrence on awkward head and state widths and token counts (chunks whole and partial),
// and a run in two pieces against one.
TEST(KernelsMixers, SsmScanLeavesMatchReferenceAndCarryState) {
  std::mt19937 rng(15);
  for (int64_t P : {1, 7, 16, 64})
    for (int64_t N : {1, 9, 16, 128})
      for (int64_t ntok : {1, 5, 17, 37, 64, 101}) {
        const int64_t ld = P + 2 * N;
        const auto xbc = random_floats(rng, static_cast<size_t>(ntok * ld));
        const auto dt = random_floats(rng, static_cast<size_t>(ntok), -3.0f, 2.0f);
        const auto state0 = random_floats(rng, static_cast<size_t>(P * N), -0.5f, 0.5f);
        auto head = [&](std::vector<float>& state, std::vector<float>& out, int64_t t0, int64_t t1) {
          SsmHead h{xbc.data() + t0 * ld,
                    xbc.data() + t0 * ld + P,
                    xbc.data() + t0 * ld + P + N,
                    ld,
                    dt.data() + t0,
                    1,
                    -0.8f,
                    0.4f,
                    0.3f,
                    out.data() + t0 * P,
                    P,
                    state.data(),
                    t1 - t0,
                    P,
                    N};
          return h;
        };
        std::vector<float> want_state = state0, want(static_cast<size_t>(ntok * P));
        ref::ssm_head_recurrent(head(want_state, want, 0, ntok));
        {  // the reference's chunked form against its recurrence
          std::vector<float> state = state0, out(want.size(), NAN);
          ref::ssm_head(head(state, out, 0, ntok), nullptr);
          expect_close(out, want, 1e-4f, 1e-5f, "ref chunked ssm out");
          expect_close(state, want_state, 1e-4f, 1e-5f, "ref chunked ssm state");
        }
        std::vector<float> scratch(static_cast<size_t>(ssm_scratch_floats(P, N)));
        for (const KernelTable* t : available_tables()) {
          std::vector<float> state = state0, out(want.size(), NAN);
          const int64_t cut = ntok / 3;
          if (cut > 0) t->mixers->ssm_head(head(state, out, 0, cut), scratch.data());
          t->mixers->ssm_head(head(state, out, cut, ntok), scratch.data());
          const std::string what = std::string(t->name) + " P " + std::to_string(P) + " N " + std::to_string(N) +
                                   " tokens " + std::to_string(ntok);
          expect_close(out, want, 1e-4f, 1e-5f, "ssm out " + what);
          expect_close(state, want_state, 1e-4f, 1e-5f, "ssm state " + what);
        }
      }
}

// Three sequences (a long prefill, a decode, a short prefill) in one call == each alone; the prefill split at an
// awkward token == in one piece.
TEST(KernelsMixers, DeltaNetDriverBatchedEqualsAloneAndSplitEqualsWhole) {
  std::mt19937 rng(14);
  ThreadPool pool(2);
  const DeltaNetParams p{.k_heads = 2, .v_heads = 6, .k_dim = 24, .v_dim = 40, .tiled_heads = false};
  const auto a_coef = random_floats(rng, 6, -2.0f, -0.1f), dt_bias = random_floats(rng, 6);
  DeltaNetParams params = p;
  params.a_coef = a_coef.data();
  params.dt_bias = dt_bias.data();
  const int64_t width = 2 * 2 * 24 + 6 * 40, out_width = 6 * 40, lens[] = {150, 1, 9};
  const int64_t rows = 160;
  const auto qkv = random_floats(rng, static_cast<size_t>(rows * width));
  const auto b = random_floats(rng, static_cast<size_t>(rows * 6)),
             a = random_floats(rng, static_cast<size_t>(rows * 6));
  const int64_t slot_floats = 6 * 24 * 40;
  for (const KernelTable* t : available_tables()) {
    std::vector<float> pool_batched(static_cast<size_t>(4 * slot_floats), 0.0f), pool_alone = pool_batched;
    const StateLayerView vb{pool_batched.data(), slot_floats, 0}, va{pool_alone.data(), slot_floats, 0};
    const int32_t starts[] = {0, 150, 151}, lens32[] = {150, 1, 9}, slots[] = {1, 2, 3};
    std::vector<float> out_b(static_cast<size_t>(rows * out_width), NAN), out_a = out_b;
    gated_delta_net(*t->mixers, qkv.data(), b.data(), a.data(), out_b.data(), params, vb, {3, starts, lens32, slots},
                    pool);
    for (int s = 0; s < 3; ++s) {
      // Alone, and the first one in two pieces (70 + 80 tokens).
      const int64_t cut = s == 0 ? 70 : lens[s];
      const int32_t st1[] = {starts[s]}, l1[] = {static_cast<int32_t>(cut)}, sl[] = {slots[s]};
      gated_delta_net(*t->mixers, qkv.data(), b.data(), a.data(), out_a.data(), params, va, {1, st1, l1, sl}, pool);
      if (cut < lens[s]) {
        const int32_t st2[] = {static_cast<int32_t>(starts[s] + cut)}, l2[] = {static_cast<int32_t>(lens[s] - cut)};
        gated_delta_net(*t->mixers, qkv.data(), b.data(), a.data(), out_a.data(), params, va, {1, st2, l2, sl}, pool);
      }
    }
    expect_close(out_b, out_a, 2e-4f, 2e-5f, std::string(t->name) + " batched vs alone");
    expect_close(pool_batched, pool_alone, 2e-4f, 2e-5f, std::string(t->name) + " states");
  }
}

}  // namespace
}  // namespace minfer::kernels
