#include "tokenizer/chat_template.h"

#include <minfer_ffi.h>

#include <nlohmann/json.hpp>

#include "base/error.h"

namespace minfer {

namespace {

// Takes ownership of a string the Rust library returned.
std::string take_string(char* s) {
  std::string out = s ? std::string(s) : std::string();
  minfer_string_free(s);
  return out;
}

}  // namespace

ChatTemplate ChatTemplate::from_source(std::string_view jinja_source, ChatTemplateOptions options) {
  char* error = nullptr;
  MinferChatTemplate* compiled = minfer_chat_template_new(jinja_source.data(), jinja_source.size(), &error);
  if (!compiled) fail("chat template {}", take_string(error));
  ChatTemplate t;
  t.compiled_ = std::shared_ptr<MinferChatTemplate>(compiled, minfer_chat_template_free);
  t.options_ = std::move(options);
  return t;
}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages, bool add_generation_prompt) const {
  return render(messages, add_generation_prompt, nlohmann::ordered_json::object());
}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                 const nlohmann::ordered_json& extra) const {
  nlohmann::ordered_json context = extra.is_object() ? extra : nlohmann::ordered_json::object();
  context["messages"] = messages;
  context["add_generation_prompt"] = add_generation_prompt;
  context["bos_token"] = options_.bos_token;
  context["eos_token"] = options_.eos_token;
  // Invalid UTF-8 from a client is replaced rather than refused here; the server validates its input.
  const std::string text = context.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  char* out = nullptr;
  const bool ok =
      minfer_chat_template_render(compiled_.get(), text.data(), text.size(), options_.now_unix.value_or(-1), &out);
  std::string result = take_string(out);
  if (!ok) fail("chat template {}", result);
  return result;
}

const std::string_view kGemma3ChatTemplate = R"TEMPLATE({{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- elif message['content'] is iterable -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'image' -%}
                {{ '<start_of_image>' }}
            {%- elif item['type'] == 'text' -%}
                {{ item['text'] | trim }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\n'}}
{%- endif -%})TEMPLATE";

}  // namespace minfer
