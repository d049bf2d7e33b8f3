// Chat in process: a conversation rendered by the model's chat template, and the reply split into content,
// reasoning and tool calls by the same parsers as the server's /v1/chat/completions (vLLM's LLM.chat; the Python
// Engine.chat). Requests are the chat route's JSON ({"messages", "tools", "tool_choice", "parallel_tool_calls",
// "chat_template_kwargs", "add_generation_prompt", "continue_final_message"}, OpenAI's shapes).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "minfer/engine.h"
#include "minfer/sampling.h"

namespace minfer {

struct ChatToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text of an object
};

struct ChatReply {
  std::string content;
  std::string reasoning;
  std::vector<ChatToolCall> tool_calls;
};

class ChatFormat {
 public:
  // The engine's chat template, or template_file's; the tool-call and reasoning parsers by vLLM's names ("auto": by
  // the template). Throws minfer::Error when the model has no usable template or a name is unknown.
  static std::shared_ptr<ChatFormat> load(const AsyncEngine& engine, const std::string& template_file = "",
                                          const std::string& tool_call_parser = "auto",
                                          const std::string& reasoning_parser = "auto");
  virtual ~ChatFormat() = default;

  // The prompt text of a request, and `params` made ready to decode the reply (a forced tool call's grammar,
  // harmony's markers). Throws minfer::Error naming the field of a bad request.
  virtual std::string render(const std::string& request_json, SamplingParams& params) const = 0;
  // The reply to that request (given its prompt) split into content, reasoning and tool calls.
  virtual ChatReply parse(const std::string& request_json, const std::string& prompt,
                          const std::string& text) const = 0;
};

}  // namespace minfer
