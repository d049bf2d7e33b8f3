#include "server/tool_call_stream.h"

#include <algorithm>

#include "server/json.h"
#include "server/tool_call_parser.h"

namespace minfer::server {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

bool arguments_key(const std::string& key) { return key == "arguments" || key == "parameters"; }

// Adds argument text of call `index` to the fragments, merged into the last one when it is the same call's.
void add_fragment_text(std::vector<CallFragment>& out, size_t index, std::string_view text) {
  if (text.empty()) return;
  if (out.empty() || out.back().index != index) out.push_back(CallFragment{index, false, "", "", ""});
  out.back().arguments += text;
}

}  // namespace

ToolCallStream::ToolCallStream(std::string forced_function, bool mistral_ids, std::vector<std::string> tool_names)
    : forced_function_(std::move(forced_function)), mistral_ids_(mistral_ids), tool_names_(std::move(tool_names)) {}

std::vector<CallFragment> ToolCallStream::update(std::string_view text) {
  std::vector<CallFragment> out;
  for (; scanned_ < text.size(); ++scanned_) scan(text[scanned_], out);
  return out;
}

void ToolCallStream::scan(char c, std::vector<CallFragment>& out) {
  const bool streaming = args_open_;
  if (streaming) add_arguments_text(std::string_view(&c, 1), out);  // the arguments' own characters, whatever they are
  if (in_string_) {
    scan_string_char(c);
    if (!in_string_ && !streaming) string_ended(out);
    return;
  }
  if (c == '"') {
    in_string_ = true;
    string_.clear();
    raw_string_.clear();
    return;
  }
  if (c == '{' || c == '[') {
    open_bracket(c, streaming, out);
    return;
  }
  if (c == '}' || c == ']') {
    close_bracket(out);
    return;
  }
  if (stack_.empty()) return;  // text outside the calls (markers, separators)
  Frame& f = stack_.back();
  if (c == ':' && f.expect == Expect::kColon)
    f.expect = Expect::kValue;
  else if (c == ',')
    f.expect = f.kind == '{' ? Expect::kKey : Expect::kValue;
  else if (!is_space(c) && f.expect == Expect::kValue)
    f.expect = Expect::kComma;  // a number, true, false, null
}

void ToolCallStream::scan_string_char(char c) {
  raw_string_ += c;
  if (escape_) {
    escape_ = false;
    string_ += c;  // keys and names are plain; an escaped arguments string is decoded from raw_string_
  } else if (c == '\\') {
    escape_ = true;
  } else if (c == '"') {
    in_string_ = false;
    raw_string_.pop_back();
  } else {
    string_ += c;
  }
}

void ToolCallStream::open_bracket(char c, bool streaming, std::vector<CallFragment>& out) {
  // The forced function's output is its arguments object: call 0, named already, streams from its brace.
  if (!forced_function_.empty() && stack_.empty() && c == '{' && calls_.empty()) {
    calls_.push_back(Call{"", forced_function_, "", false, true});
    emit_start(out);
    stack_.push_back(Frame{c, false, Expect::kKey});
    args_open_ = true;
    args_depth_ = stack_.size();
    add_arguments_text("{", out);
    return;
  }
  const bool call =
      c == '{' && forced_function_.empty() && (stack_.empty() || (stack_.size() == 1 && stack_[0].kind == '['));
  const bool args = !streaming && !stack_.empty() && stack_.back().call && stack_.back().expect == Expect::kValue &&
                    arguments_key(last_key_) && !calls_.empty() && !calls_.back().has_arguments;
  if (!stack_.empty() && stack_.back().expect == Expect::kValue) stack_.back().expect = Expect::kComma;
  stack_.push_back(Frame{c, call, c == '{' ? Expect::kKey : Expect::kValue});
  if (call) {
    calls_.push_back(Call{});
    pending_.clear();
  }
  if (args) {
    args_open_ = true;
    args_depth_ = stack_.size();
    calls_.back().has_arguments = true;
    add_arguments_text(std::string_view(&c, 1), out);
  }
}

void ToolCallStream::close_bracket(std::vector<CallFragment>& out) {
  if (stack_.empty()) return;
  const bool call = stack_.back().call;
  stack_.pop_back();
  if (args_open_ && stack_.size() < args_depth_) args_open_ = false;  // the arguments value is complete
  if (!call) return;
  // A call object closed: one that named no tool was no call; one without arguments takes none ("{}").
  if (!calls_.back().started) {
    calls_.pop_back();
    pending_.clear();
  } else if (!calls_.back().has_arguments) {
    calls_.back().has_arguments = true;
    add_arguments_text("{}", out);
  }
}

void ToolCallStream::value_done() {
  if (!stack_.empty() && stack_.back().expect == Expect::kValue) stack_.back().expect = Expect::kComma;
}

// A string ended outside the arguments: a key of the current object, or a value (the call's name, or arguments
// given as a JSON string).
void ToolCallStream::string_ended(std::vector<CallFragment>& out) {
  if (stack_.empty()) return;
  Frame& f = stack_.back();
  if (f.kind == '{' && f.expect == Expect::kKey) {
    last_key_ = string_;
    f.expect = Expect::kColon;
    return;
  }
  if (f.call && f.expect == Expect::kValue) {
    Call& call = calls_.back();
    if (last_key_ == "name" && !call.started && known_tool(string_)) {
      call.name = string_;
      emit_start(out);
    } else if (arguments_key(last_key_) && !call.has_arguments) {
      const json decoded = json::parse("\"" + raw_string_ + "\"", nullptr, /*allow_exceptions=*/false);
      call.has_arguments = true;
      add_arguments_text(decoded.is_string() ? decoded.get<std::string>() : std::string("{}"), out);
    }
  }
  value_done();
}

void ToolCallStream::add_arguments_text(std::string_view text, std::vector<CallFragment>& out) {
  Call& call = calls_.back();
  call.arguments += text;
  if (call.started)
    add_fragment_text(out, calls_.size() - 1, text);
  else
    pending_ += text;
}

void ToolCallStream::emit_start(std::vector<CallFragment>& out) {
  Call& call = calls_.back();
  call.id = make_tool_call_id(mistral_ids_);
  call.started = true;
  out.push_back(CallFragment{calls_.size() - 1, true, call.id, call.name, std::move(pending_)});
  pending_.clear();
}

bool ToolCallStream::known_tool(const std::string& name) const {
  return tool_names_.empty() || std::find(tool_names_.begin(), tool_names_.end(), name) != tool_names_.end();
}

}  // namespace minfer::server
