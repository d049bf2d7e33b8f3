// Server metrics in the Prometheus text exposition format (GET /metrics): request counts by route and
// status, latency histograms (TTFT, TPOT, end-to-end), token counters, open connections, and the engine's
// gauges (running/waiting, KV pages, prefix cache) read from an EngineStats snapshot at scrape time.
// The same quantities are also served under vLLM's names with the prefix "minfer:" and a model_name label
// (minfer:num_requests_running, minfer:kv_cache_usage_perc, minfer:time_to_first_token_seconds, ...), so a
// dashboard built for vLLM works after replacing "vllm:" with "minfer:".
// Thread-safe: handlers on any io thread record, a scrape renders.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "minfer/engine.h"

namespace minfer::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  // One counted elsewhere (the engine's tokens per step): per-bucket counts (one more for +Inf) and the sum.
  static Histogram of_counts(std::vector<double> upper_bounds, const std::vector<int64_t>& counts, double sum);
  void observe(double value, int64_t times = 1);
  // Appends the _bucket, _sum and _count lines of `name`; labels ("k=\"v\"") go on every line.
  void render(const std::string& name, std::string& out, const std::string& labels = "") const;

 private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;  // per bucket (not cumulative); one more for +Inf
  double sum_ = 0.0;
  int64_t count_ = 0;
};

// One finished generation request, as the handler saw it.
struct RequestTiming {
  double ttft_s = -1.0;  // arrival to first token; < 0 when no token came
  double e2e_s = 0.0;    // arrival to the last output
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  std::string finish_reason;  // "stop", "length", "abort"
};

class Metrics {
 public:
  explicit Metrics(std::string model_name = "");

  void record_response(const std::string& route, int status);
  void record_generation(const RequestTiming& timing);
  void record_disconnect();    // a client went away before its request finished (the request was aborted)
  void record_auth_failure();  // a request without a valid API key (answered 401)
  void record_rejected();      // a request turned away with 503 because too many were queued
  void connection_opened();
  void connection_closed();

  std::string render(const EngineStats& engine) const;

 private:
  void render_vllm_names(const EngineStats& s, std::string& out) const;
  void render_kv_tiers(const EngineStats& s, std::string& out) const;

  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, int64_t> responses_;  // (route, status) -> count
  Histogram ttft_;
  Histogram tpot_;
  Histogram e2e_;
  Histogram itl_;  // vLLM's inter_token_latency_seconds: each request's mean gap, once per gap
  std::map<std::string, int64_t> finished_by_reason_;
  std::string model_label_;  // model_name="..." on the vLLM-named series
  int64_t prompt_tokens_ = 0;
  int64_t output_tokens_ = 0;
  int64_t finished_ = 0;
  int64_t disconnects_ = 0;
  int64_t auth_failures_ = 0;
  int64_t rejected_ = 0;
  int64_t connections_open_ = 0;
  int64_t connections_total_ = 0;
};

}  // namespace minfer::server
