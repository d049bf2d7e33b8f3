#include "server/openai_protocol.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <limits>
#include <optional>

#include "server/api_error.h"
#include "server/json_fields.h"
#include "server/structured_output_request.h"

namespace minfer::server {
namespace {

constexpr int kMaxN = 128;           // OpenAI's limit on n
constexpr int kMaxStopStrings = 16;  // OpenAI allows 4; vLLM any number
constexpr int kMaxLogprobs = 20;     // chat top_logprobs' limit; vLLM uses it for completions too

std::vector<int32_t> token_ids(const json& array, const std::string& field) {
  std::vector<int32_t> ids;
  ids.reserve(array.size());
  for (size_t i = 0; i < array.size(); ++i)
    ids.push_back(static_cast<int32_t>(
        Fields::as_integer(array[i], fmt::format("{}[{}]", field, i), 0, std::numeric_limits<int32_t>::max())));
  return ids;
}

// OpenAI's logit_bias: {"token id": bias in [-100, 100]}.
void parse_logit_bias(const json& bias, SamplingParams& p) {
  if (!bias.is_object()) bad_request("logit_bias", "'logit_bias' must be an object of token id -> bias");
  for (const auto& [key, value] : bias.items()) {
    int64_t id = -1;
    const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (ec != std::errc() || end != key.data() + key.size() || id < 0 || id > std::numeric_limits<int32_t>::max())
      bad_request("logit_bias", "'logit_bias' keys must be token ids (non-negative integers), got '{}'", key);
    const std::string field = fmt::format("logit_bias.{}", key);
    if (!value.is_number()) bad_request("logit_bias", "'{}' must be a number, got {}", field, type_name(value));
    const double b = value.get<double>();
    if (!std::isfinite(b) || b < -100.0 || b > 100.0)
      bad_request("logit_bias", "'{}' must be in [-100, 100], got {}", field, b);
    p.logit_bias.emplace_back(static_cast<int32_t>(id), static_cast<float>(b));
  }
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
  if (auto v = f.boolean("return_token_ids")) r.return_token_ids = *v;
  if (auto v = f.boolean("return_tokens_as_token_ids")) r.tokens_as_ids = *v;
  if (auto v = f.boolean("skip_special_tokens")) p.skip_special_tokens = *v;  // vLLM's extension
  if (auto v = f.number("timeout", 0.0, 7 * 86400.0, /*lo_open=*/true)) r.timeout_s = *v;
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
  if (auto v = f.integer("min_tokens", 0, max_int)) p.min_tokens = static_cast<int32_t>(*v);
  if (r.max_tokens_given && p.min_tokens > p.max_tokens)
    bad_request("min_tokens", "'min_tokens' ({}) must not exceed '{}' ({})", p.min_tokens, max_tokens_key,
                p.max_tokens);
  if (const json* bias = f.get("logit_bias")) parse_logit_bias(*bias, p);
  if (auto so = parse_structured_outputs(f)) {
    p.structured_outputs = std::move(so->spec);
    r.structured_field = std::move(so->field);
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
  std::string last_key;  // the field being read when parsing fails (a number out of range names it)
  const json::parser_callback_t track = [&last_key](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key) last_key = parsed.get<std::string>();
    return true;
  };
  try {
    value = json::parse(body, track);
  } catch (const json::exception& e) {
    std::string detail = e.what();
    if (const size_t p = detail.find("] "); detail.starts_with("[json.exception") && p != std::string::npos)
      detail = detail.substr(p + 2);
    if (detail.find("UTF-8") != std::string::npos)
      throw ApiError(400, fmt::format("the request body is not valid UTF-8: {}", detail), "", "invalid_utf8");
    if (detail.find("number overflow") != std::string::npos)  // 1e400: not a finite number
      throw ApiError(400, fmt::format("'{}' is out of range: {}", last_key, detail), last_key, "invalid_json");
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

void force_tool_calls(GenerationRequest& r) {
  auto schema = forced_tool_schema(r.chat);
  if (!schema) return;
  if (r.params.structured_outputs)
    bad_request("tool_choice", "'tool_choice' '{}' forces a tool call, which cannot be combined with '{}'",
                r.chat.tool_choice.kind == ToolChoice::Kind::kRequired ? "required" : r.chat.tool_choice.function,
                r.structured_field);
  r.params.structured_outputs = StructuredOutputs{StructuredOutputs::Kind::kJsonSchema, std::move(*schema)};
  r.structured_field = "tool_choice";
}

void add_structured_outputs(const Fields& f, GenerationRequest& r) {
  auto so = parse_structured_outputs(f);
  if (!so) return;
  if (r.params.structured_outputs)
    bad_request(so->field, "'{}' cannot be combined with '{}'", so->field, r.structured_field);
  r.params.structured_outputs = std::move(so->spec);
  r.structured_field = std::move(so->field);
}

GenerationRequest parse_chat_request(const json& body) {
  GenerationRequest r;
  r.kind = RouteKind::kChat;
  const Fields f(body);
  r.chat = parse_chat_fields(f);
  parse_sampling(f, "max_tokens", r);
  if (auto v = f.integer("max_completion_tokens", 1, std::numeric_limits<int32_t>::max())) {
    r.params.max_tokens = static_cast<int32_t>(*v);
    r.max_tokens_given = true;
  }
  force_tool_calls(r);
  if (r.max_tokens_given && r.params.min_tokens > r.params.max_tokens)
    bad_request("min_tokens", "'min_tokens' ({}) must not exceed the maximum output length ({})", r.params.min_tokens,
                r.params.max_tokens);
  if (auto v = f.boolean("echo")) r.echo = *v;  // vLLM: the last message, when it is the assistant's, is echoed
  const bool logprobs = f.boolean("logprobs").value_or(false);
  const auto top = f.integer("top_logprobs", 0, kMaxLogprobs);
  if (top && !logprobs) bad_request("top_logprobs", "'top_logprobs' needs 'logprobs': true");
  if (logprobs) r.logprobs = static_cast<int>(top.value_or(0));
  return r;
}

}  // namespace minfer::server
