#include "server/api_error.h"

namespace minfer::server {

const char* ApiError::type() const {
  switch (status_) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 503: return "service_unavailable";
    default: return status_ >= 500 ? "server_error" : "invalid_request_error";
  }
}

ApiError api_error(const Error& e, const std::string& field) {
  switch (e.code()) {
    case ErrorCode::kInvalidArgument: return ApiError(400, e.what(), field);
    case ErrorCode::kUnavailable: return ApiError(503, e.what());
    case ErrorCode::kLoad:
    case ErrorCode::kInternal: break;
  }
  return ApiError(500, e.what());
}

json ApiError::to_json() const {
  json error = {{"message", what()}, {"type", type()}, {"param", nullptr}, {"code", nullptr}};
  if (!param_.empty()) error["param"] = param_;
  if (!code_.empty()) error["code"] = code_;
  return {{"error", std::move(error)}};
}

}  // namespace minfer::server
