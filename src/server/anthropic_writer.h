// The writer of Anthropic's /v1/messages (response_writer.h): the message's content blocks, usage and stop reason,
// and its stream of named events.
#pragma once

#include <memory>

#include "server/response_writer.h"

namespace minfer::server {

std::unique_ptr<ResponseWriter> make_messages_writer(ResponseContext context);

}  // namespace minfer::server
