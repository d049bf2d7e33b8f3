// Speculative decoding (engine/speculative.h) must not change what the engine outputs: greedy tokens (and their
// logprobs) equal to the plain engine's, alone and batched, with prefix caching, chunked prefill and preemption,
// stop strings, max_tokens and grammars still exact; seeded sampling equal too (the RNG is consumed token by token
// as without drafts); and, as a statistical check that needs no such argument, sampled tokens that follow the
// target distribution (a chi-square test of two independent samples). On the real stories260K model and on the
// tiny HF-layout models, with prompts that quote themselves so prompt lookup proposes drafts that are partly right.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/engine_access.h"
#include "engine_test_support.h"
#include "kv/state_pool.h"
#include "minfer/engine.h"

namespace minfer {
namespace {

EngineConfig spec_config(EngineConfig c, int k = 4) {
  c.speculative.method = SpeculativeMethod::kNgram;
  c.speculative.num_speculative_tokens = k;
  c.speculative.prompt_lookup_min = 1;
  return c;
}

EngineConfig draft_config(EngineConfig c, const std::string& draft, int k = 4) {
  c.speculative.method = SpeculativeMethod::kDraftModel;
  c.speculative.model = draft;
  c.speculative.num_speculative_tokens = k;
  return c;
}

// Prompts that repeat: a random passage, then the passage again cut short (the model is asked to go on quoting).
std::vector<std::vector<int32_t>> quoting_prompts(int n, int32_t vocab, uint64_t seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < n; ++i) {
    std::vector<int32_t> passage(12 + rng() % 30);
    for (int32_t& t : passage) t = static_cast<int32_t>(3 + rng() % static_cast<uint32_t>(vocab - 3));
    std::vector<int32_t> prompt = passage;
    prompt.insert(prompt.end(), passage.begin(), passage.begin() + static_cast<int64_t>(3 + rng() % 6));
    out.push_back(std::move(prompt));
  }
  return out;
}

struct RunResult {
  std::vector<CompletionOutput> outputs;
  EngineStats stats;
};

// All prompts added together and stepped to the end, the pages checked after every step.
RunResult run_all(const EngineConfig& c, const std::vector<std::vector<int32_t>>& prompts,
                  const std::vector<SamplingParams>& params) {
  Engine engine(c);
  std::map<RequestId, size_t> index;
  for (size_t i = 0; i < prompts.size(); ++i) index[engine.add_request(prompts[i], params[i])] = i;
  RunResult run;
  run.outputs.resize(prompts.size());
  int steps = 0;
  while (engine.has_unfinished() && ++steps < 20000) {
    for (const RequestOutput& o : engine.step()) {
      CompletionOutput& r = run.outputs[index.at(o.id)];
      r.token_ids.insert(r.token_ids.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      r.logprobs.insert(r.logprobs.end(), o.logprobs.begin(), o.logprobs.end());
      r.text += o.text_delta;
      if (o.finished) r.finish_reason = o.finish_reason, r.spec_decode = o.spec_decode;
    }
    EngineAccess::core(engine).page_manager().check_invariants();
  }
  run.stats = engine.stats();
  EXPECT_EQ(run.stats.pages_used, 0) << "pages leaked";
  return run;
}

std::vector<SamplingParams> greedy_params(size_t n, uint64_t seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::vector<SamplingParams> out;
  for (size_t i = 0; i < n; ++i) out.push_back(testing::greedy(8 + static_cast<int32_t>(rng() % 40)));
  return out;
}

class SpeculativeTest : public ::testing::TestWithParam<std::string> {
 protected:
  std::string model() const {
    if (GetParam() == "stories260K") return testing::kStoriesBin;
    return testing::tiny_model_dir(GetParam());
  }
};

bool is_hybrid(const std::string& preset) {
  static const std::set<std::string> hybrids = {"tiny-qwen3.5",    "tiny-lfm2",     "tiny-granite-4.0-h",
                                                "tiny-qwen3-next", "tiny-lfm2-moe", "tiny-nemotron-h"};
  return hybrids.count(preset) > 0;
}

// A model with recurrent layers drafts with an attention sibling of the same generated vocabulary (a draft model with
// recurrent layers is refused); the target's own recurrent state rolls back to the last accepted draft.
// The Mamba2 presets pad their vocabulary to 648 (as llama.cpp's converter does): their sibling is a tiny-llama written
// with their tokenizer, so it takes that vocabulary.
std::string attention_sibling(const std::string& preset) {
  if (preset == "tiny-qwen3.5" || preset == "tiny-qwen3-next") return testing::tiny_model_dir("tiny-qwen3");
  if (preset != "tiny-granite-4.0-h" && preset != "tiny-nemotron-h") return testing::tiny_model_dir("tiny-llama");
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "minfer_engine_test_tiny-llama-vocab648";
  if (!std::filesystem::exists(dir / "config.json")) {
    TestModelOptions o;
    o.preset = "tiny-llama";
    o.out_dir = dir.string();
    o.dtype = DType::F32;
    o.seed = 7;
    o.tokenizer_json = (std::filesystem::path(testing::tiny_model_dir(preset)) / "tokenizer.json").string();
    write_test_model(o);
  }
  return dir.string();
}

TEST_P(SpeculativeTest, GreedyOutputsEqualThePlainEngines) {
  const EngineConfig base = testing::small_engine_config(model(), 1, 160);
  int32_t vocab = 0;
  {
    Engine probe(base);
    vocab = static_cast<int32_t>(std::min<int64_t>(EngineAccess::core(probe).model_config().vocab_size, 500));
  }
  const auto prompts = quoting_prompts(12, vocab, 5);
  auto params = greedy_params(prompts.size(), 9);
  for (size_t i = 0; i < params.size(); i += 3) params[i].logprobs = 2;
  const RunResult plain = run_all(base, prompts, params);

  struct Variant {
    const char* name;
    EngineConfig config;
    bool rejects = true;  // some drafts are wrong (not so when the draft model is the target itself)
  };
  std::vector<Variant> variants = {{"k=4", spec_config(base)}, {"k=1", spec_config(base, 1)}};
  const bool hybrid = is_hybrid(GetParam());
  const std::string draft = hybrid ? attention_sibling(GetParam()) : model();
  variants.push_back({hybrid ? "draft model: an attention sibling" : "draft model: the target itself",
                      draft_config(base, draft), hybrid});
  if (GetParam() != "stories260K" && !hybrid)
    variants.push_back(
        {"draft model: other weights, k=3", draft_config(base, testing::tiny_model_dir(GetParam(), 11), 3)});
  EngineConfig c = spec_config(base, 8);
  c.enable_prefix_caching = false;
  variants.push_back({"k=8, no prefix caching", c});
  c = spec_config(base);
  c.max_num_batched_tokens = 9;  // drafts cut by the budget, prefills chunked
  variants.push_back({"budget of 9 tokens", c});
  c = spec_config(base);
  c.max_num_seqs = 1;
  variants.push_back({"one at a time", c});
  c = spec_config(base);
  const ModelConfig probe_model = [&] {
    Engine probe(base);
    return EngineAccess::core(probe).model_config();
  }();
  const int64_t page_bytes = 2 * 16 * 4 * probe_model.num_layers * probe_model.num_kv_heads * probe_model.head_dim;
  // Preemption, and drafts short of pages; a hybrid also needs a state slot with its 1 + k history slots.
  c.kv_cache_memory = page_bytes * (160 / 16 + 3) + (hybrid ? 2 * 6 * StatePool::slot_bytes(probe_model) : 0);
  variants.push_back({"tiny KV budget (preemption)", c});
  c = draft_config(c, draft);
  variants.push_back({"draft model, tiny KV budget", c, hybrid});

  int64_t accepted = 0;
  for (const Variant& v : variants) {
    SCOPED_TRACE(v.name);
    const RunResult spec = run_all(v.config, prompts, params);
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(spec.outputs[i].token_ids, plain.outputs[i].token_ids) << "request " << i;
      ASSERT_EQ(spec.outputs[i].logprobs.size(), plain.outputs[i].logprobs.size());
      // A drafted row is computed in a chunk of several rows (a GEMM, not a GEMV): equal up to float rounding.
      for (size_t j = 0; j < spec.outputs[i].logprobs.size(); ++j) {
        const TokenLogprobs &a = spec.outputs[i].logprobs[j], &b = plain.outputs[i].logprobs[j];
        EXPECT_NEAR(a.logprob, b.logprob, 1e-4);
        ASSERT_EQ(a.top.size(), b.top.size());
        for (size_t t = 0; t < a.top.size(); ++t) {
          EXPECT_EQ(a.top[t].first, b.top[t].first);
          EXPECT_NEAR(a.top[t].second, b.top[t].second, 1e-4);
        }
      }
    }
    const EngineStats& s = spec.stats;
    std::printf("%-30s steps %4ld (plain %4ld)  drafts %4ld  draft tokens %5ld  accepted %5ld  preemptions %ld\n",
                v.name, static_cast<long>(s.num_steps), static_cast<long>(plain.stats.num_steps),
                static_cast<long>(s.spec_num_drafts), static_cast<long>(s.spec_draft_tokens),
                static_cast<long>(s.spec_accepted_tokens), static_cast<long>(s.num_preemptions));
    if (v.rejects) {
      EXPECT_GT(s.spec_draft_tokens, s.spec_accepted_tokens) << "some drafts must be rejected";
    } else {
      EXPECT_GT(s.spec_accepted_tokens, s.spec_draft_tokens * 9 / 10) << "a draft equal to the target is kept";
    }
    accepted += s.spec_accepted_tokens;
    EXPECT_EQ(s.generated_tokens, plain.stats.generated_tokens);
    // Per position, a later draft is kept only when the ones before it were.
    for (size_t p = 1; p < s.spec_accepted_per_pos.size(); ++p)
      EXPECT_LE(s.spec_accepted_per_pos[p], s.spec_accepted_per_pos[p - 1]);
    int64_t per_request = 0;
    for (const CompletionOutput& o : spec.outputs) per_request += o.spec_decode.accepted_tokens;
    EXPECT_EQ(per_request, s.spec_accepted_tokens);
  }
  // The tiny hybrids' greedy text never repeats itself and their attention siblings never guess it, so every draft is
  // rejected and the state rolls back to the decode token's (engine_recurrent_state_test covers kept drafts).
  if (!hybrid) {
    EXPECT_GT(accepted, 0) << "some drafts must be accepted";
  }
}

// Speculative decoding on a quantized KV cache: the rejected drafts' K and V are overwritten as the next drafts are
// written, and greedy ids equal the plain engine's on the same KV type.
TEST_P(SpeculativeTest, GreedyOutputsEqualThePlainEnginesOnQuantizedKv) {
  EngineConfig base = testing::small_engine_config(model(), 1, 160);
  const ModelConfig m = [&] {
    Engine probe(base);
    return EngineAccess::core(probe).model_config();
  }();
  base.kv_cache_dtype = testing::quantized_kv_for(GetParam() + "-spec", m.head_dim);
  SCOPED_TRACE(kv_cache_dtype_name(base.kv_cache_dtype));
  const auto prompts = quoting_prompts(8, static_cast<int32_t>(std::min<int64_t>(m.vocab_size, 500)), 5);
  const auto params = greedy_params(prompts.size(), 9);
  const RunResult plain = run_all(base, prompts, params);
  for (int k : {1, 4}) {
    const RunResult spec = run_all(spec_config(base, k), prompts, params);
    for (size_t i = 0; i < prompts.size(); ++i)
      EXPECT_EQ(spec.outputs[i].token_ids, plain.outputs[i].token_ids) << "k=" << k << " request " << i;
    EXPECT_GT(spec.stats.spec_draft_tokens, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, SpeculativeTest,
                         ::testing::Values("stories260K", "tiny-llama", "tiny-qwen3", "tiny-gemma3", "tiny-qwen3.5",
                                           "tiny-lfm2", "tiny-granite-4.0-h", "tiny-qwen3-next", "tiny-lfm2-moe",
                                           "tiny-nemotron-h"));

// disable_by_batch_size: no drafts while that many sequences run; drafting resumes as the batch drains.
TEST(Speculative, DisableByBatchSizeTurnsDraftingOffInLargeSteps) {
  const EngineConfig base = testing::small_engine_config(testing::kStoriesBin, 1, 160);
  const auto prompts = quoting_prompts(8, 500, 21);
  const auto params = greedy_params(prompts.size(), 4);
  const RunResult plain = run_all(base, prompts, params);
  EngineConfig c = spec_config(base);
  c.speculative.disable_by_batch_size = 1;
  EXPECT_EQ(run_all(c, prompts, params).stats.spec_num_drafts, 0);
  c.speculative.disable_by_batch_size = 3;
  const RunResult some = run_all(c, prompts, params);
  const RunResult all = run_all(spec_config(base), prompts, params);
  EXPECT_GT(some.stats.spec_num_drafts, 0);
  EXPECT_LT(some.stats.spec_num_drafts, all.stats.spec_num_drafts);
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(some.outputs[i].token_ids, plain.outputs[i].token_ids);
}

// Text-level stops and limits on real text: stop strings, stop token ids, EOS and max_tokens end the output at the
// same token with or without drafts, with the same text.
TEST(Speculative, StopsAndLimitsAreExact) {
  const EngineConfig base = testing::small_engine_config();
  // A story the model continues by repeating its names and phrases.
  const std::string prompt = "Lily and Ben went to the park. Lily saw a big tree. Ben saw a big tree. Lily and Ben";
  std::vector<SamplingParams> params;
  for (int i = 0; i < 4; ++i) params.push_back(testing::greedy(60, /*stop_at_eos=*/true));
  params[1].stop = {"tree."};
  params[2].stop_token_ids = {29};
  params[3].max_tokens = 7;
  for (const SamplingParams& p : params) {
    Engine plain(base), spec(spec_config(base));
    const CompletionOutput a = plain.generate(std::vector<std::string>{prompt}, p)[0];
    const CompletionOutput b = spec.generate(std::vector<std::string>{prompt}, p)[0];
    EXPECT_EQ(b.token_ids, a.token_ids);
    EXPECT_EQ(b.text, a.text);
    EXPECT_EQ(b.finish_reason, a.finish_reason);
    EXPECT_EQ(b.stop_reason, a.stop_reason);
    EXPECT_GT(spec.stats().spec_draft_tokens, 0);
  }
}

// A grammar's mask applies to every drafted position: each row's mask follows the tokens kept before it.
TEST(Speculative, GrammarMasksStayExact) {
  const EngineConfig base = testing::small_engine_config();
  SamplingParams p = testing::greedy(40);
  p.structured_outputs = StructuredOutputs{StructuredOutputs::Kind::kRegex, "(Lily (and|or) Ben\\. ){2,6}"};
  const std::string prompt = "Lily and Ben. Lily and Ben. Lily and";
  Engine plain(base), spec(spec_config(base));
  const CompletionOutput a = plain.generate(std::vector<std::string>{prompt}, p)[0];
  const CompletionOutput b = spec.generate(std::vector<std::string>{prompt}, p)[0];
  EXPECT_EQ(b.token_ids, a.token_ids);
  EXPECT_EQ(b.text, a.text);
  EXPECT_GT(spec.stats().spec_accepted_tokens, 0);
}

// Seeded sampling: the drafted rows draw from the request's RNG in the order the plain steps would, so the tokens
// are the same ones (unless a draw lands within float rounding of a boundary between two tokens: not on these).
TEST(Speculative, SeededSamplingEqualsThePlainEngines) {
  const EngineConfig base = testing::small_engine_config();
  const auto prompts = quoting_prompts(8, 500, 3);
  std::vector<SamplingParams> params;
  for (size_t i = 0; i < prompts.size(); ++i) {
    SamplingParams p;
    p.temperature = i % 2 ? 0.7f : 1.0f;
    p.top_k = i % 3 == 0 ? 20 : 0;
    p.repetition_penalty = i % 4 == 1 ? 1.3f : 1.0f;
    p.max_tokens = 30;
    p.seed = 100 + i;
    params.push_back(p);
  }
  const RunResult plain = run_all(base, prompts, params);
  const RunResult spec = run_all(spec_config(base), prompts, params);
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(spec.outputs[i].token_ids, plain.outputs[i].token_ids);
  EXPECT_GT(spec.stats.spec_accepted_tokens, 0);
}

// The distribution itself, without relying on the RNG argument: many unseeded samples of the tokens after a
// self-quoting prompt (the second and third are drafted and checked), with and without speculation, compared by a
// chi-square test of homogeneity over the token pairs (cells with too few counts pooled). 3000 samples each; the
// test fails at p < 0.001 (a correct engine fails it one run in a thousand).
void expect_target_distribution(const EngineConfig& base, const EngineConfig& speculative) {
  // Lily ... Lily: the model's likely next tokens are the ones that followed before, so drafts are often right.
  const std::string prompt = "Lily had a red ball. Lily had a";
  constexpr int kSamples = 3000;
  auto histogram = [&](const EngineConfig& c, uint64_t seed0, EngineStats* stats) {
    Engine engine(c);
    std::map<std::vector<int32_t>, int64_t> counts;
    SamplingParams p;
    p.temperature = 1.0f;
    p.max_tokens = 3;
    p.ignore_eos = true;
    for (int i = 0; i < kSamples; ++i) {
      p.seed = seed0 + static_cast<uint64_t>(i);
      const CompletionOutput o = engine.generate(std::vector<std::string>{prompt}, p)[0];
      ++counts[{o.token_ids.begin() + 1, o.token_ids.end()}];
    }
    *stats = engine.stats();
    return counts;
  };
  EngineStats plain_stats, spec_stats;
  const auto a = histogram(base, 1, &plain_stats);
  const auto b = histogram(speculative, 1000000, &spec_stats);
  // Both branches of the check must be exercised many times.
  EXPECT_GT(spec_stats.spec_accepted_tokens, 100);
  EXPECT_GT(spec_stats.spec_draft_tokens - spec_stats.spec_accepted_tokens, 100);
  // Cells: every outcome seen; those expected fewer than 5 times in either sample pooled into one.
  std::map<std::vector<int32_t>, std::pair<int64_t, int64_t>> cells;
  for (const auto& [k, n] : a) cells[k].first = n;
  for (const auto& [k, n] : b) cells[k].second = n;
  std::vector<std::pair<double, double>> table;
  std::pair<double, double> pooled{0, 0};
  for (const auto& [k, n] : cells) {
    if ((n.first + n.second) / 2.0 < 5.0) {
      pooled.first += static_cast<double>(n.first), pooled.second += static_cast<double>(n.second);
    } else {
      table.emplace_back(static_cast<double>(n.first), static_cast<double>(n.second));
    }
  }
  if (pooled.first + pooled.second > 0) table.push_back(pooled);
  double chi2 = 0.0;
  for (const auto& [x, y] : table) {
    const double e = (x + y) / 2.0;  // equal sample sizes
    chi2 += (x - e) * (x - e) / e + (y - e) * (y - e) / e;
  }
  const double dof = static_cast<double>(table.size()) - 1.0;
  ASSERT_GE(dof, 3.0) << "too few outcomes for the test to mean anything";
  // The 0.999 quantile of chi-square by the Wilson-Hilferty approximation (z = 3.09).
  const double h = 2.0 / (9.0 * dof);
  const double critical = dof * std::pow(1.0 - h + 3.09 * std::sqrt(h), 3.0);
  std::printf("chi-square %.1f over %.0f degrees of freedom (critical %.1f at p = 0.001); accepted %ld of %ld drafts\n",
              chi2, dof, critical, static_cast<long>(spec_stats.spec_accepted_tokens),
              static_cast<long>(spec_stats.spec_draft_tokens));
  EXPECT_LT(chi2, critical);
}

TEST(Speculative, SampledTokensFollowTheTargetDistribution) {
  const EngineConfig base = testing::small_engine_config();
  expect_target_distribution(base, spec_config(base));
}

// The same with greedy drafts from a draft model (here the target's own weights: at temperature 1 its argmax is
// often not the token sampled, so drafts are both kept and rejected).
TEST(Speculative, DraftModelSamplesFollowTheTargetDistribution) {
  const EngineConfig base = testing::small_engine_config();
  expect_target_distribution(base, draft_config(base, testing::kStoriesBin, 2));
}

// A draft model must speak the served model's vocabulary; anything else is refused naming both sizes.
TEST(Speculative, DraftModelWithAnotherVocabularyIsRefused) {
  const std::string other = testing::tiny_model_dir("tiny-qwen3");
  try {
    Engine engine(draft_config(testing::small_engine_config(), other));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(other), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("vocabulary"), std::string::npos) << e.what();
  }
  EngineConfig c = testing::small_engine_config();
  c.speculative.method = SpeculativeMethod::kDraftModel;  // no path
  EXPECT_THROW(Engine{c}, Error);
}

}  // namespace
}  // namespace minfer
