// ChatOutput and the tool-call parsers: model output text -> reasoning_content, content and tool_calls, the same
// whether the text comes whole or one character at a time (streaming holds back partial markers).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "server/chat_output.h"
#include "server/json.h"
#include "server/tool_call_parser.h"

namespace minfer::server {
namespace {

struct Split {
  std::string reasoning, content;
  std::vector<ToolCall> calls;
};

Split run(const ChatOutputOptions& options, const std::string& text, size_t piece) {
  ChatOutput out(options);
  Split s;
  for (size_t i = 0; i < text.size(); i += piece) {
    const ChatDelta d = out.push(std::string_view(text).substr(i, piece));
    EXPECT_TRUE(d.calls.empty());
    s.reasoning += d.reasoning;
    s.content += d.content;
  }
  ChatDelta d = out.finish();
  s.reasoning += d.reasoning;
  s.content += d.content;
  s.calls = std::move(d.calls);
  return s;
}

// Streamed in pieces of 1, 2, 3 and 7 characters, and whole: the same split every time.
Split split(const ChatOutputOptions& options, const std::string& text) {
  const Split whole = run(options, text, text.size() + 1);
  for (size_t piece : {1u, 2u, 3u, 7u}) {
    const Split s = run(options, text, piece);
    EXPECT_EQ(s.reasoning, whole.reasoning) << "piece " << piece << ": " << text;
    EXPECT_EQ(s.content, whole.content) << "piece " << piece << ": " << text;
    EXPECT_EQ(s.calls.size(), whole.calls.size()) << "piece " << piece << ": " << text;
  }
  return whole;
}

TEST(ChatOutput, ReasoningBlocks) {
  ChatOutputOptions o;
  o.reasoning = true;
  Split s = split(o, "<think>\nadd them\n</think>\n\nIt is 4.");
  EXPECT_EQ(s.reasoning, "\nadd them\n");
  EXPECT_EQ(s.content, "It is 4.");
  s = split(o, "No block here, <think> later is text");
  EXPECT_EQ(s.reasoning, "");
  EXPECT_EQ(s.content, "No block here, <think> later is text");
  s = split(o, "<think>cut short");  // max_tokens inside the block
  EXPECT_EQ(s.reasoning, "cut short");
  EXPECT_EQ(s.content, "");
  o.starts_in_reasoning = true;  // the prompt opened the block (DeepSeek-R1)
  s = split(o, "hmm</think>Answer");
  EXPECT_EQ(s.reasoning, "hmm");
  EXPECT_EQ(s.content, "Answer");
  o.reasoning = false;
  s = split(o, "<think>x</think>y");
  EXPECT_EQ(s.content, "<think>x</think>y");
}

TEST(ChatOutput, HermesCalls) {
  const auto parser = ToolCallParser::make("hermes", "");
  ChatOutputOptions o;
  o.tools = parser.get();
  Split s = split(o,
                  "Checking. <tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>"
                  "<tool_call>{\"name\": \"g\", \"arguments\": {}}</tool_call>");
  EXPECT_EQ(s.content, "Checking. ");
  ASSERT_EQ(s.calls.size(), 2u);
  EXPECT_EQ(s.calls[0].name, "f");
  EXPECT_EQ(json::parse(s.calls[0].arguments), json::parse(R"({"a": 1})"));
  EXPECT_EQ(s.calls[1].name, "g");
  EXPECT_TRUE(s.calls[0].id.starts_with("call_") && s.calls[0].id.size() == 29);
  s = split(o, "A <tool_ which is not a call");  // a partial marker that turns out to be text
  EXPECT_EQ(s.content, "A <tool_ which is not a call");
  EXPECT_TRUE(s.calls.empty());
  s = split(o, "<tool_call>not json</tool_call>");  // unparsable: stays content
  EXPECT_EQ(s.content, "<tool_call>not json</tool_call>");
  EXPECT_TRUE(s.calls.empty());
}

TEST(ChatOutput, Llama3JsonAndMistralCalls) {
  const auto llama = ToolCallParser::make("llama3_json", "");
  ChatOutputOptions o;
  o.tools = llama.get();
  Split s = split(o, "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"x\": \"y\"}}");
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.calls[0].name, "f");
  EXPECT_EQ(json::parse(s.calls[0].arguments), json::parse(R"({"x": "y"})"));
  s = split(o, "{\"name\": \"f\", \"parameters\": {}}; {\"name\": \"g\", \"parameters\": {\"k\": 2}}");
  ASSERT_EQ(s.calls.size(), 2u);
  EXPECT_EQ(s.calls[1].name, "g");
  s = split(o, "Just text.");
  EXPECT_EQ(s.content, "Just text.");
  s = split(o, "{\"not\": \"a call\"}");
  EXPECT_EQ(s.content, "{\"not\": \"a call\"}");
  EXPECT_TRUE(s.calls.empty());

  const auto mistral = ToolCallParser::make("mistral", "");
  o.tools = mistral.get();
  s = split(o, "[TOOL_CALLS] [{\"name\": \"f\", \"arguments\": {\"a\": [1, 2]}}]");
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.calls[0].id.size(), 9u);  // Mistral's template checks 9-character ids
  EXPECT_EQ(json::parse(s.calls[0].arguments), json::parse(R"({"a": [1, 2]})"));
}

// Qwen3.5's calls, as its template writes them: bare values typed by the request's tool schemas (vLLM's
// qwen3_coder rules), the template's Python spellings (True) included.
TEST(ChatOutput, Qwen3CoderCalls) {
  const auto parser = ToolCallParser::make("qwen3_coder", "");
  ChatOutputOptions o;
  o.tools = parser.get();
  o.tool_defs = json::parse(R"([{"type": "function", "function": {"name": "get_weather", "parameters": {
      "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
      "threshold": {"type": "number"}, "exact": {"type": "boolean"}, "hours": {"type": "array"},
      "filters": {"type": "object"}, "zip": {"type": "string"}, "note": {"type": ["string", "null"]}}}}}])");
  Split s = split(o,
                  "Checking.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
                  "<parameter=days>\n2\n</parameter>\n<parameter=threshold>\n0.5\n</parameter>\n"
                  "<parameter=exact>\nTrue\n</parameter>\n<parameter=hours>\n[9, 12]\n</parameter>\n"
                  "<parameter=filters>\n{\"sky\": \"clear\"}\n</parameter>\n<parameter=zip>\n75001\n</parameter>\n"
                  "<parameter=note>\nnull\n</parameter>\n<parameter=text>\nline one\nline <two>\n</parameter>\n"
                  "</function>\n</tool_call>\n<tool_call>\n<function=search>\n<parameter=query>\n42\n</parameter>\n"
                  "</function>\n</tool_call>");
  EXPECT_EQ(s.content, "Checking.\n\n");  // streamed before the marker is seen, as with hermes
  ASSERT_EQ(s.calls.size(), 2u);
  EXPECT_EQ(s.calls[0].name, "get_weather");
  EXPECT_EQ(s.calls[0].arguments,  // in the model's order; the untyped "text" stays a string
            R"({"city":"Paris","days":2,"threshold":0.5,"exact":true,"hours":[9,12],"filters":{"sky":"clear"},)"
            R"("zip":"75001","note":null,"text":"line one\nline <two>"})");
  EXPECT_EQ(s.calls[1].name, "search");
  EXPECT_EQ(s.calls[1].arguments, R"({"query":"42"})");  // no schema: text
  EXPECT_TRUE(s.calls[0].id.starts_with("call_"));

  // A value that is not of its type stays text; a call cut short by max_tokens keeps what it has.
  s = split(o, "<tool_call>\n<function=get_weather>\n<parameter=days>\ntwo\n</parameter>\n<parameter=city>\nRo");
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.calls[0].arguments, R"({"days":"two","city":"Ro"})");
  s = split(o, "<function=f>\n</function>");  // a bare <function= block, no parameters
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.calls[0].arguments, "{}");
  s = split(o, "A <func which is text");
  EXPECT_EQ(s.content, "A <func which is text");
  EXPECT_TRUE(s.calls.empty());
  s = split(o, "<tool_call>{\"name\": \"f\"}</tool_call>");  // Hermes' JSON is not this format: stays content
  EXPECT_EQ(s.content, "<tool_call>{\"name\": \"f\"}</tool_call>");
  EXPECT_TRUE(s.calls.empty());
}

// Options for tool_choice naming a function (built out of line: GCC 12 warns falsely, -Wrestrict, on the literal
// assigned to the member when split() is inlined around it).
[[gnu::noinline]] ChatOutputOptions forced_function_options(const std::string& name) {
  ChatOutputOptions o;
  o.forced_calls = true;
  o.forced_function = name;
  return o;
}

TEST(ChatOutput, ForcedCalls) {
  ChatOutputOptions o;
  o.forced_calls = true;
  Split s = split(o, R"([{"name": "f", "parameters": {"a": 1}}, {"name": "g", "parameters": {}}])");
  ASSERT_EQ(s.calls.size(), 2u);
  EXPECT_EQ(s.content, "");
  const ChatOutputOptions named = forced_function_options("h");
  s = split(named, R"({"city": "Paris"})");
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.calls[0].name, "h");
  s = split(named, R"({"city": "Par)");  // cut by max_tokens: shown as content, no call
  EXPECT_TRUE(s.calls.empty());
  EXPECT_EQ(s.content, R"({"city": "Par)");
}

// gpt-oss's harmony messages (the text keeps its special tokens; <|return|> and <|call|> end the generation, so they
// may be absent): the analysis channel is reasoning, final and preamble commentary are content, a commentary message
// to functions.NAME a tool call (the recipient before or after the channel), whatever the piece size.
TEST(ChatOutput, HarmonyChannels) {
  ChatOutputOptions o;
  o.harmony = true;
  Split s = split(o,
                  "<|channel|>analysis<|message|>User asks 2+2. Answer 4.<|end|><|start|>assistant"
                  "<|channel|>final<|message|>It is 4.");
  EXPECT_EQ(s.reasoning, "User asks 2+2. Answer 4.");
  EXPECT_EQ(s.content, "It is 4.");
  EXPECT_TRUE(s.calls.empty());
  s = split(o, "<|channel|>final<|message|>Done.<|return|>");
  EXPECT_EQ(s.content, "Done.");
  s = split(o,
            "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
            "to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}");
  EXPECT_EQ(s.reasoning, "Need weather.");
  EXPECT_EQ(s.content, "");
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.calls[0].name, "get_weather");
  EXPECT_EQ(s.calls[0].arguments, "{\"city\": \"Paris\"}");
  EXPECT_TRUE(s.calls[0].id.starts_with("call_"));
  // Recipient in the role part, a preamble to the user first, and two calls.
  s = split(o,
            "<|channel|>commentary<|message|>Checking both.<|end|><|start|>assistant to=functions.a<|channel|>"
            "commentary json<|message|>{}<|call|><|start|>assistant to=functions.b<|channel|>commentary json"
            "<|message|>{\"x\": 1}<|call|>");
  EXPECT_EQ(s.content, "Checking both.");
  ASSERT_EQ(s.calls.size(), 2u);
  EXPECT_EQ(s.calls[0].name, "a");
  EXPECT_EQ(s.calls[1].arguments, "{\"x\": 1}");
  // Cut short inside the reasoning; and a reply with no harmony at all is content.
  s = split(o, "<|channel|>analysis<|message|>Thinking <|en");
  EXPECT_EQ(s.reasoning, "Thinking <|en");
  s = split(o, "Plain text.");
  EXPECT_EQ(s.content, "Plain text.");
  // Forced calls (a grammar writes the JSON) are not harmony messages.
  o.forced_calls = true;
  s = split(o, "[{\"name\": \"f\", \"parameters\": {}}]");
  ASSERT_EQ(s.calls.size(), 1u);
}

TEST(ToolCallParser, AutoPicksFromTheTemplate) {
  EXPECT_STREQ(ToolCallParser::make("auto", "... [TOOL_CALLS] ...")->name(), "mistral");
  EXPECT_STREQ(ToolCallParser::make("auto", "... <tool_call> ...")->name(), "hermes");
  EXPECT_STREQ(ToolCallParser::make("auto", "Environment: ipython")->name(), "llama3_json");
  EXPECT_STREQ(ToolCallParser::make("auto", "plain")->name(), "hermes");
  // Qwen3.5's template wraps its XML-style calls in <tool_call> too.
  std::ifstream qwen35(std::filesystem::path(__FILE__).parent_path().parent_path() / "data" / "chat_templates" /
                       "qwen3.5.jinja");
  const std::string qwen35_template{std::istreambuf_iterator<char>(qwen35), {}};
  ASSERT_FALSE(qwen35_template.empty());
  EXPECT_STREQ(ToolCallParser::make("auto", qwen35_template)->name(), "qwen3_coder");
  EXPECT_EQ(ToolCallParser::make("pythonic", ""), nullptr);
}

}  // namespace
}  // namespace minfer::server
