// OpenAI's Responses API (POST /v1/responses) onto the one chat pipeline: the input items (messages, function calls
// and their outputs, reasoning), after the stored conversation that previous_response_id names, become the chat
// messages the template sees; instructions a system message first; function tools, tool_choice, text.format and
// reasoning.effort the chat route's fields. Errors are ApiError 400 naming the field (404 naming an unknown or evicted
// previous_response_id).
#pragma once

#include <memory>
#include <string>

#include "server/json.h"
#include "server/openai_protocol.h"
#include "server/responses_store.h"

namespace minfer::server {

// What a Responses request carries beside the chat fields: what its response object repeats, its conversation items
// (stored with it), and where it is stored.
struct ResponsesContext {
  json echo = json::object();        // instructions, tools, tool_choice, text, reasoning, metadata, ... as given
  json input_items = json::array();  // the conversation so far (previous_response_id's) and this input, with ids
  bool store = true;
  ResponseStore* store_to = nullptr;
};

GenerationRequest parse_responses_request(const json& body, ResponseStore& store);

// An id for a response ("resp_"), an output item ("msg_", "fc_", "rs_"), ...: the prefix and 24 hex digits.
std::string responses_id(const char* prefix);

}  // namespace minfer::server
