// Request parsing of the server's routes: fields land in SamplingParams, bad values name their field.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "api_error_support.h"
#include "server/api_error.h"
#include "server/metrics.h"
#include "server/openai_protocol.h"

namespace minfer::server {
namespace {

using json = nlohmann::ordered_json;

TEST(ServerProtocol, CompletionFieldsReachSamplingParams) {
  const GenerationRequest r = parse_completion_request(json::parse(R"({
      "prompt": ["a", "b"], "max_tokens": 7, "temperature": 0.5, "top_p": 0.9, "top_k": 40, "min_p": 0.1,
      "seed": 3, "stop": ["x", "y"], "n": 2, "presence_penalty": 1.0, "frequency_penalty": -1.0,
      "logprobs": 3, "stream": true, "stream_options": {"include_usage": true}, "model": "m"})"));
  EXPECT_EQ(r.kind, RouteKind::kCompletion);
  ASSERT_EQ(r.prompts.size(), 2u);
  EXPECT_EQ(r.prompts[1].text, "b");
  EXPECT_EQ(r.params.max_tokens, 7);
  EXPECT_TRUE(r.max_tokens_given);
  EXPECT_FLOAT_EQ(r.params.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.params.top_p, 0.9f);
  EXPECT_EQ(r.params.top_k, 40);
  EXPECT_FLOAT_EQ(r.params.min_p, 0.1f);
  EXPECT_EQ(r.params.seed, 3u);
  EXPECT_EQ(r.params.stop, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(r.n, 2);
  EXPECT_EQ(r.logprobs, 3);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.model, "m");
}

TEST(ServerProtocol, TokenIdPromptsAndDefaults) {
  const GenerationRequest one = parse_completion_request(json::parse(R"({"prompt": [1, 2, 3]})"));
  ASSERT_EQ(one.prompts.size(), 1u);
  EXPECT_FALSE(one.prompts[0].is_text);
  EXPECT_EQ(one.prompts[0].ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(one.params.max_tokens, 16);
  EXPECT_FALSE(one.max_tokens_given);
  const GenerationRequest many = parse_completion_request(json::parse(R"({"prompt": [[1], [2, 3]]})"));
  EXPECT_EQ(many.prompts.size(), 2u);
  const GenerationRequest gen = parse_generate_request(json::parse(R"({"text": "hi"})"));
  EXPECT_EQ(gen.params.max_tokens, 50);
}

TEST(ServerProtocol, ChatMessagesAndLogprobs) {
  const GenerationRequest r = parse_chat_request(json::parse(R"({
      "messages": [{"role": "developer", "content": "s"},
                   {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
      "logprobs": true, "top_logprobs": 2, "max_completion_tokens": 9})"));
  ASSERT_EQ(r.chat.messages.size(), 2u);
  EXPECT_EQ(r.chat.messages[0]["role"], "system");
  EXPECT_EQ(r.chat.messages[1]["content"], "a\nb");  // text parts joined with "\n", as vLLM
  EXPECT_EQ(r.logprobs, 2);
  EXPECT_EQ(r.params.max_tokens, 9);
}

TEST(ServerProtocol, BadValuesNameTheirField) {
  const struct {
    const char* body;
    const char* param;
  } cases[] = {
      {R"({"prompt": 1})", "prompt"},
      {R"({"prompt": "x", "max_tokens": 0})", "max_tokens"},
      {R"({"prompt": "x", "max_tokens": -5})", "max_tokens"},
      {R"({"prompt": "x", "max_tokens": 1.5})", "max_tokens"},
      {R"({"prompt": "x", "temperature": -1})", "temperature"},
      {R"({"prompt": "x", "top_p": 1.5})", "top_p"},
      {R"({"prompt": "x", "n": 0})", "n"},
      {R"({"prompt": "x", "stop": [1]})", "stop"},
      {R"({"prompt": "x", "stop": ""})", "stop"},
      {R"({"prompt": "x", "logprobs": true})", "logprobs"},
      {R"({"prompt": "x", "stream_options": {"include_usage": true}})", "stream_options"},
      {R"({"prompt": [1, "a"]})", "prompt[1]"},
  };
  for (const auto& c : cases) {
    const ApiError e = parse_error([&] { parse_completion_request(json::parse(c.body)); });
    EXPECT_EQ(e.status(), 400) << c.body;
    EXPECT_EQ(e.param(), c.param) << c.body << ": " << e.what();
  }
  const ApiError chat = parse_error([] { parse_chat_request(json::parse(R"({"messages": [{"content": "x"}]})")); });
  EXPECT_EQ(chat.param(), "messages[0].role");
}

TEST(ServerProtocol, BodyErrors) {
  EXPECT_EQ(parse_error([] { parse_json_body("{"); }).code(), "invalid_json");
  EXPECT_EQ(parse_error([] { parse_json_body("{\"a\": \"\xff\"}"); }).code(), "invalid_utf8");
  EXPECT_EQ(parse_error([] { parse_json_body("[]"); }).status(), 400);
  const json error = ApiError(404, "gone", "model", "model_not_found").to_json();
  EXPECT_EQ(error["error"]["type"], "not_found_error");
  EXPECT_EQ(error["error"]["param"], "model");
}

TEST(ServerMetrics, HistogramIsCumulative) {
  Histogram h({0.1, 1.0});
  h.observe(0.05);
  h.observe(0.5);
  h.observe(5.0);
  std::string out;
  h.render("t", out);
  EXPECT_NE(out.find("t_bucket{le=\"0.1\"} 1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("t_bucket{le=\"1\"} 2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("t_bucket{le=\"+Inf\"} 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("t_count 3\n"), std::string::npos) << out;
}

}  // namespace
}  // namespace minfer::server

namespace minfer::server {
namespace {

TEST(ServerProtocol, StructuredOutputsFromEverySpelling) {
  const struct {
    const char* body;
    StructuredOutputs::Kind kind;
    const char* field;
  } cases[] = {
      {R"({"response_format": {"type": "json_object"}})", StructuredOutputs::Kind::kJsonObject, "response_format"},
      {R"({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}})",
       StructuredOutputs::Kind::kJsonSchema, "response_format.json_schema.schema"},
      {R"({"structured_outputs": {"regex": "a+"}})", StructuredOutputs::Kind::kRegex, "structured_outputs.regex"},
      {R"({"structured_outputs": {"choice": ["a", "b"]}})", StructuredOutputs::Kind::kChoice,
       "structured_outputs.choice"},
      {R"({"guided_json": "{\"type\": \"object\"}"})", StructuredOutputs::Kind::kJsonSchema, "guided_json"},
      {R"({"guided_grammar": "start: \"a\""})", StructuredOutputs::Kind::kGrammar, "guided_grammar"},
      {R"({"grammar": "start: \"a\""})", StructuredOutputs::Kind::kGrammar, "grammar"},
  };
  for (const auto& c : cases) {
    json body = json::parse(c.body);
    body["messages"] = json::parse(R"([{"role": "user", "content": "x"}])");
    const GenerationRequest r = parse_chat_request(body);
    ASSERT_TRUE(r.params.structured_outputs.has_value()) << c.body;
    EXPECT_EQ(r.params.structured_outputs->kind, c.kind) << c.body;
    EXPECT_EQ(r.structured_field, c.field) << c.body;
  }
  // A schema keeps the client's key order (it is the order of the output's keys).
  const GenerationRequest ordered = parse_chat_request(json::parse(
      R"({"messages": [{"role": "user", "content": "x"}], "guided_json": {"type": "object", "properties": {"z": {}, "a": {}}}})"));
  EXPECT_LT(ordered.params.structured_outputs->spec.find("\"z\""),
            ordered.params.structured_outputs->spec.find("\"a\""));
}

TEST(ServerProtocol, ToolsAndNewFieldsNameTheirField) {
  const struct {
    const char* extra;
    const char* param;
  } cases[] = {
      {R"("tools": {})", "tools"},
      {R"("tools": [{"type": "function"}])", "tools[0].function"},
      {R"("tools": [{"type": "function", "function": {"description": "x"}}])", "tools[0].function.name"},
      {R"("tool_choice": "required")", "tool_choice"},
      {R"("tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": {"type": "function", "function": {"name": "g"}})",
       "tool_choice.function.name"},
      {R"("tool_choice": "sometimes", "tools": [{"type": "function", "function": {"name": "f"}}])", "tool_choice"},
      {R"("logit_bias": {"abc": 1})", "logit_bias"},
      {R"("logit_bias": {"5": 101})", "logit_bias"},
      {R"("min_tokens": 9, "max_tokens": 3)", "min_tokens"},
      {R"("chat_template_kwargs": {"messages": []})", "chat_template_kwargs"},
      {R"("response_format": {"type": "xml"})", "response_format.type"},
      {R"("guided_regex": "a", "grammar": "start: \"b\"")", "grammar"},
      {R"("guided_choice": [1])", "guided_choice"},
  };
  for (const auto& c : cases) {
    const std::string body = std::string(R"({"messages": [{"role": "user", "content": "x"}], )") + c.extra + "}";
    const ApiError e = parse_error([&] { parse_chat_request(json::parse(body)); });
    EXPECT_EQ(e.status(), 400) << body;
    EXPECT_EQ(e.param(), c.param) << body << ": " << e.what();
  }
  const GenerationRequest forced = parse_chat_request(json::parse(R"({"messages": [{"role": "user", "content": "x"}],
      "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
      "tool_choice": "required", "parallel_tool_calls": false, "logit_bias": {"7": -100}, "min_tokens": 2})"));
  ASSERT_TRUE(forced.params.structured_outputs.has_value());
  const json schema = json::parse(forced.params.structured_outputs->spec);
  EXPECT_EQ(schema["type"], "array");
  EXPECT_EQ(schema["maxItems"], 1);
  EXPECT_EQ(forced.params.logit_bias.size(), 1u);
  EXPECT_EQ(forced.params.min_tokens, 2);
}

TEST(ServerProtocol, OverflowingNumbersAre400sNamingTheField) {
  try {
    parse_json_body(R"({"prompt": "x", "max_tokens": 1e400})");
    FAIL() << "expected an error";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.param(), "max_tokens");
  }
}

}  // namespace
}  // namespace minfer::server
