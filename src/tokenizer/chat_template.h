// Chat templates: a conversation -> the prompt text a chat model was trained on.
//
// Models ship their template as Jinja source (tokenizer_config.json "chat_template", chat_template.jinja,
// GGUF tokenizer.chat_template). ChatTemplate renders it with minijinja (rust/minfer_ffi) the way Hugging Face
// transformers' apply_chat_template does with Jinja2: trim_blocks, lstrip_blocks, loop controls,
// raise_exception, strftime_now, a Python-compatible tojson and Python's str/dict/list methods, so any
// template renders byte for byte as Jinja2 would (tests/unit/tokenizer_chat_template_test.cpp, against
// python3-jinja2's output in tests/data/chat_templates/expected.json).
//
// BOS: the rendered text contains BOS exactly where the template puts it (Llama, Mistral, Gemma), so encode it
// with add_special = false; the template is then the only owner of BOS.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

struct MinferChatTemplate;

namespace minfer {

struct ChatTemplateOptions {
  // The tokenizer's BOS / EOS text, given to the template as bos_token / eos_token.
  std::string bos_token;
  std::string eos_token;
  // strftime_now's time in Unix seconds (UTC); unset: the clock (local time). Tests pin it.
  std::optional<int64_t> now_unix;
};

// Gemma 3's published template (google/gemma-3-*-it), for gemma3 models whose files carry none (the PyPI GGUF).
extern const std::string_view kGemma3ChatTemplate;

class ChatTemplate {
 public:
  // Compiles the template. Throws Error("chat template line N: ...") for a syntax error.
  static ChatTemplate from_source(std::string_view jinja_source, ChatTemplateOptions options = {});

  // Objects keep their key order (ordered_json), as Python dicts do for transformers: tools and schemas print
  // in the order they were written.
  // Renders messages (OpenAI-style objects: role, content, and tool_calls / tool_call_id / name /
  // reasoning_content as the client sent them) with add_generation_prompt, bos_token, eos_token and the
  // variables of `extra` (an object: tools, documents, chat_template_kwargs entries such as
  // enable_thinking), which may override none of the first four. Throws Error("chat template line N: ...")
  // for what the template rejects (raise_exception, roles that do not alternate, a bad variable).
  std::string render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                     const nlohmann::ordered_json& extra) const;
  std::string render(const nlohmann::ordered_json& messages, bool add_generation_prompt) const;

 private:
  ChatTemplate() = default;

  std::shared_ptr<MinferChatTemplate> compiled_;  // shared by copies; rendering is thread-safe
  ChatTemplateOptions options_;
};

}  // namespace minfer
