#include "server/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>
#include <utility>
#include <vector>

namespace minfer::server {
namespace {

// Buckets as vLLM's: latencies from milliseconds (decode steps) to minutes (long generations).
const std::vector<double> kTtftBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25, 0.5,
                                          0.75,  1.0,   2.5,  5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0};
const std::vector<double> kTpotBuckets = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4,
                                          0.5,  0.75,  1.0,  2.5,   5.0, 7.5,  10.0, 20.0, 40.0};
const std::vector<double> kE2eBuckets = {0.3,  0.5,  0.8,  1.0,  1.5,  2.0,   2.5,   5.0,   10.0, 15.0,
                                         20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0};

void header(std::string& out, const char* name, const char* type, const char* help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

template <typename T>
void metric(std::string& out, const char* name, const char* type, const char* help, T value) {
  header(out, name, type, help);
  out += fmt::format("{} {}\n", name, value);
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value, int64_t times) {
  const auto it = std::lower_bound(bounds_.begin(), bounds_.end(), value);  // le: value <= bound
  counts_[static_cast<size_t>(it - bounds_.begin())] += times;
  sum_ += value * static_cast<double>(times);
  count_ += times;
}

Histogram Histogram::of_counts(std::vector<double> upper_bounds, const std::vector<int64_t>& counts, double sum) {
  Histogram h(std::move(upper_bounds));
  for (size_t i = 0; i < counts.size() && i < h.counts_.size(); ++i) {
    h.counts_[i] = counts[i];
    h.count_ += counts[i];
  }
  h.sum_ = sum;
  return h;
}

void Histogram::render(const std::string& name, std::string& out, const std::string& labels) const {
  const std::string prefix = labels.empty() ? "" : labels + ",";
  const std::string own = labels.empty() ? "" : "{" + labels + "}";
  int64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += fmt::format("{}_bucket{{{}le=\"{}\"}} {}\n", name, prefix, bounds_[i], cumulative);
  }
  out += fmt::format("{}_bucket{{{}le=\"+Inf\"}} {}\n{}_sum{} {}\n{}_count{} {}\n", name, prefix, count_, name, own,
                     sum_, name, own, count_);
}

Metrics::Metrics(std::string model_name)
    : ttft_(kTtftBuckets),
      tpot_(kTpotBuckets),
      e2e_(kE2eBuckets),
      itl_(kTpotBuckets),
      model_label_(fmt::format("model_name=\"{}\"", model_name)) {}

void Metrics::record_response(const std::string& route, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++responses_[{route, status}];
}

void Metrics::record_generation(const RequestTiming& t) {
  std::lock_guard<std::mutex> lock(mu_);
  ++finished_;
  prompt_tokens_ += t.prompt_tokens;
  output_tokens_ += t.output_tokens;
  e2e_.observe(t.e2e_s);
  if (t.ttft_s >= 0.0) {
    ttft_.observe(t.ttft_s);
    // Time per output token after the first, as vLLM's TPOT.
    if (t.output_tokens > 1) {
      const double gap = (t.e2e_s - t.ttft_s) / static_cast<double>(t.output_tokens - 1);
      tpot_.observe(gap);
      itl_.observe(gap, t.output_tokens - 1);
    }
  }
  if (!t.finish_reason.empty()) ++finished_by_reason_[t.finish_reason];
}

void Metrics::record_disconnect() {
  std::lock_guard<std::mutex> lock(mu_);
  ++disconnects_;
}

void Metrics::record_auth_failure() {
  std::lock_guard<std::mutex> lock(mu_);
  ++auth_failures_;
}

void Metrics::record_rejected() {
  std::lock_guard<std::mutex> lock(mu_);
  ++rejected_;
}

void Metrics::connection_opened() {
  std::lock_guard<std::mutex> lock(mu_);
  ++connections_open_;
  ++connections_total_;
}

void Metrics::connection_closed() {
  std::lock_guard<std::mutex> lock(mu_);
  --connections_open_;
}

std::string Metrics::render(const EngineStats& s) const {
  std::string out;
  out.reserve(8192);
  std::lock_guard<std::mutex> lock(mu_);
  header(out, "minfer_http_requests_total", "counter", "HTTP responses by route and status code.");
  for (const auto& [key, count] : responses_)
    out += fmt::format("minfer_http_requests_total{{route=\"{}\",status=\"{}\"}} {}\n", key.first, key.second, count);
  metric(out, "minfer_http_connections_open", "gauge", "Open client connections.", connections_open_);
  metric(out, "minfer_http_connections_total", "counter", "Client connections accepted.", connections_total_);
  metric(out, "minfer_requests_finished_total", "counter", "Generation requests that ran to the end.", finished_);
  metric(out, "minfer_requests_disconnected_total", "counter",
         "Generation requests aborted because the client disconnected.", disconnects_);
  metric(out, "minfer_auth_failures_total", "counter", "Requests refused (401) for a missing or wrong API key.",
         auth_failures_);
  metric(out, "minfer_requests_rejected_total", "counter",
         "Requests turned away with 503 because the queue was full (--max-queued-requests).", rejected_);
  metric(out, "minfer_prompt_tokens_total", "counter", "Prompt tokens of finished requests.", prompt_tokens_);
  metric(out, "minfer_generation_tokens_total", "counter", "Tokens generated for finished requests.", output_tokens_);
  header(out, "minfer_time_to_first_token_seconds", "histogram", "Arrival to first generated token.");
  ttft_.render("minfer_time_to_first_token_seconds", out);
  header(out, "minfer_time_per_output_token_seconds", "histogram", "Mean time per output token after the first.");
  tpot_.render("minfer_time_per_output_token_seconds", out);
  header(out, "minfer_e2e_request_latency_seconds", "histogram", "Arrival to the last output of a request.");
  e2e_.render("minfer_e2e_request_latency_seconds", out);

  metric(out, "minfer_num_requests_running", "gauge", "Sequences the engine is running.", s.num_running);
  metric(out, "minfer_num_requests_waiting", "gauge", "Sequences waiting to be scheduled.", s.num_waiting);
  metric(out, "minfer_kv_page_size_tokens", "gauge", "Tokens per KV page.", s.page_size);
  metric(out, "minfer_kv_pages_total", "gauge", "KV pages in the pool.", s.pages_total);
  metric(out, "minfer_kv_pages_used", "gauge", "KV pages referenced by a sequence.", s.pages_used);
  metric(out, "minfer_kv_pages_cached", "gauge", "KV pages held by the prefix cache.", s.pages_cached);
  metric(out, "minfer_kv_cache_usage_ratio", "gauge", "Pages used / pages in the pool.",
         s.pages_total > 0 ? static_cast<double>(s.pages_used) / static_cast<double>(s.pages_total) : 0.0);
  metric(out, "minfer_kv_utilisation_ratio", "gauge", "Tokens held / token slots of the pages in use.",
         s.kv_utilisation);
  if (s.window_pages_total > 0) {  // models with sliding-window layers (their own pool)
    metric(out, "minfer_kv_window_pages_total", "gauge", "KV pages of the sliding-window layers' pool.",
           s.window_pages_total);
    metric(out, "minfer_kv_window_pages_used", "gauge", "Sliding-window KV pages referenced by a sequence.",
           s.window_pages_used);
    metric(out, "minfer_kv_window_pages_released_total", "counter",
           "Sliding-window KV pages returned to the pool once behind every window.", s.window_pages_released);
  }
  metric(out, "minfer_prefix_cache_queries_tokens_total", "counter", "Prompt tokens looked up in the prefix cache.",
         s.prefix_queried_tokens);
  metric(out, "minfer_prefix_cache_hits_tokens_total", "counter", "Prompt tokens found in the prefix cache.",
         s.prefix_hit_tokens);
  metric(out, "minfer_prefix_cache_hit_rate", "gauge", "Prefix cache hits / queries, in tokens.",
         s.prefix_cache_hit_rate);
  metric(out, "minfer_num_preemptions_total", "counter", "Sequences preempted for lack of KV pages.",
         s.num_preemptions);
  metric(out, "minfer_engine_steps_total", "counter", "Engine steps run.", s.num_steps);
  metric(out, "minfer_engine_prompt_tokens_total", "counter", "Prompt tokens of requests added to the engine.",
         s.prompt_tokens);
  metric(out, "minfer_engine_generation_tokens_total", "counter", "Tokens the engine has sampled.", s.generated_tokens);
  if (!s.spec_accepted_per_pos.empty()) {
    metric(out, "minfer_spec_decode_acceptance_rate", "gauge", "Draft tokens accepted / checked, so far.",
           s.spec_decode().acceptance_rate());
    metric(out, "minfer_spec_decode_mean_accepted_length", "gauge",
           "Tokens a draft check yields on average (accepted drafts + the sampled token).",
           s.spec_decode().mean_accepted_length());
  }
  render_vllm_names(s, out);
  return out;
}

// The tiers behind the prefix cache (--kv-offload-ram, --kv-cache-dir), each series labelled tier="ram" or "disk".
void Metrics::render_kv_tiers(const EngineStats& s, std::string& out) const {
  std::vector<std::pair<const char*, const EngineStats::KvTier*>> tiers;
  if (s.ram_tier.enabled) tiers.emplace_back("ram", &s.ram_tier);
  if (s.disk_tier.enabled || s.disk_tier.written_bytes > 0) tiers.emplace_back("disk", &s.disk_tier);
  if (tiers.empty()) return;
  auto series = [&](const char* name, int64_t EngineStats::KvTier::*field) {
    for (const auto& [tier, t] : tiers)
      out += fmt::format("{}{{{},tier=\"{}\"}} {}\n", name, model_label_, tier, t->*field);
  };
  series("minfer:prefix_cache_hits_total", &EngineStats::KvTier::hit_tokens);
  const std::tuple<const char*, const char*, const char*, int64_t EngineStats::KvTier::*> rows[] = {
      {"minfer:kv_tier_read_bytes_total", "counter", "Bytes copied back from a KV tier into the pool.",
       &EngineStats::KvTier::read_bytes},
      {"minfer:kv_tier_written_bytes_total", "counter", "Bytes stored into a KV tier.",
       &EngineStats::KvTier::written_bytes},
      {"minfer:kv_tier_entries", "gauge", "KV pages a tier holds (the disk tier: of this model).",
       &EngineStats::KvTier::entries},
      {"minfer:kv_tier_bytes", "gauge", "Bytes a tier holds (the disk tier: its whole folder).",
       &EngineStats::KvTier::bytes},
      {"minfer:kv_tier_evictions_total", "counter", "KV pages a tier dropped for room (least recently used).",
       &EngineStats::KvTier::evictions},
      {"minfer:kv_tier_corrupt_entries_total", "counter", "Tier entries found torn or corrupt: removed, never used.",
       &EngineStats::KvTier::corrupt_removed},
  };
  for (const auto& [name, type, help, field] : rows) {
    header(out, name, type, help);
    series(name, field);
  }
}

// vLLM's metric names (v1 engine), prefix "minfer:", labelled with the served model.
void Metrics::render_vllm_names(const EngineStats& s, std::string& out) const {
  const std::string& m = model_label_;
  auto gauge = [&](const char* name, const char* type, const char* help, auto value) {
    header(out, name, type, help);
    out += fmt::format("{}{{{}}} {}\n", name, m, value);
  };
  gauge("minfer:num_requests_running", "gauge", "Requests in the running batch.", s.num_running);
  gauge("minfer:num_requests_waiting", "gauge", "Requests waiting to be scheduled.", s.num_waiting);
  gauge("minfer:kv_cache_usage_perc", "gauge", "KV-cache usage: 1 means 100 percent.",
        s.pages_total > 0 ? static_cast<double>(s.pages_used) / static_cast<double>(s.pages_total) : 0.0);
  gauge("minfer:prefix_cache_queries_total", "counter", "Prefix-cache queries, in tokens.", s.prefix_queried_tokens);
  header(out, "minfer:prefix_cache_hits_total", "counter",
         "Prefix-cache hits, in tokens: in the pool (no tier label), or brought back from a KV tier.");
  out += fmt::format("minfer:prefix_cache_hits_total{{{}}} {}\n", m, s.prefix_hit_tokens);
  render_kv_tiers(s, out);
  gauge("minfer:num_preemptions_total", "counter", "Cumulative preemptions.", s.num_preemptions);
  gauge("minfer:prompt_tokens_total", "counter", "Prefill tokens processed.", s.prompt_tokens);
  gauge("minfer:generation_tokens_total", "counter", "Generation tokens processed.", s.generated_tokens);
  header(out, "minfer:request_success_total", "counter", "Successfully finished requests, by finish reason.");
  for (const char* reason : {"stop", "length", "abort"}) {
    const auto it = finished_by_reason_.find(reason);
    out += fmt::format("minfer:request_success_total{{{},finished_reason=\"{}\"}} {}\n", m, reason,
                       it == finished_by_reason_.end() ? 0 : it->second);
  }
  header(out, "minfer:time_to_first_token_seconds", "histogram", "Time to first token in seconds.");
  ttft_.render("minfer:time_to_first_token_seconds", out, m);
  header(out, "minfer:inter_token_latency_seconds", "histogram",
         "Inter-token latency in seconds (each request's mean gap, counted once per gap).");
  itl_.render("minfer:inter_token_latency_seconds", out, m);
  header(out, "minfer:e2e_request_latency_seconds", "histogram", "End-to-end request latency in seconds.");
  e2e_.render("minfer:e2e_request_latency_seconds", out, m);
  if (!s.spec_accepted_per_pos.empty()) {  // speculative decoding on
    gauge("minfer:spec_decode_num_drafts_total", "counter", "Draft checks run (one per sequence and step).",
          s.spec_num_drafts);
    gauge("minfer:spec_decode_num_draft_tokens_total", "counter", "Draft tokens checked.", s.spec_draft_tokens);
    gauge("minfer:spec_decode_num_accepted_tokens_total", "counter", "Draft tokens accepted.", s.spec_accepted_tokens);
    header(out, "minfer:spec_decode_num_accepted_tokens_per_pos_total", "counter",
           "Draft tokens accepted, by position in the draft.");
    for (size_t i = 0; i < s.spec_accepted_per_pos.size(); ++i)
      out += fmt::format("minfer:spec_decode_num_accepted_tokens_per_pos_total{{{},position=\"{}\"}} {}\n", m, i,
                         s.spec_accepted_per_pos[i]);
  }
  header(out, "minfer:iteration_tokens_total", "histogram", "Number of tokens per engine step.");
  const std::vector<double> bounds(std::begin(EngineStats::kIterationTokenBuckets),
                                   std::end(EngineStats::kIterationTokenBuckets));
  Histogram::of_counts(bounds, s.iteration_tokens_counts, static_cast<double>(s.iteration_tokens_sum))
      .render("minfer:iteration_tokens_total", out, m);
}

}  // namespace minfer::server
