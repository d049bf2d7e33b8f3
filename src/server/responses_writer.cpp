// OpenAI's Responses objects: output items (reasoning, a message of output_text, function calls) split from the output
// by the chat route's ChatOutput, and the stream of Responses events with sequence numbers (response.created,
// response.in_progress, response.output_item.added / .done, response.content_part.added / .done,
// response.output_text.delta / .done, response.reasoning_text.delta / .done, response.function_call_arguments.delta /
// .done, response.completed). A stored response is saved with its conversation when it completes.
#include "server/responses_writer.h"

#include <chrono>

#include "server/responses_protocol.h"

namespace minfer::server {
namespace {

json message_item(const std::string& id, const std::string& text, const char* status) {
  return {{"type", "message"},
          {"id", id},
          {"status", status},
          {"role", "assistant"},
          {"content", json::array({{{"type", "output_text"}, {"text", text}, {"annotations", json::array()}}})}};
}

json reasoning_item(const std::string& id, const std::string& text) {
  return {{"type", "reasoning"},
          {"id", id},
          {"summary", json::array()},
          {"content", json::array({{{"type", "reasoning_text"}, {"text", text}}})}};
}

json function_call_item(const std::string& id, const ToolCall& call, const char* status) {
  return {{"type", "function_call"},     {"id", id},        {"call_id", call.id}, {"name", call.name},
          {"arguments", call.arguments}, {"status", status}};
}

class ResponsesWriter : public ResponseWriter {
 public:
  explicit ResponsesWriter(ResponseContext context)
      : ResponseWriter(std::move(context)),
        created_(std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                     .count()) {}

  std::string begin(const std::vector<Choice>&) const override {
    const json response = envelope("in_progress", json::array(), nullptr);
    std::string events = event("response.created", {{"response", response}});  // numbered in this order
    return events + event("response.in_progress", {{"response", response}});
  }

  std::string delta(size_t, Choice&, const RequestOutput& o) const override {
    const ChatDelta d = output_.next(o.text_delta, o.finished);
    std::string events;
    if (!d.reasoning.empty()) events += reasoning_delta(d.reasoning);
    // The end's text follows the streamed calls (what is after them); before that, text precedes calls.
    const bool calls_first = o.finished && d.calls_streamed;
    if (!calls_first && !d.content.empty()) events += text_delta(d.content);
    for (const CallFragment& f : d.fragments) events += call_fragment(f);
    for (size_t i = 0; !d.calls_streamed && i < d.calls.size(); ++i)  // calls the stream could not follow
      events += call_fragment(CallFragment{i, true, d.calls[i].id, d.calls[i].name, d.calls[i].arguments});
    if (calls_first && !d.content.empty()) events += text_delta(d.content);
    if (o.finished) events += close_item();
    return events;
  }

  // response.failed: the response so far, with the error.
  std::string error_event(const ApiError& error) const override {
    failed_ = true;
    json response = envelope("failed", items_, nullptr);
    response["error"] = {{"code", error.status() == 503 ? "server_is_overloaded" : "server_error"},
                         {"message", error.what()}};
    return event("response.failed", {{"response", std::move(response)}});
  }

  std::string finish(const std::vector<Choice>& choices) const override {
    if (failed_) return "";  // response.failed ended the stream
    const json response = complete(choices[0].state->result(), items_);
    return event("response.completed", {{"response", response}});
  }

  json body(std::vector<Choice>& choices) const override {
    const CompletionOutput r = choices[0].state->result();
    const ChatDelta d = ChatOutput::split(ctx_.chat_output, r.text);
    json items = json::array();
    if (!d.reasoning.empty()) items.push_back(reasoning_item(responses_id("rs"), d.reasoning));
    if (!d.content.empty() || d.calls.empty())
      items.push_back(message_item(responses_id("msg"), d.content, "completed"));
    for (const ToolCall& call : d.calls) items.push_back(function_call_item(responses_id("fc"), call, "completed"));
    return complete(r, items);
  }

 private:
  const ResponsesContext& responses() const { return *request().responses; }

  json envelope(const char* status, json output, json usage) const {
    json r = {{"id", ctx_.id},
              {"object", "response"},
              {"created_at", created_},
              {"status", status},
              {"model", ctx_.model},
              {"output", std::move(output)},
              {"error", nullptr},
              {"incomplete_details", nullptr},
              {"usage", std::move(usage)},
              {"store", responses().store}};
    for (const auto& [key, value] : responses().echo.items()) r[key] = value;
    return r;
  }

  // The final response object; stored with its conversation when the request asked to be.
  json complete(const CompletionOutput& r, const json& items) const {
    const bool cut = r.finish_reason == FinishReason::kLength;
    const auto output_tokens = static_cast<int64_t>(r.token_ids.size());
    json usage = {{"input_tokens", ctx_.prompt_tokens[0]},
                  {"input_tokens_details", {{"cached_tokens", r.cached_tokens}}},
                  {"output_tokens", output_tokens},
                  {"output_tokens_details", {{"reasoning_tokens", 0}}},
                  {"total_tokens", ctx_.prompt_tokens[0] + output_tokens}};
    const bool aborted = r.finish_reason == FinishReason::kAbort;  // the server shut down under it
    json response = envelope(aborted ? "failed" : cut ? "incomplete" : "completed", items, std::move(usage));
    if (cut) response["incomplete_details"] = {{"reason", "max_output_tokens"}};
    if (aborted) response["error"] = {{"code", "server_error"}, {"message", "the request was aborted"}};
    if (responses().store && responses().store_to && !aborted)
      responses().store_to->put(ctx_.id, {{"response", response}, {"input_items", responses().input_items}});
    return response;
  }

  std::string event(const char* type, json data) const {
    data["type"] = type;
    data["sequence_number"] = sequence_++;
    return "event: " + std::string(type) + "\n" + sse_event(data);
  }

  // Opens an item of `type` (closing another first); for a message, also its output_text part.
  std::string open_item(const char* type) const {
    if (open_ == type) return "";
    std::string events = close_item();
    open_ = type;
    open_id_ = responses_id(open_ == "message" ? "msg" : "rs");
    open_text_.clear();
    const json item =
        open_ == "message" ? json(message_item(open_id_, "", "in_progress")) : json(reasoning_item(open_id_, ""));
    json added = item;
    if (open_ == "message") added["content"] = json::array();
    events += event("response.output_item.added", {{"output_index", items_.size()}, {"item", added}});
    if (open_ == "message")
      events += event(
          "response.content_part.added",
          {{"item_id", open_id_}, {"output_index", items_.size()}, {"content_index", 0}, {"part", item["content"][0]}});
    return events;
  }

  std::string reasoning_delta(const std::string& text) const {
    std::string events = open_item("reasoning");
    open_text_ += text;
    return events +
           event("response.reasoning_text.delta",
                 {{"item_id", open_id_}, {"output_index", items_.size()}, {"content_index", 0}, {"delta", text}});
  }

  std::string text_delta(const std::string& text) const {
    std::string events = open_item("message");
    open_text_ += text;
    return events + event("response.output_text.delta", {{"item_id", open_id_},
                                                         {"output_index", items_.size()},
                                                         {"content_index", 0},
                                                         {"delta", text},
                                                         {"logprobs", json::array()}});
  }

  std::string close_item() const {
    if (open_.empty()) return "";
    if (open_ == "function_call") return close_call();
    std::string events;
    const json where = {{"item_id", open_id_}, {"output_index", items_.size()}, {"content_index", 0}};
    json item;
    if (open_ == "message") {
      item = message_item(open_id_, open_text_, "completed");
      json done = where;
      done["text"] = open_text_;
      done["logprobs"] = json::array();
      events += event("response.output_text.done", done);
      done = where;
      done["part"] = item["content"][0];
      events += event("response.content_part.done", done);
    } else {
      item = reasoning_item(open_id_, open_text_);
      json done = where;
      done["text"] = open_text_;
      events += event("response.reasoning_text.done", done);
    }
    events += event("response.output_item.done", {{"output_index", items_.size()}, {"item", item}});
    items_.push_back(std::move(item));
    open_.clear();
    return events;
  }

  std::string close_call() const {
    open_call_.arguments = open_text_;
    const size_t index = items_.size();
    std::string events = event("response.function_call_arguments.done",
                               {{"item_id", open_id_}, {"output_index", index}, {"arguments", open_text_}});
    json item = function_call_item(open_id_, open_call_, "completed");
    events += event("response.output_item.done", {{"output_index", index}, {"item", item}});
    items_.push_back(std::move(item));
    open_.clear();
    return events;
  }

  // A call's start (its item added) and its arguments' text as function_call_arguments deltas; close_item() ends it.
  std::string call_fragment(const CallFragment& f) const {
    std::string events;
    if (!f.start && (open_ != "function_call" || f.index != open_call_index_)) return events;  // not the open call's
    if (f.start) {
      events += close_item();
      open_ = "function_call";
      open_call_index_ = f.index;
      open_id_ = responses_id("fc");
      open_call_ = ToolCall{f.id, f.name, ""};
      open_text_.clear();
      events +=
          event("response.output_item.added",
                {{"output_index", items_.size()}, {"item", function_call_item(open_id_, open_call_, "in_progress")}});
    }
    if (f.arguments.empty()) return events;
    open_text_ += f.arguments;
    return events + event("response.function_call_arguments.delta",
                          {{"item_id", open_id_}, {"output_index", items_.size()}, {"delta", f.arguments}});
  }

  int64_t created_;
  // Stream state (a response has one choice).
  mutable ChatOutput output_{ctx_.chat_output};
  mutable int64_t sequence_ = 0;
  mutable json items_ = json::array();  // the items closed so far
  mutable std::string open_;            // the open item's type: "message", "reasoning" or ""
  mutable std::string open_id_;
  mutable std::string open_text_;
  mutable bool failed_ = false;  // response.failed was sent
  mutable ToolCall open_call_;   // the open function call's id and name
  mutable size_t open_call_index_ = 0;
};

}  // namespace

std::unique_ptr<ResponseWriter> make_responses_writer(ResponseContext context) {
  return std::unique_ptr<ResponseWriter>(new ResponsesWriter(std::move(context)));
}

}  // namespace minfer::server
