// `minfer bench offline`: offline throughput of the engine on a synthetic mixed-length workload.
//   1. continuous vs static batching (same KV budget, same max_num_seqs): output tokens/s and the ratio;
//   2. paged vs contiguous KV (same budget): utilisation (tokens held / slots allocated, averaged over
//      steps) and the most sequences held at once;
//   3. aggregate decode tokens/s at several concurrencies.
// Prompts are random token ids, outputs have exact lengths (greedy, EOS ignored), so every run does the
// same work. Prints a Markdown report (and optionally JSON lines).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "dist/communicator.h"
#include "engine/engine_access.h"
#include "engine/speculative.h"
#include "kernels/kernels.h"
#include "minfer/engine.h"
#include "tools/commands.h"
#include "tools/engine_flags.h"
#include "tools/tensor_parallel.h"

namespace minfer::tools {
namespace {

struct BenchArgs {
  BenchArgs() {
    EngineConfig& c = engine.config;
    c.num_threads = 2;
    c.max_model_len = 1024;
    c.kv_cache_memory = int64_t{512} << 20;
    c.max_num_seqs = 32;
    c.max_num_batched_tokens = 512;
    c.seed = 1;  // also the workload's
  }
  EngineFlags engine;
  // The workload: 64 requests, prompts 16-512 tokens, outputs 8-256 tokens.
  int num_requests = 64;
  int prompt_min = 16, prompt_max = 512;
  int output_min = 8, output_max = 256;
  int64_t kv_max_num_seqs = 0;  // KV section: 0 = num_requests, so the memory budget is what limits
  int64_t kv_section_mib = 0;   // KV section budget: 0 = --kv-cache-memory
  std::string sections = "batching,kv,decode";
  std::string concurrency = "1,4,16,64";
  int decode_steps = 8;
  int prefill_tokens = 512;  // prefill section: prompt length
  int prefill_tries = 3;     // prefill section: fresh prompts timed, the best reported
  int repeat = 1;
  double peak_gflops = 0;  // the machine's measured GEMM peak, if given: fraction of it and the bound it sets
  bool log_steps = false;  // batching section: runs of each policy, alternated (ABBA...) against load drift
  std::string json_out;
};

struct Request {
  std::vector<int32_t> prompt;
  int32_t output_len = 0;
};

uint64_t seed(const BenchArgs& a) { return a.engine.config.seed.value_or(1); }

std::vector<Request> make_workload(const BenchArgs& a, int64_t vocab) {
  std::mt19937_64 rng(seed(a));
  // Ordinary token ids well inside the vocabulary (away from the special tokens at the end).
  std::uniform_int_distribution<int32_t> token(100, static_cast<int32_t>(std::min<int64_t>(vocab / 2, 100000)));
  std::uniform_int_distribution<int> plen(a.prompt_min, a.prompt_max), olen(a.output_min, a.output_max);
  std::vector<Request> w(static_cast<size_t>(a.num_requests));
  for (Request& r : w) {
    r.prompt.resize(static_cast<size_t>(plen(rng)));
    for (int32_t& t : r.prompt) t = token(rng);
    r.output_len = olen(rng);
  }
  return w;
}

struct RunResult {
  std::string name;
  double seconds = 0;
  int64_t prompt_tokens = 0, output_tokens = 0, steps = 0, preemptions = 0, max_running = 0;
  double mean_utilisation = 0, mean_running = 0;
};

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Floating-point operations of the model (2 per multiply-add): the matmuls of every layer per token run
// through them, the lm_head per sampled row, and causal attention (QK^T and PV) per (query, key) pair.
struct ModelFlops {
  double per_token = 0, lm_head = 0, per_query_key = 0;
  explicit ModelFlops(const ModelConfig& m) {
    const double h = static_cast<double>(m.hidden_size), hd = static_cast<double>(m.head_dim);
    const double q = static_cast<double>(m.num_heads) * hd, kv = static_cast<double>(m.num_kv_heads) * hd;
    per_token = 2.0 * static_cast<double>(m.num_layers) *
                (h * (q + 2 * kv) + q * h + 3.0 * h * static_cast<double>(m.intermediate_size));
    lm_head = 2.0 * h * static_cast<double>(m.vocab_size);
    per_query_key = 4.0 * static_cast<double>(m.num_layers) * q;
  }
  // A prompt of `prompt` tokens prefilled and `output` tokens generated from it (greedy, exact length): every
  // token but the last output runs through the layers, attending to itself and all before it; one lm_head
  // row per output token.
  double request(int64_t prompt, int64_t output) const {
    const double n = static_cast<double>(prompt + output - 1);
    return per_token * n + per_query_key * n * (n + 1) / 2.0 + lm_head * static_cast<double>(output);
  }
};

EngineConfig base_config(const BenchArgs& a) { return a.engine.resolve(); }

SamplingParams params_for(int32_t output_len) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.ignore_eos = true;
  p.max_tokens = output_len;
  return p;
}

RunResult run_workload(const std::string& name, const EngineConfig& config, const std::vector<Request>& work) {
  Engine engine(config);
  for (const Request& r : work) engine.add_request(r.prompt, params_for(r.output_len));
  RunResult res;
  res.name = name;
  double util_sum = 0, running_sum = 0;
  int64_t util_n = 0;
  const double t0 = now_s();
  double last_report = t0;
  while (engine.has_unfinished()) {
    engine.step();
    const EngineStats s = engine.stats();
    if (s.pages_used > 0) {
      util_sum += s.kv_utilisation;
      running_sum += static_cast<double>(s.num_running);
      ++util_n;
    }
    if (now_s() - last_report > 30) {
      last_report = now_s();
      spdlog::info("{}: {:.0f} s, {} finished, {} running, {} waiting, {} tokens out", name, last_report - t0,
                   s.requests_finished, s.num_running, s.num_waiting, s.generated_tokens);
    }
  }
  res.seconds = now_s() - t0;
  const EngineStats s = engine.stats();
  res.prompt_tokens = s.prompt_tokens;
  res.output_tokens = s.generated_tokens;
  res.steps = s.num_steps;
  res.preemptions = s.num_preemptions;
  res.max_running = s.max_num_running;
  res.mean_utilisation = util_n ? util_sum / static_cast<double>(util_n) : 0;
  res.mean_running = util_n ? running_sum / static_cast<double>(util_n) : 0;
  spdlog::info("{}: {:.1f} s, {} output tokens, {:.2f} output tok/s", name, res.seconds, res.output_tokens,
               static_cast<double>(res.output_tokens) / res.seconds);
  if (config.speculative.enabled())
    spdlog::info("{}: speculative decoding: {}", name, spec_decode_summary(s.spec_decode()));
  return res;
}

int64_t num_layers_of(Engine& engine) { return EngineAccess::core(engine).model_config().num_layers; }

// What rank 0 of a tensor-parallel group sent in the timed steps, per token and layer, and the share of the steps'
// time spent in collectives (waiting for the other ranks included).
void print_comm_stats(const dist::CommStats& s, int64_t tokens, int steps, double seconds, int64_t layers) {
  const dist::CommStats::Op* ops[] = {&s.all_reduce, &s.all_gather, &s.gather, &s.all_to_all, &s.broadcast};
  const char* names[] = {"all_reduce", "all_gather", "gather", "all_to_all", "broadcast"};
  double comm_s = 0;
  std::string parts;
  for (size_t i = 0; i < std::size(ops); ++i) {
    if (ops[i]->calls == 0) continue;
    comm_s += ops[i]->seconds;
    parts += fmt::format("{}{} {:.1f}/step {:.0f} B/token/layer {:.1f} us each", parts.empty() ? "" : "; ", names[i],
                         static_cast<double>(ops[i]->calls) / steps,
                         static_cast<double>(ops[i]->bytes) / static_cast<double>(tokens * layers),
                         1e6 * ops[i]->seconds / static_cast<double>(ops[i]->calls));
  }
  std::printf("  rank 0 collectives: %s; %.0f%% of the step time\n", parts.c_str(), 100 * comm_s / seconds);
}

// c sequences with 16-token prompts; after every one has its first token, time decode_steps steps.
double decode_throughput(const BenchArgs& a, int64_t vocab, int c) {
  EngineConfig config = base_config(a);
  config.max_num_seqs = std::max<int64_t>(c, 1);
  config.kv_cache_memory = std::max<int64_t>(config.kv_cache_memory, 0);
  Engine engine(config);
  BenchArgs w = a;
  w.num_requests = c;
  w.prompt_min = w.prompt_max = 16;
  w.engine.config.seed = seed(a) + 100;
  for (const Request& r : make_workload(w, vocab)) engine.add_request(r.prompt, params_for(a.decode_steps + 2));
  // Prefill everything (one token out each).
  while (engine.stats().generated_tokens < c) engine.step();
  const int64_t before = engine.stats().generated_tokens;
  dist::Communicator& comm = dist::Communicator::world();
  comm.reset_stats();
  const double t0 = now_s();
  for (int i = 0; i < a.decode_steps; ++i) engine.step();
  const double dt = now_s() - t0;
  const int64_t made = engine.stats().generated_tokens - before;
  if (comm.distributed()) print_comm_stats(comm.stats(), made, a.decode_steps, dt, num_layers_of(engine));
  return static_cast<double>(made) / dt;
}

// One sequence with a `tokens`-token prompt, prefilled in one step (max_num_batched_tokens raised to fit; a model
// with recurrent layers cuts it at its state snapshots, so the prompt's every step is timed) and its one token
// sampled: best of `rounds` timings, as prompt tokens/s and GFLOP/s (the matmuls of every layer for every
// token, causal attention, the lm_head of the one sampled row).
std::pair<double, double> prefill_throughput(const BenchArgs& a, int64_t vocab, int tokens, int rounds) {
  EngineConfig config = base_config(a);
  config.max_num_seqs = 1;
  config.max_num_batched_tokens = std::max<int64_t>(config.max_num_batched_tokens, tokens);
  config.max_model_len = std::max<int64_t>(config.max_model_len, tokens + 8);
  Engine engine(config);
  const ModelFlops model_flops(EngineAccess::core(engine).model_config());
  const double flops = model_flops.request(tokens, 1);
  BenchArgs w = a;
  w.num_requests = 1;
  w.prompt_min = w.prompt_max = tokens;
  double best = 1e30, total = 0;
  dist::Communicator& comm = dist::Communicator::world();
  comm.reset_stats();
  for (int r = 0; r < rounds; ++r) {
    w.engine.config.seed = seed(a) + 200 + static_cast<uint64_t>(r);  // a fresh prompt: no prefix-cache hit
    engine.add_request(make_workload(w, vocab)[0].prompt, params_for(1));
    const double t0 = now_s();
    while (engine.has_unfinished()) engine.step();
    best = std::min(best, now_s() - t0);
    total += now_s() - t0;
  }
  if (comm.distributed())
    print_comm_stats(comm.stats(), int64_t{tokens} * rounds, rounds, total, num_layers_of(engine));
  return {tokens / best, flops / best * 1e-9};
}

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) out.push_back(std::stoi(item));
  return out;
}

void print_run_table(const std::vector<RunResult>& runs) {
  std::printf(
      "| run | wall s | prompt tok | output tok | output tok/s | total tok/s | steps | mean running | "
      "max running | preemptions | mean KV utilisation |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const RunResult& r : runs)
    std::printf("| %s | %.1f | %ld | %ld | %.2f | %.2f | %ld | %.1f | %ld | %ld | %.1f%% |\n", r.name.c_str(),
                r.seconds, static_cast<long>(r.prompt_tokens), static_cast<long>(r.output_tokens),
                static_cast<double>(r.output_tokens) / r.seconds,
                static_cast<double>(r.output_tokens + r.prompt_tokens) / r.seconds, static_cast<long>(r.steps),
                r.mean_running, static_cast<long>(r.max_running), static_cast<long>(r.preemptions),
                100 * r.mean_utilisation);
}

double output_rate(const RunResult& r) { return static_cast<double>(r.output_tokens) / r.seconds; }

// Loads the model once to print what it is and to warm the page cache; returns its config.
ModelConfig probe_model(const BenchArgs& a) {
  EngineConfig probe = base_config(a);
  probe.max_num_seqs = 1;
  Engine engine(probe);
  const ModelConfig& m = EngineAccess::core(engine).model_config();
  // Warm-up: reads every weight once (page cache) so the first timed run does not pay for the disk.
  std::vector<int32_t> warm(64, 100);
  engine.generate(std::vector<std::vector<int32_t>>{warm}, params_for(2));
  std::printf("model %s: %s, %ld layers, hidden %ld, vocab %ld, %s weights, %s KV cache; kernels %s; %d threads\n",
              a.engine.config.model_path.c_str(), m.arch_name().c_str(), static_cast<long>(m.num_layers),
              static_cast<long>(m.hidden_size), static_cast<long>(m.vocab_size),
              std::string(dtype_name(m.dtype)).c_str(), kv_cache_dtype_name(engine.config().kv_cache_dtype),
              kernels::kernels_summary().c_str(), a.engine.config.num_threads);
  return m;
}

void print_workload(const BenchArgs& a) {
  std::printf(
      "workload: %d requests, prompts %d-%d tokens, outputs %d-%d tokens (seed %lu); KV budget %ld MiB, "
      "max_model_len %ld, max_num_seqs %ld, max_num_batched_tokens %ld, page_size %ld\n\n",
      a.num_requests, a.prompt_min, a.prompt_max, a.output_min, a.output_max, static_cast<unsigned long>(seed(a)),
      static_cast<long>(a.engine.config.kv_cache_memory >> 20), static_cast<long>(a.engine.config.max_model_len),
      static_cast<long>(a.engine.config.max_num_seqs), static_cast<long>(a.engine.config.max_num_batched_tokens),
      static_cast<long>(a.engine.config.page_size));
  std::fflush(stdout);
}

// Both policies do the same arithmetic; how fast it runs bounds what any schedule can gain. best_cont and
// best_static: the best output tokens/s of each.
void print_batching_bound(const BenchArgs& a, const std::vector<Request>& work, const ModelFlops& flops,
                          int64_t output_tokens, double best_cont, double best_static) {
  double work_flops = 0;
  for (const Request& r : work) work_flops += flops.request(static_cast<int64_t>(r.prompt.size()), r.output_len);
  const double best_static_s = static_cast<double>(output_tokens) / best_static;
  const double best_cont_s = static_cast<double>(output_tokens) / best_cont;
  std::printf("workload arithmetic: %.2f TFLOP; continuous %.0f GFLOP/s, static %.0f GFLOP/s (best runs)\n",
              work_flops * 1e-12, work_flops / best_cont_s * 1e-9, work_flops / best_static_s * 1e-9);
  if (a.peak_gflops > 0) {
    const double floor_s = work_flops / (a.peak_gflops * 1e9);
    std::printf(
        "at the %.0f GFLOP/s peak the workload takes at least %.1f s: static runs at %.0f%% of the peak, so no "
        "schedule can exceed %.2fx static's output tokens/s here\n",
        a.peak_gflops, floor_s, 100 * floor_s / best_static_s, best_static_s / floor_s);
  }
}

// Same budget and max_num_seqs; only the batching policy differs.
std::vector<RunResult> batching_section(const BenchArgs& a, const std::vector<Request>& work, const ModelFlops& flops) {
  std::vector<RunResult> b;
  EngineConfig cont = base_config(a), stat = base_config(a);
  stat.enable_continuous_batching = false;
  std::vector<double> tc, ts;
  for (int i = 0; i < a.repeat; ++i) {
    // Alternate the order (ABBA...) so a drift in machine load does not favour one policy.
    const bool static_first = i % 2 == 1;
    if (static_first) b.push_back(run_workload("static batching, paged", stat, work));
    b.push_back(run_workload("continuous batching, paged", cont, work));
    if (!static_first) b.push_back(run_workload("static batching, paged", stat, work));
    for (size_t j = b.size() - 2; j < b.size(); ++j)
      (b[j].name.starts_with("continuous") ? tc : ts).push_back(output_rate(b[j]));
  }
  std::printf("### Continuous vs static batching (max_num_seqs %ld)\n\n",
              static_cast<long>(a.engine.config.max_num_seqs));
  print_run_table(b);
  std::sort(tc.begin(), tc.end());
  std::sort(ts.begin(), ts.end());
  std::printf("\ncontinuous / static output tokens/s: best %.2fx (%.2f vs %.2f), median %.2fx, over %d runs each\n",
              tc.back() / ts.back(), tc.back(), ts.back(), tc[tc.size() / 2] / ts[ts.size() / 2], a.repeat);
  print_batching_bound(a, work, flops, b[0].output_tokens, tc.back(), ts.back());
  std::printf("\n");
  std::fflush(stdout);
  return b;
}

// Same budget; max_num_seqs high enough that the KV memory decides how many sequences run.
std::vector<RunResult> kv_section(const BenchArgs& a, const std::vector<Request>& work) {
  std::vector<RunResult> k;
  EngineConfig c = base_config(a);
  c.max_num_seqs = a.kv_max_num_seqs > 0 ? a.kv_max_num_seqs : a.num_requests;
  const int64_t kv_mib = a.kv_section_mib > 0 ? a.kv_section_mib : a.engine.config.kv_cache_memory >> 20;
  c.kv_cache_memory = kv_mib << 20;
  k.push_back(run_workload("paged KV", c, work));
  c.kv_layout = KvLayout::kContiguous;
  k.push_back(run_workload("contiguous KV", c, work));
  std::printf("### Paged vs contiguous KV (same %ld MiB budget, max_num_seqs %ld)\n\n", static_cast<long>(kv_mib),
              static_cast<long>(c.max_num_seqs));
  print_run_table(k);
  std::printf(
      "\npaged vs contiguous: utilisation %.1f%% vs %.1f%%, most sequences held %ld vs %ld, "
      "output tokens/s %.2fx\n\n",
      100 * k[0].mean_utilisation, 100 * k[1].mean_utilisation, static_cast<long>(k[0].max_running),
      static_cast<long>(k[1].max_running), output_rate(k[0]) / output_rate(k[1]));
  std::fflush(stdout);
  return k;
}

// (concurrency, aggregate decode tokens/s) of each --concurrency.
std::vector<std::pair<int, double>> decode_section(const BenchArgs& a, int64_t vocab) {
  std::vector<std::pair<int, double>> decode;
  std::printf(
      "### Aggregate decode throughput\n\n| concurrent sequences | aggregate decode tok/s | "
      "per sequence tok/s |\n|---|---|---|\n");
  for (int c : parse_list(a.concurrency)) {
    const double tps = decode_throughput(a, vocab, c);
    decode.emplace_back(c, tps);
    std::printf("| %d | %.2f | %.2f |\n", c, tps, tps / c);
    std::fflush(stdout);
  }
  return decode;
}

void prefill_section(const BenchArgs& a, int64_t vocab) {
  const auto [tps, gflops] = prefill_throughput(a, vocab, a.prefill_tokens, a.prefill_tries);
  std::printf("### Prefill\n\n%d-token prompt, one step, best of %d: %.1f prompt tok/s, %.1f GFLOP/s\n\n",
              a.prefill_tokens, a.prefill_tries, tps, gflops);
  std::fflush(stdout);
}

void write_json(const std::string& path, const std::vector<RunResult>& runs,
                const std::vector<std::pair<int, double>>& decode) {
  std::ofstream out(path);
  for (const RunResult& r : runs)
    out << fmt::format(
        "{{\"run\":\"{}\",\"seconds\":{:.3f},\"prompt_tokens\":{},\"output_tokens\":{},\"steps\":{},"
        "\"preemptions\":{},\"max_running\":{},\"mean_running\":{:.2f},\"mean_utilisation\":{:.4f}}}\n",
        r.name, r.seconds, r.prompt_tokens, r.output_tokens, r.steps, r.preemptions, r.max_running, r.mean_running,
        r.mean_utilisation);
  for (auto [c, tps] : decode) out << fmt::format("{{\"decode_concurrency\":{},\"tokens_per_s\":{:.3f}}}\n", c, tps);
  if (!out) fail("{}: cannot write", path);
}

bool wants(const BenchArgs& a, const char* section) { return a.sections.find(section) != std::string::npos; }

void run_bench(const BenchArgs& a) {
  if (take_tensor_parallel_role(base_config(a))) return;
  if (a.log_steps) spdlog::set_level(spdlog::level::debug);
  const ModelConfig model_config = probe_model(a);
  const int64_t vocab = model_config.vocab_size;
  const std::vector<Request> work = make_workload(a, vocab);
  print_workload(a);
  std::vector<RunResult> runs;
  if (wants(a, "batching")) {
    const std::vector<RunResult> b = batching_section(a, work, ModelFlops(model_config));
    runs.insert(runs.end(), b.begin(), b.end());
  }
  if (wants(a, "kv")) {
    const std::vector<RunResult> k = kv_section(a, work);
    runs.insert(runs.end(), k.begin(), k.end());
  }
  std::vector<std::pair<int, double>> decode;
  if (wants(a, "decode")) decode = decode_section(a, vocab);
  if (wants(a, "prefill")) prefill_section(a, vocab);
  if (!a.json_out.empty()) write_json(a.json_out, runs, decode);
}

}  // namespace

void add_bench_command(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks");
  bench->require_subcommand(1);
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd = bench->add_subcommand("offline",
                                        "Offline engine throughput: continuous vs static batching, "
                                        "paged vs contiguous KV, decode tokens/s by concurrency");
  add_engine_flags(*cmd, args->engine, "Model directory or file (required)");
  cmd->add_option("-n,--num-requests", args->num_requests, "Requests in the workload")->capture_default_str();
  cmd->add_option("--prompt-min", args->prompt_min)->capture_default_str();
  cmd->add_option("--prompt-max", args->prompt_max)->capture_default_str();
  cmd->add_option("--output-min", args->output_min)->capture_default_str();
  cmd->add_option("--output-max", args->output_max)->capture_default_str();
  cmd->add_option("--kv-max-num-seqs", args->kv_max_num_seqs, "max_num_seqs of the KV section (0 = all requests)")
      ->capture_default_str();
  cmd->add_option("--kv-section-mib", args->kv_section_mib,
                  "KV budget of the KV section in MiB (0 = --kv-cache-memory)")
      ->capture_default_str();
  cmd->add_option("--sections", args->sections, "Any of batching,kv,decode,prefill")->capture_default_str();
  cmd->add_option("--prefill-tries", args->prefill_tries, "Fresh prompts the prefill section times (best reported)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--prefill-tokens", args->prefill_tokens, "Prompt length of the prefill section")
      ->capture_default_str();
  cmd->add_option("--concurrency", args->concurrency, "Decode concurrencies")->capture_default_str();
  cmd->add_option("--decode-steps", args->decode_steps, "Timed decode steps per concurrency")->capture_default_str();
  cmd->add_option("--peak-gflops", args->peak_gflops,
                  "The machine's measured GEMM peak (minfer_micro_bench --benchmark_filter=peak): report the fraction "
                  "of it each batching policy reaches and the bound it puts on their ratio");
  cmd->add_flag("--log-steps", args->log_steps, "Log every step's size and time");
  cmd->add_option("--repeat", args->repeat, "Runs of each batching policy (alternated)")->capture_default_str();
  cmd->add_option("--json", args->json_out, "Also write the results as JSON lines to this file");
  cmd->callback([args] {
    if (args->engine.config.model_path.empty()) fail("bench offline needs --model");
    run_bench(*args);
  });
  add_bench_ops_command(*bench);  // `minfer bench ops`: dispatch counts and step times, fusion auto vs none
}

}  // namespace minfer::tools
