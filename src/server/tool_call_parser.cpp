#include "server/tool_call_parser.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <random>

#include "base/text.h"
#include "server/json.h"

namespace minfer::server {
namespace {

// Where `marker` starts in text, or (partial_ok) where a tail of text that is a prefix of it starts.
size_t marker_start(std::string_view text, std::string_view marker, bool partial_ok) {
  const size_t at = text.find(marker);
  if (at != std::string_view::npos || !partial_ok) return at;
  const size_t tail = partial_marker_at_end(text, marker);
  return tail > 0 ? text.size() - tail : std::string_view::npos;
}

// {"name": ..., <args_key>: {...}} -> a call; nullopt when it is not one.
std::optional<ToolCall> call_from_json(const json& j, const char* args_key, bool mistral_ids) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return std::nullopt;
  const json* args = nullptr;
  for (const char* key : {args_key, "arguments", "parameters"})
    if (j.contains(key)) {
      args = &j[key];
      break;
    }
  std::string arguments = "{}";
  if (args && args->is_object())
    arguments = args->dump();
  else if (args && args->is_string())
    arguments = args->get<std::string>();  // already JSON text
  else if (args && !args->is_null())
    return std::nullopt;
  return ToolCall{make_tool_call_id(mistral_ids), j["name"].get<std::string>(), std::move(arguments)};
}

std::string_view trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

class HermesParser : public ToolCallParser {
 public:
  const char* name() const override { return "hermes"; }
  size_t call_start(std::string_view text, bool partial_ok) const override {
    return marker_start(text, kOpen, partial_ok);
  }
  ParsedToolCalls parse(std::string_view text, const json& /*tools*/) const override {
    ParsedToolCalls out;
    size_t pos = 0;
    while (true) {
      const size_t open = text.find(kOpen, pos);
      if (open == std::string_view::npos) break;
      const size_t body = open + kOpen.size();
      size_t close = text.find(kClose, body);
      const size_t end = close == std::string_view::npos ? text.size() : close + kClose.size();
      if (close == std::string_view::npos) close = text.size();  // cut by max_tokens: parse what is there
      const json j = json::parse(trim(text.substr(body, close - body)), nullptr, false);
      auto call = call_from_json(j, "arguments", false);
      if (!call) break;  // not a call: the rest stays content
      out.content.append(text.substr(pos, open - pos));
      out.calls.push_back(std::move(*call));
      pos = end;
    }
    out.content.append(text.substr(pos));
    if (!out.calls.empty()) out.content = std::string(trim(out.content));
    return out;
  }

 private:
  static constexpr std::string_view kOpen = "<tool_call>";
  static constexpr std::string_view kClose = "</tool_call>";
};

class Llama3JsonParser : public ToolCallParser {
 public:
  const char* name() const override { return "llama3_json"; }
  // A call is the whole output: it starts at the first non-space character when that is "{" or <|python_tag|>.
  size_t call_start(std::string_view text, bool partial_ok) const override {
    const size_t b = text.find_first_not_of(" \t\r\n");
    if (b == std::string_view::npos) return partial_ok && !text.empty() ? 0 : std::string_view::npos;
    const std::string_view rest = text.substr(b);
    if (rest.front() == '{' || rest.starts_with(kTag)) return 0;
    if (partial_ok && kTag.starts_with(rest)) return 0;
    return std::string_view::npos;
  }
  ParsedToolCalls parse(std::string_view text, const json& /*tools*/) const override {
    std::string_view body = trim(text);
    if (body.starts_with(kTag)) body = trim(body.substr(kTag.size()));
    ParsedToolCalls out;
    size_t pos = 0;
    while (pos < body.size()) {  // calls separated by ";"
      size_t next = body.find("};", pos);
      next = next == std::string_view::npos ? body.size() : next + 1;
      auto call = call_from_json(json::parse(trim(body.substr(pos, next - pos)), nullptr, false), "parameters", false);
      if (!call) return {std::string(text), {}};
      out.calls.push_back(std::move(*call));
      pos = next + 1;
    }
    if (out.calls.empty()) out.content = std::string(text);
    return out;
  }

 private:
  static constexpr std::string_view kTag = "<|python_tag|>";
};

class MistralParser : public ToolCallParser {
 public:
  const char* name() const override { return "mistral"; }
  size_t call_start(std::string_view text, bool partial_ok) const override {
    return marker_start(text, kTag, partial_ok);
  }
  ParsedToolCalls parse(std::string_view text, const json& /*tools*/) const override {
    const size_t at = text.find(kTag);
    if (at == std::string_view::npos) return {std::string(text), {}};
    const json j = json::parse(trim(text.substr(at + kTag.size())), nullptr, false);
    ParsedToolCalls out{std::string(trim(text.substr(0, at))), {}};
    for (const json& c : j.is_array() ? j : json::array({j})) {
      auto call = call_from_json(c, "arguments", true);
      if (!call) return {std::string(text), {}};
      out.calls.push_back(std::move(*call));
    }
    return out;
  }

 private:
  static constexpr std::string_view kTag = "[TOOL_CALLS]";
};

const json* find_key(const json& j, std::string_view key) {
  if (!j.is_object()) return nullptr;
  const auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

// The JSON schema of parameter `key` of function `function` among the request's tools, or null.
const json* parameter_schema(const json& tools, std::string_view function, std::string_view key) {
  if (!tools.is_array()) return nullptr;
  for (const json& tool : tools) {
    const json* f = find_key(tool, "function");
    const json* name = f ? find_key(*f, "name") : nullptr;
    if (!name || !name->is_string() || name->get<std::string>() != function) continue;
    const json* params = find_key(*f, "parameters");
    const json* props = params ? find_key(*params, "properties") : nullptr;
    return props ? find_key(*props, key) : nullptr;
  }
  return nullptr;
}

// A bare parameter value as the JSON its schema's type asks for, after vLLM's qwen3_coder parser: "null" is
// null, booleans in any case (the template writes Python's True / False), numbers, objects and arrays as JSON. Text
// that is not of the type, and a parameter the schema does not type, stay a string.
json typed_value(const std::string& text, const json* schema) {
  const json* type = schema ? find_key(*schema, "type") : nullptr;
  if (!type) return text;
  std::vector<std::string> types;
  for (const json& t : type->is_array() ? *type : json::array({*type}))
    if (t.is_string()) types.push_back(t.get<std::string>());
  auto wants = [&](std::string_view name) { return std::find(types.begin(), types.end(), name) != types.end(); };
  std::string lower = text;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "null") return nullptr;
  if (wants("string")) return text;
  if (wants("boolean") && (lower == "true" || lower == "false")) return lower == "true";
  json v = json::parse(text, nullptr, false);
  const bool fits = (wants("integer") && v.is_number_integer()) || (wants("number") && v.is_number()) ||
                    (wants("object") && v.is_object()) || (wants("array") && v.is_array());
  return fits ? v : json(text);
}

// Qwen3-Coder's XML-style calls. Values are the raw text between the tags (less the newline after the opening tag
// and the one before the closing tag), so the schema decides what JSON they become. A missing closing tag (cut by
// max_tokens) ends at the next opening tag or the end of the text.
class Qwen3CoderParser : public ToolCallParser {
 public:
  const char* name() const override { return "qwen3_coder"; }
  bool json_calls() const override { return false; }  // XML-like bodies
  // A call opens with <tool_call>, or with a bare <function= where the model leaves the wrapper out.
  size_t call_start(std::string_view text, bool partial_ok) const override {
    return std::min(marker_start(text, kToolCall, partial_ok), marker_start(text, kFunction, partial_ok));
  }
  ParsedToolCalls parse(std::string_view text, const json& tools) const override {
    const size_t start = call_start(text, false);
    if (start == std::string_view::npos) return {std::string(text), {}};
    ParsedToolCalls out{std::string(trim(text.substr(0, start))), {}};
    for (size_t pos = text.find(kFunction, start); pos != std::string_view::npos; pos = text.find(kFunction, pos)) {
      auto call = parse_function(text, pos, tools);
      if (!call) break;
      out.calls.push_back(std::move(*call));
    }
    // Markers but no well-formed call: the text stays content. Text after the calls is dropped, as vLLM does (the
    // template tells the model to write nothing there).
    if (out.calls.empty()) return {std::string(text), {}};
    return out;
  }

 private:
  // The call whose <function= is at pos; pos moves past it. nullopt when the name is not closed by ">".
  static std::optional<ToolCall> parse_function(std::string_view text, size_t& pos, const json& tools) {
    const size_t name_begin = pos + kFunction.size();
    const size_t name_end = text.find('>', name_begin);
    if (name_end == std::string_view::npos) return std::nullopt;
    const std::string name(trim(text.substr(name_begin, name_end - name_begin)));
    if (name.empty()) return std::nullopt;
    const size_t close = text.find(kFunctionEnd, name_end);
    const size_t end = std::min({close, text.find(kFunction, name_end), text.size()});
    pos = end == close ? close + kFunctionEnd.size() : end;
    const std::string_view body = text.substr(name_end + 1, end - name_end - 1);
    json arguments = json::object();
    for (size_t p = body.find(kParameter); p != std::string_view::npos; p = body.find(kParameter, p)) {
      const size_t key_end = body.find('>', p);
      if (key_end == std::string_view::npos) break;
      const std::string key(trim(body.substr(p + kParameter.size(), key_end - p - kParameter.size())));
      const size_t value_end = std::min(body.find(kParameterEnd, key_end), body.find(kParameter, key_end));
      std::string_view value = body.substr(key_end + 1, std::min(value_end, body.size()) - key_end - 1);
      if (value.starts_with('\n')) value.remove_prefix(1);
      if (value.ends_with('\n')) value.remove_suffix(1);
      arguments[key] = typed_value(std::string(value), parameter_schema(tools, name, key));
      p = value_end;
    }
    return ToolCall{make_tool_call_id(false), name, arguments.dump()};
  }

  static constexpr std::string_view kToolCall = "<tool_call>";
  static constexpr std::string_view kFunction = "<function=";
  static constexpr std::string_view kFunctionEnd = "</function>";
  static constexpr std::string_view kParameter = "<parameter=";
  static constexpr std::string_view kParameterEnd = "</parameter>";
};

}  // namespace

std::unique_ptr<ToolCallParser> ToolCallParser::make(std::string_view name, std::string_view chat_template) {
  if (name == "auto") {
    if (chat_template.find("[TOOL_CALLS]") != std::string_view::npos)
      name = "mistral";
    else if (chat_template.find("<function=") != std::string_view::npos &&
             chat_template.find("<parameter=") != std::string_view::npos)
      name = "qwen3_coder";  // before hermes: these templates wrap calls in <tool_call> too
    else if (chat_template.find("<tool_call>") != std::string_view::npos)
      name = "hermes";
    else if (chat_template.find("<|python_tag|>") != std::string_view::npos ||
             chat_template.find("Environment: ipython") != std::string_view::npos)
      name = "llama3_json";
    else
      name = "hermes";  // the most common format of models trained for tools
  }
  if (name == "hermes") return std::make_unique<HermesParser>();
  if (name == "llama3_json") return std::make_unique<Llama3JsonParser>();
  if (name == "mistral") return std::make_unique<MistralParser>();
  if (name == "qwen3_coder") return std::make_unique<Qwen3CoderParser>();
  return nullptr;
}

const char* ToolCallParser::known_names() { return "auto, hermes, llama3_json, mistral, qwen3_coder"; }

std::string make_tool_call_id(bool mistral_style) {
  static constexpr char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string id = mistral_style ? "" : "call_";
  for (int i = 0; i < (mistral_style ? 9 : 24); ++i) id += kChars[rng() % (sizeof kChars - 1)];
  return id;
}

}  // namespace minfer::server
