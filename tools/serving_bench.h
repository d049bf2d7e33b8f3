// The client side of `minfer bench serve`: sends streaming /v1/completions requests to an OpenAI-compatible
// server with Poisson arrivals under a concurrency cap, timestamps every SSE event, and reduces the samples
// to the metrics of vLLM's serving benchmark (benchmarks/benchmark_serving.py), defined the same way:
//   TTFT  start of the request -> first streamed chunk with text
//   ITL   time between consecutive streamed chunks (all requests pooled)
//   TPOT  (e2e latency - TTFT) / (output tokens - 1), per request with more than one output token
//   E2EL  start of the request -> end of the stream
//   request / output-token / total-token throughput over the benchmark's wall time.
// A request's clock starts when it gets a concurrency slot, as in vLLM.
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace minfer::tools {

struct ServeTarget {
  std::string host;
  std::string port;
  std::string base_path;  // e.g. "" or "/api" (the URL's path, without a trailing '/')
};

// "http://127.0.0.1:8000" or "http://host:port/prefix"; throws Error for anything else (https included).
ServeTarget parse_http_url(const std::string& url);

struct ServeBenchRequest {
  nlohmann::json prompt;   // a string or an array of token ids
  int64_t prompt_len = 0;  // tokens (used when the server reports no usage)
  int64_t output_len = 0;
};

struct ServeBenchConfig {
  ServeTarget target;
  std::string model;                                              // "model" field of each request
  double request_rate = std::numeric_limits<double>::infinity();  // requests/s; inf: all at once
  int max_concurrency = 0;                                        // 0: unlimited
  bool ignore_eos = true;
  uint64_t seed = 0;
  double request_timeout_s = 600;
  // Fields merged into every request body (e.g. a structured-output constraint: {"guided_json": {...}}).
  nlohmann::json extra_body = nlohmann::json::object();
};

struct RequestResult {
  bool success = false;
  std::string error;
  int64_t prompt_len = 0;
  int64_t output_tokens = 0;
  double ttft_s = 0;
  double latency_s = 0;
  std::vector<double> itl_s;
};

struct ServeBenchRun {
  std::vector<RequestResult> results;
  double duration_s = 0;
};

// Runs the requests against the server (blocking). Throws Error if the server cannot be reached at all;
// a failed request is recorded in its RequestResult.
ServeBenchRun run_serve_bench(const ServeBenchConfig& config, const std::vector<ServeBenchRequest>& requests);

// GET /v1/models: the first model's id and max_model_len (0 when not reported). Throws Error naming the URL.
struct ServedModel {
  std::string id;
  int64_t max_model_len = 0;
};
ServedModel query_served_model(const ServeTarget& target);

struct LatencyStats {
  double mean_ms = 0, median_ms = 0, std_ms = 0, p99_ms = 0;
};

struct ServeBenchMetrics {
  int64_t completed = 0;
  int64_t failed = 0;
  double duration_s = 0;
  int64_t total_input = 0;
  int64_t total_output = 0;
  double request_throughput = 0;      // req/s
  double output_throughput = 0;       // output tok/s
  double total_token_throughput = 0;  // (input + output) tok/s
  LatencyStats ttft, tpot, itl, e2el;
};

ServeBenchMetrics compute_metrics(const ServeBenchRun& run);

// The report in vLLM's layout.
std::string format_report(const ServeBenchMetrics& m, double request_rate, int max_concurrency);

nlohmann::json metrics_to_json(const ServeBenchMetrics& m);

// numpy.percentile's default (linear interpolation between closest ranks); q in [0, 100]. 0 for no values.
double percentile(std::vector<double> values, double q);

}  // namespace minfer::tools
