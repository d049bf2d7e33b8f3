// ChatTemplate (minijinja) against the real templates in tests/data/chat_templates/: expected.json holds what
// Jinja2 renders for each (generate_expected.py, transformers' settings); render() must match byte for byte,
// and fail where Jinja2 fails.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "base/error.h"
#include "tokenizer/chat_template.h"

namespace minfer {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

const fs::path kDataDir = fs::path(__FILE__).parent_path().parent_path() / "data" / "chat_templates";

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << "cannot open " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The time every expected case was rendered at (generate_expected.py NOW).
constexpr int64_t kNow = 1796212800;

ChatTemplate load(const std::string& file, ChatTemplateOptions options = {}) {
  if (!options.now_unix) options.now_unix = kNow;
  return ChatTemplate::from_source(read_file(kDataDir / file), std::move(options));
}

json user(const std::string& text) { return json::array({{{"role", "user"}, {"content", text}}}); }

TEST(ChatTemplate, MatchesJinjaRenderingOfRealTemplates) {
  const json cases = json::parse(read_file(kDataDir / "expected.json"));
  ASSERT_GE(cases.size(), 150u);
  int rejected = 0;
  for (const json& c : cases) {
    const ChatTemplate t = load(c.at("template").get<std::string>(),
                                {c.at("bos_token").get<std::string>(), c.at("eos_token").get<std::string>(), kNow});
    const bool gen = c.at("add_generation_prompt").get<bool>();
    const std::string what = fmt::format("{} extra {} add_generation_prompt {} messages {}", c.at("template").dump(),
                                         c.at("extra").dump(), gen, c.at("messages").dump());
    if (c.contains("error")) {
      ++rejected;
      EXPECT_THROW(t.render(c.at("messages"), gen, c.at("extra")), Error) << what;
    } else {
      EXPECT_EQ(t.render(c.at("messages"), gen, c.at("extra")), c.at("expected").get<std::string>()) << what;
    }
  }
  EXPECT_GE(rejected, 4);
}

TEST(ChatTemplate, Gemma3BuiltinTemplateIsThePublishedOne) {
  EXPECT_EQ(kGemma3ChatTemplate, read_file(kDataDir / "gemma3.jinja"));
}

// Without a pinned time, strftime_now is today's date (Llama 3.2 prints it).
TEST(ChatTemplate, StrftimeNowUsesTheClock) {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char today[32];
  std::strftime(today, sizeof today, "%d %b %Y", &local);
  const ChatTemplate t = ChatTemplate::from_source(read_file(kDataDir / "llama-3.2-instruct.jinja"),
                                                   {"<|begin_of_text|>", "<|eot_id|>", std::nullopt});
  const std::string text = t.render(user("Hi"), true);
  EXPECT_NE(text.find(std::string("Today Date: ") + today + "\n\n"), std::string::npos) << text;
  EXPECT_EQ(text.rfind("<|begin_of_text|>", 0), 0u);
}

TEST(ChatTemplate, UsesTheTokenizersBosAndEos) {
  const ChatTemplate t = load("mixtral-8x7b-instruct-v0.1.jinja", {"<BOS>", "<EOS>", std::nullopt});
  const json chat = json::array({{{"role", "user"}, {"content", "a"}}, {{"role", "assistant"}, {"content", "b"}}});
  EXPECT_EQ(t.render(chat, false), "<BOS>[INST] a [/INST]b<EOS>");
}

// Errors name the template line: raise_exception's message, a syntax error, an undefined operation.
TEST(ChatTemplate, ErrorsNameTheTemplateLine) {
  const ChatTemplate mistral = load("mistral-7b-instruct-v0.1.jinja");
  const json two_users = json::array({{{"role", "user"}, {"content", "a"}}, {{"role", "user"}, {"content", "b"}}});
  try {
    mistral.render(two_users, true);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), testing::HasSubstr("Conversation roles must alternate"));
    EXPECT_THAT(e.what(), testing::MatchesRegex(".*chat template line [0-9]+: .*"));
  }
  try {
    ChatTemplate::from_source("{% for m in messages %}\n{{ m.content }\n{% endfor %}");
    FAIL() << "expected a syntax error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), testing::HasSubstr("chat template line 2: syntax error"));
  }
  const ChatTemplate adds = ChatTemplate::from_source("{{ messages[0].content + 1 }}");
  EXPECT_THROW(adds.render(user("x"), true), Error);
}

// transformers' tojson is json.dumps: ", " / ": " separators, no HTML escaping, non-ASCII kept, floats as
// Python spells them, indent and sort_keys.
TEST(ChatTemplate, TojsonIsPythonsJsonDumps) {
  const ChatTemplate t = ChatTemplate::from_source(
      "{{ tools | tojson }}|{{ tools[0] | tojson(indent=2) }}|{{ tools[0] | tojson(sort_keys=true) }}");
  const json tools = json::parse(R"([{"b": 1.0, "a": [1e-05, 0.5, "<&>é\n"], "c": {}}])");
  EXPECT_EQ(t.render(json::array(), false, {{"tools", tools}}),
            "[{\"b\": 1.0, \"a\": [1e-05, 0.5, \"<&>é\\n\"], \"c\": {}}]|"
            "{\n  \"b\": 1.0,\n  \"a\": [\n    1e-05,\n    0.5,\n    \"<&>é\\n\"\n  ],\n  \"c\": {}\n}|"
            "{\"a\": [1e-05, 0.5, \"<&>é\\n\"], \"b\": 1.0, \"c\": {}}");
}

TEST(ChatTemplate, CopiesShareTheCompiledTemplateAcrossThreads) {
  const ChatTemplate t = load("qwen3.jinja");
  std::vector<std::thread> threads;
  std::atomic<int> good{0};
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([t, &good, i] {
      for (int k = 0; k < 50; ++k)
        if (t.render(user(std::to_string(i)), true) ==
            "<|im_start|>user\n" + std::to_string(i) + "<|im_end|>\n<|im_start|>assistant\n")
          ++good;
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(good.load(), 200);
}

}  // namespace
}  // namespace minfer
