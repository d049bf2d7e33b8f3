// A chat choice's output text -> what the OpenAI message carries: reasoning_content (a <think>...</think>
// block, Qwen3 / DeepSeek-R1; gpt-oss's analysis channel), content, and tool_calls (the model's own call format through
// a ToolCallParser, or the JSON a grammar forced for tool_choice "required" / a named function). Fed the text deltas as
// they come (streaming) and told when the output is complete; text that may still turn into a marker (a partial
// "</think>" or "<tool_call>") is held back until it is decided, so streamed and whole answers agree.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/harmony_output.h"
#include "server/tool_call_parser.h"
#include "server/tool_call_stream.h"

namespace minfer::server {

struct ChatDelta {
  std::string reasoning;
  std::string content;
  std::vector<ToolCall> calls;  // only from finish()
  // stream_calls: the calls' starts and argument text as they are written; calls_streamed (from finish()) says
  // that `calls` went out as fragments already.
  std::vector<CallFragment> fragments;
  bool calls_streamed = false;
  bool empty() const { return reasoning.empty() && content.empty() && calls.empty() && fragments.empty(); }
};

struct ChatOutputOptions {
  bool reasoning = false;                 // split a <think> block into reasoning_content
  bool starts_in_reasoning = false;       // the prompt ends inside <think> (DeepSeek-R1, Qwen3 thinking templates)
  const ToolCallParser* tools = nullptr;  // tool_choice auto: the model's call format; null: no tool parsing
  json tool_defs;                         // the request's `tools`: their schemas type qwen3_coder's bare values
  // tool_choice "required" / a named function: the whole output is grammar-forced JSON (an array of
  // {"name", "parameters"}, or the named function's arguments).
  bool forced_calls = false;
  std::string forced_function;  // the named function; empty for "required"
  bool mistral_ids = false;     // forced calls get Mistral's 9-character ids (its template checks them)
  // gpt-oss: the output is harmony messages (harmony_output.h), decoded with their special tokens; the other options
  // but forced calls do not apply.
  bool harmony = false;
  // A stream: tool calls in a JSON format go out as fragments while they are written (ToolCallStream).
  bool stream_calls = false;
};

class ChatOutput {
 public:
  explicit ChatOutput(ChatOutputOptions options);

  ChatDelta push(std::string_view text);
  // The rest once the output is complete: held text, and the tool calls.
  ChatDelta finish();
  // A streamed output's next text: push(text), with finish() merged in when it is the last.
  ChatDelta next(std::string_view text, bool finished);
  // A whole output, split at once.
  static ChatDelta split(const ChatOutputOptions& options, std::string_view text);

 private:
  enum class Phase { kMaybeThink, kReasoning, kContent };
  void route_content(std::string_view text, ChatDelta& out);
  void stream_held_calls(ChatDelta& out);
  void settle_streamed_calls(ChatDelta& out, size_t before_held);
  void emit_reasoning(ChatDelta& out, bool final);

  ChatOutputOptions options_;
  Phase phase_;
  std::string pending_;          // reasoning phases: text not yet routed
  bool strip_newlines_ = false;  // right after </think>: the blank line before the answer is not content
  std::string content_held_;     // content that is (or may become) a tool call
  bool in_calls_ = false;        // a call marker was seen: everything from here is held to the end
  std::optional<HarmonyOutput> harmony_;
  std::optional<ToolCallStream> calls_stream_;
};

}  // namespace minfer::server
