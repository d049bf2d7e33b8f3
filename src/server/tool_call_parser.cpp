#include "server/tool_call_parser.h"

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
  ParsedToolCalls parse(std::string_view text) const override {
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
  ParsedToolCalls parse(std::string_view text) const override {
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
  ParsedToolCalls parse(std::string_view text) const override {
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

}  // namespace

std::unique_ptr<ToolCallParser> ToolCallParser::make(std::string_view name, std::string_view chat_template) {
  if (name == "auto") {
    if (chat_template.find("[TOOL_CALLS]") != std::string_view::npos)
      name = "mistral";
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
  return nullptr;
}

const char* ToolCallParser::known_names() { return "auto, hermes, llama3_json, mistral"; }

std::string make_tool_call_id(bool mistral_style) {
  static constexpr char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string id = mistral_style ? "" : "call_";
  for (int i = 0; i < (mistral_style ? 9 : 24); ++i) id += kChars[rng() % (sizeof kChars - 1)];
  return id;
}

}  // namespace minfer::server
