#include "server/openai_protocol.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <optional>

#include "server/api_error.h"

namespace minfer::server {
namespace {

using nlohmann::json;

constexpr int kMaxN = 128;           // OpenAI's limit on n
constexpr int kMaxStopStrings = 16;  // OpenAI allows 4; vLLM any number
constexpr int kMaxLogprobs = 20;     // chat top_logprobs' limit; vLLM uses it for completions too

const char* type_name(const json& v) {
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

std::vector<int32_t> token_ids(const json& array, const std::string& field) {
  std::vector<int32_t> ids;
  ids.reserve(array.size());
  for (size_t i = 0; i < array.size(); ++i)
    ids.push_back(static_cast<int32_t>(
        Fields::as_integer(array[i], fmt::format("{}[{}]", field, i), 0, std::numeric_limits<int32_t>::max())));
  return ids;
}

// The sampling fields shared by every route. max_tokens_key: the route's name for the output length.
void parse_sampling(const Fields& f, const char* max_tokens_key, GenerationRequest& r) {
  SamplingParams& p = r.params;
  const int64_t max_int = std::numeric_limits<int32_t>::max();
  if (auto v = f.integer(max_tokens_key, 1, max_int)) {
    p.max_tokens = static_cast<int32_t>(*v);
    r.max_tokens_given = true;
  }
  if (auto v = f.number("temperature", 0.0, 2.0)) p.temperature = static_cast<float>(*v);
  if (auto v = f.number("top_p", 0.0, 1.0, /*lo_open=*/true)) p.top_p = static_cast<float>(*v);
  if (auto v = f.integer("top_k", -1, max_int)) p.top_k = static_cast<int32_t>(*v);
  if (auto v = f.number("min_p", 0.0, 1.0)) p.min_p = static_cast<float>(*v);
  if (auto v = f.number("presence_penalty", -2.0, 2.0)) p.presence_penalty = static_cast<float>(*v);
  if (auto v = f.number("frequency_penalty", -2.0, 2.0)) p.frequency_penalty = static_cast<float>(*v);
  if (auto v = f.number("repetition_penalty", 0.0, 10.0, /*lo_open=*/true))
    p.repetition_penalty = static_cast<float>(*v);
  if (auto v = f.integer("seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()))
    p.seed = static_cast<uint64_t>(*v);
  if (auto v = f.boolean("ignore_eos")) p.ignore_eos = *v;
  if (const json* stop = f.get("stop")) {
    if (stop->is_string()) {
      p.stop.push_back(stop->get<std::string>());
    } else if (stop->is_array()) {
      if (stop->size() > kMaxStopStrings)
        bad_request("stop", "'stop' may hold at most {} strings, got {}", kMaxStopStrings, stop->size());
      for (size_t i = 0; i < stop->size(); ++i) {
        if (!(*stop)[i].is_string())
          bad_request("stop", "'stop[{}]' must be a string, got {}", i, type_name((*stop)[i]));
        p.stop.push_back((*stop)[i].get<std::string>());
      }
    } else {
      bad_request("stop", "'stop' must be a string or an array of strings, got {}", type_name(*stop));
    }
    for (const std::string& s : p.stop)
      if (s.empty()) bad_request("stop", "'stop' strings must not be empty");
  }
  if (const json* ids = f.get("stop_token_ids")) {
    if (!ids->is_array()) bad_request("stop_token_ids", "'stop_token_ids' must be an array of integers");
    p.stop_token_ids = token_ids(*ids, "stop_token_ids");
  }
  if (auto v = f.integer("n", 1, kMaxN)) r.n = static_cast<int>(*v);
  if (auto v = f.boolean("stream")) r.stream = *v;
  if (const json* opts = f.get("stream_options")) {
    if (!opts->is_object()) bad_request("stream_options", "'stream_options' must be an object");
    if (!r.stream) bad_request("stream_options", "'stream_options' is only allowed when 'stream' is true");
    if (auto v = Fields(*opts, "stream_options.").boolean("include_usage")) r.include_usage = *v;
  }
  if (auto v = f.string("model")) r.model = *v;
}

}  // namespace

json parse_json_body(std::string_view body) {
  if (body.empty()) throw ApiError(400, "the request body is empty: send a JSON object");
  json value;
  try {
    value = json::parse(body);
  } catch (const json::parse_error& e) {
    std::string detail = e.what();
    if (const size_t p = detail.find("] "); detail.starts_with("[json.exception") && p != std::string::npos)
      detail = detail.substr(p + 2);
    if (detail.find("UTF-8") != std::string::npos)
      throw ApiError(400, fmt::format("the request body is not valid UTF-8: {}", detail), "", "invalid_utf8");
    throw ApiError(400, fmt::format("the request body is not valid JSON: {}", detail), "", "invalid_json");
  }
  if (!value.is_object())
    throw ApiError(400, fmt::format("the request body must be a JSON object, got {}", type_name(value)));
  return value;
}

GenerationRequest parse_generate_request(const json& body) {
  GenerationRequest r;
  r.kind = RouteKind::kGenerate;
  const Fields f(body);
  auto text = f.string("text");
  if (!text) bad_request("text", "'text' is required: the prompt as a string");
  r.prompts.push_back({true, std::move(*text), {}});
  r.params.max_tokens = 50;  // MindIE / TGI default for max_new_tokens
  parse_sampling(f, "max_new_tokens", r);
  return r;
}

GenerationRequest parse_completion_request(const json& body) {
  GenerationRequest r;
  r.kind = RouteKind::kCompletion;
  const Fields f(body);
  const json* prompt = f.get("prompt");
  if (!prompt) bad_request("prompt", "'prompt' is required: a string, an array of strings, or token ids");
  if (prompt->is_string()) {
    r.prompts.push_back({true, prompt->get<std::string>(), {}});
  } else if (prompt->is_array() && !prompt->empty()) {
    const json& first = (*prompt)[0];
    if (first.is_string()) {
      for (size_t i = 0; i < prompt->size(); ++i) {
        if (!(*prompt)[i].is_string())
          bad_request("prompt", "'prompt[{}]' must be a string like the others, got {}", i, type_name((*prompt)[i]));
        r.prompts.push_back({true, (*prompt)[i].get<std::string>(), {}});
      }
    } else if (first.is_array()) {
      for (size_t i = 0; i < prompt->size(); ++i) {
        const std::string field = fmt::format("prompt[{}]", i);
        if (!(*prompt)[i].is_array() || (*prompt)[i].empty())
          bad_request("prompt", "'{}' must be a non-empty array of token ids", field);
        r.prompts.push_back({false, "", token_ids((*prompt)[i], field)});
      }
    } else {
      r.prompts.push_back({false, "", token_ids(*prompt, "prompt")});
    }
  } else {
    bad_request("prompt",
                "'prompt' must be a string, an array of strings, an array of token ids or an array of "
                "token-id arrays (non-empty), got {}",
                prompt->is_array() ? "an empty array" : type_name(*prompt));
  }
  r.params.max_tokens = 16;  // OpenAI's default for completions
  parse_sampling(f, "max_tokens", r);
  if (const json* lp = f.get("logprobs")) {
    if (lp->is_boolean())
      bad_request("logprobs", "'logprobs' of a completion is an integer (0-{}), not a boolean", kMaxLogprobs);
    r.logprobs = static_cast<int>(Fields::as_integer(*lp, "logprobs", 0, kMaxLogprobs));
  }
  if (auto v = f.boolean("echo")) r.echo = *v;
  if (auto v = f.string("suffix"); v && !v->empty()) bad_request("suffix", "'suffix' is not supported");
  if (auto v = f.integer("best_of", 1, kMaxN); v && *v != r.n)
    bad_request("best_of", "'best_of' other than n is not supported");
  return r;
}

GenerationRequest parse_chat_request(const json& body) {
  GenerationRequest r;
  r.kind = RouteKind::kChat;
  const Fields f(body);
  const json* messages = f.get("messages");
  if (!messages) bad_request("messages", "'messages' is required: an array of {{role, content}} objects");
  if (!messages->is_array() || messages->empty())
    bad_request("messages", "'messages' must be a non-empty array, got {}",
                messages->is_array() ? "an empty array" : type_name(*messages));
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& m = (*messages)[i];
    const std::string prefix = fmt::format("messages[{}].", i);
    if (!m.is_object()) bad_request("messages", "'messages[{}]' must be an object, got {}", i, type_name(m));
    const Fields mf(m, prefix);
    auto role = mf.string("role");
    if (!role) bad_request(prefix + "role", "'{}role' is required", prefix);
    if (*role == "developer") role = "system";  // OpenAI's newer name for the system role
    if (*role != "system" && *role != "user" && *role != "assistant" && *role != "tool")
      bad_request(prefix + "role", "'{}role' must be system, developer, user, assistant or tool, got '{}'", prefix,
                  *role);
    ChatMessage message{*role, ""};
    if (const json* content = mf.get("content")) {
      if (content->is_string()) {
        message.content = content->get<std::string>();
      } else if (content->is_array()) {  // content parts: only text
        for (size_t j = 0; j < content->size(); ++j) {
          const json& part = (*content)[j];
          const std::string part_name = fmt::format("{}content[{}]", prefix, j);
          if (!part.is_object()) bad_request(part_name, "'{}' must be an object", part_name);
          const Fields pf(part, part_name + ".");
          const std::string type = pf.string("type").value_or("");
          if (type != "text")
            bad_request(part_name + ".type", "'{}.type' '{}' is not supported: only text", part_name, type);
          auto text = pf.string("text");
          if (!text) bad_request(part_name + ".text", "'{}.text' is required", part_name);
          message.content += *text;
        }
      } else {
        bad_request(prefix + "content", "'{}content' must be a string or an array of text parts, got {}", prefix,
                    type_name(*content));
      }
    } else if (*role != "assistant") {
      bad_request(prefix + "content", "'{}content' is required", prefix);
    }
    r.messages.push_back(std::move(message));
  }
  parse_sampling(f, "max_tokens", r);
  if (auto v = f.integer("max_completion_tokens", 1, std::numeric_limits<int32_t>::max())) {
    r.params.max_tokens = static_cast<int32_t>(*v);
    r.max_tokens_given = true;
  }
  const bool logprobs = f.boolean("logprobs").value_or(false);
  const auto top = f.integer("top_logprobs", 0, kMaxLogprobs);
  if (top && !logprobs) bad_request("top_logprobs", "'top_logprobs' needs 'logprobs': true");
  if (logprobs) r.logprobs = static_cast<int>(top.value_or(0));
  return r;
}

}  // namespace minfer::server
