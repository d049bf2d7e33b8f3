// OpenAI's Responses requests onto the chat route's fields (items -> messages, previous_response_id's conversation
// first, function tools, text.format, reasoning), and the response store (in memory with LRU eviction; SQLite).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>

#include "api_error_support.h"
#include "server/api_error.h"
#include "server/responses_protocol.h"
#include "server/responses_store.h"

namespace minfer::server {
namespace {

TEST(OpenAiResponses, ItemsBecomeTheChatMessagesTheTemplateSees) {
  ResponseStore store;
  const GenerationRequest r = parse_responses_request(json::parse(R"({
      "model": "m", "instructions": "Be brief.", "max_output_tokens": 7, "temperature": 0.5, "store": false,
      "input": [
        {"role": "user", "content": [{"type": "input_text", "text": "Weather?"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "hm"}]},
        {"type": "function_call", "call_id": "c1", "name": "w", "arguments": "{\"city\": \"P\"}"},
        {"type": "function_call_output", "call_id": "c1", "output": "21"},
        {"role": "developer", "content": "Answer now."}],
      "tools": [{"type": "function", "name": "w", "parameters": {"type": "object"}}],
      "tool_choice": {"type": "function", "name": "w"}, "parallel_tool_calls": false,
      "reasoning": {"effort": "minimal"}})"),
                                                      store);
  EXPECT_EQ(r.kind, RouteKind::kResponses);
  const json& m = r.chat.messages;
  ASSERT_EQ(m.size(), 5u);
  EXPECT_EQ(m[0], json({{"role", "system"}, {"content", "Be brief."}}));
  EXPECT_EQ(m[1], json({{"role", "user"}, {"content", "Weather?"}}));
  EXPECT_EQ(m[2]["role"], "assistant");
  EXPECT_EQ(m[2]["reasoning_content"], "hm");
  EXPECT_EQ(m[2]["tool_calls"][0]["function"]["arguments"], json({{"city", "P"}}));
  EXPECT_EQ(m[3], json({{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "21"}}));
  EXPECT_EQ(m[4]["role"], "system");
  EXPECT_EQ(r.chat.tool_choice.kind, ToolChoice::Kind::kFunction);
  EXPECT_EQ(r.structured_field, "tool_choice");
  EXPECT_EQ(r.chat.template_kwargs["enable_thinking"], false);
  EXPECT_EQ(r.params.max_tokens, 7);
  ASSERT_TRUE(r.responses);
  EXPECT_FALSE(r.responses->store);
  EXPECT_EQ(r.responses->echo["instructions"], "Be brief.");
  EXPECT_EQ(r.responses->echo["tools"][0]["name"], "w");  // echoed in the Responses shape
  for (const json& item : r.responses->input_items) EXPECT_TRUE(item.contains("id")) << item;
}

TEST(OpenAiResponses, PreviousResponseIdPutsItsConversationFirst) {
  ResponseStore store;
  store.put(
      "resp_1",
      {{"response",
        {{"output",
          json::array(
              {{{"type", "function_call"}, {"id", "fc_1"}, {"call_id", "c1"}, {"name", "w"}, {"arguments", "{}"}}})}}},
       {"input_items", json::array({{{"type", "message"}, {"role", "user"}, {"content", "Hi"}}})}});
  const GenerationRequest r = parse_responses_request(json::parse(R"({"previous_response_id": "resp_1", "input": [
          {"type": "function_call_output", "call_id": "c1", "output": "ok"}]})"),
                                                      store);
  ASSERT_EQ(r.chat.messages.size(), 3u);
  EXPECT_EQ(r.chat.messages[1]["tool_calls"][0]["id"], "c1");
  EXPECT_EQ(r.responses->input_items.size(), 3u);
  const ApiError missing = parse_error(
      [&] { parse_responses_request(json::parse(R"({"previous_response_id": "resp_x", "input": "Hi"})"), store); });
  EXPECT_EQ(missing.status(), 404);
  EXPECT_EQ(missing.param(), "previous_response_id");
}

TEST(OpenAiResponses, BadFieldsAreNamed) {
  ResponseStore store;
  const auto param = [&](const char* body) {
    return parse_error([&] { parse_responses_request(json::parse(body), store); }).param();
  };
  EXPECT_EQ(param(R"({"max_output_tokens": 3})"), "input");
  EXPECT_EQ(param(R"({"input": [{"type": "function_call_output", "call_id": "x", "output": "y"}]})"),
            "input[0].call_id");
  EXPECT_EQ(param(R"({"input": "Hi", "tools": [{"type": "file_search"}]})"), "tools[0].type");
  EXPECT_EQ(param(R"({"input": "Hi", "text": {"format": {"type": "xml"}}})"), "text.format.type");
  EXPECT_EQ(param(R"({"input": "Hi", "reasoning": {"effort": "extreme"}})"), "reasoning.effort");
  EXPECT_EQ(param(R"({"input": [{"type": 5, "role": "user", "content": "x"}]})"), "input[0].type");
  EXPECT_EQ(param(R"({"input": [{"id": 5, "role": "user", "content": "x"}]})"), "input[0].id");
  EXPECT_EQ(param(R"({"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{x"}]})"),
            "input[0].arguments");
}

TEST(ResponseStoreTest, MemoryEvictsTheLeastRecentlyUsed) {
  ResponseStore store("", 2);
  store.put("a", {{"x", 1}});
  store.put("b", {{"x", 2}});
  EXPECT_TRUE(store.get("a"));  // a is now the most recent
  store.put("c", {{"x", 3}});
  EXPECT_FALSE(store.get("b"));
  EXPECT_EQ((*store.get("a"))["x"], 1);
  EXPECT_TRUE(store.erase("c"));
  EXPECT_FALSE(store.erase("c"));
}

TEST(ResponseStoreTest, SqliteKeepsRecordsAcrossOpens) {
  const std::filesystem::path db =
      std::filesystem::temp_directory_path() / ("minfer_responses_" + std::to_string(::getpid()) + ".sqlite");
  {
    ResponseStore store(db.string());
    store.put("r1", {{"response", {{"id", "r1"}}}, {"input_items", json::array()}});
    store.put("r2", {{"response", {{"id", "r2"}}}});
    EXPECT_TRUE(store.erase("r2"));
  }
  {
    ResponseStore store(db.string());
    ASSERT_TRUE(store.get("r1"));
    EXPECT_EQ((*store.get("r1"))["response"]["id"], "r1");
    EXPECT_FALSE(store.get("r2"));
  }
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(db.string() + suffix);
  EXPECT_THROW(ResponseStore("/nonexistent-dir/x.sqlite"), Error);
}

}  // namespace
}  // namespace minfer::server
