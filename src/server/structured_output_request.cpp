#include "server/structured_output_request.h"

#include <fmt/format.h>

#include <vector>

namespace minfer::server {
namespace {

using Kind = StructuredOutputs::Kind;

// Built member by member: GCC 12 misreads nested aggregate braces inside std::optional as uninitialized.
StructuredOutputField make(Kind kind, std::string spec, std::string field) {
  StructuredOutputField f;
  f.spec.kind = kind;
  f.spec.spec = std::move(spec);
  f.field = std::move(field);
  return f;
}

// A schema given as an object or as JSON text; kept in the client's key order (it is the output's order).
std::string schema_text(const json& v, const std::string& field) {
  if (v.is_object() || v.is_boolean()) return v.dump();
  if (v.is_string()) {
    const json parsed = json::parse(v.get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (parsed.is_object()) return parsed.dump();
  }
  bad_request(field, "'{}' must be a JSON schema (an object, or a string holding one)", field);
}

std::string string_field(const json& v, const std::string& field) {
  if (!v.is_string() || v.get<std::string>().empty()) bad_request(field, "'{}' must be a non-empty string", field);
  return v.get<std::string>();
}

std::string choice_text(const json& v, const std::string& field) {
  if (!v.is_array() || v.empty()) bad_request(field, "'{}' must be a non-empty array of strings", field);
  for (const json& c : v)
    if (!c.is_string()) bad_request(field, "'{}' must be a non-empty array of strings", field);
  return v.dump();
}

std::optional<StructuredOutputField> from_response_format(const json& rf) {
  if (!rf.is_object()) bad_request("response_format", "'response_format' must be an object");
  const Fields f(rf, "response_format.");
  const std::string type = f.string("type").value_or("");
  if (type == "text") return std::nullopt;
  if (type == "json_object") return make(Kind::kJsonObject, "", "response_format");
  if (type != "json_schema")
    bad_request("response_format.type", "'response_format.type' must be text, json_object or json_schema, got '{}'",
                type);
  const json* js = f.get("json_schema");
  if (!js || !js->is_object())
    bad_request("response_format.json_schema", "'response_format.json_schema' is required for type json_schema");
  const Fields jf(*js, "response_format.json_schema.");
  const json* schema = jf.get("schema");
  // OpenAI allows a json_schema without a schema: any JSON object.
  if (!schema) return make(Kind::kJsonObject, "", "response_format.json_schema");
  return make(Kind::kJsonSchema, schema_text(*schema, "response_format.json_schema.schema"),
              "response_format.json_schema.schema");
}

std::optional<StructuredOutputField> from_structured_outputs(const json& so) {
  if (!so.is_object()) bad_request("structured_outputs", "'structured_outputs' must be an object");
  std::vector<StructuredOutputField> found;
  const Fields f(so, "structured_outputs.");
  if (const json* v = f.get("json"))
    found.push_back(make(Kind::kJsonSchema, schema_text(*v, f.name("json")), f.name("json")));
  if (const json* v = f.get("regex"))
    found.push_back(make(Kind::kRegex, string_field(*v, f.name("regex")), f.name("regex")));
  if (const json* v = f.get("choice"))
    found.push_back(make(Kind::kChoice, choice_text(*v, f.name("choice")), f.name("choice")));
  if (const json* v = f.get("grammar"))
    found.push_back(make(Kind::kGrammar, string_field(*v, f.name("grammar")), f.name("grammar")));
  if (f.boolean("json_object").value_or(false)) found.push_back(make(Kind::kJsonObject, "", f.name("json_object")));
  if (found.size() > 1)
    bad_request("structured_outputs", "'structured_outputs' may hold one of json, regex, choice, grammar, json_object");
  if (found.empty()) return std::nullopt;
  return found[0];
}

}  // namespace

std::optional<StructuredOutputField> parse_structured_outputs(const Fields& f) {
  std::vector<StructuredOutputField> found;
  if (const json* v = f.get("response_format"))
    if (auto so = from_response_format(*v)) found.push_back(std::move(*so));
  if (const json* v = f.get("structured_outputs"))
    if (auto so = from_structured_outputs(*v)) found.push_back(std::move(*so));
  if (const json* v = f.get("guided_json"))
    found.push_back(make(Kind::kJsonSchema, schema_text(*v, "guided_json"), "guided_json"));
  if (const json* v = f.get("guided_regex"))
    found.push_back(make(Kind::kRegex, string_field(*v, "guided_regex"), "guided_regex"));
  if (const json* v = f.get("guided_choice"))
    found.push_back(make(Kind::kChoice, choice_text(*v, "guided_choice"), "guided_choice"));
  if (const json* v = f.get("guided_grammar"))
    found.push_back(make(Kind::kGrammar, string_field(*v, "guided_grammar"), "guided_grammar"));
  if (const json* v = f.get("grammar")) found.push_back(make(Kind::kGrammar, string_field(*v, "grammar"), "grammar"));
  if (found.size() > 1)
    bad_request(found[1].field, "'{}' and '{}' both constrain the output: give one", found[0].field, found[1].field);
  if (found.empty()) return std::nullopt;
  return found[0];
}

}  // namespace minfer::server
