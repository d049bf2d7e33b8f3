// `minfer bench ops` (the issue's --report-ops): compiles the model's graph with fusion none and auto and
// prints, for each, the nodes of one decoder layer and the dispatches the executor counts per step (prefill
// and decode at each batch size), then times the same steps for both, interleaved (ABAB...) so load drift
// hits both alike. A dispatch is one graph node run by the executor: one kernel entry call, which is at
// most one fork-join of the thread pool (embedding, gather and kv_write run on the calling thread).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "engine/model_runner.h"
#include "kernels/kernels.h"
#include "kv/kv_cache.h"
#include "kv/state_pool.h"
#include "model/model_weights.h"
#include "tools/commands.h"
#include "tools/engine_flags.h"

namespace minfer::tools {
namespace {

struct OpsArgs {
  std::string model;
  int threads = 2;
  std::vector<int> batches = {1, 32};
  int context = 64;     // tokens already cached per sequence when decode steps are timed
  int prefill = 128;    // tokens of the timed prefill step
  int mix_decodes = 0;  // > 0: also time a step of the prefill beside this many decodes (continuous batching)
  int repeat = 8;       // timed steps per mode and scenario (median reported)
  bool list_passes = false;
  bool profile = false;                         // also time every node and print the time per operator
  KvCacheDtype kv_dtype = KvCacheDtype::kAuto;  // auto: as the engine's (kernels/kv_format.h)
  graph::FusionOptions fusion;                  // the "auto" column (honours --disable-pass)
};

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Nodes of layer 0: those writing a "layers.0." value, and the kv_write of layer 0.
std::vector<std::string> layer0_ops(const graph::Graph& g) {
  std::vector<std::string> ops;
  for (const graph::Node& n : g.nodes()) {
    const bool named = n.output != graph::kNoValue && g.value(n.output).name.starts_with("layers.0.");
    if (named || (n.output == graph::kNoValue && n.layer == 0)) ops.push_back(graph::node_label(n));
  }
  return ops;
}

// One mode's compiled model, its own KV pool, and the step arrays of each scenario.
struct Mode {
  std::string name;
  std::unique_ptr<ModelRunner> runner;
  std::unique_ptr<KvCache> cache;
  std::unique_ptr<StatePool> states;  // models with recurrent layers: slot i for sequence i (null otherwise)
  KvPools pools() const { return KvPools{cache.get(), nullptr, states.get()}; }
};

struct Scenario {
  std::string name;
  std::vector<std::vector<int32_t>> tokens;  // per sequence: the step's tokens
  std::vector<int32_t> start;                // per sequence
  bool last_uses_spare_table = false;
};

// Sequence i uses block table i (and state slot i); the mixed step's prefill (its last sequence) takes the spare
// last table and slot so that it does not overwrite a decoding sequence's context.
std::vector<SequenceChunk> chunks_of(const Scenario& s, const std::vector<std::vector<int32_t>>& tables,
                                     bool recurrent) {
  std::vector<SequenceChunk> c;
  for (size_t i = 0; i < s.tokens.size(); ++i) {
    const bool spare = s.last_uses_spare_table && i + 1 == s.tokens.size();
    const size_t table = spare ? tables.size() - 1 : i;
    SequenceChunk chunk{s.tokens[i], s.start[i], tables[table], true};
    if (recurrent) chunk.state_slot = static_cast<int32_t>(table);
    c.push_back(chunk);
  }
  return c;
}

// Per step, summed over layers: milliseconds per operator label, from `repeat` profiled runs of the step.
std::map<std::string, double> profile_ops(Mode& mode, const std::vector<SequenceChunk>& chunks, int repeat) {
  graph::Executor& ex = mode.runner->executor();
  ex.set_profiling(true);
  for (int r = 0; r < repeat; ++r) mode.runner->execute(chunks, mode.pools());
  std::map<std::string, double> ms;
  const std::vector<graph::Node>& nodes = mode.runner->graph().nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    // The op and what it computes ("matmul -> attn_out"), the same for every layer.
    std::string label = graph::node_label(nodes[i]);
    if (nodes[i].output != graph::kNoValue) {
      std::string value = mode.runner->graph().value(nodes[i].output).name;
      if (value.starts_with("layers.")) value = value.substr(value.find('.', 7) + 1);
      label += " -> " + value;
    }
    ms[label] += 1e3 * ex.node_seconds()[i] / repeat;
  }
  ex.set_profiling(false);
  return ms;
}

void print_profile(const std::string& scenario, std::vector<std::map<std::string, double>>& per_mode,
                   const std::vector<Mode>& modes) {
  std::printf("\n%s, ms per step by operator (all layers; profiled runs):\n\n| operator |", scenario.c_str());
  for (const Mode& m : modes) std::printf(" ms %s | share %s |", m.name.c_str(), m.name.c_str());
  std::printf("\n|---|");
  for (size_t i = 0; i < modes.size(); ++i) std::printf("---|---|");
  std::printf("\n");
  std::map<std::string, bool> labels;
  std::vector<double> totals;
  for (const auto& ms : per_mode) {
    double t = 0;
    for (const auto& [label, v] : ms) {
      labels[label] = true;
      t += v;
    }
    totals.push_back(t);
  }
  for (const auto& [label, unused] : labels) {
    std::printf("| %s |", label.c_str());
    for (size_t i = 0; i < per_mode.size(); ++i) {
      const auto it = per_mode[i].find(label);
      if (it == per_mode[i].end()) {
        std::printf(" | |");
      } else {
        std::printf(" %.2f | %.0f%% |", it->second, 100.0 * it->second / totals[i]);
      }
    }
    std::printf("\n");
  }
}

void list_passes() {
  for (const auto* list : {&graph::fusion_passes(), &graph::layout_passes()})
    for (const graph::FusionPass& p : *list) std::printf("%-15s %s\n", p.name, p.summary);
}

// The KV pool every mode gets a copy of: one page table per decoding sequence, and the last one for the prefill
// of the mixed step.
struct KvPlan {
  KvCacheShape shape;
  std::vector<std::vector<int32_t>> tables;
};

KvPlan plan_kv(const OpsArgs& a, const ModelConfig& m, int max_batch) {
  const int64_t page = 16;
  const int64_t max_tokens = std::max<int64_t>(a.context + 1, a.prefill + a.mix_decodes);
  const int64_t pages_per_seq = (max_tokens + page - 1) / page;
  KvPlan plan;
  plan.shape = KvCacheShape{.num_layers = m.num_layers,
                            .kv_heads = m.num_kv_heads,
                            .head_dim = m.head_dim,
                            .page = PageGeometry::of(page),
                            .num_pages = 1 + (max_batch + 1) * pages_per_seq};
  plan.shape.dtype = a.kv_dtype != KvCacheDtype::kAuto ? a.kv_dtype : auto_kv_cache_dtype(m.dtype);
  plan.tables.resize(static_cast<size_t>(max_batch) + 1);
  for (int s = 0; s <= max_batch; ++s)
    for (int64_t p = 0; p < pages_per_seq; ++p)
      plan.tables[static_cast<size_t>(s)].push_back(static_cast<int32_t>(1 + s * pages_per_seq + p));
  return plan;
}

// A state pool with a slot for each of the plan's page tables (recurrent models; null otherwise).
std::unique_ptr<StatePool> make_states(const ModelConfig& m, size_t tables) {
  if (!m.has_recurrent_layers()) return nullptr;
  auto states = std::make_unique<StatePool>(m, static_cast<int64_t>(tables));
  for (size_t i = 0; i < tables; ++i) states->acquire(static_cast<RequestId>(i));  // slot i
  return states;
}

std::vector<Mode> make_modes(const OpsArgs& a, const ModelWeights& weights, ThreadPool& pool, const KvPlan& kv) {
  const KvCacheShape& shape = kv.shape;
  graph::FusionOptions none;
  none.strategy = FusionStrategy::kNone;
  graph::FusionOptions fused = a.fusion;
  fused.strategy = FusionStrategy::kAuto;
  std::vector<Mode> modes;
  for (const auto& [name, options] : {std::pair{"none", none}, std::pair{"auto", fused}})
    modes.push_back(Mode{name, std::make_unique<ModelRunner>(weights, pool, options), std::make_unique<KvCache>(shape),
                         make_states(weights.config, kv.tables.size())});
  return modes;
}

// A step of `n` sequences of `len` random tokens each, from `start`.
Scenario uniform_scenario(std::string name, int n, int len, int32_t start,
                          const std::function<std::vector<int32_t>(int)>& random_tokens) {
  Scenario s{std::move(name), {}, {}};
  for (int i = 0; i < n; ++i) {
    s.tokens.push_back(random_tokens(len));
    s.start.push_back(start);
  }
  return s;
}

// The timed steps, and the context every decode step attends to (filled first, untimed). Their tokens are drawn
// in that order from one seeded generator, so that every run times the same steps.
struct Scenarios {
  std::vector<Scenario> timed;
  Scenario context;
};

Scenarios make_scenarios(const OpsArgs& a, int64_t vocab_size, int max_batch) {
  std::mt19937 rng(1);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(vocab_size - 1));
  const std::function<std::vector<int32_t>(int)> random_tokens = [&](int n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (int32_t& x : t) x = tok(rng);
    return t;
  };
  std::vector<Scenario> scenarios;
  scenarios.push_back(Scenario{fmt::format("prefill {} tokens", a.prefill), {random_tokens(a.prefill)}, {0}});
  if (a.mix_decodes > 0) {
    // What continuous batching runs while prompts wait: a prefill chunk beside the running decodes; and the
    // prefill-only step of the same row count to compare its time per row with.
    const int rows = a.prefill + a.mix_decodes;
    scenarios.push_back(Scenario{fmt::format("prefill {} tokens", rows), {random_tokens(rows)}, {0}});
    Scenario mixed = uniform_scenario(fmt::format("prefill {} + decode {}", a.prefill, a.mix_decodes), a.mix_decodes, 1,
                                      a.context, random_tokens);
    mixed.tokens.push_back(random_tokens(a.prefill));
    mixed.start.push_back(0);
    mixed.last_uses_spare_table = true;
    scenarios.push_back(std::move(mixed));
  }
  for (int b : a.batches)
    scenarios.push_back(uniform_scenario(fmt::format("decode batch {}", b), b, 1, a.context, random_tokens));
  Scenario context = uniform_scenario("context", max_batch, a.context, 0, random_tokens);
  return Scenarios{std::move(scenarios), std::move(context)};
}

void print_header(const OpsArgs& a, const ModelConfig& m, const std::vector<Mode>& modes) {
  std::printf("model %s: %s, %ld layers, hidden %ld, %s weights; kernels %s; %d threads\n\n", a.model.c_str(),
              m.arch_name().c_str(), static_cast<long>(m.num_layers), static_cast<long>(m.hidden_size),
              std::string(dtype_name(m.dtype)).c_str(), kernels::kernels_summary().c_str(), a.threads);
  std::printf("A dispatch is one graph node run by the executor (one kernel call, at most one fork-join).\n\n");
  for (const Mode& mode : modes) {
    const auto ops = layer0_ops(mode.runner->graph());
    std::string list;
    for (const std::string& op : ops) list += (list.empty() ? "" : ", ") + op;
    std::printf("- %s: %zu nodes per layer: %s\n", mode.name.c_str(), ops.size(), list.c_str());
  }
  std::printf(
      "\n| step | dispatches none | dispatches auto | per layer none | per layer auto | ms none | ms auto | "
      "none / auto time |\n|---|---|---|---|---|---|---|---|\n");
}

// Times a scenario's step in every mode (after a warm-up, in ABBA order) and prints its row of the table.
void time_scenario(const Scenario& s, const std::vector<SequenceChunk>& chunks, std::vector<Mode>& modes, int repeat) {
  std::vector<std::vector<double>> times(modes.size());
  std::vector<int64_t> dispatches(modes.size());
  for (Mode& mode : modes) mode.runner->execute(chunks, mode.pools());  // warm-up (buffers grow here)
  for (int r = 0; r < repeat; ++r) {
    for (size_t i = 0; i < modes.size(); ++i) {
      const size_t k = r % 2 == 0 ? i : modes.size() - 1 - i;  // ABBA order
      const int64_t before = modes[k].runner->dispatches_total();
      const double t0 = now_s();
      modes[k].runner->execute(chunks, modes[k].pools());
      times[k].push_back(now_s() - t0);
      dispatches[k] = modes[k].runner->dispatches_total() - before;
    }
  }
  std::vector<double> med;
  for (auto& t : times) {
    std::sort(t.begin(), t.end());
    med.push_back(t[t.size() / 2]);
  }
  std::vector<size_t> per_layer;
  for (const Mode& mode : modes) per_layer.push_back(layer0_ops(mode.runner->graph()).size());
  std::printf("| %s | %ld | %ld | %zu | %zu | %.2f | %.2f | %.2fx |\n", s.name.c_str(),
              static_cast<long>(dispatches[0]), static_cast<long>(dispatches[1]), per_layer[0], per_layer[1],
              1e3 * med[0], 1e3 * med[1], med[0] / med[1]);
  std::fflush(stdout);
}

void run_ops(const OpsArgs& a) {
  if (a.list_passes) {
    list_passes();
    return;
  }
  const ModelWeights weights = load_model(a.model);
  const ModelConfig& m = weights.config;
  ThreadPool pool(a.threads);
  const int max_batch = std::max({1, a.mix_decodes, *std::max_element(a.batches.begin(), a.batches.end())});
  const KvPlan kv = plan_kv(a, m, max_batch);
  std::vector<Mode> modes = make_modes(a, weights, pool, kv);
  const Scenarios scenarios = make_scenarios(a, m.vocab_size, max_batch);
  // Fill the context every decode scenario attends to (same tokens for both modes).
  for (Mode& mode : modes)
    mode.runner->execute(chunks_of(scenarios.context, kv.tables, m.has_recurrent_layers()), mode.pools());

  print_header(a, m, modes);
  std::vector<std::pair<std::string, std::vector<std::map<std::string, double>>>> profiles;
  for (const Scenario& s : scenarios.timed) {
    const std::vector<SequenceChunk> chunks = chunks_of(s, kv.tables, m.has_recurrent_layers());
    time_scenario(s, chunks, modes, a.repeat);
    if (a.profile) {
      std::vector<std::map<std::string, double>> per_mode;
      for (Mode& mode : modes) per_mode.push_back(profile_ops(mode, chunks, a.repeat));
      profiles.emplace_back(s.name, std::move(per_mode));
    }
  }
  for (auto& [name, per_mode] : profiles) print_profile(name, per_mode, modes);
}

}  // namespace

void add_bench_ops_command(CLI::App& bench) {
  auto args = std::make_shared<OpsArgs>();
  CLI::App* cmd = bench.add_subcommand(
      "ops", "Dispatches per layer and per step, and step times, with fusion none vs auto (--report-ops)");
  cmd->add_option("-m,--model", args->model, "Model directory or file");
  cmd->add_option("-t,--threads", args->threads, "Worker threads")->capture_default_str();
  cmd->add_option_function<std::string>(
         "--kv-cache-dtype", [args](const std::string& v) { parse_kv_cache_dtype(v, &args->kv_dtype); },
         "KV cache type of the timed pools (auto: bf16 for bf16 weights, else f32)")
      ->check(CLI::IsMember({"auto", "f32", "bf16", "f16", "int8", "fp8_e4m3", "q8_0", "q4_0"}));
  cmd->add_option("--batches", args->batches, "Decode batch sizes (sequences)")->delimiter(',')->capture_default_str();
  cmd->add_option("--context", args->context, "Cached tokens per sequence before the decode steps")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--prefill", args->prefill, "Tokens of the prefill step")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--repeat", args->repeat, "Timed steps per mode (median reported)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--mix-decodes", args->mix_decodes,
                  "Also time the prefill beside this many decodes at --context (a continuous-batching step)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--list-passes", args->list_passes, "List the fusion passes and exit");
  cmd->add_flag("--profile", args->profile, "Also time each operator (separate runs) and print ms per operator");
  add_fusion_flags(*cmd, args->fusion.strategy, args->fusion.disabled_passes);
  cmd->callback([args] {
    if (!args->list_passes && args->model.empty()) fail("bench ops: give --model (or --list-passes)");
    for (int b : args->batches)
      if (b <= 0) fail("bench ops: batch sizes must be positive (got {})", b);
    run_ops(*args);
  });
}

}  // namespace minfer::tools
