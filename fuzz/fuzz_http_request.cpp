// The server's request path up to the engine, on arbitrary bytes: Beast's HTTP/1.1 parser with the server's header
// and body limits, then the OpenAI request parsers (/generate, /v1/completions, /v1/chat/completions: JSON, UTF-8,
// every field's type and range, messages, tools, structured outputs) on the body. A bad request is an ApiError (the
// server's 4xx naming the field); anything else escaping is a finding.
// clang-format off
#include "server/asio.h"
// clang-format on
#include <boost/beast/core/buffers_range.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "base/error.h"
#include "server/anthropic_protocol.h"
#include "server/api_error.h"
#include "server/openai_protocol.h"
#include "server/responses_protocol.h"

namespace http = boost::beast::http;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  http::request_parser<http::string_body> parser;
  parser.body_limit(8u << 20);
  parser.header_limit(64 * 1024);
  parser.eager(true);
  boost::beast::error_code ec;
  size_t used = 0;
  while (used < size && !ec && !parser.is_done()) {
    const size_t n = parser.put(boost::asio::buffer(data + used, size - used), ec);
    if (n == 0 && !ec) break;
    used += n;
  }
  if (!parser.is_done()) return 0;
  const auto& request = parser.get();
  const std::string_view target(request.target().data(), request.target().size());
  (void)target.substr(0, target.find('?'));
  try {
    const minfer::server::json body = minfer::server::parse_json_body(request.body());
    const auto messages = [](const minfer::server::json& b) { return minfer::server::parse_messages_request(b); };
    const auto count_tokens = [](const minfer::server::json& b) {
      return minfer::server::parse_messages_request(b, true);
    };
    const auto responses = [](const minfer::server::json& b) {
      static minfer::server::ResponseStore store;  // in memory, empty: a previous_response_id is a 404
      return minfer::server::parse_responses_request(b, store);
    };
    for (minfer::server::GenerationRequest (*parse)(const minfer::server::json&) :
         {minfer::server::parse_generate_request, minfer::server::parse_completion_request,
          minfer::server::parse_chat_request, +messages, +count_tokens, +responses}) {
      try {
        (void)parse(body);
      } catch (const minfer::server::ApiError&) {
      }
    }
  } catch (const minfer::server::ApiError&) {
  }
  return 0;
}
