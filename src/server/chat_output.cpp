#include "server/chat_output.h"

#include "base/text.h"
#include "server/json.h"

namespace minfer::server {
namespace {

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";

std::vector<ToolCall> forced_calls(std::string_view text, const std::string& function, bool mistral_ids) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  std::vector<ToolCall> calls;
  if (!function.empty()) {
    if (j.is_object()) calls.push_back({make_tool_call_id(mistral_ids), function, j.dump()});
    return calls;
  }
  if (!j.is_array()) return calls;
  for (const json& c : j)
    if (c.is_object() && c.contains("name") && c["name"].is_string())
      calls.push_back({make_tool_call_id(mistral_ids), c["name"].get<std::string>(),
                       c.contains("parameters") ? c["parameters"].dump() : "{}"});
  return calls;
}

}  // namespace

ChatOutput::ChatOutput(ChatOutputOptions options)
    : options_(std::move(options)),
      phase_(!options_.reasoning            ? Phase::kContent
             : options_.starts_in_reasoning ? Phase::kReasoning
                                            : Phase::kMaybeThink) {
  if (options_.harmony && !options_.forced_calls) harmony_.emplace();
  const bool json_calls = options_.forced_calls || (options_.tools && options_.tools->json_calls());
  if (options_.stream_calls && json_calls && !harmony_) {
    std::vector<std::string> names;  // a call must name one of the tools (forced calls: the grammar sees to it)
    if (options_.tool_defs.is_array())
      for (const json& t : options_.tool_defs)
        if (t.contains("function") && t["function"].contains("name") && t["function"]["name"].is_string())
          names.push_back(t["function"]["name"].get<std::string>());
    calls_stream_.emplace(options_.forced_function, options_.mistral_ids, std::move(names));
  }
}

ChatDelta ChatOutput::push(std::string_view text) {
  ChatDelta out;
  if (harmony_) {
    harmony_->push(text, out);
    return out;
  }
  if (phase_ == Phase::kContent) {
    route_content(text, out);
    return out;
  }
  pending_ += text;
  if (phase_ == Phase::kMaybeThink) {
    const size_t b = pending_.find_first_not_of(" \t\r\n");
    if (b == std::string::npos) return out;  // only whitespace so far
    const std::string_view rest = std::string_view(pending_).substr(b);
    if (rest.size() < kThinkOpen.size() && kThinkOpen.starts_with(rest)) return out;  // undecided
    if (rest.starts_with(kThinkOpen)) {
      pending_.erase(0, b + kThinkOpen.size());
      phase_ = Phase::kReasoning;
    } else {
      phase_ = Phase::kContent;
      std::string all = std::move(pending_);
      pending_.clear();
      route_content(all, out);
      return out;
    }
  }
  emit_reasoning(out, /*final=*/false);
  return out;
}

// Reasoning up to </think>; what follows is content.
void ChatOutput::emit_reasoning(ChatDelta& out, bool final) {
  const size_t close = pending_.find(kThinkClose);
  if (close == std::string::npos) {
    const size_t keep = final ? 0 : partial_marker_at_end(pending_, kThinkClose);
    out.reasoning += pending_.substr(0, pending_.size() - keep);
    pending_.erase(0, pending_.size() - keep);
    return;
  }
  out.reasoning += pending_.substr(0, close);
  std::string rest = pending_.substr(close + kThinkClose.size());
  pending_.clear();
  phase_ = Phase::kContent;
  strip_newlines_ = true;
  route_content(rest, out);
}

void ChatOutput::route_content(std::string_view text, ChatDelta& out) {
  if (strip_newlines_) {
    const size_t b = text.find_first_not_of("\r\n");
    if (b == std::string_view::npos) return;
    text.remove_prefix(b);
    strip_newlines_ = false;
  }
  if (options_.forced_calls || in_calls_) {
    content_held_ += text;
    stream_held_calls(out);
    return;
  }
  if (!options_.tools) {
    out.content += text;
    return;
  }
  content_held_ += text;
  const size_t start = options_.tools->call_start(content_held_, /*partial_ok=*/true);
  if (start == std::string::npos) {
    out.content += content_held_;
    content_held_.clear();
    return;
  }
  out.content += content_held_.substr(0, start);
  content_held_.erase(0, start);
  // A whole marker (not just a possible start of one): from here on everything is held to the end.
  in_calls_ = options_.tools->call_start(content_held_, /*partial_ok=*/false) == 0;
  if (in_calls_) stream_held_calls(out);
}

// The held calls text as far as it is written: the calls' starts and argument text (stream_calls only).
void ChatOutput::stream_held_calls(ChatDelta& out) {
  if (!calls_stream_) return;
  for (CallFragment& f : calls_stream_->update(content_held_)) out.fragments.push_back(std::move(f));
}

// The complete output's calls against the streamed ones: the streamed calls stand (ids, names, argument text); calls
// the parser found beyond them go out whole now.
void ChatOutput::settle_streamed_calls(ChatDelta& out, size_t before_held) {
  if (!calls_stream_) return;
  std::vector<ToolCall> calls;
  for (const ToolCallStream::Call& c : calls_stream_->calls())
    if (c.started) calls.push_back(ToolCall{c.id, c.name, c.arguments.empty() ? "{}" : c.arguments});
  if (calls.empty()) return;
  if (out.calls.empty()) out.content.resize(before_held);  // cut short: the calls went out, not as content
  for (size_t i = calls.size(); i < out.calls.size(); ++i) {
    out.fragments.push_back(CallFragment{i, true, out.calls[i].id, out.calls[i].name, out.calls[i].arguments});
    calls.push_back(out.calls[i]);
  }
  out.calls = std::move(calls);
  out.calls_streamed = true;
}

ChatDelta ChatOutput::finish() {
  ChatDelta out;
  if (harmony_) {
    harmony_->finish(out);
    return out;
  }
  if (phase_ == Phase::kMaybeThink) {
    phase_ = Phase::kContent;
    std::string all = std::move(pending_);
    pending_.clear();
    route_content(all, out);
  } else if (phase_ == Phase::kReasoning) {
    emit_reasoning(out, /*final=*/true);
  }
  const size_t before_held = out.content.size();
  if (options_.forced_calls) {
    out.calls = forced_calls(content_held_, options_.forced_function, options_.mistral_ids);
    if (out.calls.empty()) out.content += content_held_;  // cut short: show what there is
  } else if (options_.tools && !content_held_.empty()) {
    ParsedToolCalls parsed = options_.tools->parse(content_held_, options_.tool_defs);
    out.content += parsed.content;
    out.calls = std::move(parsed.calls);
  } else {
    out.content += content_held_;
  }
  settle_streamed_calls(out, before_held);
  content_held_.clear();
  return out;
}

ChatDelta ChatOutput::next(std::string_view text, bool finished) {
  ChatDelta d = push(text);
  if (finished) {
    ChatDelta rest = finish();
    d.reasoning += rest.reasoning;
    d.content += rest.content;
    d.calls = std::move(rest.calls);
    for (CallFragment& f : rest.fragments) d.fragments.push_back(std::move(f));
    d.calls_streamed = rest.calls_streamed;
  }
  return d;
}

ChatDelta ChatOutput::split(const ChatOutputOptions& options, std::string_view text) {
  return ChatOutput(options).next(text, /*finished=*/true);
}

}  // namespace minfer::server
