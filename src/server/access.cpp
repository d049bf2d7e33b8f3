#include "server/access.h"

#include <algorithm>
#include <cstdlib>

namespace minfer::server {
namespace {

// Compares without an early exit, so the time taken does not tell how much of a guessed key was right.
bool constant_time_equal(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

std::string_view header(const HttpRequest& request, http::field field) {
  const auto it = request.find(field);
  return it == request.end() ? std::string_view() : std::string_view(it->value().data(), it->value().size());
}

bool listed(const std::vector<std::string>& allowed, std::string_view value) {
  return std::any_of(allowed.begin(), allowed.end(), [&](const std::string& a) { return a == "*" || a == value; });
}

std::string joined(const std::vector<std::string>& values) {
  std::string out;
  for (const std::string& v : values) out += (out.empty() ? "" : ", ") + v;
  return out;
}

}  // namespace

bool Access::authorized(const HttpRequest& request) const {
  if (o_.api_keys.empty()) return true;
  // `Authorization: Bearer KEY` (OpenAI's clients), or `x-api-key: KEY` (Anthropic's).
  const std::string_view value = header(request, http::field::authorization);
  constexpr std::string_view kBearer = "Bearer ";
  const auto x_api_key = request.find("x-api-key");
  const bool bearer = value.starts_with(kBearer);
  const bool has_key = bearer || x_api_key != request.end();
  const std::string_view given = bearer ? value.substr(kBearer.size())
                                 : x_api_key != request.end()
                                     ? std::string_view(x_api_key->value().data(), x_api_key->value().size())
                                     : std::string_view();
  bool ok = false;
  for (const std::string& key : o_.api_keys) ok |= constant_time_equal(given, key);  // every key, no early exit
  return ok && has_key;
}

std::optional<std::string> Access::allowed_origin(const HttpRequest& request) const {
  const std::string_view origin = header(request, http::field::origin);
  if (origin.empty() || !listed(o_.allowed_origins, origin)) return std::nullopt;
  return std::string(origin);
}

bool Access::is_preflight(const HttpRequest& request) {
  return request.method() == http::verb::options &&
         !header(request, http::field::access_control_request_method).empty();
}

bool Access::answer_preflight(const HttpRequest& request, Connection& connection) const {
  const std::optional<std::string> origin = allowed_origin(request);
  const std::string_view method = header(request, http::field::access_control_request_method);
  if (!origin || !listed(o_.allowed_methods, method)) return false;
  const std::string_view asked = header(request, http::field::access_control_request_headers);
  const bool any_header = listed(o_.allowed_headers, "*");
  connection.add_header("Access-Control-Allow-Methods",
                        listed(o_.allowed_methods, "*") ? std::string(method) : joined(o_.allowed_methods));
  if (!asked.empty() || !any_header)
    connection.add_header("Access-Control-Allow-Headers", any_header ? std::string(asked) : joined(o_.allowed_headers));
  connection.add_header("Access-Control-Max-Age", "600");
  return true;
}

void add_env_api_keys(std::vector<std::string>& keys) {
  const char* env = std::getenv("MINFER_API_KEY");
  if (!env) return;
  std::string_view rest(env);
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view key = rest.substr(0, comma);
    if (!key.empty()) keys.emplace_back(key);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
}

bool is_loopback_host(const std::string& host) {
  return host == "localhost" || host == "::1" || host.starts_with("127.");
}

}  // namespace minfer::server
