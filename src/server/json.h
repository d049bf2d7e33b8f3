// The server's JSON type: nlohmann's ordered_json, which keeps an object's keys in the order they came. A
// client's tools and schemas reach the chat template and the grammar compiler in the order the client wrote
// them (as Python dicts do for vLLM), and responses list their fields in OpenAI's order.
#pragma once

#include <nlohmann/json.hpp>

namespace minfer::server {

using json = nlohmann::ordered_json;

}  // namespace minfer::server
