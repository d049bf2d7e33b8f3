// ToolCallStream: tool calls of the JSON formats followed as their text grows, in chunks of every size: each call's
// start once its name is complete, then its arguments' own characters, which concatenate to the argument text.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/tool_call_stream.h"

namespace minfer::server {
namespace {

struct Seen {
  std::vector<std::string> names;
  std::vector<std::string> arguments;
  bool arguments_before_start = false;
};

// Feeds text in pieces of `chunk` characters and gathers the fragments per call.
Seen feed(ToolCallStream& s, const std::string& text, size_t chunk) {
  Seen seen;
  for (size_t end = 0; end < text.size();) {
    end = std::min(text.size(), end + chunk);
    for (const CallFragment& f : s.update(std::string_view(text).substr(0, end))) {
      if (f.start) {
        EXPECT_EQ(f.index, seen.names.size());
        EXPECT_FALSE(f.id.empty());
        seen.names.push_back(f.name);
        seen.arguments.emplace_back();
      } else if (f.index >= seen.arguments.size()) {
        seen.arguments_before_start = true;
        continue;
      }
      seen.arguments[f.index] += f.arguments;
    }
  }
  return seen;
}

void expect_calls(const std::string& text, const std::string& forced, const std::vector<std::string>& names,
                  const std::vector<std::string>& arguments) {
  for (size_t chunk : {1, 2, 3, 7, 1000}) {
    SCOPED_TRACE(chunk);
    ToolCallStream s(forced);
    const Seen seen = feed(s, text, chunk);
    EXPECT_FALSE(seen.arguments_before_start);
    EXPECT_EQ(seen.names, names);
    EXPECT_EQ(seen.arguments, arguments);
    ASSERT_EQ(s.calls().size(), names.size());
    for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(s.calls()[i].arguments, arguments[i]);
  }
}

TEST(ToolCallStream, HermesCallsStreamTheirArguments) {
  expect_calls(
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Pa}ris\\\"{\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": [1, {\"a\": null}]}}\n</tool_call>",
      "", {"get_weather", "get_time"}, {R"({"city": "Pa}ris\"{"})", R"({"zone": [1, {"a": null}]})"});
}

TEST(ToolCallStream, ForcedArrayMistralAndLlamaShapes) {
  expect_calls(R"([{"name": "f", "parameters": {"x": 1}}, {"name": "g", "parameters": {}}])", "", {"f", "g"},
               {R"({"x": 1})", "{}"});
  expect_calls(R"([TOOL_CALLS] [{"name": "f", "arguments": {"x": [true, false]}}])", "", {"f"},
               {R"({"x": [true, false]})"});
  expect_calls(R"({"name": "f", "parameters": {"q": "a,b"}}; {"name": "g", "parameters": {"n": -2.5e3}})", "",
               {"f", "g"}, {R"({"q": "a,b"})", R"({"n": -2.5e3})"});
}

TEST(ToolCallStream, ForcedFunctionStreamsTheWholeObject) {
  expect_calls(R"({"city": "Rome", "days": [1, 2]})", "get_weather", {"get_weather"},
               {R"({"city": "Rome", "days": [1, 2]})"});
}

TEST(ToolCallStream, ArgumentsBeforeTheNameWaitForIt) {
  expect_calls(R"({"arguments": {"a": {"b": 1}}, "name": "f"})", "", {"f"}, {R"({"a": {"b": 1}})"});
}

TEST(ToolCallStream, ArgumentsAsAStringAreDecodedWhenTheyEnd) {
  expect_calls(R"({"name": "f", "arguments": "{\"a\": \"x\\ny\"}"})", "", {"f"}, {R"({"a": "x\ny"})"});
}

// A call without arguments takes "{}" when it closes, in order; objects naming no tool are no calls (and take no
// index); braces in the text between calls start nothing that lasts.
TEST(ToolCallStream, CallsWithoutArgumentsAndObjectsNamingNoTool) {
  const std::string text =
      "<tool_call>{\"name\": \"a\"}</tool_call> see {x} <tool_call>{\"name\": \"b\"}</tool_call>"
      "{\"name\": \"Alice\", \"age\": 3} <tool_call>{\"name\": \"a\", \"arguments\": {\"k\": 1}}</tool_call>";
  for (size_t chunk : {1, 5, 1000}) {
    ToolCallStream s("", false, {"a", "b"});
    const Seen seen = feed(s, text, chunk);
    EXPECT_FALSE(seen.arguments_before_start);
    EXPECT_EQ(seen.names, (std::vector<std::string>{"a", "b", "a"}));
    EXPECT_EQ(seen.arguments, (std::vector<std::string>{"{}", "{}", R"({"k": 1})"}));
  }
}

}  // namespace
}  // namespace minfer::server
