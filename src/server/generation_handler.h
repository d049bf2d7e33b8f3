// The request core of the generation routes (/generate, /v1/completions, /v1/chat/completions), top to bottom:
//   1. prepare: check the model name, render the chat template, tokenize, check each prompt against
//      max_model_len with its max_tokens (the API's own check, naming the field; the engine validates the
//      rest once, when the request is submitted);
//   2. submit one engine request per (prompt, choice), each read through its RequestState, whose listener
//      wakes this connection's coroutine;
//   3. collect: stream each output through the route's ResponseWriter as server-sent events, or wait for every
//      choice and send the writer's body.
// A client that goes away mid-request aborts its engine requests, which frees their KV pages at the engine's
// next step. Engine errors map to HTTP by their ErrorCode.
#pragma once

// clang-format off
#include "server/asio.h"
// clang-format on
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "minfer/engine.h"
#include "server/chat_prompt.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/openai_protocol.h"
#include "server/response_writer.h"
#include "server/strand_wakeup.h"

namespace minfer::server {

class GenerationHandler {
 public:
  // request_timeout_s: the longest any request may run (--request-timeout; 0 = no limit), after which it ends with
  // 408 and its engine requests are aborted (their pages freed).
  // stream_ping_s: how often a stream whose route has keep-alive events (Anthropic's ping) sends one while waiting.
  GenerationHandler(AsyncEngine& engine, const ChatPrompt& chat, Metrics& metrics, std::string model_name,
                    double request_timeout_s = 0, double stream_ping_s = 10);

  const std::string& model_name() const { return model_name_; }
  // --allowed-local-media-path: the directory file:// image URLs may read under ("" = none may).
  void set_allowed_local_media_path(std::string dir) { allowed_local_media_path_ = std::move(dir); }
  int64_t created() const { return created_; }

  // Writes the response (or nothing, when the client went away). Throws ApiError before anything is written
  // for a request that cannot be served.
  asio::awaitable<void> handle(GenerationRequest request, Connection& connection);
  // The prompt tokens the request would feed the model (Anthropic's count_tokens). Throws ApiError.
  int64_t count_tokens(GenerationRequest request) const;

 private:
  using Clock = std::chrono::steady_clock;
  class Deadline;
  class Heartbeat;
  void check_model(const GenerationRequest& request) const;  // 404 for another model's name
  std::vector<std::vector<int32_t>> prepare(GenerationRequest& request) const;
  std::vector<int32_t> tokenize(const GenerationRequest& request, const PromptInput& prompt) const;
  std::vector<Choice> submit(const GenerationRequest& request, const std::vector<std::vector<int32_t>>& prompts,
                             const std::shared_ptr<StrandWakeup>& wakeup);
  ResponseContext response_context(const GenerationRequest& request, const std::vector<std::vector<int32_t>>& prompts);
  asio::awaitable<void> stream(const ResponseWriter& writer, std::vector<Choice>& choices, StrandWakeup& wakeup,
                               Connection& connection, Clock::time_point arrival, const Deadline& deadline);
  asio::awaitable<void> answer_whole(const ResponseWriter& writer, std::vector<Choice>& choices, StrandWakeup& wakeup,
                                     Connection& connection, Clock::time_point arrival, const Deadline& deadline);
  void record_finished(const Choice& choice, Clock::time_point arrival);
  std::string next_id(RouteKind kind);

  AsyncEngine& engine_;
  const ChatPrompt& chat_;
  Metrics& metrics_;
  std::string model_name_;
  int64_t created_;
  double request_timeout_s_;
  double stream_ping_s_;
  SamplingDefaults sampling_defaults_;  // the checkpoint's, read once at start-up
  std::atomic<uint64_t> counter_{0};
  std::string allowed_local_media_path_;
};

}  // namespace minfer::server
