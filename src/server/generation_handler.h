// Runs one generation request (/generate, /v1/completions, /v1/chat/completions) on the AsyncEngine and
// answers it, whole or streamed as server-sent events. Tokenizes and checks the prompt against
// max_model_len on the connection's thread, submits one engine request per (prompt, choice), then waits on
// an OutputChannel: each batch of outputs the engine thread pushes becomes SSE events (streaming) or is
// gathered into one response. A client that goes away mid-request aborts its engine requests, which frees
// their KV pages at the engine's next step.
#pragma once

// clang-format off
#include "server/asio.h"
// clang-format on
#include <atomic>
#include <cstdint>
#include <string>

#include "minfer/engine.h"
#include "server/chat_prompt.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/openai_protocol.h"

namespace minfer::server {

class GenerationHandler {
 public:
  GenerationHandler(AsyncEngine& engine, const ChatPrompt& chat, Metrics& metrics, std::string model_name);

  const std::string& model_name() const { return model_name_; }
  int64_t created() const { return created_; }

  // Writes the response (or nothing, when the client went away). Throws ApiError before anything is written
  // for a request that cannot be served.
  asio::awaitable<void> handle(GenerationRequest request, Connection& connection);

 private:
  std::vector<int32_t> tokenize(const GenerationRequest& request, const PromptInput& prompt) const;
  std::string next_id(RouteKind kind);

  AsyncEngine& engine_;
  const ChatPrompt& chat_;
  Metrics& metrics_;
  std::string model_name_;
  int64_t created_;
  std::atomic<uint64_t> counter_{0};
};

}  // namespace minfer::server
