// Each render_* function is the published Jinja template of its family evaluated by hand for messages that
// are plain {role, content} text; the comments quote the template expression a line reproduces.
#include "tokenizer/chat_template.h"

#include <ctime>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/error.h"

namespace minfer {

namespace {

bool contains(std::string_view s, std::string_view what) { return s.find(what) != std::string_view::npos; }

// Decodes the UTF-8 code point that starts at s[i] (its byte length in len); invalid bytes decode as
// themselves with length 1, which is never whitespace.
char32_t code_point_at(std::string_view s, size_t i, size_t& len) {
  const auto b = static_cast<unsigned char>(s[i]);
  size_t n = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
  if (n == 0 || i + n > s.size()) {
    len = 1;
    return b;
  }
  char32_t cp = n == 1 ? b : n == 2 ? (b & 0x1F) : n == 3 ? (b & 0x0F) : (b & 0x07);
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  len = n;
  return cp;
}

// Python's str.isspace(), which Jinja's trim filter and str.strip() use.
bool is_python_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Python's str.strip() with no argument (Jinja's `trim`).
std::string python_strip(std::string_view s) {
  size_t begin = 0;
  while (begin < s.size()) {
    size_t len = 0;
    if (!is_python_space(code_point_at(s, begin, len))) break;
    begin += len;
  }
  size_t end = s.size();
  while (end > begin) {
    // Step back to the start of the last code point (skip UTF-8 continuation bytes).
    size_t start = end - 1;
    while (start > begin && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    size_t len = 0;
    const char32_t cp = code_point_at(s, start, len);
    if (start + len != end || !is_python_space(cp)) break;
    end = start;
  }
  return std::string(s.substr(begin, end - begin));
}

// str.lstrip('\n') / str.rstrip('\n') / str.strip('\n').
std::string_view lstrip_newlines(std::string_view s) {
  while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
  return s;
}
std::string_view rstrip_newlines(std::string_view s) {
  while (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  return s;
}
std::string_view strip_newlines(std::string_view s) { return rstrip_newlines(lstrip_newlines(s)); }

// Jinja's `tojson` as transformers defines it: json.dumps(x, ensure_ascii=False).
std::string to_json_string(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The text of a Jinja string literal body (Python escapes \n \t \r \\ \' \").
std::string unescape_jinja_literal(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    const char c = s[++i];
    out += c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c;
  }
  return out;
}

// A ChatML template that inserts a default system message has it as one literal:
// '<|im_start|>system\nYou are ...<|im_end|>\n'. Occurrences followed by an expression
// ('<|im_start|>system\n' + messages[0]['content']) are not one.
std::string find_default_system_prompt(std::string_view src) {
  constexpr std::string_view kOpen = "<|im_start|>system";
  for (size_t at = src.find(kOpen); at != std::string_view::npos; at = src.find(kOpen, at + 1)) {
    std::string_view rest = src.substr(at + kOpen.size());
    if (rest.substr(0, 2) == "\\n") {
      rest.remove_prefix(2);
    } else if (rest.substr(0, 1) == "\n") {
      rest.remove_prefix(1);
    } else {
      continue;
    }
    const size_t end = rest.find("<|im_end|>");
    if (end == std::string_view::npos || end == 0) continue;
    const std::string_view body = rest.substr(0, end);
    if (body.find_first_of("'\"{}+") != std::string_view::npos) continue;
    return unescape_jinja_literal(body);
  }
  return "";
}

// `{%- set date_string = "26 Jul 2024" %}`: the literal a Llama 3.1+ template falls back to.
std::string find_literal_date(std::string_view src) {
  constexpr std::string_view kSet = "set date_string = ";
  for (size_t at = src.find(kSet); at != std::string_view::npos; at = src.find(kSet, at + 1)) {
    std::string_view rest = src.substr(at + kSet.size());
    if (rest.empty() || (rest[0] != '"' && rest[0] != '\'')) continue;
    const size_t close = rest.find(rest[0], 1);
    if (close != std::string_view::npos) return std::string(rest.substr(1, close - 1));
  }
  return "26 Jul 2024";
}

// strftime_now("%d %b %Y") as transformers evaluates it (local time).
std::string today_date_string() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[32];
  const size_t n = std::strftime(buf, sizeof buf, "%d %b %Y", &local);
  return std::string(buf, n);
}

std::string excerpt(std::string_view src) {
  std::string out;
  for (char c : src.substr(0, 80)) out += c == '\n' ? std::string("\\n") : std::string(1, c);
  return src.size() > 80 ? out + "..." : out;
}

constexpr std::string_view kSupported =
    "ChatML (Qwen2, Qwen2.5, Qwen3), Llama 3 / 3.1+, Llama 2 ([INST] <<SYS>>), Mistral v0.1/v0.2 ([INST]), Gemma "
    "(<start_of_turn>)";

}  // namespace

ChatTemplate ChatTemplate::from_source(const std::string& jinja_source, ChatTemplateOptions options) {
  const std::string_view src = jinja_source;
  if (python_strip(src).empty()) fail("chat template is empty");
  ChatTemplate t;
  t.options_ = std::move(options);
  if (contains(src, "<|im_start|>") && contains(src, "<|im_end|>")) {
    if (contains(src, "</think>")) {
      t.family_ = ChatTemplateFamily::kQwen3;
    } else {
      t.family_ = ChatTemplateFamily::kChatML;
      t.default_system_ = find_default_system_prompt(src);
      t.qwen_tool_responses_ = contains(src, "<tool_response>");
    }
  } else if (contains(src, "<|start_header_id|>") && contains(src, "<|eot_id|>")) {
    if (contains(src, "Cutting Knowledge Date")) {
      t.family_ = ChatTemplateFamily::kLlama31;
      t.today_from_clock_ = contains(src, "strftime_now");
      if (t.options_.date_string.empty() && !t.today_from_clock_) t.options_.date_string = find_literal_date(src);
    } else {
      t.family_ = ChatTemplateFamily::kLlama3;
    }
    if (t.options_.bos_token.empty()) t.options_.bos_token = "<|begin_of_text|>";
  } else if (contains(src, "[INST]")) {
    if (contains(src, "<<SYS>>")) {
      t.family_ = ChatTemplateFamily::kLlama2;
    } else if (contains(src, "system_message") || contains(src, "[AVAILABLE_TOOLS]") ||
               contains(src, "[SYSTEM_PROMPT]") || !contains(src, "[INST] ") || !contains(src, " [/INST]")) {
      fail(
          "unsupported Mistral chat template variant (v0.3 and later: system prompt folded into the last user "
          "turn, tool blocks or [SYSTEM_PROMPT]); supported: {}. The template begins: \"{}\"",
          kSupported, excerpt(src));
    } else {
      t.family_ = ChatTemplateFamily::kMistral;
      t.eos_then_space_ = contains(src, "eos_token + ' '") || contains(src, "eos_token + \" \"");
    }
    if (t.options_.bos_token.empty()) t.options_.bos_token = "<s>";
    if (t.options_.eos_token.empty()) t.options_.eos_token = "</s>";
  } else if (contains(src, "<start_of_turn>") && contains(src, "<end_of_turn>") && contains(src, "first_user_prefix")) {
    t.family_ = ChatTemplateFamily::kGemma;
    if (t.options_.bos_token.empty()) t.options_.bos_token = "<bos>";
  } else {
    fail("unknown chat template: supported families are {}. The template begins: \"{}\"", kSupported, excerpt(src));
  }
  return t;
}

std::string_view ChatTemplate::family_name() const {
  switch (family_) {
    case ChatTemplateFamily::kChatML: return default_system_.empty() ? "chatml" : "qwen2";
    case ChatTemplateFamily::kQwen3: return "qwen3";
    case ChatTemplateFamily::kLlama3: return "llama3";
    case ChatTemplateFamily::kLlama31: return "llama3.1";
    case ChatTemplateFamily::kLlama2: return "llama2";
    case ChatTemplateFamily::kMistral: return "mistral";
    case ChatTemplateFamily::kGemma: return "gemma";
  }
  return "?";
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
  if (messages.empty()) fail("chat template: the conversation has no messages");
  switch (family_) {
    case ChatTemplateFamily::kChatML: return render_chatml(messages, add_generation_prompt);
    case ChatTemplateFamily::kQwen3: return render_qwen3(messages, add_generation_prompt);
    case ChatTemplateFamily::kLlama3: return render_llama3(messages, add_generation_prompt);
    case ChatTemplateFamily::kLlama31: return render_llama31(messages, add_generation_prompt);
    case ChatTemplateFamily::kLlama2: return render_llama2(messages);
    case ChatTemplateFamily::kMistral: return render_mistral(messages);
    case ChatTemplateFamily::kGemma: return render_gemma(messages, add_generation_prompt);
  }
  return "";
}

namespace {

void append_chatml_turn(std::string& out, std::string_view role, std::string_view content) {
  // '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n'
  out.append("<|im_start|>").append(role).append("\n").append(content).append("<|im_end|>\n");
}

// Qwen: consecutive tool messages share one user turn of <tool_response> blocks.
void append_tool_response(std::string& out, const std::vector<ChatMessage>& m, size_t i) {
  if (i == 0 || m[i - 1].role != "tool") out += "<|im_start|>user";
  out.append("\n<tool_response>\n").append(m[i].content).append("\n</tool_response>");
  if (i + 1 == m.size() || m[i + 1].role != "tool") out += "<|im_end|>\n";
}

}  // namespace

std::string ChatTemplate::render_chatml(const std::vector<ChatMessage>& m, bool add_generation_prompt) const {
  std::string out;
  const bool first_is_system = m[0].role == "system";
  // Qwen2.5: {%- if messages[0]['role'] == 'system' %} ... {%- else %} '<|im_start|>system\nYou are Qwen...'
  if (first_is_system) {
    append_chatml_turn(out, "system", m[0].content);
  } else if (!default_system_.empty()) {
    append_chatml_turn(out, "system", default_system_);
  }
  for (size_t i = first_is_system ? 1 : 0; i < m.size(); ++i) {
    const std::string& role = m[i].role;
    if (qwen_tool_responses_) {
      if (role == "tool") {
        append_tool_response(out, m, i);
        continue;
      }
      // The Qwen template has no branch for other roles: they are left out.
      if (role != "user" && role != "system" && role != "assistant") continue;
    }
    append_chatml_turn(out, role, m[i].content);
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

std::string ChatTemplate::render_qwen3(const std::vector<ChatMessage>& m, bool add_generation_prompt) const {
  std::string out;
  if (m[0].role == "system") append_chatml_turn(out, "system", m[0].content);
  // ns.last_query_index: the last user message that is not a wrapped tool response.
  size_t last_query = m.size() - 1;
  for (size_t k = m.size(); k-- > 0;) {
    const std::string& c = m[k].content;
    const bool wrapped_tool_response = c.starts_with("<tool_response>") && c.ends_with("</tool_response>");
    if (m[k].role == "user" && !wrapped_tool_response) {
      last_query = k;
      break;
    }
  }
  for (size_t i = 0; i < m.size(); ++i) {
    const std::string& role = m[i].role;
    if (role == "user" || (role == "system" && i != 0)) {
      append_chatml_turn(out, role, m[i].content);
    } else if (role == "assistant") {
      std::string_view content = m[i].content;
      std::string_view reasoning;
      if (contains(content, "</think>")) {
        // content.split('</think>')[-1].lstrip('\n') and
        // content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n')
        const std::string_view full = content;
        content = lstrip_newlines(full.substr(full.rfind("</think>") + 8));
        std::string_view before = rstrip_newlines(full.substr(0, full.find("</think>")));
        const size_t open = before.rfind("<think>");
        reasoning = lstrip_newlines(open == std::string_view::npos ? before : before.substr(open + 7));
      }
      out += "<|im_start|>assistant\n";
      if (i > last_query && (i + 1 == m.size() || !reasoning.empty())) {
        out.append("<think>\n").append(strip_newlines(reasoning)).append("\n</think>\n\n");
        out.append(lstrip_newlines(content));
      } else {
        out.append(content);
      }
      out += "<|im_end|>\n";
    } else if (role == "tool") {
      append_tool_response(out, m, i);
    }
  }
  if (add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (!options_.enable_thinking) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

namespace {

void append_llama3_turn(std::string& out, std::string_view role, std::string_view content) {
  // '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>'
  out.append("<|start_header_id|>").append(role).append("<|end_header_id|>\n\n");
  out.append(python_strip(content)).append("<|eot_id|>");
}

constexpr std::string_view kLlama3AssistantHeader = "<|start_header_id|>assistant<|end_header_id|>\n\n";

}  // namespace

std::string ChatTemplate::render_llama3(const std::vector<ChatMessage>& m, bool add_generation_prompt) const {
  std::string out = options_.bos_token;  // {% if loop.index0 == 0 %}{% set content = bos_token + content %}
  for (const ChatMessage& msg : m) append_llama3_turn(out, msg.role, msg.content);
  if (add_generation_prompt) out += kLlama3AssistantHeader;
  return out;
}

std::string ChatTemplate::render_llama31(const std::vector<ChatMessage>& m, bool add_generation_prompt) const {
  std::string out = options_.bos_token;
  size_t first = 0;
  std::string system_message;
  if (m[0].role == "system") {
    system_message = python_strip(m[0].content);  // messages[0]['content']|trim
    first = 1;
  }
  const std::string date = !options_.date_string.empty() ? options_.date_string
                           : today_from_clock_           ? today_date_string()
                                                         : "26 Jul 2024";
  out += "<|start_header_id|>system<|end_header_id|>\n\n";
  out += "Cutting Knowledge Date: December 2023\n";
  out.append("Today Date: ").append(date).append("\n\n");
  out.append(system_message).append("<|eot_id|>");
  for (size_t i = first; i < m.size(); ++i) {
    if (m[i].role == "tool" || m[i].role == "ipython") {
      // A string "is iterable" in Jinja, so the template writes message.content | tojson.
      out.append("<|start_header_id|>ipython<|end_header_id|>\n\n").append(to_json_string(m[i].content));
      out += "<|eot_id|>";
    } else {
      append_llama3_turn(out, m[i].role, m[i].content);
    }
  }
  if (add_generation_prompt) out += kLlama3AssistantHeader;
  return out;
}

std::string ChatTemplate::render_llama2(const std::vector<ChatMessage>& m) const {
  std::string out;
  size_t first = 0;
  std::optional<std::string> system_message;  // `false` in the template when there is none
  if (m[0].role == "system") {
    system_message = m[0].content;
    first = 1;
  }
  for (size_t i = first; i < m.size(); ++i) {
    const size_t k = i - first;  // loop.index0 over loop_messages
    const bool is_user = m[i].role == "user";
    if (is_user != (k % 2 == 0))
      fail(
          "chat template (Llama 2): conversation roles must alternate user/assistant/user/assistant/... after "
          "an optional first system message (message {} is '{}')",
          i, m[i].role);
    std::string content = m[i].content;
    if (k == 0 && system_message) content = "<<SYS>>\n" + *system_message + "\n<</SYS>>\n\n" + content;
    if (is_user) {
      // bos_token + '[INST] ' + content.strip() + ' [/INST]'
      out.append(options_.bos_token).append("[INST] ").append(python_strip(content)).append(" [/INST]");
    } else if (m[i].role == "assistant") {
      // ' '  + content.strip() + ' ' + eos_token
      out.append(" ").append(python_strip(content)).append(" ").append(options_.eos_token);
    }
  }
  return out;
}

std::string ChatTemplate::render_mistral(const std::vector<ChatMessage>& m) const {
  std::string out = options_.bos_token;
  for (size_t i = 0; i < m.size(); ++i) {
    const std::string& role = m[i].role;
    if (role != "user" && role != "assistant")
      fail("chat template (Mistral): only user and assistant roles are supported (message {} is '{}')", i, role);
    if ((role == "user") != (i % 2 == 0))
      fail(
          "chat template (Mistral): conversation roles must alternate user/assistant/user/assistant/... "
          "(message {} is '{}')",
          i, role);
    if (role == "user") {
      out.append("[INST] ").append(m[i].content).append(" [/INST]");  // '[INST] ' + message['content'] + ' [/INST]'
    } else {
      out.append(m[i].content).append(options_.eos_token);  // message['content'] + eos_token [+ ' ']
      if (eos_then_space_) out += ' ';
    }
  }
  return out;
}

// {{ bos_token }}; a system message becomes first_user_prefix (content + '\n\n', untrimmed); then per message
// '<start_of_turn>' + role ("model" for assistant) + '\n' + prefix on the first + content | trim + '<end_of_turn>\n'.
std::string ChatTemplate::render_gemma(const std::vector<ChatMessage>& m, bool add_generation_prompt) const {
  std::string out = options_.bos_token;
  const bool has_system = m[0].role == "system";
  const std::string prefix = has_system ? m[0].content + "\n\n" : "";
  for (size_t i = has_system ? 1 : 0, turn = 0; i < m.size(); ++i, ++turn) {
    const std::string& role = m[i].role;
    if ((role == "user") != (turn % 2 == 0))
      fail(
          "chat template (Gemma): conversation roles must alternate user/assistant/user/assistant/... (message {} "
          "is '{}')",
          i, role);
    out.append("<start_of_turn>").append(role == "assistant" ? "model" : role).append("\n");
    if (turn == 0) out += prefix;
    out.append(python_strip(m[i].content)).append("<end_of_turn>\n");
  }
  if (add_generation_prompt) out += "<start_of_turn>model\n";
  return out;
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
