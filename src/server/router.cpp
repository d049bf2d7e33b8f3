#include "server/router.h"

#include <spdlog/spdlog.h>

#include <optional>

#include "server/api_error.h"
#include "server/json.h"
#include "server/openai_protocol.h"

namespace minfer::server {
namespace {

// Named, not literals: GCC 12 fails on a string literal inside a co_await expression ("array used as
// initializer").
const std::string_view kJsonType = "application/json";
const std::string_view kPrometheusType = "text/plain; version=0.0.4";
const std::string_view kHealthyBody = R"({"status":"ok"})";

struct Route {
  const char* path;
  http::verb method;
};

constexpr Route kRoutes[] = {
    {"/health", http::verb::get},    {"/metrics", http::verb::get},         {"/v1/models", http::verb::get},
    {"/generate", http::verb::post}, {"/v1/completions", http::verb::post}, {"/v1/chat/completions", http::verb::post},
    {"/tokenize", http::verb::post}, {"/detokenize", http::verb::post},     {"/v1/embeddings", http::verb::post},
};

const Route* find_route(const std::string& path) {
  for (const Route& r : kRoutes)
    if (path == r.path) return &r;
  return nullptr;
}

// Compares without an early exit, so the time taken does not tell how much of a guessed key was right.
bool constant_time_equal(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

}  // namespace

std::string error_json(int status, const std::string& message) {
  return ApiError(status, message).to_json().dump(-1, ' ', false, json::error_handler_t::replace);
}

Router::Router(AsyncEngine& engine, GenerationHandler& generation, const TokenizerRoutes& tokenizer_routes,
               EmbeddingsHandler& embeddings, Metrics& metrics, std::string api_key)
    : engine_(engine),
      generation_(generation),
      tokenizer_routes_(tokenizer_routes),
      embeddings_(embeddings),
      metrics_(metrics),
      api_key_(std::move(api_key)) {}

bool Router::authorized(const HttpRequest& request) const {
  if (api_key_.empty()) return true;
  const auto it = request.find(http::field::authorization);
  if (it == request.end()) return false;
  const std::string_view value(it->value().data(), it->value().size());
  constexpr std::string_view kBearer = "Bearer ";
  return value.starts_with(kBearer) && constant_time_equal(value.substr(kBearer.size()), api_key_);
}

asio::awaitable<void> Router::handle(const HttpRequest& request, Connection& connection) {
  const std::string_view target(request.target().data(), request.target().size());
  const std::string path(target.substr(0, target.find('?')));
  const Route* route = find_route(path);
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
    co_await connection.send(static_cast<http::status>(error->status()),
                             error->to_json().dump(-1, ' ', false, json::error_handler_t::replace), kJsonType);
  }
  // Clients that went away before any response are counted as 499 (nginx's "client closed request").
  metrics_.record_response(route ? route->path : "other", connection.status() ? connection.status() : 499);
}

asio::awaitable<void> Router::dispatch(const HttpRequest& request, const std::string& path, Connection& connection) {
  const Route* route = find_route(path);
  if (!route)
    throw ApiError(404, fmt::format("no route {} {}", std::string(request.method_string()), path), "", "not_found");
  if (request.method() != route->method)
    throw ApiError(405, fmt::format("{} expects {}, not {}", path, std::string(http::to_string(route->method)),
                                    std::string(request.method_string())));
  if (path.starts_with("/v1/") && !authorized(request))
    throw ApiError(401, "missing or wrong API key: send the header 'Authorization: Bearer <key>'", "",
                   "invalid_api_key");

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
  } else if (path == "/v1/embeddings") {
    if (engine_.config().task != EngineTask::kEmbed)
      throw ApiError(400, "this server generates text: start it with --task embed to serve /v1/embeddings", "",
                     "embeddings_unavailable");
    co_await embeddings_.handle(parse_json_body(request.body()), connection);
  } else if (engine_.config().task == EngineTask::kEmbed && path != "/tokenize" && path != "/detokenize") {
    throw ApiError(400, fmt::format("this server computes embeddings (--task embed): {} is unavailable", path), "",
                   "generation_unavailable");
  } else if (path == "/tokenize" || path == "/detokenize") {
    const json body = parse_json_body(request.body());
    const json out = path == "/tokenize" ? tokenizer_routes_.tokenize(body) : tokenizer_routes_.detokenize(body);
    co_await connection.send(http::status::ok, out.dump(-1, ' ', false, json::error_handler_t::replace), kJsonType);
  } else {
    const json body = parse_json_body(request.body());
    GenerationRequest parsed = path == "/generate"         ? parse_generate_request(body)
                               : path == "/v1/completions" ? parse_completion_request(body)
                                                           : parse_chat_request(body);
    co_await generation_.handle(std::move(parsed), connection);
  }
}

}  // namespace minfer::server
