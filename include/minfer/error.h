// What minfer throws: minfer::Error, a std::runtime_error whose message says what to change, with a code
// that says what kind of failure it is, so callers (the server's HTTP status, the Python exception type)
// tell failures apart without reading the message.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace minfer {

enum class ErrorCode : uint8_t {
  kInvalidArgument,  // the caller's input (a config field, a prompt, a sampling parameter) cannot be served
  kLoad,             // a model or tokenizer file is missing or malformed (the message starts with the path)
  kUnavailable,      // the engine is shut down or has failed; retrying elsewhere may work
  kInternal,         // a bug in minfer (an internal check failed)
};

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, ErrorCode code = ErrorCode::kInvalidArgument)
      : std::runtime_error(message), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

// A problem with a file on disk: the message always starts with the path.
class LoadError : public Error {
 public:
  LoadError(const std::string& path, const std::string& problem) : Error(path + ": " + problem, ErrorCode::kLoad) {}
};

}  // namespace minfer
