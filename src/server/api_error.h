// An error a request handler reports to its client: the HTTP status and the OpenAI error object
// {"error": {"message", "type", "param", "code"}}. Handlers throw it; the router turns it into the response.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

#include "minfer/error.h"
#include "server/json.h"

namespace minfer::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string param = "", std::string code = "")
      : std::runtime_error(std::move(message)), status_(status), param_(std::move(param)), code_(std::move(code)) {}

  int status() const { return status_; }
  const std::string& param() const { return param_; }
  const std::string& code() const { return code_; }
  // OpenAI's error types by status: invalid_request_error (400, 413, 422), authentication_error (401),
  // not_found_error (404), server_error (5xx).
  const char* type() const;
  json to_json() const;

 private:
  int status_;
  std::string param_;
  std::string code_;
};

// The status an engine error gets: the caller's fault (400, naming `field`), the engine's state (503), or a bug
// (500).
ApiError api_error(const Error& e, const std::string& field);

// A 400 invalid_request_error naming the field.
template <typename... Args>
[[noreturn]] void bad_request(const std::string& param, fmt::format_string<Args...> format, Args&&... args) {
  throw ApiError(400, fmt::format(format, std::forward<Args>(args)...), param);
}

}  // namespace minfer::server
