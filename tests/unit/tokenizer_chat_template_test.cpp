// ChatTemplate against the real templates in tests/data/chat_templates/: expected.json holds what Jinja2
// renders for each (generate_expected.py, transformers' settings); render() must match byte for byte.
#include <gtest/gtest.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/error.h"
#include "tokenizer/chat_template.h"

namespace minfer {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const fs::path kDataDir = fs::path(__FILE__).parent_path().parent_path() / "data" / "chat_templates";

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << "cannot open " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<ChatMessage> messages_from(const json& j) {
  std::vector<ChatMessage> out;
  for (const json& m : j) out.push_back({m.at("role").get<std::string>(), m.at("content").get<std::string>()});
  return out;
}

std::string string_or_empty(const json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get_ref<const std::string&>() : std::string();
}

ChatTemplate load(const std::string& file, ChatTemplateOptions options = {}) {
  return ChatTemplate::from_source(read_file(kDataDir / file), std::move(options));
}

TEST(ChatTemplate, MatchesJinjaRenderingOfRealTemplates) {
  const json cases = json::parse(read_file(kDataDir / "expected.json"));
  ASSERT_GE(cases.size(), 60u);
  for (const json& c : cases) {
    const json& o = c.at("options");
    ChatTemplateOptions options;
    options.bos_token = string_or_empty(o, "bos_token");
    options.eos_token = string_or_empty(o, "eos_token");
    options.date_string = string_or_empty(o, "date_string");
    options.enable_thinking = !o.contains("enable_thinking") || o["enable_thinking"].get<bool>();
    const ChatTemplate t = load(c.at("template").get<std::string>(), options);
    const bool gen = c.at("add_generation_prompt").get<bool>();
    EXPECT_EQ(t.render(messages_from(c.at("messages")), gen), c.at("expected").get<std::string>())
        << c.at("template") << " options " << o.dump() << " add_generation_prompt " << gen << " messages "
        << c.at("messages").dump();
  }
}

TEST(ChatTemplate, RecognisesFamilies) {
  EXPECT_EQ(load("qwen2.5-instruct.jinja").family(), ChatTemplateFamily::kChatML);
  EXPECT_EQ(load("chatml-openhermes-2.5.jinja").family(), ChatTemplateFamily::kChatML);
  EXPECT_EQ(load("qwen3.jinja").family(), ChatTemplateFamily::kQwen3);
  EXPECT_EQ(load("llama-3-instruct.jinja").family(), ChatTemplateFamily::kLlama3);
  EXPECT_EQ(load("llama-3.2-instruct.jinja").family(), ChatTemplateFamily::kLlama31);
  EXPECT_EQ(load("llama-2-chat.jinja").family(), ChatTemplateFamily::kLlama2);
  EXPECT_EQ(load("mistral-7b-instruct-v0.1.jinja").family(), ChatTemplateFamily::kMistral);
  EXPECT_EQ(load("mixtral-8x7b-instruct-v0.1.jinja").family(), ChatTemplateFamily::kMistral);
  EXPECT_EQ(load("gemma3.jinja").family(), ChatTemplateFamily::kGemma);
  EXPECT_EQ(ChatTemplate::from_source(std::string(kGemma3ChatTemplate)).family(), ChatTemplateFamily::kGemma);
}

// Written out by hand from the Qwen2.5 template: the system turn it inserts when the chat has none.
TEST(ChatTemplate, Qwen25InsertsItsDefaultSystemPrompt) {
  const ChatTemplate t = load("qwen2.5-instruct.jinja");
  EXPECT_EQ(t.default_system_prompt(), "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.");
  EXPECT_EQ(t.render({{"user", "Hi"}}, true),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(t.render({{"system", "Be brief."}, {"user", "Hi"}}, false),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
  // Qwen3 has no default system prompt.
  EXPECT_EQ(load("qwen3.jinja").default_system_prompt(), "");
  EXPECT_EQ(load("qwen3.jinja").render({{"user", "Hi"}}, true),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

// Llama 3.2 asks transformers for today's date (strftime_now) unless date_string is given.
TEST(ChatTemplate, Llama32UsesTodaysDateByDefault) {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char today[32];
  std::strftime(today, sizeof today, "%d %b %Y", &local);
  const std::string text = load("llama-3.2-instruct.jinja").render({{"user", "Hi"}}, true);
  EXPECT_NE(text.find(std::string("Today Date: ") + today + "\n\n"), std::string::npos) << text;
  EXPECT_EQ(text.rfind("<|begin_of_text|>", 0), 0u);
}

TEST(ChatTemplate, UsesTheTokenizersBosAndEos) {
  ChatTemplateOptions options;
  options.bos_token = "<BOS>";
  options.eos_token = "<EOS>";
  EXPECT_EQ(load("mixtral-8x7b-instruct-v0.1.jinja", options).render({{"user", "a"}, {"assistant", "b"}}, false),
            "<BOS>[INST] a [/INST]b<EOS>");
}

TEST(ChatTemplate, RejectsWhatTheTemplateRejects) {
  const ChatTemplate mistral = load("mistral-7b-instruct-v0.1.jinja");
  EXPECT_THROW(mistral.render({{"system", "s"}, {"user", "u"}}, true), Error);
  EXPECT_THROW(mistral.render({{"user", "a"}, {"user", "b"}}, true), Error);
  const ChatTemplate llama2 = load("llama-2-chat.jinja");
  EXPECT_THROW(llama2.render({{"assistant", "a"}}, true), Error);
  EXPECT_THROW(llama2.render({{"system", "s"}, {"user", "u"}, {"user", "v"}}, true), Error);
  EXPECT_THROW(load("qwen3.jinja").render({}, true), Error);
  try {
    mistral.render({{"user", "a"}, {"tool", "b"}}, true);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("message 1 is 'tool'"), std::string::npos) << e.what();
  }
}

TEST(ChatTemplate, UnknownTemplateIsAClearError) {
  const std::string gemma =
      "{{ bos_token }}{% for message in messages %}{{ '<start_of_turn>' + message['role'] + '\\n' + "
      "message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}";
  try {
    ChatTemplate::from_source(gemma);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("unknown chat template"), std::string::npos) << msg;
    EXPECT_NE(msg.find("Llama 3"), std::string::npos) << msg;
    EXPECT_NE(msg.find("<start_of_turn>"), std::string::npos) << msg;
  }
  EXPECT_THROW(ChatTemplate::from_source(""), Error);
  EXPECT_THROW(ChatTemplate::from_source("  \n "), Error);
  // Mistral v0.3-style: the system prompt is folded into the last user turn, which is not reproduced.
  EXPECT_THROW(ChatTemplate::from_source("{%- if messages[0][\"role\"] == \"system\" %}{%- set system_message = "
                                         "messages[0][\"content\"] %}{% endif %}{{ \"[INST] \" + x + \"[/INST]\" }}"),
               Error);
}

}  // namespace
}  // namespace minfer
