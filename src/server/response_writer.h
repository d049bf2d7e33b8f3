// One small writer per generation route (/generate, /v1/completions, /v1/chat/completions): how a request's
// outputs become the route's response. Streaming: begin() (events before any output), delta() (the events of
// one output of one choice), finish() (the closing events). Whole: body() once every choice has finished.
// The request core (generation_handler.h) owns the flow; writers only shape JSON.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "minfer/request_state.h"
#include "minfer/tokenizer.h"
#include "server/api_error.h"
#include "server/chat_output.h"
#include "server/choice.h"
#include "server/json.h"
#include "server/openai_protocol.h"
#include "server/token_json.h"

namespace minfer::server {

struct ResponseContext {
  const GenerationRequest* request = nullptr;
  std::string id;  // "chatcmpl-...", "cmpl-...", "gen-..."
  int64_t created = 0;
  std::string model;
  const Tokenizer* tokenizer = nullptr;
  std::vector<int64_t> prompt_tokens;            // per prompt
  std::vector<std::vector<int32_t>> prompt_ids;  // per prompt, with return_token_ids (else empty)
  std::vector<std::string> echo;                 // per prompt: the text echoed before the completion ("" without echo)
  ChatOutputOptions chat_output;                 // chat: how the output splits into reasoning, content and tool calls
};

class ResponseWriter {
 public:
  static std::unique_ptr<ResponseWriter> make(ResponseContext context);
  virtual ~ResponseWriter() = default;

  virtual std::string begin(const std::vector<Choice>& /*choices*/) const { return ""; }
  // "" when the output carries nothing to send.
  virtual std::string delta(size_t index, Choice& choice, const RequestOutput& output) const = 0;
  virtual std::string finish(const std::vector<Choice>& choices) const = 0;
  virtual json body(std::vector<Choice>& choices) const = 0;
  // A stream's event for an error after it began (OpenAI's error object by default).
  virtual std::string error_event(const ApiError& error) const;
  // The event a waiting stream sends now and then ("" for none: the OpenAI routes send nothing).
  virtual std::string keepalive() const { return ""; }

 protected:
  explicit ResponseWriter(ResponseContext context)
      : ctx_(std::move(context)), tokens_(ctx_.tokenizer, ctx_.request->tokens_as_ids) {}
  const GenerationRequest& request() const { return *ctx_.request; }
  // Whether an output is worth an event: text, the end, or tokens whose logprobs or ids were asked for.
  bool has_news(const RequestOutput& output) const;

  ResponseContext ctx_;
  TokenJson tokens_;
};

// A server-sent event carrying j.
std::string sse_event(const json& j);
// JSON text; invalid UTF-8 is replaced, never thrown on.
std::string dump_json(const json& j);

}  // namespace minfer::server
