// Errors inside minfer are exceptions of type minfer::Error; they carry a message a user can act on
// (for loaders: the file and the problem). Public APIs catch them at the boundary.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace minfer {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// A problem with a file on disk: the message always starts with the path.
class LoadError : public Error {
 public:
  LoadError(const std::string& path, const std::string& problem) : Error(path + ": " + problem) {}
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

template <typename... Args>
[[noreturn]] void fail_load(const std::string& path, fmt::format_string<Args...> format, Args&&... args) {
  throw LoadError(path, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace minfer

// Internal invariant check that stays on in release builds; a failure is a bug in minfer, not bad input.
#define MINFER_CHECK(cond, ...)                                                                                       \
  do {                                                                                                                \
    if (!(cond))                                                                                                      \
      ::minfer::fail("internal check failed at {}:{}: {} {}", __FILE__, __LINE__, #cond, ::fmt::format(__VA_ARGS__)); \
  } while (0)
