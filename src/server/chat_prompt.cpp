#include "server/chat_prompt.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/error.h"
#include "formats/gguf_file.h"
#include "server/api_error.h"

namespace minfer::server {
namespace {

namespace fs = std::filesystem;

// tokenizer_config.json writes special tokens as a string or as {"content": "..."}.
std::string token_string(const nlohmann::json& config, const char* key) {
  if (!config.contains(key)) return "";
  const nlohmann::json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return "";
}

struct TemplateSource {
  std::string text;  // empty: none found
  std::string where;
  ChatTemplateOptions options;
};

TemplateSource find_template(const std::string& model_path) {
  TemplateSource src;
  std::error_code ec;
  if (fs::is_directory(model_path, ec)) {
    const fs::path config_path = fs::path(model_path) / "tokenizer_config.json";
    src.where = config_path.string();
    std::ifstream in(config_path);
    if (!in) return src;
    nlohmann::json config = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (config.is_discarded() || !config.is_object()) return src;
    src.options.bos_token = token_string(config, "bos_token");
    src.options.eos_token = token_string(config, "eos_token");
    const nlohmann::json& t = config.contains("chat_template") ? config["chat_template"] : nlohmann::json();
    if (t.is_string()) {
      src.text = t.get<std::string>();
    } else if (t.is_array()) {  // named templates: [{"name": "default", "template": "..."}, ...]
      for (const auto& entry : t)
        if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template") &&
            entry["template"].is_string())
          src.text = entry["template"].get<std::string>();
    }
    return src;
  }
  if (model_path.size() > 5 && model_path.ends_with(".gguf")) {
    src.where = model_path;
    const auto gguf = GgufFile::open(model_path);
    if (auto t = gguf->find_string("tokenizer.chat_template")) src.text = *t;
  }
  return src;
}

}  // namespace

ChatPrompt ChatPrompt::load(const std::string& model_path, const std::string& template_file) {
  ChatPrompt prompt;
  TemplateSource src;
  try {
    src = find_template(model_path);
  } catch (const std::exception& e) {
    prompt.unavailable_ = fmt::format("cannot read the model's chat template: {}", e.what());
    return prompt;
  }
  if (!template_file.empty()) {
    std::ifstream in(template_file, std::ios::binary);
    if (!in) fail("--chat-template {}: cannot open the file", template_file);
    std::ostringstream text;
    text << in.rdbuf();
    src.text = text.str();
    src.where = template_file;
  }
  if (src.text.empty()) {
    prompt.unavailable_ = "this model has no chat template (give one with --chat-template FILE); use /v1/completions";
    return prompt;
  }
  try {
    prompt.tmpl_ = ChatTemplate::from_source(src.text, src.options);
  } catch (const std::exception& e) {
    prompt.unavailable_ = fmt::format("the chat template of {} is not supported: {}", src.where, e.what());
  }
  return prompt;
}

std::string ChatPrompt::describe() const { return tmpl_ ? std::string(tmpl_->family_name()) : unavailable_; }

std::string ChatPrompt::render(const std::vector<ChatMessage>& messages) const {
  if (!tmpl_) throw ApiError(400, unavailable_, "messages", "chat_template_unavailable");
  try {
    return tmpl_->render(messages, /*add_generation_prompt=*/true);
  } catch (const Error& e) {
    throw ApiError(400, e.what(), "messages");
  }
}

}  // namespace minfer::server
