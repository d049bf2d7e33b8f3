#include "server/response_writer.h"

#include "server/anthropic_writer.h"
#include "server/responses_writer.h"

namespace minfer::server {
namespace {

json finish_reason_json(const RequestOutput& o) {
  if (!o.finished) return nullptr;
  return finish_reason_name(o.finish_reason);
}

json reason_json(FinishReason reason) {
  return reason == FinishReason::kNone ? json(nullptr) : finish_reason_name(reason);
}

json stop_reason_json(const std::string& stop) { return stop.empty() ? json(nullptr) : json(stop); }

// POST /generate: {"output", "finish_reason"} (and "outputs" for several choices); events of the same shape.
class GenerateWriter : public ResponseWriter {
 public:
  using ResponseWriter::ResponseWriter;

  std::string delta(size_t index, Choice&, const RequestOutput& o) const override {
    if (!has_news(o)) return "";
    return sse_event({{"index", index}, {"output", o.text_delta}, {"finish_reason", finish_reason_json(o)}});
  }
  std::string finish(const std::vector<Choice>&) const override { return "data: [DONE]\n\n"; }
  json body(std::vector<Choice>& choices) const override {
    const CompletionOutput first = choices[0].state->result();
    json body = {{"output", first.text}, {"finish_reason", reason_json(first.finish_reason)}};
    if (choices.size() > 1) {
      body["outputs"] = json::array();
      for (const Choice& c : choices) body["outputs"].push_back(c.state->result().text);
    }
    return body;
  }
};

// What the two OpenAI routes share: the chunk and response envelopes, usage, the stream's tail.
class OpenAiWriter : public ResponseWriter {
 public:
  using ResponseWriter::ResponseWriter;

  std::string delta(size_t index, Choice& c, const RequestOutput& o) const override {
    if (!has_news(o)) return "";
    json choice = delta_choice(index, c, o);
    choice["finish_reason"] = finish_reason_json(o);
    choice["stop_reason"] = stop_reason_json(o.finished ? o.stop_reason : "");
    add_token_ids(choice, c, o.new_token_ids);
    return sse_event(chunk(json::array({std::move(choice)})));
  }
  std::string finish(const std::vector<Choice>& choices) const override {
    std::string tail;
    if (request().include_usage) {
      json u = chunk(json::array());
      u["usage"] = usage(choices);
      tail += sse_event(u);
    }
    return tail + "data: [DONE]\n\n";
  }
  json body(std::vector<Choice>& choices) const override {
    json list = json::array();
    for (size_t i = 0; i < choices.size(); ++i) {
      const CompletionOutput r = choices[i].state->result();
      json choice = whole_choice(i, choices[i], r);
      if (!choice.contains("finish_reason")) choice["finish_reason"] = reason_json(r.finish_reason);
      choice["stop_reason"] = stop_reason_json(r.stop_reason);
      add_token_ids(choice, choices[i], r.token_ids);
      list.push_back(std::move(choice));
    }
    json body = {{"id", ctx_.id},       {"object", object()},         {"created", ctx_.created},
                 {"model", ctx_.model}, {"choices", std::move(list)}, {"usage", usage(choices)}};
    if (request().return_token_ids && request().kind == RouteKind::kChat) body["prompt_token_ids"] = ctx_.prompt_ids[0];
    return body;
  }

 protected:
  virtual const char* object() const = 0;
  virtual const char* chunk_object() const = 0;
  virtual json delta_choice(size_t index, Choice& c, const RequestOutput& o) const = 0;
  virtual json whole_choice(size_t index, Choice& c, const CompletionOutput& r) const = 0;

  bool want_logprobs(const RequestOutput& o) const { return request().logprobs >= 0 && !o.new_token_ids.empty(); }

  // return_token_ids: the choice's output ids (a stream's new ones), and for completions its prompt's ids (a stream's
  // first chunk of the choice); chat puts the prompt's at the top level (chunk(), body()).
  void add_token_ids(json& choice, Choice& c, const std::vector<int32_t>& ids) const {
    if (!request().return_token_ids) return;
    choice["token_ids"] = ids;
    if (request().kind == RouteKind::kCompletion && !c.prompt_ids_sent) {
      choice["prompt_token_ids"] = ctx_.prompt_ids[c.prompt_index];
      c.prompt_ids_sent = true;
    }
  }

  json chunk(json choice_list) const {
    json j = {{"id", ctx_.id},
              {"object", chunk_object()},
              {"created", ctx_.created},
              {"model", ctx_.model},
              {"choices", std::move(choice_list)}};
    if (request().include_usage) j["usage"] = nullptr;
    return j;
  }

  // A prompt counts once, whatever n is.
  json usage(const std::vector<Choice>& choices) const {
    const size_t n = static_cast<size_t>(request().n);
    int64_t prompt_tokens = 0, completion_tokens = 0, cached = 0;
    for (size_t i = 0; i < choices.size(); ++i) {
      const CompletionOutput r = choices[i].state->result();
      completion_tokens += static_cast<int64_t>(r.token_ids.size());
      if (i % n == 0) {
        prompt_tokens += ctx_.prompt_tokens[choices[i].prompt_index];
        cached += r.cached_tokens;
      }
    }
    return {{"prompt_tokens", prompt_tokens},
            {"completion_tokens", completion_tokens},
            {"total_tokens", prompt_tokens + completion_tokens},
            {"prompt_tokens_details", {{"cached_tokens", cached}}}};
  }
};

class CompletionWriter : public OpenAiWriter {
 public:
  using OpenAiWriter::OpenAiWriter;

  // With echo, each choice's stream opens with its prompt.
  std::string begin(const std::vector<Choice>& choices) const override {
    if (!request().echo) return "";
    std::string events;
    for (size_t i = 0; i < choices.size(); ++i)
      events += sse_event(chunk(json::array({{{"index", i},
                                              {"text", ctx_.echo[choices[i].prompt_index]},
                                              {"logprobs", nullptr},
                                              {"finish_reason", nullptr}}})));
    return events;
  }

 protected:
  const char* object() const override { return "text_completion"; }
  const char* chunk_object() const override { return "text_completion"; }
  json delta_choice(size_t index, Choice& c, const RequestOutput& o) const override {
    return {{"index", index},
            {"text", o.text_delta},
            {"logprobs", want_logprobs(o) ? tokens_.completion_logprobs(o.new_token_ids, o.logprobs, c.text_offset)
                                          : json(nullptr)}};
  }
  json whole_choice(size_t index, Choice& c, const CompletionOutput& r) const override {
    return {{"index", index},
            {"text", ctx_.echo[c.prompt_index] + r.text},
            {"logprobs", request().logprobs >= 0 ? tokens_.completion_logprobs(r.token_ids, r.logprobs, c.text_offset)
                                                 : json(nullptr)}};
  }
};

json tool_calls_json(const std::vector<ToolCall>& calls, bool streamed) {
  json list = json::array();
  for (size_t k = 0; k < calls.size(); ++k) {
    json call = json::object();
    if (streamed) call["index"] = k;  // chunks say which call a fragment extends
    call["id"] = calls[k].id;
    call["type"] = "function";
    call["function"] = {{"name", calls[k].name}, {"arguments", calls[k].arguments}};
    list.push_back(std::move(call));
  }
  return list;
}

// Streamed calls as chat chunks carry them: a call's first fragment with its id, type and name.
json call_fragments_json(const std::vector<CallFragment>& fragments) {
  json list = json::array();
  for (const CallFragment& f : fragments) {
    json call = {{"index", f.index}};
    if (f.start) {
      call["id"] = f.id;
      call["type"] = "function";
      call["function"] = {{"name", f.name}, {"arguments", f.arguments}};
    } else {
      call["function"] = {{"arguments", f.arguments}};
    }
    list.push_back(std::move(call));
  }
  return list;
}

// Chat: the output split into reasoning_content, content and tool_calls (chat_output.h), one ChatOutput per
// choice while streaming.
class ChatWriter : public OpenAiWriter {
 public:
  using OpenAiWriter::OpenAiWriter;

  // Each choice's stream opens with the assistant's role.
  std::string begin(const std::vector<Choice>& choices) const override {
    std::string events;
    for (size_t i = 0; i < choices.size(); ++i) {
      json first = chunk(json::array({{{"index", i},
                                       {"delta", {{"role", "assistant"}, {"content", ctx_.echo[0]}}},
                                       {"logprobs", nullptr},
                                       {"finish_reason", nullptr}}}));
      if (request().return_token_ids && i == 0) first["prompt_token_ids"] = ctx_.prompt_ids[0];
      events += sse_event(first);
    }
    return events;
  }

  std::string delta(size_t index, Choice& c, const RequestOutput& o) const override {
    ChatDelta d = output(index).next(o.text_delta, o.finished);
    const bool ids = request().return_token_ids && !o.new_token_ids.empty();
    if (d.empty() && !o.finished && !want_logprobs(o) && !ids) return "";
    json delta = json::object();
    if (!d.reasoning.empty()) delta["reasoning_content"] = d.reasoning;
    if (!d.content.empty()) delta["content"] = d.content;
    if (!d.fragments.empty())
      delta["tool_calls"] = call_fragments_json(d.fragments);
    else if (!d.calls.empty() && !d.calls_streamed)
      delta["tool_calls"] = tool_calls_json(d.calls, /*streamed=*/true);
    json choice = {{"index", index},
                   {"delta", std::move(delta)},
                   {"logprobs", want_logprobs(o) ? tokens_.chat_logprobs(o.new_token_ids, o.logprobs) : json(nullptr)},
                   {"finish_reason", !o.finished       ? json(nullptr)
                                     : d.calls.empty() ? finish_reason_json(o)
                                                       : json("tool_calls")},
                   {"stop_reason", stop_reason_json(o.finished ? o.stop_reason : "")}};
    add_token_ids(choice, c, o.new_token_ids);
    return sse_event(chunk(json::array({std::move(choice)})));
  }

 protected:
  const char* object() const override { return "chat.completion"; }
  const char* chunk_object() const override { return "chat.completion.chunk"; }
  json delta_choice(size_t, Choice&, const RequestOutput&) const override { return json::object(); }  // delta()
  json whole_choice(size_t index, Choice&, const CompletionOutput& r) const override {
    ChatDelta d = ChatOutput::split(ctx_.chat_output, r.text);
    d.content.insert(0, ctx_.echo[0]);  // chat echo ("" without)
    json message = {{"role", "assistant"},
                    {"content", d.content.empty() && !d.calls.empty() ? json(nullptr) : json(d.content)}};
    if (!d.reasoning.empty()) message["reasoning_content"] = d.reasoning;
    if (!d.calls.empty()) message["tool_calls"] = tool_calls_json(d.calls, /*streamed=*/false);
    json choice = {
        {"index", index},
        {"message", std::move(message)},
        {"logprobs", request().logprobs >= 0 ? tokens_.chat_logprobs(r.token_ids, r.logprobs) : json(nullptr)}};
    if (!d.calls.empty()) choice["finish_reason"] = "tool_calls";
    return choice;
  }

 private:
  ChatOutput& output(size_t index) const {
    if (outputs_.size() <= index) outputs_.resize(index + 1);
    if (!outputs_[index]) outputs_[index] = std::make_unique<ChatOutput>(ctx_.chat_output);
    return *outputs_[index];
  }
  mutable std::vector<std::unique_ptr<ChatOutput>> outputs_;
};

}  // namespace

std::string dump_json(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }
std::string sse_event(const json& j) { return "data: " + dump_json(j) + "\n\n"; }

std::string ResponseWriter::error_event(const ApiError& error) const { return sse_event(error.to_json()); }

bool ResponseWriter::has_news(const RequestOutput& o) const {
  return !o.text_delta.empty() || o.finished ||
         ((request().logprobs >= 0 || request().return_token_ids) && !o.new_token_ids.empty());
}

std::unique_ptr<ResponseWriter> ResponseWriter::make(ResponseContext context) {
  switch (context.request->kind) {
    case RouteKind::kGenerate: return std::unique_ptr<ResponseWriter>(new GenerateWriter(std::move(context)));
    case RouteKind::kCompletion: return std::unique_ptr<ResponseWriter>(new CompletionWriter(std::move(context)));
    case RouteKind::kChat: return std::unique_ptr<ResponseWriter>(new ChatWriter(std::move(context)));
    case RouteKind::kMessages: return make_messages_writer(std::move(context));
    case RouteKind::kResponses: return make_responses_writer(std::move(context));
  }
  return nullptr;
}

}  // namespace minfer::server
