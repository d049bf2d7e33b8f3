#include "server/chat_request.h"

#include <fmt/format.h>

#include <algorithm>

namespace minfer::server {
namespace {

void parse_tool_calls(json& message, const std::string& prefix) {
  json& calls = message["tool_calls"];
  if (!calls.is_array()) bad_request(prefix + "tool_calls", "'{}tool_calls' must be an array", prefix);
  for (size_t k = 0; k < calls.size(); ++k) {
    const std::string call_name = fmt::format("{}tool_calls[{}]", prefix, k);
    json& call = calls[k];
    if (!call.is_object() || !call.contains("function") || !call["function"].is_object())
      bad_request(call_name, "'{}' must be an object with a 'function' object", call_name);
    json& function = call["function"];
    if (!function.contains("name") || !function["name"].is_string())
      bad_request(call_name + ".function.name", "'{}.function.name' is required", call_name);
    auto args = function.find("arguments");
    if (args != function.end() && args->is_string()) {
      json parsed = json::parse(args->get<std::string>(), nullptr, /*allow_exceptions=*/false);
      if (parsed.is_object()) *args = std::move(parsed);
    }
  }
}

bool has_image_part(const json& content) {
  if (!content.is_array()) return false;
  return std::any_of(content.begin(), content.end(),
                     [](const json& p) { return p.is_object() && p.value("type", "") == "image_url"; });
}

// Content parts with images: text parts and {"type": "image"} in order, each image's URL recorded with its field.
json parts_with_images(const json& content, const std::string& field, std::vector<ImageRef>& images) {
  json parts = json::array();
  for (size_t j = 0; j < content.size(); ++j) {
    const std::string name = fmt::format("{}[{}]", field, j);
    if (!content[j].is_object()) bad_request(name, "'{}' must be an object, got {}", name, type_name(content[j]));
    const Fields pf(content[j], name + ".");
    const std::string type = pf.string("type").value_or("");
    if (type == "image_url") {
      const std::string part = content[j].value(kImagePartField, name);
      images.push_back({image_part_url(content[j], name), part + (part == name ? ".image_url" : ""), part});
      parts.push_back({{"type", "image"}});
    } else if (type == "text") {
      auto text = pf.string("text");
      if (!text) bad_request(name + ".text", "'{}.text' is required", name);
      parts.push_back({{"type", "text"}, {"text", *text}});
    } else {
      bad_request(name + ".type", "'{}.type' is '{}': text and image_url parts are supported", name, type);
    }
  }
  return parts;
}

json parse_message(const json& m, size_t i, std::vector<ImageRef>& images) {
  const std::string prefix = fmt::format("messages[{}].", i);
  if (!m.is_object()) bad_request("messages", "'messages[{}]' must be an object, got {}", i, type_name(m));
  const Fields mf(m, prefix);
  auto role = mf.string("role");
  if (!role) bad_request(prefix + "role", "'{}role' is required", prefix);
  if (*role == "developer") role = "system";  // OpenAI's newer name for the system role
  if (*role != "system" && *role != "user" && *role != "assistant" && *role != "tool")
    bad_request(prefix + "role", "'{}role' must be system, developer, user, assistant or tool, got '{}'", prefix,
                *role);
  json message = m;
  message["role"] = *role;
  if (const json* content = mf.get("content")) {
    message["content"] = has_image_part(*content) && *role == "user"
                             ? parts_with_images(*content, prefix + "content", images)
                             : json(joined_text_parts(*content, prefix + "content", {"text"}));
  } else if (*role == "assistant") {
    message["content"] = "";  // a message of tool calls only; "" as vLLM gives templates (Qwen3 tests `in content`)
  } else {
    bad_request(prefix + "content", "'{}content' is required", prefix);
  }
  if (mf.get("tool_calls")) parse_tool_calls(message, prefix);
  if (*role == "tool" && !mf.string("tool_call_id") && !mf.string("name"))
    bad_request(prefix + "tool_call_id", "'{}tool_call_id' is required for a tool message", prefix);
  return message;
}

json parse_tools(const json& tools) {
  if (!tools.is_array()) bad_request("tools", "'tools' must be an array, got {}", type_name(tools));
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string name = fmt::format("tools[{}]", i);
    const json& tool = tools[i];
    if (!tool.is_object()) bad_request(name, "'{}' must be an object", name);
    const Fields tf(tool, name + ".");
    if (tf.string("type").value_or("function") != "function")
      bad_request(name + ".type", "'{}.type' must be \"function\"", name);
    const json* function = tf.get("function");
    if (!function || !function->is_object()) bad_request(name + ".function", "'{}.function' is required", name);
    const Fields ff(*function, name + ".function.");
    if (!ff.string("name")) bad_request(name + ".function.name", "'{}.function.name' is required", name);
    if (const json* params = ff.get("parameters"); params && !params->is_object())
      bad_request(name + ".function.parameters", "'{}.function.parameters' must be a JSON schema object", name);
  }
  return tools;
}

ToolChoice parse_tool_choice(const json& choice, const json& tools) {
  ToolChoice out;
  if (choice.is_string()) {
    const std::string s = choice.get<std::string>();
    if (s == "auto") return out;
    if (s == "none")
      out.kind = ToolChoice::Kind::kNone;
    else if (s == "required")
      out.kind = ToolChoice::Kind::kRequired;
    else
      bad_request("tool_choice", "'tool_choice' must be \"auto\", \"none\", \"required\" or a function, got '{}'", s);
  } else if (choice.is_object()) {
    const json* function = Fields(choice, "tool_choice.").get("function");
    if (!function || !function->is_object() || !(*function)["name"].is_string())
      bad_request("tool_choice.function.name",
                  "'tool_choice' names a function as {{\"type\": \"function\", "
                  "\"function\": {{\"name\": ...}}}}");
    out.kind = ToolChoice::Kind::kFunction;
    out.function = (*function)["name"].get<std::string>();
  } else {
    bad_request("tool_choice", "'tool_choice' must be a string or an object, got {}", type_name(choice));
  }
  if (out.kind == ToolChoice::Kind::kNone) return out;
  if (!tools.is_array() || tools.empty())
    bad_request("tool_choice", "'tool_choice' is '{}' but no 'tools' were given", choice.dump());
  if (out.kind == ToolChoice::Kind::kFunction) {
    bool found = false;
    for (const json& t : tools) found = found || t["function"]["name"] == out.function;
    if (!found)
      bad_request("tool_choice.function.name", "'tool_choice' names '{}', which is not in 'tools'", out.function);
  }
  return out;
}

}  // namespace

std::string joined_text_parts(const json& content, const std::string& field,
                              std::initializer_list<std::string_view> types) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array())
    bad_request(field, "'{}' must be a string or an array of content parts, got {}", field, type_name(content));
  std::string text;
  for (size_t j = 0; j < content.size(); ++j) {
    const std::string name = fmt::format("{}[{}]", field, j);
    if (!content[j].is_object()) bad_request(name, "'{}' must be an object, got {}", name, type_name(content[j]));
    const Fields pf(content[j], name + ".");
    const std::string type = pf.string("type").value_or("");
    if (std::find(types.begin(), types.end(), type) == types.end())
      bad_request(name + ".type", "'{}.type' is '{}': only text parts are supported (this server reads text)", name,
                  type);
    auto part = pf.string("text");
    if (!part) bad_request(name + ".text", "'{}.text' is required", name);
    if (j > 0) text += '\n';
    text += *part;
  }
  return text;
}

std::optional<std::string> forced_tool_schema(const ChatFields& chat) {
  using Kind = ToolChoice::Kind;
  if (chat.tool_choice.kind != Kind::kRequired && chat.tool_choice.kind != Kind::kFunction) return std::nullopt;
  auto parameters = [](const json& tool) {
    const json& function = tool["function"];
    return function.contains("parameters") && function["parameters"].is_object() ? function["parameters"]
                                                                                 : json{{"type", "object"}};
  };
  if (chat.tool_choice.kind == Kind::kFunction) {
    for (const json& tool : chat.tools)
      if (tool["function"]["name"] == chat.tool_choice.function) return parameters(tool).dump();
  }
  json any_of = json::array();
  for (const json& tool : chat.tools)
    any_of.push_back(
        {{"type", "object"},
         {"properties",
          {{"name", {{"type", "string"}, {"enum", {tool["function"]["name"]}}}}, {"parameters", parameters(tool)}}},
         {"required", {"name", "parameters"}},
         {"additionalProperties", false}});
  json schema = {{"type", "array"}, {"minItems", 1}, {"items", {{"anyOf", any_of}}}};
  if (!chat.parallel_tool_calls) schema["maxItems"] = 1;
  return schema.dump();
}

json ChatFields::template_variables() const {
  json vars = template_kwargs;
  if (tools.is_array()) vars["tools"] = tools;
  return vars;
}

ChatFields parse_chat_fields(const Fields& f) {
  ChatFields chat;
  const json* messages = f.get("messages");
  if (!messages) bad_request("messages", "'messages' is required: an array of {{role, content}} objects");
  if (!messages->is_array() || messages->empty())
    bad_request("messages", "'messages' must be a non-empty array, got {}",
                messages->is_array() ? "an empty array" : type_name(*messages));
  for (size_t i = 0; i < messages->size(); ++i) chat.messages.push_back(parse_message((*messages)[i], i, chat.images));
  if (const json* tools = f.get("tools")) chat.tools = parse_tools(*tools);
  if (const json* choice = f.get("tool_choice")) chat.tool_choice = parse_tool_choice(*choice, chat.tools);
  if (auto v = f.boolean("parallel_tool_calls")) chat.parallel_tool_calls = *v;
  chat.continue_final_message = f.boolean("continue_final_message").value_or(false);
  chat.add_generation_prompt = f.boolean("add_generation_prompt").value_or(!chat.continue_final_message);
  if (chat.continue_final_message && chat.add_generation_prompt)
    bad_request("continue_final_message", "'continue_final_message' and 'add_generation_prompt' cannot both be true");
  if (chat.continue_final_message && chat.messages.back()["role"] != "assistant")
    bad_request("continue_final_message", "'continue_final_message' needs the last message to be the assistant's");
  if (const json* kwargs = f.get("chat_template_kwargs")) {
    if (!kwargs->is_object())
      bad_request("chat_template_kwargs", "'chat_template_kwargs' must be an object, got {}", type_name(*kwargs));
    for (const char* reserved : {"messages", "add_generation_prompt", "bos_token", "eos_token"})
      if (kwargs->contains(reserved))
        bad_request("chat_template_kwargs", "'chat_template_kwargs' may not set '{}'", reserved);
    chat.template_kwargs = *kwargs;
  }
  return chat;
}

}  // namespace minfer::server
