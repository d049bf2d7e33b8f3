// Who may call the server: API keys (`--api-key`, repeatable, or MINFER_API_KEY with keys separated by commas)
// checked on every route that tokenizes or runs the model, and CORS (`--allowed-origins`, `--allowed-methods`,
// `--allowed-headers`, spelled as vLLM spells them) for browser pages on other origins.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/http_server.h"

namespace minfer::server {

struct AccessOptions {
  std::vector<std::string> api_keys;  // empty: no authentication
  bool metrics_require_key = false;   // /metrics behind the key too (it is open by default, as /health always is)
  // CORS. No origin allowed (the default): responses carry no CORS headers and browsers keep other origins out.
  // "*" allows any origin. Methods and headers default to any ("*").
  std::vector<std::string> allowed_origins;
  std::vector<std::string> allowed_methods = {"*"};
  std::vector<std::string> allowed_headers = {"*"};
};

class Access {
 public:
  explicit Access(AccessOptions options) : o_(std::move(options)) {}

  bool keys_required() const { return !o_.api_keys.empty(); }
  bool metrics_require_key() const { return o_.metrics_require_key; }
  // Whether the request carries `Authorization: Bearer K` for one of the keys (or no key is configured). Every key
  // is compared in full, in constant time, so the time taken tells nothing about a guess.
  bool authorized(const HttpRequest& request) const;

  // The request's Origin when CORS allows it (the value to echo in Access-Control-Allow-Origin); nullopt when the
  // request has no Origin or it is not allowed.
  std::optional<std::string> allowed_origin(const HttpRequest& request) const;
  // A CORS preflight (OPTIONS with Access-Control-Request-Method).
  static bool is_preflight(const HttpRequest& request);
  // Adds the preflight answer's headers to `connection` and returns true when origin and method are allowed;
  // false (nothing added) when not.
  bool answer_preflight(const HttpRequest& request, Connection& connection) const;

 private:
  AccessOptions o_;
};

// The keys of MINFER_API_KEY (comma-separated), appended to `keys`.
void add_env_api_keys(std::vector<std::string>& keys);

// True for 127.0.0.0/8, ::1 and "localhost": a server bound there is reachable from this machine only.
bool is_loopback_host(const std::string& host);

}  // namespace minfer::server
