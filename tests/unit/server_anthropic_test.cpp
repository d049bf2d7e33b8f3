// Anthropic's Messages requests onto the chat route's fields: the messages the template sees, tools, tool_choice,
// template switches and sampling; bad input named in Anthropic's error shape.
#include <gtest/gtest.h>

#include <functional>

#include "api_error_support.h"
#include "server/anthropic_protocol.h"
#include "server/api_error.h"

namespace minfer::server {
namespace {

TEST(AnthropicMessages, BlocksBecomeTheChatMessagesTheTemplateSees) {
  const GenerationRequest r = parse_messages_request(json::parse(R"({
      "model": "m", "max_tokens": 9, "system": [{"type": "text", "text": "Be brief."}],
      "messages": [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm", "signature": "s"},
                                          {"type": "text", "text": "Checking."},
                                          {"type": "tool_use", "id": "t1", "name": "w", "input": {"city": "P"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "21", "is_error": true},
                                     {"type": "text", "text": "and?"}]}],
      "tools": [{"name": "w", "description": "weather", "input_schema": {"type": "object"}}],
      "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
      "stop_sequences": ["END"], "thinking": {"type": "disabled"}, "output_config": {"effort": "max"},
      "temperature": 0.5, "stream": true})"));
  EXPECT_EQ(r.kind, RouteKind::kMessages);
  const json& m = r.chat.messages;
  ASSERT_EQ(m.size(), 5u);
  EXPECT_EQ(m[0], json({{"role", "system"}, {"content", "Be brief."}}));
  EXPECT_EQ(m[1]["role"], "user");
  EXPECT_EQ(m[2]["content"], "Checking.");
  EXPECT_EQ(m[2]["reasoning_content"], "hm");
  EXPECT_EQ(m[2]["tool_calls"][0]["function"]["arguments"], json({{"city", "P"}}));
  EXPECT_EQ(m[3], json({{"role", "tool"}, {"tool_call_id", "t1"}, {"content", "Error: 21"}}));
  EXPECT_EQ(m[4], json({{"role", "user"}, {"content", "and?"}}));
  EXPECT_EQ(r.chat.tools[0]["function"]["parameters"], json({{"type", "object"}}));
  EXPECT_EQ(r.chat.tool_choice.kind, ToolChoice::Kind::kRequired);
  EXPECT_FALSE(r.chat.parallel_tool_calls);
  EXPECT_EQ(r.structured_field, "tool_choice");  // the forced call's grammar
  EXPECT_EQ(r.chat.template_kwargs["enable_thinking"], false);
  EXPECT_EQ(r.chat.template_kwargs["reasoning_effort"], "high");
  EXPECT_EQ(r.params.stop, std::vector<std::string>{"END"});
  EXPECT_FLOAT_EQ(r.params.temperature, 0.5f);
  ASSERT_TRUE(r.model_defaults.has_value());
  EXPECT_TRUE(r.model_defaults->temperature);
  EXPECT_FALSE(r.model_defaults->top_p);
  EXPECT_TRUE(r.stream);
  EXPECT_EQ(r.params.max_tokens, 9);
}

TEST(AnthropicMessages, CountTokensNeedsNoMaxTokens) {
  const json body = json::parse(R"({"model": "m", "messages": [{"role": "user", "content": "Hi"}]})");
  EXPECT_EQ(parse_messages_request(body, /*count_tokens=*/true).chat.messages.size(), 1u);
  EXPECT_EQ(parse_error([&] { parse_messages_request(body); }).param(), "max_tokens");
}

TEST(AnthropicMessages, BadBlocksNameTheirField) {
  const auto param = [](const char* body) {
    return parse_error([&] { parse_messages_request(json::parse(body)); }).param();
  };
  EXPECT_EQ(param(R"({"max_tokens": 1, "messages": [{"role": "user", "content": [
      {"type": "tool_result", "tool_use_id": "nope", "content": "x"}]}]})"),
            "messages[0].content[0].tool_use_id");
  EXPECT_EQ(param(R"({"max_tokens": 1, "messages": [{"role": "user", "content": [{"type": "image"}]}]})"),
            "messages[0].content[0].source");
  EXPECT_EQ(param(R"({"max_tokens": 1, "messages": [{"role": "user", "content": [{"type": "image",
      "source": {"type": "url", "url": "https://x/y.png"}}]}]})"),
            "messages[0].content[0].source.type");
  EXPECT_EQ(param(R"({"max_tokens": 1, "messages": [{"role": "user", "content": [{"type": "document"}]}]})"),
            "messages[0].content[0].type");
  EXPECT_EQ(param(R"({"max_tokens": 1, "messages": [{"role": "tool", "content": "x"}]})"), "messages[0].role");
  EXPECT_EQ(param(R"({"max_tokens": 1, "messages": [{"role": "user", "content": "x"}],
      "tool_choice": {"type": "tool"}, "tools": [{"name": "w", "input_schema": {}}]})"),
            "tool_choice.name");
  EXPECT_EQ(param(R"({"max_tokens": 1, "messages": [{"role": "user", "content": "x"}], "top_k": -1})"), "top_k");
}

TEST(AnthropicMessages, ErrorsInAnthropicsShapeNameTheField) {
  EXPECT_EQ(anthropic_error_json(400, "bad schema", "output_config.format"),
            json::parse(R"({"type": "error", "error": {"type": "invalid_request_error",
                            "message": "output_config.format: bad schema"}})"));
  EXPECT_EQ(anthropic_error_json(401, "no key")["error"]["type"], "authentication_error");
  EXPECT_EQ(anthropic_error_json(503, "busy")["error"]["type"], "overloaded_error");
  EXPECT_EQ(anthropic_error_json(404, "'max_tokens' is", "max_tokens")["error"]["message"], "'max_tokens' is");
}

}  // namespace
}  // namespace minfer::server
