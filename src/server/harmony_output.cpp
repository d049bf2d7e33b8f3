#include "server/harmony_output.h"

#include <algorithm>
#include <array>

#include "base/text.h"
#include "server/chat_output.h"

namespace minfer::server {
namespace {

constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kChannel = "<|channel|>";
// What ends a body: the end of a message, of the reply (also an end of generation, so usually absent), a call (the
// same), or the next message's start where a model leaves out <|end|>.
constexpr std::array<std::string_view, 4> kBodyEnds = {"<|end|>", "<|return|>", "<|call|>", "<|start|>"};

// The word after `key` in a header ("analysis" after <|channel|>, "functions.get_weather" after "to="), up to a
// space or the next marker.
std::string_view header_word(std::string_view header, std::string_view key) {
  const size_t at = header.rfind(key);
  if (at == std::string_view::npos) return {};
  std::string_view rest = header.substr(at + key.size());
  return rest.substr(0, std::min(rest.find(' '), rest.find("<|")));
}

std::string trimmed(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return "";
  return std::string(s.substr(b, s.find_last_not_of(" \t\r\n") + 1 - b));
}

}  // namespace

void HarmonyOutput::start_body(std::string_view header) {
  const std::string_view recipient = header_word(header, "to=");
  if (recipient.starts_with("functions.")) {
    route_ = Route::kCall;
    call_name_ = std::string(recipient.substr(10));
    call_args_.clear();
    return;
  }
  route_ = header_word(header, kChannel) == "analysis" ? Route::kReasoning : Route::kContent;
}

void HarmonyOutput::push(std::string_view text, ChatDelta& out) {
  buffer_ += text;
  while (true) {
    if (!in_body_) {
      const size_t at = buffer_.find(kMessage);
      if (at == std::string::npos) return;  // the header goes on
      saw_marker_ = true;
      start_body(std::string_view(buffer_).substr(0, at));
      buffer_.erase(0, at + kMessage.size());
      in_body_ = true;
    }
    size_t end = std::string::npos, end_len = 0;
    for (std::string_view marker : kBodyEnds) {
      const size_t at = buffer_.find(marker);
      if (at < end) {
        end = at;
        end_len = marker == "<|start|>" ? 0 : marker.size();  // <|start|> begins the next header
      }
    }
    if (end == std::string::npos) {
      route_body(out, /*final=*/false);
      return;
    }
    std::string rest = buffer_.substr(end + end_len);
    buffer_.resize(end);
    route_body(out, /*final=*/true);
    end_message();
    buffer_ = std::move(rest);
  }
}

// Body text to its route, all of it when final, else all but a tail that may start a marker.
void HarmonyOutput::route_body(ChatDelta& out, bool final) {
  size_t keep = 0;
  if (!final)
    for (std::string_view marker : kBodyEnds) keep = std::max(keep, partial_marker_at_end(buffer_, marker));
  const std::string_view text = std::string_view(buffer_).substr(0, buffer_.size() - keep);
  switch (route_) {
    case Route::kReasoning: out.reasoning += text; break;
    case Route::kContent: out.content += text; break;
    case Route::kCall: call_args_ += text; break;
  }
  buffer_.erase(0, buffer_.size() - keep);
}

void HarmonyOutput::end_message() {
  in_body_ = false;
  if (route_ != Route::kCall) return;
  const std::string args = trimmed(call_args_);
  calls_.push_back({make_tool_call_id(false), call_name_, args.empty() ? "{}" : args});
  call_args_.clear();
}

void HarmonyOutput::finish(ChatDelta& out) {
  if (in_body_) {
    route_body(out, /*final=*/true);
    end_message();
  } else if (!saw_marker_ && !std::string_view(buffer_).starts_with(kChannel)) {
    out.content += buffer_;  // no harmony message at all: the text is the answer
  }
  buffer_.clear();
  out.calls = std::move(calls_);
  calls_.clear();
}

}  // namespace minfer::server
