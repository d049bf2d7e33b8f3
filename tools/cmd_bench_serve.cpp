// `minfer bench serve`: the serving benchmark (vLLM's benchmark_serving.py metrics) against a running
// OpenAI-compatible server, e.g. `minfer serve`. Synthetic workload: num_prompts prompts of input_len random
// token ids (or random words), each asking for exactly output_len tokens (ignore_eos), arriving as a Poisson
// process at request_rate, at most `concurrency` in flight. --plot sweeps the concurrency and draws
// throughput and latency against it (scripts/plot_serve_bench.py, Debian python3-matplotlib).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "tokenizer/tokenizer.h"
#include "tools/commands.h"
#include "tools/serving_bench.h"

namespace minfer::tools {
namespace {

struct BenchServeArgs {
  std::string url = "http://127.0.0.1:8000";
  std::string model;
  int num_prompts = 64;
  std::string request_rate = "inf";
  int concurrency = 0;
  int64_t input_len = 128;
  int64_t output_len = 128;
  std::string prompt_kind = "ids";
  std::string tokenizer;
  int32_t vocab_size = 256;
  uint64_t seed = 0;
  bool no_ignore_eos = false;
  std::string extra_body;  // JSON object merged into each request
  double timeout_s = 600;
  std::string json_out;
  std::string plot_out;
  std::string sweep = "1,2,4,8,16,32";
  std::string plot_script;
};

double parse_rate(const std::string& s) {
  if (s == "inf" || s == "infinity") return std::numeric_limits<double>::infinity();
  char* end = nullptr;
  const double r = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || *end != '\0' || !(r > 0)) fail("--request-rate {}: expected a positive number or inf", s);
  return r;
}

std::vector<int> parse_int_list(const std::string& s, const char* flag) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 1 || v > 1 << 20)
      fail("{} {}: expected positive integers like 1,2,4", flag, s);
    out.push_back(static_cast<int>(v));
  }
  if (out.empty()) fail("{} is empty", flag);
  return out;
}

// Random prompts, different for every request so that prefix caching does not shortcut the prefill.
std::vector<ServeBenchRequest> make_requests(const BenchServeArgs& a) {
  std::mt19937_64 rng(a.seed);
  std::vector<ServeBenchRequest> requests(static_cast<size_t>(a.num_prompts));
  if (a.prompt_kind == "text") {
    static const std::vector<std::string> kWords = {"the",   "of",    "and",    "time",   "river",  "light", "house",
                                                    "small", "green", "open",   "water",  "stone",  "quiet", "market",
                                                    "north", "paper", "garden", "number", "window", "story"};
    std::uniform_int_distribution<size_t> pick(0, kWords.size() - 1);
    for (auto& r : requests) {
      std::string text;
      for (int64_t i = 0; i < a.input_len; ++i) text += (i ? " " : "") + kWords[pick(rng)];
      r.prompt = text;
      r.prompt_len = a.input_len;  // replaced by the server's usage.prompt_tokens
      r.output_len = a.output_len;
    }
    return requests;
  }
  // Token ids: from the tokenizer's vocabulary without special tokens, else [3, vocab_size) (0-2 are often
  // <unk>/<s>/</s>).
  std::vector<int32_t> candidates;
  if (!a.tokenizer.empty()) {
    const auto tok = tokenizer_from_file(a.tokenizer);
    for (int32_t id = 0; id < tok->vocab_size(); ++id)
      if (!tok->is_special(id)) candidates.push_back(id);
  } else {
    for (int32_t id = 3; id < a.vocab_size; ++id) candidates.push_back(id);
  }
  if (candidates.empty()) fail("no token ids to draw prompts from (--vocab-size {})", a.vocab_size);
  std::uniform_int_distribution<size_t> pick(0, candidates.size() - 1);
  for (auto& r : requests) {
    nlohmann::json ids = nlohmann::json::array();
    for (int64_t i = 0; i < a.input_len; ++i) ids.push_back(candidates[pick(rng)]);
    r.prompt = std::move(ids);
    r.prompt_len = a.input_len;
    r.output_len = a.output_len;
  }
  return requests;
}

nlohmann::json run_json(const ServeBenchRun& run, const ServeBenchMetrics& m, double rate, int concurrency) {
  nlohmann::json j = metrics_to_json(m);
  j["request_rate"] = std::isfinite(rate) ? nlohmann::json(rate) : nlohmann::json("inf");
  j["max_concurrency"] = concurrency;
  nlohmann::json requests = nlohmann::json::array();
  for (const RequestResult& r : run.results) {
    nlohmann::json q = {{"success", r.success}, {"prompt_len", r.prompt_len}, {"output_tokens", r.output_tokens},
                        {"ttft_s", r.ttft_s},   {"latency_s", r.latency_s},   {"itl_s", r.itl_s}};
    if (!r.success) q["error"] = r.error;
    requests.push_back(std::move(q));
  }
  j["requests"] = std::move(requests);
  return j;
}

std::string default_plot_script() {
  // This file is tools/cmd_bench_serve.cpp in the source tree; the script is scripts/plot_serve_bench.py.
  return (std::filesystem::path(__FILE__).parent_path().parent_path() / "scripts" / "plot_serve_bench.py").string();
}

void run_bench_serve(const BenchServeArgs& a) {
  if (a.num_prompts < 1) fail("--num-prompts must be >= 1, got {}", a.num_prompts);
  if (a.input_len < 1) fail("--input-len must be >= 1, got {}", a.input_len);
  if (a.output_len < 1) fail("--output-len must be >= 1, got {}", a.output_len);
  if (a.concurrency < 0) fail("--concurrency must be >= 0 (0 = unlimited), got {}", a.concurrency);
  if (a.prompt_kind != "ids" && a.prompt_kind != "text") fail("--prompt-kind {}: expected ids or text", a.prompt_kind);
  if (!(a.timeout_s > 0)) fail("--timeout must be > 0 seconds");
  ServeBenchConfig config;
  config.target = parse_http_url(a.url);
  config.request_rate = parse_rate(a.request_rate);
  config.ignore_eos = !a.no_ignore_eos;
  if (!a.extra_body.empty()) {
    config.extra_body = nlohmann::json::parse(a.extra_body, nullptr, /*allow_exceptions=*/false);
    if (!config.extra_body.is_object()) fail("--extra-body must be a JSON object, got: {}", a.extra_body);
  }
  config.seed = a.seed;
  config.request_timeout_s = a.timeout_s;
  const ServedModel served = query_served_model(config.target);
  config.model = a.model.empty() ? served.id : a.model;
  if (served.max_model_len > 0 && a.input_len + a.output_len > served.max_model_len)
    fail("--input-len {} + --output-len {} exceeds the server's max_model_len {}", a.input_len, a.output_len,
         served.max_model_len);
  const std::vector<ServeBenchRequest> requests = make_requests(a);
  const std::vector<int> concurrencies =
      a.plot_out.empty() ? std::vector<int>{a.concurrency} : parse_int_list(a.sweep, "--sweep");
  fmt::print("bench serve: {} model {}, {} prompts of {} {} -> {} tokens, request rate {}\n", a.url, config.model,
             a.num_prompts, a.input_len, a.prompt_kind == "ids" ? "token ids" : "words", a.output_len, a.request_rate);
  nlohmann::json runs = nlohmann::json::array();
  int64_t failed = 0;
  for (int c : concurrencies) {
    config.max_concurrency = c;
    const ServeBenchRun run = run_serve_bench(config, requests);
    const ServeBenchMetrics m = compute_metrics(run);
    fmt::print("{}", format_report(m, config.request_rate, c));
    for (const RequestResult& r : run.results)
      if (!r.success) {
        fmt::print(stderr, "first failed request: {}\n", r.error);
        break;
      }
    failed += m.failed;
    runs.push_back(run_json(run, m, config.request_rate, c));
  }
  const nlohmann::json out = {{"url", a.url},
                              {"model", config.model},
                              {"num_prompts", a.num_prompts},
                              {"input_len", a.input_len},
                              {"output_len", a.output_len},
                              {"prompt_kind", a.prompt_kind},
                              {"ignore_eos", config.ignore_eos},
                              {"extra_body", config.extra_body},
                              {"runs", runs}};
  std::string json_path = a.json_out;
  if (json_path.empty() && !a.plot_out.empty())
    json_path = std::filesystem::path(a.plot_out).replace_extension(".json").string();
  if (!json_path.empty()) {
    std::ofstream f(json_path);
    if (!f) fail("--json {}: cannot write the file", json_path);
    f << out.dump(1) << "\n";
    fmt::print("raw numbers: {}\n", json_path);
  }
  if (!a.plot_out.empty()) {
    const std::string script = a.plot_script.empty() ? default_plot_script() : a.plot_script;
    if (!std::filesystem::is_regular_file(script))
      fail("plot script {} not found (pass --plot-script); the numbers are in {}", script, json_path);
    const std::string cmd = fmt::format("/usr/bin/python3 '{}' '{}' '{}'", script, json_path, a.plot_out);
    if (std::system(cmd.c_str()) != 0) fail("plotting failed: {} (the numbers are in {})", cmd, json_path);
    fmt::print("plot: {}\n", a.plot_out);
  }
  if (failed > 0) fail("{} request(s) failed", failed);
}

}  // namespace

void add_bench_serve_command(CLI::App& bench) {
  auto args = std::make_shared<BenchServeArgs>();
  BenchServeArgs& a = *args;
  CLI::App* cmd = bench.add_subcommand(
      "serve", "Serving benchmark against a running server (TTFT, TPOT, ITL, E2E latency, throughput; vLLM's metrics)");
  cmd->add_option("--url", a.url, "Server base URL")->capture_default_str();
  cmd->add_option("--model", a.model, "Model id to request (default: the first one of GET /v1/models)");
  cmd->add_option("-n,--num-prompts", a.num_prompts, "Requests to send")->capture_default_str();
  cmd->add_option("--request-rate", a.request_rate, "Poisson arrival rate in requests/s, or inf (all at once)")
      ->capture_default_str();
  cmd->add_option("-c,--concurrency", a.concurrency, "Most requests in flight (0 = unlimited)")->capture_default_str();
  cmd->add_option("--input-len", a.input_len, "Prompt tokens per request")->capture_default_str();
  cmd->add_option("--output-len", a.output_len, "Output tokens per request (max_tokens, with ignore_eos)")
      ->capture_default_str();
  cmd->add_option("--prompt-kind", a.prompt_kind, "ids: random token ids; text: random words")->capture_default_str();
  cmd->add_option("--tokenizer", a.tokenizer, "Tokenizer whose non-special ids the prompts draw from");
  cmd->add_option("--vocab-size", a.vocab_size, "Without --tokenizer: prompt ids from [3, vocab-size)")
      ->capture_default_str();
  cmd->add_option("--seed", a.seed, "Seed of prompts and arrival times")->capture_default_str();
  cmd->add_flag("--no-ignore-eos", a.no_ignore_eos, "Let requests stop at EOS (output lengths then vary)");
  cmd->add_option("--extra-body", a.extra_body,
                  "JSON object merged into every request body, e.g. a structured-output constraint "
                  "'{\"guided_json\": {...}}'");
  cmd->add_option("--timeout", a.timeout_s, "Seconds one request may take")->capture_default_str();
  cmd->add_option("--json", a.json_out, "Write the metrics and per-request samples as JSON to this file");
  cmd->add_option("--plot", a.plot_out, "Sweep --sweep concurrencies and plot throughput and latency to this PNG");
  cmd->add_option("--sweep", a.sweep, "Concurrencies for --plot")->capture_default_str();
  cmd->add_option("--plot-script", a.plot_script, "Plotting script (default: scripts/plot_serve_bench.py)");
  cmd->callback([args] { run_bench_serve(*args); });
}

}  // namespace minfer::tools
