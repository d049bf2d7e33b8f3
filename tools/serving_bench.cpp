#include "tools/serving_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <functional>
#include <numeric>
#include <random>
#include <string_view>
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange without including it
// clang-format off
#include <boost/asio/awaitable.hpp>
// clang-format on
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include "base/error.h"

namespace minfer::tools {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Server-sent events: blank-line separated events; calls on_data with each "data:" payload.
class SseParser {
 public:
  void feed(std::string_view bytes, const std::function<void(std::string_view)>& on_data) {
    for (char c : bytes)
      if (c != '\r') buffer_ += c;
    size_t end;
    while ((end = buffer_.find("\n\n")) != std::string::npos) {
      const std::string event = buffer_.substr(0, end);
      buffer_.erase(0, end + 2);
      size_t line_start = 0;
      while (line_start <= event.size()) {
        size_t line_end = event.find('\n', line_start);
        if (line_end == std::string::npos) line_end = event.size();
        std::string_view line(event.data() + line_start, line_end - line_start);
        if (line.starts_with("data:")) {
          line.remove_prefix(5);
          if (line.starts_with(' ')) line.remove_prefix(1);
          on_data(line);
        }
        line_start = line_end + 1;
      }
    }
  }

 private:
  std::string buffer_;
};

http::request<http::string_body> make_request(const ServeTarget& target, http::verb verb, const std::string& path,
                                              std::string body) {
  http::request<http::string_body> req{verb, target.base_path + path, 11};
  req.set(http::field::host, target.host + ":" + target.port);
  req.set(http::field::user_agent, "minfer-bench-serve");
  if (verb == http::verb::post) {
    req.set(http::field::content_type, "application/json");
    req.set(http::field::accept, "text/event-stream");
    req.body() = std::move(body);
    req.prepare_payload();
  }
  return req;
}

json completion_body(const ServeBenchConfig& config, const ServeBenchRequest& request) {
  json body = {{"model", config.model}, {"prompt", request.prompt}, {"max_tokens", request.output_len},
               {"temperature", 0.0},    {"stream", true},           {"stream_options", {{"include_usage", true}}}};
  if (config.ignore_eos) body["ignore_eos"] = true;
  for (const auto& [key, value] : config.extra_body.items()) body[key] = value;
  return body;
}

// One streamed completion, timed as vLLM's async_request_openai_completions does.
asio::awaitable<void> send_one(const ServeBenchConfig& config, const tcp::resolver::results_type& endpoints,
                               const ServeBenchRequest& request, RequestResult& out) {
  out.prompt_len = request.prompt_len;
  const Clock::time_point start = Clock::now();
  Clock::time_point most_recent = start;
  bool first_chunk = false;
  int64_t chunks = 0;
  try {
    beast::tcp_stream stream(co_await asio::this_coro::executor);
    stream.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(config.request_timeout_s)));
    co_await stream.async_connect(endpoints, asio::use_awaitable);
    auto req =
        make_request(config.target, http::verb::post, "/v1/completions", completion_body(config, request).dump());
    co_await http::async_write(stream, req, asio::use_awaitable);

    beast::flat_buffer buffer;
    http::response_parser<http::buffer_body> parser;
    parser.body_limit(std::numeric_limits<uint64_t>::max());
    co_await http::async_read_header(stream, buffer, parser, asio::use_awaitable);
    const unsigned status = parser.get().result_int();
    std::string error_body;
    SseParser sse;
    char chunk[16384];
    while (!parser.is_done()) {
      parser.get().body().data = chunk;
      parser.get().body().size = sizeof chunk;
      beast::error_code ec;
      // read_some returns after each socket read; read() would wait for a full buffer and batch the events.
      co_await http::async_read_some(stream, buffer, parser, asio::redirect_error(asio::use_awaitable, ec));
      if (ec == http::error::need_buffer) ec = {};
      if (ec) throw beast::system_error(ec);
      const size_t n = sizeof chunk - parser.get().body().size;
      const Clock::time_point now = Clock::now();
      if (status != 200) {
        error_body.append(chunk, n);
        continue;
      }
      sse.feed(std::string_view(chunk, n), [&](std::string_view data) {
        if (data == "[DONE]") return;
        const json j = json::parse(data, nullptr, /*allow_exceptions=*/false);
        if (j.is_discarded()) fail("malformed JSON in the event stream: {}", data.substr(0, 200));
        if (j.contains("error")) fail("error event: {}", j["error"].dump());
        const auto choices = j.find("choices");
        if (choices != j.end() && choices->is_array() && !choices->empty()) {
          // vLLM: the first chunk with choices ends TTFT; each later one adds an inter-token latency.
          if (!first_chunk) {
            first_chunk = true;
            out.ttft_s = seconds_between(start, now);
          } else {
            out.itl_s.push_back(seconds_between(most_recent, now));
          }
          most_recent = now;
          ++chunks;
        } else if (const auto usage = j.find("usage"); usage != j.end() && usage->is_object()) {
          if (usage->contains("completion_tokens")) out.output_tokens = (*usage)["completion_tokens"].get<int64_t>();
          if (usage->contains("prompt_tokens")) out.prompt_len = (*usage)["prompt_tokens"].get<int64_t>();
        }
      });
    }
    beast::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    if (status != 200) fail("HTTP {}: {}", status, error_body.substr(0, 300));
    if (!first_chunk) fail("never received a chunk with choices");
    // Without usage in the stream, count one token per chunk (exact for servers that stream token by token).
    if (out.output_tokens == 0) out.output_tokens = chunks;
    out.latency_s = seconds_between(start, most_recent);
    out.success = true;
  } catch (const std::exception& e) {
    out.success = false;
    out.error = e.what();
  }
}

// Starts requests as they arrive while slots are free; a finished request frees its slot for the next.
class Dispatcher {
 public:
  Dispatcher(asio::io_context& io, const ServeBenchConfig& config, const tcp::resolver::results_type& endpoints,
             const std::vector<ServeBenchRequest>& requests, std::vector<RequestResult>& results)
      : io_(io), config_(config), endpoints_(endpoints), requests_(requests), results_(results) {}

  asio::awaitable<void> arrivals() {
    std::mt19937_64 rng(config_.seed);
    const bool paced = std::isfinite(config_.request_rate) && config_.request_rate > 0;
    std::exponential_distribution<double> interval(paced ? config_.request_rate : 1.0);
    asio::steady_timer timer(io_);
    Clock::time_point next = Clock::now();
    for (size_t i = 0; i < requests_.size(); ++i) {
      if (paced && i > 0) {
        next += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(interval(rng)));
        timer.expires_at(next);
        co_await timer.async_wait(asio::use_awaitable);
      }
      pending_.push_back(i);
      start_pending();
    }
  }

 private:
  void start_pending() {
    while (!pending_.empty() && (config_.max_concurrency <= 0 || in_flight_ < config_.max_concurrency)) {
      const size_t i = pending_.front();
      pending_.pop_front();
      ++in_flight_;
      asio::co_spawn(io_, run_one(i), asio::detached);
    }
  }

  asio::awaitable<void> run_one(size_t i) {
    co_await send_one(config_, endpoints_, requests_[i], results_[i]);
    --in_flight_;
    start_pending();
  }

  asio::io_context& io_;
  const ServeBenchConfig& config_;
  const tcp::resolver::results_type& endpoints_;
  const std::vector<ServeBenchRequest>& requests_;
  std::vector<RequestResult>& results_;
  std::deque<size_t> pending_;
  int in_flight_ = 0;
};

tcp::resolver::results_type resolve(asio::io_context& io, const ServeTarget& target) {
  tcp::resolver resolver(io);
  beast::error_code ec;
  auto endpoints = resolver.resolve(target.host, target.port, ec);
  if (ec) fail("cannot resolve {}:{}: {}", target.host, target.port, ec.message());
  return endpoints;
}

LatencyStats stats_ms(const std::vector<double>& seconds) {
  LatencyStats s;
  if (seconds.empty()) return s;
  const double n = static_cast<double>(seconds.size());
  const double mean = std::accumulate(seconds.begin(), seconds.end(), 0.0) / n;
  double var = 0;
  for (double v : seconds) var += (v - mean) * (v - mean);
  s.mean_ms = mean * 1000;
  s.std_ms = std::sqrt(var / n) * 1000;  // numpy.std: population standard deviation
  s.median_ms = percentile(seconds, 50) * 1000;
  s.p99_ms = percentile(seconds, 99) * 1000;
  return s;
}

}  // namespace

ServeTarget parse_http_url(const std::string& url) {
  constexpr std::string_view kScheme = "http://";
  if (!std::string_view(url).starts_with(kScheme))
    fail("--url {}: expected http://HOST:PORT[/PATH] (https is not supported)", url);
  std::string rest = url.substr(kScheme.size());
  ServeTarget t;
  const size_t slash = rest.find('/');
  if (slash != std::string::npos) {
    t.base_path = rest.substr(slash);
    rest.resize(slash);
    while (!t.base_path.empty() && t.base_path.back() == '/') t.base_path.pop_back();
  }
  const size_t colon = rest.rfind(':');
  const size_t bracket = rest.find(']');  // [v6::addr]:port
  if (colon == std::string::npos || (bracket != std::string::npos && bracket > colon)) {
    t.host = rest;
    t.port = "80";
  } else {
    t.host = rest.substr(0, colon);
    t.port = rest.substr(colon + 1);
  }
  if (t.host.size() > 2 && t.host.front() == '[' && t.host.back() == ']') t.host = t.host.substr(1, t.host.size() - 2);
  if (t.host.empty() || t.port.empty() || t.port.find_first_not_of("0123456789") != std::string::npos)
    fail("--url {}: expected http://HOST:PORT[/PATH]", url);
  return t;
}

ServedModel query_served_model(const ServeTarget& target) {
  const std::string url = fmt::format("http://{}:{}{}/v1/models", target.host, target.port, target.base_path);
  try {
    asio::io_context io;
    beast::tcp_stream stream(io);
    stream.expires_after(std::chrono::seconds(30));
    stream.connect(resolve(io, target));
    auto req = make_request(target, http::verb::get, "/v1/models", "");
    http::write(stream, req);
    beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(stream, buffer, res);
    if (res.result_int() != 200) fail("HTTP {}: {}", res.result_int(), res.body().substr(0, 300));
    const json j = json::parse(res.body());
    const json& first = j.at("data").at(0);
    ServedModel m;
    m.id = first.at("id").get<std::string>();
    if (first.contains("max_model_len") && first["max_model_len"].is_number_integer())
      m.max_model_len = first["max_model_len"].get<int64_t>();
    return m;
  } catch (const std::exception& e) {
    fail("GET {}: {}", url, e.what());
  }
}

ServeBenchRun run_serve_bench(const ServeBenchConfig& config, const std::vector<ServeBenchRequest>& requests) {
  asio::io_context io;
  const tcp::resolver::results_type endpoints = resolve(io, config.target);
  ServeBenchRun run;
  run.results.resize(requests.size());
  Dispatcher dispatcher(io, config, endpoints, requests, run.results);
  const Clock::time_point start = Clock::now();
  asio::co_spawn(io, dispatcher.arrivals(), [](std::exception_ptr e) {
    if (e) std::rethrow_exception(e);
  });
  io.run();
  run.duration_s = seconds_between(start, Clock::now());
  return run;
}

double percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double rank = q / 100.0 * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (values[hi] - values[lo]) * (rank - static_cast<double>(lo));
}

ServeBenchMetrics compute_metrics(const ServeBenchRun& run) {
  ServeBenchMetrics m;
  m.duration_s = run.duration_s;
  std::vector<double> ttfts, tpots, itls, e2els;
  for (const RequestResult& r : run.results) {
    if (!r.success) {
      ++m.failed;
      continue;
    }
    ++m.completed;
    m.total_input += r.prompt_len;
    m.total_output += r.output_tokens;
    if (r.output_tokens > 1) tpots.push_back((r.latency_s - r.ttft_s) / static_cast<double>(r.output_tokens - 1));
    itls.insert(itls.end(), r.itl_s.begin(), r.itl_s.end());
    ttfts.push_back(r.ttft_s);
    e2els.push_back(r.latency_s);
  }
  if (m.duration_s > 0) {
    m.request_throughput = static_cast<double>(m.completed) / m.duration_s;
    m.output_throughput = static_cast<double>(m.total_output) / m.duration_s;
    m.total_token_throughput = static_cast<double>(m.total_input + m.total_output) / m.duration_s;
  }
  m.ttft = stats_ms(ttfts);
  m.tpot = stats_ms(tpots);
  m.itl = stats_ms(itls);
  m.e2el = stats_ms(e2els);
  return m;
}

std::string format_report(const ServeBenchMetrics& m, double request_rate, int max_concurrency) {
  std::string out;
  auto line = [&](std::string_view label, const std::string& value) {
    out += fmt::format("{:<40} {:<10}\n", label, value);
  };
  auto header = [&](std::string_view title) { out += fmt::format("{:-^50}\n", title); };
  auto latency = [&](std::string_view name, std::string_view title, const LatencyStats& s) {
    header(title);
    line(fmt::format("Mean {} (ms):", name), fmt::format("{:.2f}", s.mean_ms));
    line(fmt::format("Median {} (ms):", name), fmt::format("{:.2f}", s.median_ms));
    line(fmt::format("P99 {} (ms):", name), fmt::format("{:.2f}", s.p99_ms));
  };
  out += fmt::format("{:=^50}\n", " Serving Benchmark Result ");
  line("Successful requests:", std::to_string(m.completed));
  if (m.failed > 0) line("Failed requests:", std::to_string(m.failed));
  line("Request rate configured (RPS):", std::isfinite(request_rate) ? fmt::format("{:.2f}", request_rate) : "inf");
  if (max_concurrency > 0) line("Maximum request concurrency:", std::to_string(max_concurrency));
  line("Benchmark duration (s):", fmt::format("{:.2f}", m.duration_s));
  line("Total input tokens:", std::to_string(m.total_input));
  line("Total generated tokens:", std::to_string(m.total_output));
  line("Request throughput (req/s):", fmt::format("{:.2f}", m.request_throughput));
  line("Output token throughput (tok/s):", fmt::format("{:.2f}", m.output_throughput));
  line("Total Token throughput (tok/s):", fmt::format("{:.2f}", m.total_token_throughput));
  latency("TTFT", "Time to First Token", m.ttft);
  latency("TPOT", "Time per Output Token (excl. 1st token)", m.tpot);
  latency("ITL", "Inter-token Latency", m.itl);
  latency("E2EL", "End-to-end Latency", m.e2el);
  out += std::string(50, '=') + "\n";
  return out;
}

nlohmann::json metrics_to_json(const ServeBenchMetrics& m) {
  json j = {{"completed", m.completed},
            {"failed", m.failed},
            {"duration_s", m.duration_s},
            {"total_input_tokens", m.total_input},
            {"total_output_tokens", m.total_output},
            {"request_throughput", m.request_throughput},
            {"output_throughput", m.output_throughput},
            {"total_token_throughput", m.total_token_throughput}};
  auto add = [&](const std::string& name, const LatencyStats& s) {
    j["mean_" + name + "_ms"] = s.mean_ms;
    j["median_" + name + "_ms"] = s.median_ms;
    j["std_" + name + "_ms"] = s.std_ms;
    j["p99_" + name + "_ms"] = s.p99_ms;
  };
  add("ttft", m.ttft);
  add("tpot", m.tpot);
  add("itl", m.itl);
  add("e2el", m.e2el);
  return j;
}

}  // namespace minfer::tools
