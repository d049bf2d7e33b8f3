// Tool calls in a chat model's output text, by the format the model was trained on (vLLM's --tool-call-parser
// names):
//   hermes       <tool_call>{"name": ..., "arguments": {...}}</tool_call>, any number   (Hermes, Qwen2.5, Qwen3)
//   llama3_json  {"name": ..., "parameters": {...}} as the whole output, optionally after <|python_tag|>, several
//                separated by ";"   (Llama 3.1 / 3.2 / 3.3)
//   mistral      [TOOL_CALLS] [{"name": ..., "arguments": {...}}, ...]   (Mistral v0.3, Nemo, Small)
//   qwen3_coder  <tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n...</function>\n</tool_call>
//                (Qwen3-Coder, Qwen3.5 / 3.6, Nemotron 3 Nano): values are bare text, typed by the tool's schema
// A parser finds where calls start (so streaming holds that text back from `content`) and turns the held text
// into calls once the output is complete. Text that does not parse stays content, as vLLM does.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "server/json.h"

namespace minfer::server {

struct ToolCall {
  std::string id;  // "call_" + 24 random alphanumerics (9 for Mistral, whose template checks it)
  std::string name;
  std::string arguments;  // JSON text of an object
};

struct ParsedToolCalls {
  std::string content;  // the text outside the calls
  std::vector<ToolCall> calls;
};

class ToolCallParser {
 public:
  // "hermes", "llama3_json", "mistral", "qwen3_coder"; "auto" picks by the chat template's text. Returns null for an
  // unknown name (the caller reports it).
  static std::unique_ptr<ToolCallParser> make(std::string_view name, std::string_view chat_template);
  static const char* known_names();
  virtual ~ToolCallParser() = default;

  virtual const char* name() const = 0;
  // Whether a call's body is JSON with "name" and "arguments" / "parameters" (so ToolCallStream can stream it).
  virtual bool json_calls() const { return true; }
  // Where the first call starts in text, or npos. partial_ok: a tail of text that could still become the start
  // marker counts as a start (streaming holds it back until it is decided).
  virtual size_t call_start(std::string_view text, bool partial_ok) const = 0;
  // Splits complete output into content and calls. tools is the request's `tools` array (OpenAI's form, or null):
  // formats that write argument values as bare text (qwen3_coder) type them by the parameter's schema.
  virtual ParsedToolCalls parse(std::string_view text, const json& tools) const = 0;
};

// A tool call id as OpenAI spells them ("call_..."), or Mistral's 9 alphanumerics.
std::string make_tool_call_id(bool mistral_style);

}  // namespace minfer::server
