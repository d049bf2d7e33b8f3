// minfer::ChatFormat (include/minfer/chat.h) over the server's chat pieces: the request parsed and checked as the
// chat route parses it, rendered by ChatPrompt, the reply split by ChatOutput.
#include "base/error.h"
#include "minfer/chat.h"
#include "server/api_error.h"
#include "server/chat_prompt.h"
#include "server/openai_protocol.h"

namespace minfer {
namespace {

using server::ApiError;

class ServerChatFormat : public ChatFormat {
 public:
  explicit ServerChatFormat(server::ChatPrompt prompt) : prompt_(std::move(prompt)) {}

  std::string render(const std::string& request_json, SamplingParams& params) const override {
    const server::GenerationRequest r = request(request_json);
    try {
      std::string text = prompt_.render(r.chat);
      prompt_.decode_for_parsing(params);
      if (r.params.structured_outputs) params.structured_outputs = r.params.structured_outputs;
      return text;
    } catch (const ApiError& e) {
      fail("{}", e.what());
    }
  }

  ChatReply parse(const std::string& request_json, const std::string& prompt, const std::string& text) const override {
    const server::GenerationRequest r = request(request_json);
    const server::ChatDelta d = server::ChatOutput::split(prompt_.output_options(r.chat, prompt, false), text);
    ChatReply reply{d.content, d.reasoning, {}};
    for (const server::ToolCall& c : d.calls) reply.tool_calls.push_back({c.id, c.name, c.arguments});
    return reply;
  }

 private:
  // The request as the chat route reads it; its errors as minfer::Error (a ValueError in Python) naming the field.
  static server::GenerationRequest request(const std::string& request_json) {
    try {
      server::json body = server::parse_json_body(request_json);
      if (!body.contains("max_tokens")) body["max_tokens"] = 1;  // the route's check; the caller's params decide
      return server::parse_chat_request(body);
    } catch (const ApiError& e) {
      fail("{}", e.what());
    }
  }

  server::ChatPrompt prompt_;
};

}  // namespace

std::shared_ptr<ChatFormat> ChatFormat::load(const AsyncEngine& engine, const std::string& template_file,
                                             const std::string& tool_call_parser, const std::string& reasoning_parser) {
  server::ChatPrompt prompt = server::ChatPrompt::load(engine, template_file, tool_call_parser, reasoning_parser);
  if (!prompt.available()) fail("chat is unavailable: {}", prompt.describe());
  return std::make_shared<ServerChatFormat>(std::move(prompt));
}

}  // namespace minfer
