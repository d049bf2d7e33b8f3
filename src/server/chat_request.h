// The chat-only fields of /v1/chat/completions: the messages as the chat template sees them, the tools and
// how they may be called, and the client's extra template variables.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "server/image_parts.h"
#include "server/json.h"
#include "server/json_fields.h"

namespace minfer::server {

// tool_choice: "auto" (the model decides), "none" (no calls; the tools still reach the template, as vLLM),
// "required" (at least one call), or one named function.
struct ToolChoice {
  enum class Kind : uint8_t { kAuto, kNone, kRequired, kFunction };
  Kind kind = Kind::kAuto;
  std::string function;  // kFunction
};

struct ChatFields {
  // Each message as the client sent it, except: content parts joined into one string ("\n" between text
  // parts, as vLLM), role "developer" renamed "system", and tool-call arguments given as a JSON string
  // parsed to an object (transformers' convention, which templates that print arguments with tojson follow).
  // A user message with images keeps its parts as a list the template walks ({"type": "text", "text"} and
  // {"type": "image"}: Gemma 3's and Qwen's templates write the model's image placeholder for the latter).
  json messages = json::array();
  std::vector<ImageRef> images;  // the messages' images in order (their URLs; fetched when the request is prepared)
  json tools;                    // the `tools` array, or null
  ToolChoice tool_choice;
  bool parallel_tool_calls = true;
  // vLLM: add_generation_prompt (the assistant turn's header, default on); continue_final_message (the reply
  // continues the last, assistant message: the prompt ends right after its content).
  bool add_generation_prompt = true;
  bool continue_final_message = false;
  // chat_template_kwargs (e.g. enable_thinking) as template variables.
  json template_kwargs = json::object();

  bool tools_enabled() const {
    return tools.is_array() && !tools.empty() && tool_choice.kind != ToolChoice::Kind::kNone;
  }
  // The template's variables besides messages: tools (when given) and the kwargs.
  json template_variables() const;
};

// A message's text: a string, or an array of parts whose type is one of `types` (text parts; image, audio and file
// parts are refused naming the part), joined by newlines as vLLM joins them. Throws ApiError 400 naming the field.
std::string joined_text_parts(const json& content, const std::string& field,
                              std::initializer_list<std::string_view> types);

// tool_choice "required" or a named function, as a JSON schema the output must follow (vLLM's approach): an
// array of {"name", "parameters"} (at most one item without parallel_tool_calls), or the named function's
// arguments. nullopt for auto / none.
std::optional<std::string> forced_tool_schema(const ChatFields& chat);

// Reads messages, tools, tool_choice, parallel_tool_calls and chat_template_kwargs. Throws ApiError 400 naming
// the field (an image part, a tool without a name, a tool_choice naming no given tool, ...).
ChatFields parse_chat_fields(const Fields& f);

}  // namespace minfer::server
