// Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens) onto the one chat pipeline: the request
// body becomes a GenerationRequest whose chat fields are the messages as the chat template sees them (the system
// prompt first; text blocks joined; tool_use blocks -> the assistant's tool_calls; tool_result blocks -> tool
// messages; thinking blocks -> reasoning_content), its tools the function tools, its tool_choice the chat
// route's. Errors are ApiError 400 naming the field; the router writes them in Anthropic's error shape.
#pragma once

#include "server/json.h"
#include "server/openai_protocol.h"

namespace minfer::server {

// count_tokens: the same body without max_tokens (and without sampling), whose prompt is what /v1/messages would
// feed the model.
GenerationRequest parse_messages_request(const json& body, bool count_tokens = false);

// {"type": "error", "error": {"type", "message"}}: Anthropic's error object for an HTTP status; `param`, the field
// at fault, is named in the message.
json anthropic_error_json(int status, const std::string& message, const std::string& param = "");

}  // namespace minfer::server
