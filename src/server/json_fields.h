// Typed access to the fields of a request's JSON object: every error is an ApiError 400 naming the field
// (prefix + key), as OpenAI's invalid_request_error with `param` set. null counts as absent.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include "server/api_error.h"
#include "server/json.h"

namespace minfer::server {

inline const char* type_name(const json& v) {
  if (v.is_number_integer() || v.is_number_unsigned()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return "null";
}

// Typed access to the fields of one JSON object; every error names the field (prefix + key).
class Fields {
 public:
  Fields(const json& object, std::string prefix = "") : obj_(object), prefix_(std::move(prefix)) {}

  std::string name(const char* key) const { return prefix_ + key; }

  const json* get(const char* key) const {
    auto it = obj_.find(key);
    if (it == obj_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  std::optional<bool> boolean(const char* key) const {
    const json* v = get(key);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) bad_request(name(key), "'{}' must be a boolean, got {}", name(key), type_name(*v));
    return v->get<bool>();
  }

  std::optional<std::string> string(const char* key) const {
    const json* v = get(key);
    if (!v) return std::nullopt;
    if (!v->is_string()) bad_request(name(key), "'{}' must be a string, got {}", name(key), type_name(*v));
    return v->get<std::string>();
  }

  std::optional<int64_t> integer(const char* key, int64_t lo, int64_t hi) const {
    const json* v = get(key);
    if (!v) return std::nullopt;
    return as_integer(*v, name(key), lo, hi);
  }

  std::optional<double> number(const char* key, double lo, double hi, bool lo_open = false) const {
    const json* v = get(key);
    if (!v) return std::nullopt;
    if (!v->is_number()) bad_request(name(key), "'{}' must be a number, got {}", name(key), type_name(*v));
    const double x = v->get<double>();
    const bool low_ok = lo_open ? x > lo : x >= lo;
    if (!std::isfinite(x) || !low_ok || x > hi)
      bad_request(name(key), "'{}' must be in {}{}, {}], got {}", name(key), lo_open ? "(" : "[", lo, hi, x);
    return x;
  }

  static int64_t as_integer(const json& v, const std::string& field, int64_t lo, int64_t hi) {
    if (v.is_number_unsigned()) {
      const uint64_t u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(hi) || (lo > 0 && u < static_cast<uint64_t>(lo)))
        bad_request(field, "'{}' must be in [{}, {}], got {}", field, lo, hi, u);
      return static_cast<int64_t>(u);
    }
    if (!v.is_number_integer()) bad_request(field, "'{}' must be an integer, got {}", field, type_name(v));
    const int64_t x = v.get<int64_t>();
    if (x < lo || x > hi) bad_request(field, "'{}' must be in [{}, {}], got {}", field, lo, hi, x);
    return x;
  }

 private:
  const json& obj_;
  std::string prefix_;
};

// Calls fn(fields, name) for each element of `array`, the request's `field`, which must be an array of objects: name is
// "field[i]", and the fields' errors name "field[i].key".
template <typename Fn>
void for_each_object(const json& array, const std::string& field, Fn fn) {
  if (!array.is_array()) bad_request(field, "'{}' must be an array, got {}", field, type_name(array));
  for (size_t i = 0; i < array.size(); ++i) {
    const std::string name = fmt::format("{}[{}]", field, i);
    if (!array[i].is_object()) bad_request(name, "'{}' must be an object, got {}", name, type_name(array[i]));
    fn(Fields(array[i], name + "."), name);
  }
}

}  // namespace minfer::server
