#include "server/anthropic_protocol.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <set>
#include <string>

#include "server/api_error.h"
#include "server/json_fields.h"

namespace minfer::server {
namespace {

constexpr size_t kMaxStopSequences = 16;

// A block's "text" ({"type": "text", "text": ...}); other block types are refused naming the field.
std::string text_of(const json& block, const std::string& field) {
  const Fields bf(block, field + ".");
  auto text = bf.string("text");
  if (!text) bad_request(field + ".text", "'{}.text' is required", field);
  return *text;
}

[[noreturn]] void refuse_block(const std::string& name, const std::string& type) {
  if (type == "document")
    bad_request(name + ".type", "'{}.type' is '{}': this server reads text and images only", name, type);
  bad_request(name + ".type", "'{}.type' is '{}', which is not a content block this API takes", name, type);
}

// An image block as the OpenAI image_url part the chat parser reads: its base64 source as a data: URL.
json image_part(const json& block, const std::string& name) {
  const auto source = block.find("source");
  if (source == block.end() || !source->is_object())
    bad_request(name + ".source", "'{}.source' is required: {{\"type\": \"base64\", \"media_type\", \"data\"}}", name);
  const Fields sf(*source, name + ".source.");
  const std::string type = sf.string("type").value_or("");
  if (type != "base64")
    bad_request(name + ".source.type", "'{}.source.type' is '{}': this server fetches nothing; send base64 data", name,
                type);
  auto media = sf.string("media_type");
  auto data = sf.string("data");
  if (!media || !data) bad_request(name + ".source", "'{}.source' needs media_type and data", name);
  return {
      {"type", "image_url"}, {"image_url", {{"url", "data:" + *media + ";base64," + *data}}}, {kImagePartField, name}};
}

// The OpenAI-shaped chat messages one Anthropic message becomes, appended to `out`. `tool_ids`: the ids of the
// tool_use blocks so far, which each tool_result must name.
struct MessageConverter {
  json& out;
  std::set<std::string>& tool_ids;

  void user(const json& content, const std::string& field) {
    if (content.is_string()) {
      out.push_back({{"role", "user"}, {"content", content}});
      return;
    }
    std::string text;
    bool has_text = false;
    json parts = json::array();  // text and images in order, when there are images
    for (size_t j = 0; j < content.size(); ++j) {
      const std::string name = fmt::format("{}[{}]", field, j);
      const std::string type = block_type(content[j], name);
      if (type == "text") {
        if (has_text) text += '\n';
        text += text_of(content[j], name);
        has_text = true;
        parts.push_back({{"type", "text"}, {"text", text_of(content[j], name)}});
      } else if (type == "image") {
        parts.push_back(image_part(content[j], name));
      } else if (type == "tool_result") {
        out.push_back(tool_result(content[j], name));
      } else {
        refuse_block(name, type);
      }
    }
    const bool has_image = std::any_of(parts.begin(), parts.end(), [](const json& p) { return p["type"] != "text"; });
    if (has_image) {
      out.push_back({{"role", "user"}, {"content", std::move(parts)}});
    } else if (has_text) {
      out.push_back({{"role", "user"}, {"content", text}});
    }
  }

  void assistant(const json& content, const std::string& field) {
    json message = {{"role", "assistant"}, {"content", content.is_string() ? content : json("")}};
    if (content.is_string()) {
      out.push_back(std::move(message));
      return;
    }
    std::string text, reasoning;
    json calls = json::array();
    for (size_t j = 0; j < content.size(); ++j) {
      const std::string name = fmt::format("{}[{}]", field, j);
      const std::string type = block_type(content[j], name);
      const Fields bf(content[j], name + ".");
      if (type == "text") {
        text += text_of(content[j], name);
      } else if (type == "thinking") {
        reasoning += bf.string("thinking").value_or("");
      } else if (type == "redacted_thinking") {
        continue;  // opaque to any model but the one that wrote it
      } else if (type == "tool_use") {
        calls.push_back(tool_use(bf, name));
      } else {
        refuse_block(name, type);
      }
    }
    message["content"] = text;
    if (!reasoning.empty()) message["reasoning_content"] = reasoning;
    if (!calls.empty()) message["tool_calls"] = std::move(calls);
    out.push_back(std::move(message));
  }

 private:
  static std::string block_type(const json& block, const std::string& name) {
    if (!block.is_object()) bad_request(name, "'{}' must be a content block object, got {}", name, type_name(block));
    auto type = Fields(block, name + ".").string("type");
    if (!type) bad_request(name + ".type", "'{}.type' is required", name);
    return *type;
  }

  json tool_use(const Fields& bf, const std::string& name) {
    auto id = bf.string("id");
    auto tool = bf.string("name");
    if (!id || id->empty()) bad_request(name + ".id", "'{}.id' is required", name);
    if (!tool) bad_request(name + ".name", "'{}.name' is required", name);
    const json* input = bf.get("input");
    if (input && !input->is_object()) bad_request(name + ".input", "'{}.input' must be an object", name);
    tool_ids.insert(*id);
    return {{"id", *id},
            {"type", "function"},
            {"function", {{"name", *tool}, {"arguments", input ? *input : json::object()}}}};
  }

  json tool_result(const json& block, const std::string& name) {
    const Fields bf(block, name + ".");
    auto id = bf.string("tool_use_id");
    if (!id) bad_request(name + ".tool_use_id", "'{}.tool_use_id' is required", name);
    if (!tool_ids.count(*id))
      bad_request(name + ".tool_use_id", "'{}.tool_use_id' is '{}', which no earlier tool_use block has", name, *id);
    const json* content = bf.get("content");
    std::string text = content ? joined_text_parts(*content, name + ".content", {"text"}) : "";
    if (bf.boolean("is_error").value_or(false)) text = "Error: " + text;
    return {{"role", "tool"}, {"tool_call_id", *id}, {"content", std::move(text)}};
  }
};

json chat_messages(const Fields& f) {
  json out = json::array();
  if (const json* system = f.get("system"))
    out.push_back({{"role", "system"}, {"content", joined_text_parts(*system, "system", {"text"})}});
  const json* messages = f.get("messages");
  if (!messages) bad_request("messages", "'messages' is required: an array of {{role, content}} objects");
  if (!messages->is_array() || messages->empty())
    bad_request("messages", "'messages' must be a non-empty array, got {}",
                messages->is_array() ? "an empty array" : type_name(*messages));
  std::set<std::string> tool_ids;
  MessageConverter convert{out, tool_ids};
  for (size_t i = 0; i < messages->size(); ++i) {
    const std::string name = fmt::format("messages[{}]", i);
    const json& m = (*messages)[i];
    if (!m.is_object()) bad_request(name, "'{}' must be an object, got {}", name, type_name(m));
    const Fields mf(m, name + ".");
    const std::string role = mf.string("role").value_or("");
    const json* content = mf.get("content");
    if (!content) bad_request(name + ".content", "'{}.content' is required", name);
    if (!content->is_string() && !content->is_array())
      bad_request(name + ".content", "'{}.content' must be a string or an array of content blocks", name);
    if (role == "user") {
      convert.user(*content, name + ".content");
    } else if (role == "assistant") {
      convert.assistant(*content, name + ".content");
    } else {
      bad_request(name + ".role", "'{}.role' must be \"user\" or \"assistant\", got '{}'", name, role);
    }
  }
  return out;
}

// Anthropic's tools ({name, description, input_schema}) as function tools; server tools (typed, e.g.
// web_search_20250305) are refused naming the type.
json function_tools(const json& tools) {
  json out = json::array();
  for_each_object(tools, "tools", [&](const Fields& tf, const std::string& name) {
    if (const auto type = tf.string("type"); type && *type != "custom")
      bad_request(name + ".type", "'{}.type' is '{}': only client tools (name, input_schema) are supported", name,
                  *type);
    auto tool = tf.string("name");
    if (!tool || tool->empty()) bad_request(name + ".name", "'{}.name' is required", name);
    const json* schema = tf.get("input_schema");
    if (!schema || !schema->is_object())
      bad_request(name + ".input_schema", "'{}.input_schema' is required: a JSON schema object", name);
    json function = {{"name", *tool}, {"parameters", *schema}};
    if (auto d = tf.string("description")) function["description"] = *d;
    out.push_back({{"type", "function"}, {"function", std::move(function)}});
  });
  return out;
}

// tool_choice {"type": auto | any | tool | none, "name", "disable_parallel_tool_use"} as the chat route's.
void add_tool_choice(const json& choice, json& chat_body) {
  if (!choice.is_object()) bad_request("tool_choice", "'tool_choice' must be an object, got {}", type_name(choice));
  const Fields cf(choice, "tool_choice.");
  const std::string type = cf.string("type").value_or("");
  if (type == "auto") {
    chat_body["tool_choice"] = "auto";
  } else if (type == "any") {
    chat_body["tool_choice"] = "required";
  } else if (type == "none") {
    chat_body["tool_choice"] = "none";
  } else if (type == "tool") {
    auto name = cf.string("name");
    if (!name) bad_request("tool_choice.name", "'tool_choice.name' is required for a tool_choice of type tool");
    chat_body["tool_choice"] = {{"type", "function"}, {"function", {{"name", *name}}}};
  } else {
    bad_request("tool_choice.type", "'tool_choice.type' must be auto, any, tool or none, got '{}'", type);
  }
  if (cf.boolean("disable_parallel_tool_use").value_or(false)) chat_body["parallel_tool_calls"] = false;
}

// thinking {"type": "enabled", "budget_tokens"} / {"type": "disabled"}, and output_config.effort: the template's
// switches (Qwen3's enable_thinking, gpt-oss's reasoning_effort); templates ignore the ones they lack.
void add_thinking(const Fields& f, json& kwargs) {
  if (const json* thinking = f.get("thinking")) {
    if (!thinking->is_object()) bad_request("thinking", "'thinking' must be an object");
    const std::string type = Fields(*thinking, "thinking.").string("type").value_or("");
    if (type != "enabled" && type != "disabled" && type != "adaptive")
      bad_request("thinking.type", "'thinking.type' must be enabled, disabled or adaptive, got '{}'", type);
    kwargs["enable_thinking"] = type != "disabled";
  }
}

void add_output_config(const Fields& f, GenerationRequest& r, json& kwargs) {
  const json* config = f.get("output_config");
  if (!config) return;
  if (!config->is_object()) bad_request("output_config", "'output_config' must be an object");
  const Fields cf(*config, "output_config.");
  if (auto effort = cf.string("effort")) {
    if (*effort != "low" && *effort != "medium" && *effort != "high" && *effort != "max")
      bad_request("output_config.effort", "'output_config.effort' must be low, medium, high or max, got '{}'", *effort);
    kwargs["reasoning_effort"] = *effort == "max" ? "high" : *effort;
  }
  const json* format = cf.get("format");
  if (!format) return;
  if (!format->is_object()) bad_request("output_config.format", "'output_config.format' must be an object");
  const Fields ff(*format, "output_config.format.");
  if (ff.string("type").value_or("") != "json_schema")
    bad_request("output_config.format.type", "'output_config.format.type' must be \"json_schema\"");
  const json* schema = ff.get("schema");
  if (!schema || !schema->is_object())
    bad_request("output_config.format.schema", "'output_config.format.schema' is required: a JSON schema object");
  r.params.structured_outputs = StructuredOutputs{StructuredOutputs::Kind::kJsonSchema, schema->dump()};
  r.structured_field = "output_config.format";
}

void parse_messages_sampling(const Fields& f, GenerationRequest& r, bool count_tokens) {
  const int64_t max_int = std::numeric_limits<int32_t>::max();
  if (auto v = f.integer("max_tokens", 1, max_int)) {
    r.params.max_tokens = static_cast<int32_t>(*v);
    r.max_tokens_given = true;
  } else if (!count_tokens) {
    bad_request("max_tokens", "'max_tokens' is required: the most tokens the reply may have");
  }
  SamplingGiven given;
  if (auto v = f.number("temperature", 0.0, 1.0))
    r.params.temperature = static_cast<float>(*v), given.temperature = true;
  if (auto v = f.number("top_p", 0.0, 1.0, /*lo_open=*/true))
    r.params.top_p = static_cast<float>(*v), given.top_p = true;
  if (auto v = f.integer("top_k", 0, max_int)) r.params.top_k = static_cast<int32_t>(*v), given.top_k = true;
  r.model_defaults = given;
  if (const json* stop = f.get("stop_sequences")) {
    if (!stop->is_array() || stop->size() > kMaxStopSequences)
      bad_request("stop_sequences", "'stop_sequences' must be an array of at most {} strings", kMaxStopSequences);
    for (size_t i = 0; i < stop->size(); ++i) {
      if (!(*stop)[i].is_string() || (*stop)[i].get<std::string>().empty())
        bad_request("stop_sequences", "'stop_sequences[{}]' must be a non-empty string", i);
      r.params.stop.push_back((*stop)[i].get<std::string>());
    }
  }
  if (const json* metadata = f.get("metadata"); metadata && !metadata->is_object())
    bad_request("metadata", "'metadata' must be an object");
  if (auto v = f.boolean("stream")) r.stream = *v;
  if (auto v = f.string("model")) r.model = *v;
}

}  // namespace

GenerationRequest parse_messages_request(const json& body, bool count_tokens) {
  GenerationRequest r;
  r.kind = RouteKind::kMessages;
  const Fields f(body);
  json chat_body = {{"messages", chat_messages(f)}};
  if (const json* tools = f.get("tools")) chat_body["tools"] = function_tools(*tools);
  if (const json* choice = f.get("tool_choice")) add_tool_choice(*choice, chat_body);
  json kwargs = json::object();
  add_thinking(f, kwargs);
  add_output_config(f, r, kwargs);
  chat_body["chat_template_kwargs"] = std::move(kwargs);
  r.chat = parse_chat_fields(Fields(chat_body));
  parse_messages_sampling(f, r, count_tokens);
  add_structured_outputs(f, r);  // vLLM's extension (regex, choice, grammar, ...), as on the OpenAI routes
  force_tool_calls(r);
  return r;
}

json anthropic_error_json(int status, const std::string& message, const std::string& param) {
  const char* type = status == 401   ? "authentication_error"
                     : status == 403 ? "permission_error"
                     : status == 404 ? "not_found_error"
                     : status == 413 ? "request_too_large"
                     : status == 429 ? "rate_limit_error"
                     : status == 503 ? "overloaded_error"
                     : status >= 500 ? "api_error"
                                     : "invalid_request_error";
  // Anthropic's errors have no `param`: the field goes into the message where it does not already name it.
  const bool named = param.empty() || message.find(param) != std::string::npos;
  return {{"type", "error"}, {"error", {{"type", type}, {"message", named ? message : param + ": " + message}}}};
}

}  // namespace minfer::server
