// The chat-template renderer (tokenizer/chat_template: minijinja through rust/minfer_ffi) on arbitrary templates:
// the input is the template source, rendered with a conversation that has a system prompt, tools, a tool call and
// its result, as the server renders requests.
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "tokenizer/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const nlohmann::ordered_json messages = nlohmann::ordered_json::parse(R"([
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "id": "c1",
      "function": {"name": "weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "18C"},
    {"role": "user", "content": "Thanks"}])");
  static const nlohmann::ordered_json extra = nlohmann::ordered_json::parse(R"({"tools": [{"type": "function",
    "function": {"name": "weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
    "enable_thinking": false})");
  try {
    const auto tmpl =
        minfer::ChatTemplate::from_source(std::string_view(reinterpret_cast<const char*>(data), size),
                                          minfer::ChatTemplateOptions{.bos_token = "<s>", .eos_token = "</s>"});
    (void)tmpl.render(messages, true, extra);
  } catch (const minfer::Error&) {
  }
  return 0;
}
