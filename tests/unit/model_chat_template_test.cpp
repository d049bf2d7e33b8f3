// A checkpoint's chat template: tokenizer_config.json (string or named list), chat_template.jinja, GGUF
// tokenizer.chat_template, and the errors when there is none or it does not compile.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "base/error.h"
#include "model/model_tokenizer.h"

namespace minfer {
namespace {

namespace fs = std::filesystem;

constexpr const char* kChatML =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
    "'\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
constexpr const char* kLlama2 =
    "{% for message in messages %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] <<SYS>> ' + "
    "message['content'] + ' [/INST]' }}{% endif %}{% endfor %}";

class ModelChatTemplate : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("minfer_chat_template_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    weights_.format = CheckpointFormat::kHuggingFace;
    weights_.path = dir_.string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  void write_config(const nlohmann::json& config) {
    const fs::path path = dir_ / "tokenizer_config.json";
    std::ofstream(path) << config.dump();
    weights_.tokenizer.hf_tokenizer_config_json = path.string();
  }

  fs::path dir_;
  ModelWeights weights_;
};

TEST_F(ModelChatTemplate, FromTokenizerConfigString) {
  write_config({{"chat_template", kChatML}});
  EXPECT_EQ(chat_template_source(weights_), kChatML);
  EXPECT_EQ(load_chat_template(weights_, nullptr)
                .render(nlohmann::ordered_json::parse(R"([{"role": "user", "content": "hi"}])"), true),
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
}

TEST_F(ModelChatTemplate, FromNamedTemplateListTakesDefault) {
  write_config({{"chat_template", nlohmann::json::array({{{"name", "tool_use"}, {"template", "x"}},
                                                         {{"name", "default"}, {"template", kLlama2}}})}});
  EXPECT_EQ(chat_template_source(weights_), kLlama2);
  EXPECT_EQ(load_chat_template(weights_, nullptr)
                .render(nlohmann::ordered_json::parse(R"([{"role": "user", "content": "hi"}])"), true),
            "[INST] <<SYS>> hi [/INST]");

  write_config({{"chat_template", nlohmann::json::array({{{"name", "rag"}, {"template", "x"}}})}});
  EXPECT_THROW(chat_template_source(weights_), LoadError);
  write_config({{"chat_template", 42}});
  EXPECT_THROW(chat_template_source(weights_), LoadError);
}

TEST_F(ModelChatTemplate, FromChatTemplateJinjaFile) {
  write_config({{"bos_token", "<s>"}});
  std::ofstream(dir_ / "chat_template.jinja") << kChatML;
  EXPECT_EQ(chat_template_source(weights_), kChatML);
}

TEST_F(ModelChatTemplate, FromGgufMetadata) {
  // A GGUF v3 file with no tensors and one string: tokenizer.chat_template.
  const fs::path path = dir_ / "model.gguf";
  std::string out = "GGUF";
  auto put = [&](auto v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); };
  auto put_str = [&](const std::string& s) {
    put(static_cast<uint64_t>(s.size()));
    out += s;
  };
  put(uint32_t{3});
  put(uint64_t{0});  // tensors
  put(uint64_t{1});  // metadata entries
  put_str("tokenizer.chat_template");
  put(uint32_t{8});  // string
  put_str(kChatML);
  out.append((32 - out.size() % 32) % 32, '\0');
  std::ofstream(path, std::ios::binary) << out;
  ModelWeights w;
  w.format = CheckpointFormat::kGguf;
  w.path = path.string();
  EXPECT_EQ(chat_template_source(w), kChatML);
}

TEST_F(ModelChatTemplate, MissingOrBrokenIsAnErrorNamingTheModel) {
  write_config({{"bos_token", "<s>"}});
  EXPECT_EQ(chat_template_source(weights_), "");
  try {
    load_chat_template(weights_, nullptr);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir_.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("no chat template"), std::string::npos) << e.what();
  }
  write_config({{"chat_template", "{% if messages %}{{ '<start_of_turn>' }}"}});
  try {
    load_chat_template(weights_, nullptr);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir_.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("chat template line 1: syntax error"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace minfer
