#include "server/tool_call_stream.h"

#include "server/tool_call_parser.h"

namespace minfer::server {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Adds argument text of call `index` to the fragments, merged into the last one when it is the same call's.
void add_arguments(std::vector<CallFragment>& out, size_t index, std::string_view text) {
  if (text.empty()) return;
  if (out.empty() || out.back().index != index) out.push_back(CallFragment{index, false, "", "", ""});
  out.back().arguments += text;
}

}  // namespace

ToolCallStream::ToolCallStream(std::string forced_function, bool mistral_ids)
    : forced_function_(std::move(forced_function)), mistral_ids_(mistral_ids) {}

std::vector<CallFragment> ToolCallStream::update(std::string_view text) {
  std::vector<CallFragment> out;
  for (; scanned_ < text.size(); ++scanned_) scan(text[scanned_], out);
  return out;
}

void ToolCallStream::scan(char c, std::vector<CallFragment>& out) {
  const bool streaming = args_open_;
  if (streaming) {  // the arguments' own characters, whatever they are
    Call& call = calls_.back();
    call.arguments += c;
    if (call.started)
      add_arguments(out, calls_.size() - 1, std::string_view(&c, 1));
    else
      pending_.back() += c;
  }
  if (in_string_) {
    scan_string_char(c);
    if (!in_string_ && !streaming)
      take_key_or_value(out);
    else if (!in_string_)
      value_done();
    return;
  }
  if (c == '"') {
    in_string_ = true;
    string_.clear();
    return;
  }
  if (c == '{' || c == '[') {
    // The forced function's output is its arguments object: call 0, named already, streams from its brace.
    if (!forced_function_.empty() && stack_.empty() && c == '{' && calls_.empty()) {
      calls_.push_back(Call{"", forced_function_, "{", false});
      pending_.push_back("{");
      emit_start(0, out);
      open(c);
      args_open_ = true;
      args_depth_ = stack_.size();
      return;
    }
    const bool call =
        c == '{' && forced_function_.empty() && (stack_.empty() || (stack_.size() == 1 && stack_[0].kind == '['));
    const bool args = !streaming && !stack_.empty() && stack_.back().call && stack_.back().expect == Expect::kValue &&
                      (last_key_ == "arguments" || last_key_ == "parameters");
    open(c);
    stack_.back().call = call;
    if (call) {
      calls_.push_back(Call{});
      pending_.push_back("");
    }
    if (args) {
      args_open_ = true;
      args_depth_ = stack_.size();
      calls_.back().arguments += c;
      if (calls_.back().started)
        add_arguments(out, calls_.size() - 1, std::string_view(&c, 1));
      else
        pending_.back() += c;
    }
    return;
  }
  if (c == '}' || c == ']') {
    close();
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
  if (escape_) {
    escape_ = false;
    string_ += c;  // kept escaped: only keys and names are read, and they are plain
  } else if (c == '\\') {
    escape_ = true;
  } else if (c == '"') {
    in_string_ = false;
  } else {
    string_ += c;
  }
}

void ToolCallStream::open(char kind) {
  if (!stack_.empty() && stack_.back().expect == Expect::kValue) stack_.back().expect = Expect::kComma;
  stack_.push_back(Frame{kind, false, kind == '{' ? Expect::kKey : Expect::kValue});
}

void ToolCallStream::close() {
  if (stack_.empty()) return;
  stack_.pop_back();
  if (args_open_ && stack_.size() < args_depth_) args_open_ = false;  // the arguments value is complete
}

void ToolCallStream::value_done() {
  if (!stack_.empty() && stack_.back().expect == Expect::kValue) stack_.back().expect = Expect::kComma;
}

// A string ended outside the arguments: a key of the current object, or a value (the call's name).
void ToolCallStream::take_key_or_value(std::vector<CallFragment>& out) {
  if (stack_.empty()) return;
  Frame& f = stack_.back();
  if (f.kind == '{' && f.expect == Expect::kKey) {
    last_key_ = string_;
    f.expect = Expect::kColon;
    return;
  }
  if (f.call && f.expect == Expect::kValue && last_key_ == "name" && !calls_.back().started) {
    calls_.back().name = string_;
    emit_start(calls_.size() - 1, out);
  }
  value_done();
}

void ToolCallStream::emit_start(size_t index, std::vector<CallFragment>& out) {
  Call& call = calls_[index];
  call.id = make_tool_call_id(mistral_ids_);
  call.started = true;
  out.push_back(CallFragment{index, true, call.id, call.name, std::move(pending_[index])});
  pending_[index].clear();
}

}  // namespace minfer::server
