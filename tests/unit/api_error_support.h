// What the server's request-parser tests share: the ApiError a parse throws.
#pragma once

#include <gtest/gtest.h>

#include <functional>

#include "server/api_error.h"

namespace minfer::server {

// The ApiError `parse` throws (its status and param), or a test failure and ApiError(0, "").
inline ApiError parse_error(const std::function<void()>& parse) {
  try {
    parse();
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "expected an ApiError";
  return ApiError(0, "");
}

}  // namespace minfer::server
