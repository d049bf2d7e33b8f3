// The writer of OpenAI's /v1/responses (response_writer.h): the response object with its output items, and its
// stream of Responses events.
#pragma once

#include <memory>

#include "server/response_writer.h"

namespace minfer::server {

std::unique_ptr<ResponseWriter> make_responses_writer(ResponseContext context);

}  // namespace minfer::server
