// Maps method + path to the handlers, checks the API key on every route that tokenizes or runs the model (and on
// /metrics with --metrics-require-key), answers CORS preflights, turns away requests past the queue cap with 503
// and Retry-After, and turns every error a handler throws into an OpenAI-style JSON error response; records each
// response in the metrics.
//
//   GET  /health                 liveness: 200 {"status": "ok"}
//   GET  /metrics                Prometheus text
//   GET  /v1/models              the served model
//   POST /generate               {"text", "max_new_tokens"=50, sampling fields} -> {"output"}
//   POST /v1/completions         OpenAI completions (prompt: string, strings, token ids), SSE streaming
//   POST /v1/chat/completions    OpenAI chat completions through the model's chat template, SSE streaming
//   POST /tokenize, /detokenize  vLLM's tokenizer routes (tokenizer_routes.h)
//   POST /v1/embeddings          OpenAI embeddings, on an engine started with --task embed (embeddings_handler.h)
//   POST /v1/messages            Anthropic's Messages API (+ /count_tokens; anthropic_protocol.h), Anthropic's errors
//   POST /v1/responses           OpenAI's Responses API (responses_protocol.h); GET / DELETE /v1/responses/{id},
//                                GET /v1/responses/{id}/input_items: the stored ones (responses_store.h)
#pragma once

// clang-format off
#include "server/asio.h"
// clang-format on
#include <atomic>
#include <string>

#include "minfer/engine.h"
#include "server/access.h"
#include "server/embeddings_handler.h"
#include "server/generation_handler.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/responses_store.h"
#include "server/tokenizer_routes.h"

namespace minfer::server {

class Router {
 public:
  // max_in_flight: requests for the model (generation, embeddings) handled at once, running and queued; past it,
  // 503 with Retry-After.
  Router(AsyncEngine& engine, GenerationHandler& generation, const TokenizerRoutes& tokenizer_routes,
         EmbeddingsHandler& embeddings, ResponseStore& responses, Metrics& metrics, const Access& access,
         int64_t max_in_flight);

  asio::awaitable<void> handle(const HttpRequest& request, Connection& connection);

 private:
  asio::awaitable<void> dispatch(const HttpRequest& request, const std::string& path, Connection& connection);
  asio::awaitable<void> run_model_route(const HttpRequest& request, const std::string& path, Connection& connection);

  AsyncEngine& engine_;
  GenerationHandler& generation_;
  const TokenizerRoutes& tokenizer_routes_;
  EmbeddingsHandler& embeddings_;
  ResponseStore& responses_;
  Metrics& metrics_;
  const Access& access_;
  int64_t max_in_flight_;
  std::atomic<int64_t> in_flight_{0};
};

// {"error": {...}} for errors the HTTP layer answers itself.
std::string error_json(int status, const std::string& message);

}  // namespace minfer::server
