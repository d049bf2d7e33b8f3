// The stored responses' routes of OpenAI's Responses API: GET /v1/responses/{id}, DELETE /v1/responses/{id} and
// GET /v1/responses/{id}/input_items (?order=asc|desc, OpenAI's default desc). An unknown, deleted or evicted id is a
// 404 naming it.
#pragma once

#include <string_view>

#include "server/http_server.h"
#include "server/json.h"
#include "server/responses_store.h"

namespace minfer::server {

// `rest`: the path after "/v1/responses/"; `query`: the target's query string (after '?', may be empty).
json stored_response_route(ResponseStore& store, http::verb method, std::string_view rest, std::string_view query);

}  // namespace minfer::server
