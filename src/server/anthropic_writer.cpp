// Anthropic's Messages responses: a message of content blocks (thinking, text, tool_use) split from the output by
// the chat route's ChatOutput, and its stream as Anthropic's named events (message_start, ping, content_block_start
// / _delta / _stop, message_delta, message_stop).
#include "server/anthropic_writer.h"

#include "server/anthropic_protocol.h"

namespace minfer::server {
namespace {

// An event with its name line, as Anthropic's SDKs dispatch on it.
std::string named_event(const char* name, const json& data) {
  return std::string("event: ") + name + "\n" + sse_event(data);
}

json tool_use_block(const ToolCall& call) {
  json input = json::parse(call.arguments, nullptr, /*allow_exceptions=*/false);
  if (!input.is_object()) input = json::object();
  return {{"type", "tool_use"}, {"id", call.id}, {"name", call.name}, {"input", std::move(input)}};
}

class MessagesWriter : public ResponseWriter {
 public:
  explicit MessagesWriter(ResponseContext context) : ResponseWriter(std::move(context)) {}

  std::string begin(const std::vector<Choice>&) const override {
    json message = envelope(json::array(), nullptr, "");
    message["usage"] = {{"input_tokens", ctx_.prompt_tokens[0]}, {"output_tokens", 0}};
    return named_event("message_start", {{"type", "message_start"}, {"message", std::move(message)}}) +
           named_event("ping", {{"type", "ping"}});
  }

  std::string delta(size_t, Choice&, const RequestOutput& o) const override {
    const ChatDelta d = output_.next(o.text_delta, o.finished);
    std::string events;
    if (!d.reasoning.empty())
      events += block_delta("thinking", {{"type", "thinking_delta"}, {"thinking", d.reasoning}});
    // The end's text follows the streamed calls (what is after them); before that, text precedes calls.
    const bool calls_first = o.finished && d.calls_streamed;
    const std::string text =
        d.content.empty() ? "" : block_delta("text", {{"type", "text_delta"}, {"text", d.content}});
    if (!calls_first) events += text;
    for (const CallFragment& f : d.fragments) events += tool_use_fragment(f);
    for (size_t i = 0; !d.calls_streamed && i < d.calls.size(); ++i) {  // calls the stream could not follow
      const ToolCall& call = d.calls[i];
      events += tool_use_fragment(CallFragment{i, true, call.id, call.name, tool_use_block(call)["input"].dump()});
    }
    if (calls_first) events += text;
    if (o.finished) events += close_block();
    return events;
  }

  std::string keepalive() const override { return named_event("ping", {{"type", "ping"}}); }
  std::string error_event(const ApiError& error) const override {
    failed_ = true;
    return named_event("error", anthropic_error_json(error.status(), error.what(), error.param()));
  }

  std::string finish(const std::vector<Choice>& choices) const override {
    if (failed_) return "";  // the error event ended the message
    const CompletionOutput r = choices[0].state->result();
    const auto [reason, sequence] = stop_reason(r, called_);
    return named_event("message_delta", {{"type", "message_delta"},
                                         {"delta", {{"stop_reason", reason}, {"stop_sequence", sequence}}},
                                         {"usage", usage(r)}}) +
           named_event("message_stop", {{"type", "message_stop"}});
  }

  json body(std::vector<Choice>& choices) const override {
    const CompletionOutput r = choices[0].state->result();
    const ChatDelta d = ChatOutput::split(ctx_.chat_output, r.text);
    json content = json::array();
    if (!d.reasoning.empty()) content.push_back({{"type", "thinking"}, {"thinking", d.reasoning}, {"signature", ""}});
    if (!d.content.empty() || (d.reasoning.empty() && d.calls.empty()))
      content.push_back({{"type", "text"}, {"text", d.content}});
    for (const ToolCall& call : d.calls) content.push_back(tool_use_block(call));
    const auto [reason, sequence] = stop_reason(r, !d.calls.empty());
    json message = envelope(std::move(content), reason, sequence);
    message["usage"] = usage(r);
    return message;
  }

 private:
  json envelope(json content, json reason, json sequence) const {
    return {{"id", ctx_.id},
            {"type", "message"},
            {"role", "assistant"},
            {"model", ctx_.model},
            {"content", content},
            {"stop_reason", std::move(reason)},
            {"stop_sequence", std::move(sequence)}};
  }

  json usage(const CompletionOutput& r) const {
    return {{"input_tokens", ctx_.prompt_tokens[0] - r.cached_tokens},
            {"cache_creation_input_tokens", 0},
            {"cache_read_input_tokens", r.cached_tokens},
            {"output_tokens", static_cast<int64_t>(r.token_ids.size())}};
  }

  // Anthropic's stop_reason and stop_sequence for a finished output.
  // A reply cut by max_tokens says so even when it got to a call (whose input may be cut too).
  std::pair<json, json> stop_reason(const CompletionOutput& r, bool called) const {
    if (r.finish_reason == FinishReason::kLength) return {"max_tokens", nullptr};
    if (called) return {"tool_use", nullptr};
    if (!r.stop_reason.empty()) return {"stop_sequence", r.stop_reason};
    return {"end_turn", nullptr};
  }

  // A delta for a thinking or text block, opening it (and closing the other) first.
  std::string block_delta(const char* type, json delta) const {
    std::string events;
    if (open_ != type) {
      events += close_block();
      json block = std::string(type) == "thinking" ? json{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}
                                                   : json{{"type", "text"}, {"text", ""}};
      events += named_event("content_block_start",
                            {{"type", "content_block_start"}, {"index", next_index_}, {"content_block", block}});
      open_ = type;
    }
    return events + named_event("content_block_delta",
                                {{"type", "content_block_delta"}, {"index", next_index_}, {"delta", std::move(delta)}});
  }

  // A tool_use block's start (its id and name) and its input's JSON text, in input_json_delta fragments.
  std::string tool_use_fragment(const CallFragment& f) const {
    std::string events;
    if (!f.start && (open_ != "tool_use" || f.index != open_call_)) return events;  // not the open call's
    if (f.start) {
      events += close_block();
      open_call_ = f.index;
      const json block = {{"type", "tool_use"}, {"id", f.id}, {"name", f.name}, {"input", json::object()}};
      events += named_event("content_block_start",
                            {{"type", "content_block_start"}, {"index", next_index_}, {"content_block", block}});
      open_ = "tool_use";
      called_ = true;
    }
    if (f.arguments.empty()) return events;
    return events + named_event("content_block_delta",
                                {{"type", "content_block_delta"},
                                 {"index", next_index_},
                                 {"delta", {{"type", "input_json_delta"}, {"partial_json", f.arguments}}}});
  }

  std::string close_block() const {
    if (open_.empty()) return "";
    open_.clear();
    return named_event("content_block_stop", {{"type", "content_block_stop"}, {"index", next_index_++}});
  }

  // Stream state (a message has one choice).
  mutable ChatOutput output_{ctx_.chat_output};
  mutable std::string open_;  // the open block's type, "" when none
  mutable int64_t next_index_ = 0;
  mutable bool called_ = false;
  mutable bool failed_ = false;   // an error event was sent
  mutable size_t open_call_ = 0;  // the call whose tool_use block is open (open_ == "tool_use")
};

}  // namespace

std::unique_ptr<ResponseWriter> make_messages_writer(ResponseContext context) {
  return std::unique_ptr<ResponseWriter>(new MessagesWriter(std::move(context)));
}

}  // namespace minfer::server
