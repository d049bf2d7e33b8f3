// Errors inside minfer are exceptions of type minfer::Error; they carry a message a user can act on
// (for loaders: the file and the problem). Public APIs catch them at the boundary.
#pragma once

#include <fmt/format.h>

#include <string>

#include "minfer/error.h"

namespace minfer {

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

template <typename... Args>
[[noreturn]] void fail_internal(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...), ErrorCode::kInternal);
}

template <typename... Args>
[[noreturn]] void fail_load(const std::string& path, fmt::format_string<Args...> format, Args&&... args) {
  throw LoadError(path, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace minfer

// Internal invariant check that stays on in release builds; a failure is a bug in minfer, not bad input.
#define MINFER_CHECK(cond, ...)                                                                   \
  do {                                                                                            \
    if (!(cond))                                                                                  \
      ::minfer::fail_internal("internal check failed at {}:{}: {} {}", __FILE__, __LINE__, #cond, \
                              ::fmt::format(__VA_ARGS__));                                        \
  } while (0)
