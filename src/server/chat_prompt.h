// The served model's chat template, found once at start: --chat-template FILE, else the checkpoint's own (the
// engine finds it: model/model_tokenizer.h chat_template_source). Rendering is ChatTemplate's
// (tokenizer/chat_template.h, minijinja); this file only picks the source and turns a missing template, or
// one that does not compile or rejects a conversation, into an error a chat request can report.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "minfer/engine.h"
#include "server/chat_output.h"
#include "server/chat_request.h"
#include "server/json.h"
#include "server/tool_call_parser.h"
#include "tokenizer/chat_template.h"

namespace minfer::server {

class ChatPrompt {
 public:
  // Never throws for a missing or unknown template: chat requests then fail with the reason, and the
  // other routes keep working. Throws minfer::Error only when template_file is given but unreadable.
  // tool_call_parser / reasoning_parser: vLLM's names ("auto" picks from the template's text); an unknown name
  // throws minfer::Error.
  static ChatPrompt load(const AsyncEngine& engine, const std::string& template_file,
                         const std::string& tool_call_parser = "auto", const std::string& reasoning_parser = "auto");

  bool available() const { return tmpl_.has_value(); }
  // Where the template comes from; or why chat is unavailable.
  std::string describe() const;
  // The prompt text for the messages (and `extra` template variables: tools, chat_template_kwargs), ending
  // with the assistant turn's header. Throws ApiError 400 when chat is unavailable or the template rejects
  // the conversation (the message names the template line).
  std::string render(const json& messages, const json& extra, bool add_generation_prompt = true) const;
  // A chat request's prompt: its messages, tools and kwargs rendered; with continue_final_message cut right after
  // the last message's content (vLLM's rule), so the reply continues it rather than starting a new turn.
  std::string render(const ChatFields& chat) const;

  // The model's tool-call format (tool_call_parser.h); never null once loaded.
  const ToolCallParser* tool_parser() const { return tool_parser_.get(); }
  // Whether outputs may hold a <think> block to split into reasoning_content.
  bool reasoning() const { return reasoning_; }
  // Whether outputs are harmony messages (gpt-oss: analysis / final / commentary channels; harmony_output.h).
  bool harmony() const { return harmony_; }
  // What a chat request's decoding needs for the output to be parsed: harmony replies keep their markers (special
  // tokens) and end at <|return|> and <|call|>, which a GGUF may not list among its end tokens.
  void decode_for_parsing(SamplingParams& params) const;
  // How a chat request's output splits into reasoning, content and tool calls (chat_output.h): by the template's
  // formats, the request's tools and tool_choice, and whether the prompt leaves the reply inside <think>.
  ChatOutputOptions output_options(const ChatFields& chat, std::string_view prompt, bool stream) const;

 private:
  std::optional<ChatTemplate> tmpl_;
  std::shared_ptr<ToolCallParser> tool_parser_;
  bool reasoning_ = false;
  bool harmony_ = false;
  std::vector<int32_t> harmony_stops_;  // the ids of <|return|> and <|call|> (resolved once, at load)
  void load_source(const AsyncEngine& engine, const std::string& template_file);

  std::string source_;       // the template's text
  std::string source_name_;  // the file the template came from
  std::string unavailable_;  // why tmpl_ is empty
};

}  // namespace minfer::server
