// gpt-oss's replies in OpenAI's harmony format -> reasoning_content, content and tool_calls, as vLLM's openai_gptoss
// reasoning parser and openai tool parser give them. A reply is a run of messages, each a header and a body:
//   <|channel|>analysis<|message|>...<|end|>                         reasoning
//   <|start|>assistant<|channel|>final<|message|>...<|return|>      content
//   <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}<|call|>   a tool call
// (a commentary message without a function recipient is a preamble to the user: content). The text arrives with its
// special tokens (the request decodes with skip_special_tokens false); <|return|> and <|call|> end the generation and
// do not appear. Fed deltas as they come; a possible start of a marker is held until it is decided.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "server/tool_call_parser.h"

namespace minfer::server {

struct ChatDelta;

class HarmonyOutput {
 public:
  void push(std::string_view text, ChatDelta& out);
  // The rest once the output is complete: an unterminated body, and the tool calls.
  void finish(ChatDelta& out);

 private:
  enum class Route { kReasoning, kContent, kCall };
  void start_body(std::string_view header);
  void route_body(ChatDelta& out, bool final);
  void end_message();

  bool in_body_ = false;
  bool saw_marker_ = false;  // any harmony marker at all (plain text without one is content)
  Route route_ = Route::kContent;
  std::string buffer_;     // the header being read, or body text not yet routed
  std::string call_name_;  // kCall: the function
  std::string call_args_;  // kCall: its arguments so far
  std::vector<ToolCall> calls_;
};

}  // namespace minfer::server
