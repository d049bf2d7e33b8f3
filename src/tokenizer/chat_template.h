// Chat templates: a list of {role, content} messages -> the prompt text a chat model was trained on.
//
// Models ship their template as Jinja source (tokenizer_config.json "chat_template", GGUF
// tokenizer.chat_template). Rather than embed a Jinja interpreter, ChatTemplate recognises the common
// families from the source and renders them in C++, reproducing byte for byte what the published templates
// produce for plain text messages (tests/unit/tokenizer_chat_template_test.cpp compares against them):
//   ChatML        <|im_start|>role\n...<|im_end|>   (Qwen2 / Qwen2.5, with the default system prompt the
//                 template inserts when there is none; OpenHermes-style plain ChatML)
//   Qwen3         ChatML plus <think> handling (reasoning stripped from earlier turns, enable_thinking)
//   Llama 3       <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|>   (3.0)
//   Llama 3.1+    the same with the "Cutting Knowledge Date / Today Date" system header (3.1, 3.2, 3.3)
//   Llama 2       <s>[INST] <<SYS>>\n...\n<</SYS>>\n\n... [/INST] ... </s>
//   Mistral       <s>[INST] ... [/INST]...</s>   (v0.1 / v0.2 / Mixtral: user and assistant roles only)
//   Gemma         <bos><start_of_turn>user\n...<end_of_turn>\n<start_of_turn>model\n   (Gemma 2 / 3; the system
//                 prompt prefixes the first user turn)
// An unknown template is an Error naming the supported families, never a silently wrong prompt.
//
// BOS: the rendered text contains BOS exactly where the template puts it (Llama, Mistral), so encode it
// with add_special = false; the template is then the only owner of BOS.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace minfer {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", "tool"
  std::string content;
};

enum class ChatTemplateFamily : uint8_t { kChatML, kQwen3, kLlama3, kLlama31, kLlama2, kMistral, kGemma };

struct ChatTemplateOptions {
  // The tokenizer's BOS / EOS text; empty: the family's own (<|begin_of_text|> for Llama 3, <s> / </s> for
  // Llama 2 and Mistral). ChatML templates use neither.
  std::string bos_token;
  std::string eos_token;
  // Llama 3.1+: the "Today Date:" line, e.g. "26 Jul 2024". Empty: what the template does by itself, i.e.
  // today's date ("%d %b %Y") when it calls strftime_now, else its literal default.
  std::string date_string;
  // Qwen3: false appends the empty <think></think> block to the generation prompt (non-thinking mode).
  bool enable_thinking = true;
};

// Gemma 3's published template (google/gemma-3-*-it), for gemma3 models whose files carry none (the PyPI GGUF).
extern const std::string_view kGemma3ChatTemplate;

class ChatTemplate {
 public:
  // Recognises the family from the template text. Throws Error for an unknown template or a known family's
  // variant this renderer does not reproduce.
  static ChatTemplate from_source(const std::string& jinja_source, ChatTemplateOptions options = {});

  // The prompt for messages; add_generation_prompt appends the assistant turn's header where the template
  // has one (Llama 2 / Mistral end with [/INST] either way). Throws Error for what the template itself
  // rejects (e.g. Llama 2 / Mistral roles that do not alternate user/assistant, a system message for
  // Mistral) and for an empty message list.
  std::string render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;

  ChatTemplateFamily family() const { return family_; }
  std::string_view family_name() const;
  // ChatML templates that insert a system message when the conversation has none (Qwen2.5: "You are Qwen,
  // created by Alibaba Cloud. You are a helpful assistant."); empty otherwise.
  const std::string& default_system_prompt() const { return default_system_; }

 private:
  ChatTemplate() = default;

  std::string render_chatml(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;
  std::string render_qwen3(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;
  std::string render_llama3(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;
  std::string render_llama31(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;
  std::string render_llama2(const std::vector<ChatMessage>& messages) const;
  std::string render_mistral(const std::vector<ChatMessage>& messages) const;
  std::string render_gemma(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;

  ChatTemplateFamily family_ = ChatTemplateFamily::kChatML;
  ChatTemplateOptions options_;
  std::string default_system_;        // ChatML
  bool qwen_tool_responses_ = false;  // ChatML: "tool" messages become <tool_response> blocks in a user turn
  bool today_from_clock_ = false;     // Llama 3.1+: date_string from strftime_now
  bool eos_then_space_ = false;       // Mistral v0.1: eos_token + ' ' after each assistant turn
};

}  // namespace minfer
