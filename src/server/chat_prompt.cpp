#include "server/chat_prompt.h"

#include <fstream>
#include <sstream>

#include "base/error.h"
#include "model/model_tokenizer.h"
#include "server/api_error.h"

namespace minfer::server {

ChatPrompt ChatPrompt::load(const AsyncEngine& engine, const std::string& template_file) {
  ChatPrompt prompt;
  std::string source, where;
  if (!template_file.empty()) {
    std::ifstream in(template_file, std::ios::binary);
    if (!in) fail("--chat-template {}: cannot open the file", template_file);
    std::ostringstream text;
    text << in.rdbuf();
    source = text.str();
    where = template_file;
  } else {
    try {
      source = engine.chat_template_source();
    } catch (const std::exception& e) {
      prompt.unavailable_ = fmt::format("cannot read the model's chat template: {}", e.what());
      return prompt;
    }
    where = engine.config().model_path;
  }
  if (source.empty()) {
    prompt.unavailable_ = "this model has no chat template (give one with --chat-template FILE); use /v1/completions";
    return prompt;
  }
  try {
    prompt.tmpl_ = ChatTemplate::from_source(source, chat_template_options(engine.tokenizer()));
  } catch (const std::exception& e) {
    prompt.unavailable_ = fmt::format("the chat template of {} does not compile: {}", where, e.what());
  }
  prompt.source_name_ = where;
  return prompt;
}

std::string ChatPrompt::describe() const {
  return tmpl_ ? fmt::format("the Jinja template of {}", source_name_) : unavailable_;
}

std::string ChatPrompt::render(const json& messages, const json& extra) const {
  if (!tmpl_) throw ApiError(400, unavailable_, "messages", "chat_template_unavailable");
  try {
    return tmpl_->render(messages, /*add_generation_prompt=*/true, extra);
  } catch (const Error& e) {
    throw ApiError(400, e.what(), "messages", "chat_template_error");
  }
}

}  // namespace minfer::server
