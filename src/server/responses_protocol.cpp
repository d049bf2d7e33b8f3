#include "server/responses_protocol.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <random>
#include <set>

#include "server/api_error.h"
#include "server/json_fields.h"

namespace minfer::server {
namespace {

// The text parts of a message item's content (input_text in requests, output_text in earlier outputs).
const std::initializer_list<std::string_view> kTextParts = {"input_text", "output_text", "text"};

// The chat messages the conversation's items become, in order; a function call joins the assistant message before
// it (or starts one), reasoning goes to the next assistant message, a function_call_output must answer an earlier
// call.
class ItemConverter {
 public:
  explicit ItemConverter(json& out) : out_(out) {}

  void add(const json& item, const std::string& name) {
    if (!item.is_object()) bad_request(name, "'{}' must be an object, got {}", name, type_name(item));
    const Fields f(item, name + ".");
    const std::string type = f.string("type").value_or(item.contains("role") ? "message" : "");
    if (type == "message") {
      message(f, name);
    } else if (type == "function_call") {
      function_call(f, name);
    } else if (type == "function_call_output") {
      function_call_output(f, name);
    } else if (type == "reasoning") {
      reasoning(item, name);
    } else {
      bad_request(name + ".type",
                  "'{}.type' is '{}': input items are message, function_call, function_call_output or "
                  "reasoning",
                  name, type);
    }
  }

 private:
  void message(const Fields& f, const std::string& name) {
    std::string role = f.string("role").value_or("");
    if (role == "developer") role = "system";
    if (role != "system" && role != "user" && role != "assistant")
      bad_request(name + ".role", "'{}.role' must be user, assistant, system or developer, got '{}'", name, role);
    const json* content = f.get("content");
    if (!content) bad_request(name + ".content", "'{}.content' is required", name);
    json m = {{"role", role}, {"content", user_content(*content, name + ".content")}};
    if (role == "assistant") take_reasoning(m);
    out_.push_back(std::move(m));
  }

  // A message's content as the chat parser takes it: its text joined, or with input_image parts (a data: URL in
  // image_url) text and image_url parts in order.
  static json user_content(const json& content, const std::string& field) {
    const bool images = content.is_array() && std::any_of(content.begin(), content.end(), [](const json& p) {
                          return p.is_object() && p.value("type", "") == "input_image";
                        });
    if (!images) return joined_text_parts(content, field, kTextParts);
    json parts = json::array();
    for (size_t j = 0; j < content.size(); ++j) {
      const std::string name = fmt::format("{}[{}]", field, j);
      const json& p = content[j];
      if (p.is_object() && p.value("type", "") == "input_image") {
        if (!p.contains("image_url") || !p["image_url"].is_string())
          bad_request(name + ".image_url", "'{}.image_url' is required (a data: URL; file_id is not supported)", name);
        parts.push_back({{"type", "image_url"}, {"image_url", {{"url", p["image_url"]}}}, {kImagePartField, name}});
      } else {
        parts.push_back({{"type", "text"}, {"text", joined_text_parts(json::array({p}), name, kTextParts)}});
      }
    }
    return parts;
  }

  void function_call(const Fields& f, const std::string& name) {
    auto call_id = f.string("call_id");
    auto function = f.string("name");
    if (!call_id || call_id->empty()) bad_request(name + ".call_id", "'{}.call_id' is required", name);
    if (!function) bad_request(name + ".name", "'{}.name' is required", name);
    const std::string arguments = f.string("arguments").value_or("{}");
    json parsed = json::parse(arguments, nullptr, /*allow_exceptions=*/false);
    if (!parsed.is_object())
      bad_request(name + ".arguments", "'{}.arguments' must be the JSON text of an object", name);
    if (out_.empty() || out_.back()["role"] != "assistant") {
      json m = {{"role", "assistant"}, {"content", ""}};
      take_reasoning(m);
      out_.push_back(std::move(m));
    }
    out_.back()["tool_calls"].push_back(
        {{"id", *call_id}, {"type", "function"}, {"function", {{"name", *function}, {"arguments", parsed}}}});
    calls_.insert(*call_id);
  }

  void function_call_output(const Fields& f, const std::string& name) {
    auto call_id = f.string("call_id");
    if (!call_id) bad_request(name + ".call_id", "'{}.call_id' is required", name);
    if (!calls_.count(*call_id))
      bad_request(name + ".call_id", "'{}.call_id' is '{}', which no earlier function_call has", name, *call_id);
    const json* output = f.get("output");
    if (!output) bad_request(name + ".output", "'{}.output' is required", name);
    out_.push_back({{"role", "tool"},
                    {"tool_call_id", *call_id},
                    {"content", joined_text_parts(*output, name + ".output", kTextParts)}});
  }

  // A reasoning item's text (its content, else its summary), kept for the next assistant message.
  void reasoning(const json& item, const std::string& name) {
    for (const char* key : {"content", "summary"}) {
      const auto it = item.find(key);
      if (it == item.end() || !it->is_array() || it->empty()) continue;
      for (size_t j = 0; j < it->size(); ++j) {
        const json& part = (*it)[j];
        if (!part.is_object() || !part.contains("text") || !part["text"].is_string())
          bad_request(fmt::format("{}.{}[{}]", name, key, j), "'{}.{}[{}].text' is required", name, key, j);
        reasoning_ += part["text"].get<std::string>();
      }
      return;
    }
  }

  void take_reasoning(json& message) {
    if (!reasoning_.empty()) message["reasoning_content"] = std::exchange(reasoning_, "");
  }

  json& out_;
  std::set<std::string> calls_;
  std::string reasoning_;
};

// This request's input as items, each with an id (a string input is one user message).
json input_items(const Fields& f) {
  const json* input = f.get("input");
  if (!input) bad_request("input", "'input' is required: a string or an array of input items");
  if (input->is_string())
    return json::array({{{"id", responses_id("msg")},
                         {"type", "message"},
                         {"role", "user"},
                         {"content", json::array({{{"type", "input_text"}, {"text", *input}}})}}});
  if (!input->is_array() || input->empty())
    bad_request("input", "'input' must be a string or a non-empty array of items, got {}", type_name(*input));
  json items = *input;
  for (size_t i = 0; i < items.size(); ++i) {
    json& item = items[i];
    if (!item.is_object()) continue;  // refused, naming it, when converted
    if (const auto id = item.find("id"); id != item.end() && !id->is_string())
      bad_request(fmt::format("input[{}].id", i), "'input[{}].id' must be a string, got {}", i, type_name(*id));
    if (!item.contains("type") && item.contains("role")) item["type"] = "message";
    const auto t = item.find("type");  // a type that is no string is refused, naming it, when converted
    const std::string type = t != item.end() && t->is_string() ? t->get<std::string>() : "";
    if (!item.contains("id"))  // every stored item has one (input_items lists them by id)
      item["id"] = responses_id(type == "function_call"          ? "fc"
                                : type == "function_call_output" ? "fco"
                                : type == "reasoning"            ? "rs"
                                                                 : "msg");
  }
  return items;
}

// Responses' flat function tools ({"type": "function", "name", "parameters", ...}) as the chat route's.
json chat_tools(const json& tools) {
  json out = json::array();
  for_each_object(tools, "tools", [&](const Fields& tf, const std::string& name) {
    const std::string type = tf.string("type").value_or("");
    if (type != "function")
      bad_request(name + ".type", "'{}.type' is '{}': only function tools are supported", name, type);
    auto function = tf.string("name");
    if (!function) bad_request(name + ".name", "'{}.name' is required", name);
    json f = {{"name", *function}};
    if (const json* p = tf.get("parameters")) f["parameters"] = *p;
    if (auto d = tf.string("description")) f["description"] = *d;
    out.push_back({{"type", "function"}, {"function", std::move(f)}});
  });
  return out;
}

json chat_tool_choice(const json& choice) {
  if (choice.is_string()) return choice;  // auto, none, required: checked by the chat route
  if (!choice.is_object()) bad_request("tool_choice", "'tool_choice' must be a string or an object");
  const Fields cf(choice, "tool_choice.");
  if (cf.string("type").value_or("") != "function")
    bad_request("tool_choice.type", "'tool_choice.type' must be \"function\" (only function tools are supported)");
  auto name = cf.string("name");
  if (!name) bad_request("tool_choice.name", "'tool_choice.name' is required");
  return {{"type", "function"}, {"function", {{"name", *name}}}};
}

// text.format: json_schema / json_object through llguidance; text: none.
void add_text_format(const Fields& f, GenerationRequest& r) {
  const json* text = f.get("text");
  if (!text) return;
  if (!text->is_object()) bad_request("text", "'text' must be an object");
  const json* format = Fields(*text, "text.").get("format");
  if (!format) return;
  if (!format->is_object()) bad_request("text.format", "'text.format' must be an object");
  const Fields ff(*format, "text.format.");
  const std::string type = ff.string("type").value_or("");
  if (type == "text") return;
  r.structured_field = "text.format";
  if (type == "json_object") {
    r.params.structured_outputs = StructuredOutputs{StructuredOutputs::Kind::kJsonObject, ""};
    return;
  }
  if (type != "json_schema")
    bad_request("text.format.type", "'text.format.type' must be text, json_object or json_schema, got '{}'", type);
  const json* schema = ff.get("schema");
  if (!schema || !schema->is_object())
    bad_request("text.format.schema", "'text.format.schema' is required: a JSON schema object");
  r.params.structured_outputs = StructuredOutputs{StructuredOutputs::Kind::kJsonSchema, schema->dump()};
}

// reasoning.effort: the template's switches (enable_thinking off for none / minimal, gpt-oss's reasoning_effort).
void add_reasoning(const Fields& f, json& kwargs) {
  const json* reasoning = f.get("reasoning");
  if (!reasoning) return;
  if (!reasoning->is_object()) bad_request("reasoning", "'reasoning' must be an object");
  auto effort = Fields(*reasoning, "reasoning.").string("effort");
  if (!effort) return;
  if (*effort != "none" && *effort != "minimal" && *effort != "low" && *effort != "medium" && *effort != "high")
    bad_request("reasoning.effort", "'reasoning.effort' must be none, minimal, low, medium or high, got '{}'", *effort);
  kwargs["enable_thinking"] = *effort != "none" && *effort != "minimal";
  kwargs["reasoning_effort"] = *effort == "none" || *effort == "minimal" ? "low" : *effort;
}

void parse_responses_sampling(const Fields& f, GenerationRequest& r) {
  const int64_t max_int = std::numeric_limits<int32_t>::max();
  if (auto v = f.integer("max_output_tokens", 1, max_int)) {
    r.params.max_tokens = static_cast<int32_t>(*v);
    r.max_tokens_given = true;
  }
  SamplingGiven given;
  if (auto v = f.number("temperature", 0.0, 2.0))
    r.params.temperature = static_cast<float>(*v), given.temperature = true;
  if (auto v = f.number("top_p", 0.0, 1.0, /*lo_open=*/true))
    r.params.top_p = static_cast<float>(*v), given.top_p = true;
  r.model_defaults = given;
  if (auto v = f.boolean("stream")) r.stream = *v;
  if (auto v = f.string("model")) r.model = *v;
  if (f.boolean("background").value_or(false))
    bad_request("background", "'background' responses are not supported: send the request and wait, or stream it");
  if (const json* metadata = f.get("metadata"); metadata && !metadata->is_object())
    bad_request("metadata", "'metadata' must be an object");
}

// The conversation previous_response_id names: its input items and its output, in order. 404 when unknown.
json history(const Fields& f, ResponseStore& store) {
  auto previous = f.string("previous_response_id");
  if (!previous) return json::array();
  const std::optional<json> record = store.get(*previous);
  if (!record)
    throw ApiError(404,
                   fmt::format("previous_response_id '{}' is not a stored response (unknown, deleted, evicted, or "
                               "created with store: false)",
                               *previous),
                   "previous_response_id", "previous_response_not_found");
  json items = (*record)["input_items"];
  for (const json& item : (*record)["response"]["output"]) items.push_back(item);
  return items;
}

// The fields the response object repeats, as given (defaults where the request left them out).
json echo_fields(const Fields& f, const GenerationRequest& r) {
  auto given = [&](const char* key, json fallback) {
    const json* v = f.get(key);
    return v ? *v : fallback;
  };
  return {{"instructions", given("instructions", nullptr)},
          {"max_output_tokens", r.max_tokens_given ? json(r.params.max_tokens) : json(nullptr)},
          {"metadata", given("metadata", json::object())},
          {"parallel_tool_calls", r.chat.parallel_tool_calls},
          {"previous_response_id", given("previous_response_id", nullptr)},
          {"reasoning", given("reasoning", json{{"effort", nullptr}, {"summary", nullptr}})},
          {"temperature", given("temperature", 1.0)},
          {"text", given("text", json{{"format", {{"type", "text"}}}})},
          {"tool_choice", given("tool_choice", "auto")},
          {"tools", given("tools", json::array())},
          {"top_p", given("top_p", 1.0)},
          {"truncation", given("truncation", "disabled")},
          {"user", given("user", nullptr)}};
}

}  // namespace

std::string responses_id(const char* prefix) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{}_{:016x}{:08x}", prefix, rng(), static_cast<uint32_t>(rng()));
}

GenerationRequest parse_responses_request(const json& body, ResponseStore& store) {
  GenerationRequest r;
  r.kind = RouteKind::kResponses;
  const Fields f(body);
  auto context = std::make_shared<ResponsesContext>();
  context->input_items = history(f, store);
  const size_t earlier = context->input_items.size();
  for (const json& item : input_items(f)) context->input_items.push_back(item);
  json messages = json::array();
  if (auto instructions = f.string("instructions"))
    messages.push_back({{"role", "system"}, {"content", *instructions}});
  ItemConverter convert(messages);
  for (size_t i = 0; i < context->input_items.size(); ++i)
    convert.add(context->input_items[i],
                i < earlier ? fmt::format("previous_response_id's item {}", i) : fmt::format("input[{}]", i - earlier));
  json chat_body = {{"messages", std::move(messages)}, {"chat_template_kwargs", json::object()}};
  if (const json* tools = f.get("tools")) chat_body["tools"] = chat_tools(*tools);
  if (const json* choice = f.get("tool_choice")) chat_body["tool_choice"] = chat_tool_choice(*choice);
  if (auto v = f.boolean("parallel_tool_calls")) chat_body["parallel_tool_calls"] = *v;
  add_reasoning(f, chat_body["chat_template_kwargs"]);
  r.chat = parse_chat_fields(Fields(chat_body));
  parse_responses_sampling(f, r);
  add_text_format(f, r);
  add_structured_outputs(f, r);  // vLLM's extension (regex, choice, grammar, ...), as on the other routes
  force_tool_calls(r);
  context->store = f.boolean("store").value_or(true);
  context->store_to = &store;
  context->echo = echo_fields(f, r);
  r.responses = std::move(context);
  return r;
}

}  // namespace minfer::server
