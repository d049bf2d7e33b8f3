#include "server/router.h"

#include <spdlog/spdlog.h>

#include <optional>

#include "server/anthropic_protocol.h"
#include "server/api_error.h"
#include "server/json.h"
#include "server/openai_protocol.h"
#include "server/responses_protocol.h"
#include "server/responses_routes.h"

namespace minfer::server {
namespace {

// Named, not literals: GCC 12 fails on a string literal inside a co_await expression ("array used as
// initializer").
const std::string_view kJsonType = "application/json";
const std::string_view kPrometheusType = "text/plain; version=0.0.4";
const std::string_view kHealthyBody = R"({"status":"ok"})";

// Who may call a route: anyone (/health), key holders when keys are set (every route that tokenizes or runs the
// model, and /v1/models), or /metrics's own rule (open unless --metrics-require-key).
enum class Guard : uint8_t { kOpen, kKey, kMetrics };

struct Route {
  const char* path;
  http::verb method;
  Guard guard;
  bool model = false;                             // runs the model: counted against the in-flight cap
  bool prefix = false;                            // the path is a prefix (an id follows)
  http::verb other_method = http::verb::unknown;  // a second method the route takes
};

constexpr Route kRoutes[] = {
    {"/health", http::verb::get, Guard::kOpen},
    {"/metrics", http::verb::get, Guard::kMetrics},
    {"/v1/models", http::verb::get, Guard::kKey},
    {"/generate", http::verb::post, Guard::kKey, true},
    {"/v1/completions", http::verb::post, Guard::kKey, true},
    {"/v1/chat/completions", http::verb::post, Guard::kKey, true},
    {"/v1/messages", http::verb::post, Guard::kKey, true},
    {"/v1/messages/count_tokens", http::verb::post, Guard::kKey},
    {"/v1/responses", http::verb::post, Guard::kKey, true},
    {"/v1/responses/", http::verb::get, Guard::kKey, false, true, http::verb::delete_},
    {"/tokenize", http::verb::post, Guard::kKey},
    {"/detokenize", http::verb::post, Guard::kKey},
    {"/v1/embeddings", http::verb::post, Guard::kKey, true},
};

std::string count_tokens_json(int64_t input_tokens) { return json{{"input_tokens", input_tokens}}.dump(); }

const Route* find_route(const std::string& path) {
  for (const Route& r : kRoutes)
    if (r.prefix ? path.starts_with(r.path) : path == r.path) return &r;
  return nullptr;
}

}  // namespace

std::string error_json(int status, const std::string& message) {
  return ApiError(status, message).to_json().dump(-1, ' ', false, json::error_handler_t::replace);
}

Router::Router(AsyncEngine& engine, GenerationHandler& generation, const TokenizerRoutes& tokenizer_routes,
               EmbeddingsHandler& embeddings, ResponseStore& responses, Metrics& metrics, const Access& access,
               int64_t max_in_flight)
    : engine_(engine),
      generation_(generation),
      tokenizer_routes_(tokenizer_routes),
      embeddings_(embeddings),
      responses_(responses),
      metrics_(metrics),
      access_(access),
      max_in_flight_(max_in_flight) {}

asio::awaitable<void> Router::handle(const HttpRequest& request, Connection& connection) {
  const std::string_view target(request.target().data(), request.target().size());
  const std::string path(target.substr(0, target.find('?')));
  const Route* route = find_route(path);
  if (const std::optional<std::string> origin = access_.allowed_origin(request)) {
    connection.add_header("Access-Control-Allow-Origin", *origin);
    connection.add_header("Vary", "Origin");
  }
  std::optional<ApiError> error;
  try {
    co_await dispatch(request, path, connection);
  } catch (const ApiError& e) {
    error = e;
  } catch (const std::exception& e) {
    spdlog::error("{} {}: {}", std::string(request.method_string()), path, e.what());
    error = ApiError(500, fmt::format("internal error: {}", e.what()));
  }
  if (error && connection.status() != 0) {
    spdlog::warn("{} {}: error after the response began: {}", std::string(request.method_string()), path,
                 error->what());
  } else if (error) {
    if (error->status() >= 500)
      spdlog::warn("{} {} -> {}: {}", std::string(request.method_string()), path, error->status(), error->what());
    // Anthropic's routes answer in Anthropic's error shape, the others in OpenAI's.
    const json body = path.starts_with("/v1/messages")
                          ? anthropic_error_json(error->status(), error->what(), error->param())
                          : error->to_json();
    co_await connection.send(static_cast<http::status>(error->status()),
                             body.dump(-1, ' ', false, json::error_handler_t::replace), kJsonType);
  }
  // Clients that went away before any response are counted as 499 (nginx's "client closed request").
  metrics_.record_response(route ? route->path : "other", connection.status() ? connection.status() : 499);
}

asio::awaitable<void> Router::dispatch(const HttpRequest& request, const std::string& path, Connection& connection) {
  const Route* route = find_route(path);
  if (!route)
    throw ApiError(404, fmt::format("no route {} {}", std::string(request.method_string()), path), "", "not_found");
  if (Access::is_preflight(request)) {  // a browser asking before a cross-origin call: no key needed
    if (!access_.answer_preflight(request, connection))
      throw ApiError(403,
                     "CORS preflight refused: the origin or method is not allowed (--allowed-origins, "
                     "--allowed-methods)");
    co_await connection.send(http::status::no_content, "", "");
    co_return;
  }
  if (request.method() != route->method && request.method() != route->other_method)
    throw ApiError(405, fmt::format("{} expects {}, not {}", path, std::string(http::to_string(route->method)),
                                    std::string(request.method_string())));
  const bool needs_key =
      route->guard == Guard::kKey || (route->guard == Guard::kMetrics && access_.metrics_require_key());
  if (needs_key && !access_.authorized(request)) {
    metrics_.record_auth_failure();
    throw ApiError(401, "missing or wrong API key: send the header 'Authorization: Bearer <key>' or 'x-api-key: <key>'",
                   "", "invalid_api_key");
  }
  if (route->model) {
    // Past the cap a request would only wait: say so now, with when to retry, instead of queueing without bound.
    struct InFlight {
      std::atomic<int64_t>& n;
      ~InFlight() { --n; }
    } in_flight{in_flight_};
    if (++in_flight_ > max_in_flight_) {
      metrics_.record_rejected();
      connection.add_header("Retry-After", "1");
      throw ApiError(503, fmt::format("the server has {} requests running or queued (--max-queued-requests): retry "
                                      "shortly",
                                      max_in_flight_));
    }
    co_await run_model_route(request, path, connection);
    co_return;
  }

  if (path == "/health") {
    co_await connection.send(http::status::ok, std::string(kHealthyBody), kJsonType);
  } else if (path == "/metrics") {
    co_await connection.send(http::status::ok, metrics_.render(engine_.stats()), kPrometheusType);
  } else if (path == "/v1/models") {
    const json model = {{"id", generation_.model_name()},
                        {"object", "model"},
                        {"created", generation_.created()},
                        {"owned_by", "minfer"},
                        {"max_model_len", engine_.config().max_model_len}};
    std::string body = json{{"object", "list"}, {"data", json::array({model})}}.dump();
    co_await connection.send(http::status::ok, std::move(body), kJsonType);
  } else if (path == "/tokenize" || path == "/detokenize") {
    const json body = parse_json_body(request.body());
    const json out = path == "/tokenize" ? tokenizer_routes_.tokenize(body) : tokenizer_routes_.detokenize(body);
    co_await connection.send(http::status::ok, out.dump(-1, ' ', false, json::error_handler_t::replace), kJsonType);
  } else if (path.starts_with("/v1/responses/")) {
    const std::string_view target(request.target().data(), request.target().size());
    const size_t q = target.find('?');
    std::string body = stored_response_route(responses_, request.method(), std::string_view(path).substr(14),
                                             q == std::string_view::npos ? "" : target.substr(q + 1))
                           .dump(-1, ' ', false, json::error_handler_t::replace);
    co_await connection.send(http::status::ok, std::move(body), kJsonType);
  } else if (path == "/v1/messages/count_tokens") {
    const int64_t n = generation_.count_tokens(parse_messages_request(parse_json_body(request.body()), true));
    std::string body = count_tokens_json(n);  // no literal inside co_await (GCC 12, above)
    co_await connection.send(http::status::ok, std::move(body), kJsonType);
  }
}

asio::awaitable<void> Router::run_model_route(const HttpRequest& request, const std::string& path,
                                              Connection& connection) {
  if (path == "/v1/embeddings") {
    if (engine_.config().task != EngineTask::kEmbed)
      throw ApiError(400, "this server generates text: start it with --task embed to serve /v1/embeddings", "",
                     "embeddings_unavailable");
    co_await embeddings_.handle(parse_json_body(request.body()), connection);
  } else if (engine_.config().task == EngineTask::kEmbed) {
    throw ApiError(400, fmt::format("this server computes embeddings (--task embed): {} is unavailable", path), "",
                   "generation_unavailable");
  } else {
    const json body = parse_json_body(request.body());
    GenerationRequest parsed = path == "/generate"         ? parse_generate_request(body)
                               : path == "/v1/completions" ? parse_completion_request(body)
                               : path == "/v1/messages"    ? parse_messages_request(body)
                               : path == "/v1/responses"   ? parse_responses_request(body, responses_)
                                                           : parse_chat_request(body);
    co_await generation_.handle(std::move(parsed), connection);
  }
}

}  // namespace minfer::server
