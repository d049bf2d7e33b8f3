#include "server/chat_prompt.h"

#include <fstream>
#include <sstream>

#include "base/error.h"
#include "model/model_tokenizer.h"
#include "server/api_error.h"

namespace minfer::server {

namespace {

// vLLM's --reasoning-parser names; auto: a template of harmony messages (gpt-oss) is openai_gptoss, one that knows
// <think> blocks qwen3.
bool harmony_enabled(const std::string& parser, const std::string& source) {
  return parser == "openai_gptoss" || (parser == "auto" && source.find("<|channel|>") != std::string::npos);
}
bool reasoning_enabled(const std::string& parser, const std::string& source) {
  if (parser == "auto") return source.find("<think>") != std::string::npos;
  if (parser == "none" || parser == "openai_gptoss") return false;
  if (parser == "qwen3" || parser == "deepseek_r1") return true;
  fail("--reasoning-parser {}: unknown (auto, none, qwen3, deepseek_r1, openai_gptoss)", parser);
}

}  // namespace

ChatPrompt ChatPrompt::load(const AsyncEngine& engine, const std::string& template_file,
                            const std::string& tool_call_parser, const std::string& reasoning_parser) {
  ChatPrompt prompt;
  prompt.load_source(engine, template_file);
  // vLLM's "openai" tool parser reads harmony messages, which HarmonyOutput parses whole (calls included).
  const bool openai = tool_call_parser == "openai";
  prompt.tool_parser_ = ToolCallParser::make(openai ? "auto" : tool_call_parser, prompt.source_);
  if (!prompt.tool_parser_)
    fail("--tool-call-parser {}: unknown ({}, openai)", tool_call_parser, ToolCallParser::known_names());
  prompt.harmony_ = openai || harmony_enabled(reasoning_parser, prompt.source_);
  prompt.reasoning_ = !prompt.harmony_ && reasoning_enabled(reasoning_parser, prompt.source_);
  if (const Tokenizer* tok = engine.tokenizer(); tok && prompt.harmony_)
    for (std::string_view end : {"<|return|>", "<|call|>"})
      if (const auto id = tok->token_id(end)) prompt.harmony_stops_.push_back(*id);
  return prompt;
}

void ChatPrompt::decode_for_parsing(SamplingParams& params) const {
  if (!harmony_) return;
  params.skip_special_tokens = false;
  params.stop_token_ids.insert(params.stop_token_ids.end(), harmony_stops_.begin(), harmony_stops_.end());
}

void ChatPrompt::load_source(const AsyncEngine& engine, const std::string& template_file) {
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
      unavailable_ = fmt::format("cannot read the model's chat template: {}", e.what());
      return;
    }
    where = engine.config().model_path;
  }
  if (source.empty()) {
    unavailable_ = "this model has no chat template (give one with --chat-template FILE); use /v1/completions";
    return;
  }
  try {
    tmpl_ = ChatTemplate::from_source(source, chat_template_options(engine.tokenizer()));
  } catch (const std::exception& e) {
    unavailable_ = fmt::format("the chat template of {} does not compile: {}", where, e.what());
  }
  source_name_ = where;
  source_ = std::move(source);
}

std::string ChatPrompt::describe() const {
  return tmpl_ ? fmt::format("the Jinja template of {}", source_name_) : unavailable_;
}

std::string ChatPrompt::render(const ChatFields& chat) const {
  std::string text = render(chat.messages, chat.template_variables(), chat.add_generation_prompt);
  if (!chat.continue_final_message) return text;
  const json& content = chat.messages.back()["content"];
  const std::string last = content.is_string() ? content.get<std::string>() : "";
  const size_t at = last.empty() ? std::string::npos : text.rfind(last);
  if (at == std::string::npos)
    bad_request("continue_final_message", "the chat template does not print the last message's content verbatim");
  text.resize(at + last.size());
  return text;
}

std::string ChatPrompt::render(const json& messages, const json& extra, bool add_generation_prompt) const {
  if (!tmpl_) throw ApiError(400, unavailable_, "messages", "chat_template_unavailable");
  try {
    return tmpl_->render(messages, add_generation_prompt, extra);
  } catch (const Error& e) {
    throw ApiError(400, e.what(), "messages", "chat_template_error");
  }
}

ChatOutputOptions ChatPrompt::output_options(const ChatFields& chat, std::string_view prompt, bool stream) const {
  ChatOutputOptions o;
  o.reasoning = reasoning_;
  // Templates that open the reasoning block themselves (DeepSeek-R1; Qwen3 with thinking) leave the output
  // inside it.
  o.starts_in_reasoning = o.reasoning && prompt.substr(0, prompt.find_last_not_of(" \t\r\n") + 1).ends_with("<think>");
  using Kind = ToolChoice::Kind;
  const ToolChoice& choice = chat.tool_choice;
  o.forced_calls = choice.kind == Kind::kRequired || choice.kind == Kind::kFunction;
  o.forced_function = choice.kind == Kind::kFunction ? choice.function : "";
  o.mistral_ids = std::string_view(tool_parser_->name()) == "mistral";
  o.harmony = harmony_;
  o.stream_calls = stream;
  if (chat.tools_enabled() && !o.forced_calls) {
    o.tools = tool_parser_.get();
    o.tool_defs = chat.tools;
  }
  return o;
}

}  // namespace minfer::server
