#include "server/generation_handler.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <random>

#include "base/error.h"
#include "server/api_error.h"
#include "server/output_channel.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace minfer::server {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }
std::string sse_event(const json& j) { return "data: " + dump(j) + "\n\n"; }

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// One choice of the response: one engine request.
struct Choice {
  size_t prompt_index = 0;
  RequestId id = 0;
  std::string text;
  std::vector<int32_t> token_ids;
  std::vector<TokenLogprobs> logprobs;
  FinishReason finish = FinishReason::kNone;
  std::string stop_reason;
  std::string error;
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  int64_t cached_tokens = 0;
  bool finished = false;
  bool has_first_token = false;
  Clock::time_point first_token;
  size_t text_offset = 0;  // completions logprobs: where the next token's text starts
};

// Aborts the engine requests still running when the handler leaves early (client gone, write failed).
struct AbortUnfinished {
  AsyncEngine& engine;
  std::vector<Choice>& choices;
  ~AbortUnfinished() {
    for (const Choice& c : choices)
      if (c.id != 0 && !c.finished) engine.abort(c.id);
  }
};

json finish_reason_json(const Choice& c) {
  if (!c.finished) return nullptr;
  return finish_reason_name(c.finish);
}

json stop_reason_json(const Choice& c) {
  if (c.stop_reason.empty()) return nullptr;
  return c.stop_reason;
}

// Log-probabilities cannot be -inf in JSON; vLLM clamps the same way.
double finite_logprob(float lp) { return std::isfinite(lp) ? static_cast<double>(lp) : -9999.0; }

class TokenText {
 public:
  explicit TokenText(const Tokenizer* tokenizer) : tok_(tokenizer) {}

  std::string raw(int32_t id) const {
    if (!tok_ || id < 0 || id >= tok_->vocab_size()) return "";
    return tok_->is_special(id) ? std::string(tok_->token_text(id)) : tok_->token_bytes(id);
  }
  std::string text(int32_t id) const {
    if (!tok_ || id < 0 || id >= tok_->vocab_size()) return fmt::format("token_id:{}", id);
    return unicode::sanitize(raw(id));
  }
  json bytes(int32_t id) const {
    json out = json::array();
    for (unsigned char b : raw(id)) out.push_back(static_cast<int>(b));
    return out;
  }

 private:
  const Tokenizer* tok_;
};

// OpenAI chat logprobs: {"content": [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}]}.
json chat_logprobs(const TokenText& tt, const std::vector<int32_t>& ids, const std::vector<TokenLogprobs>& lps,
                   size_t begin) {
  json content = json::array();
  for (size_t i = begin; i < ids.size() && i < lps.size(); ++i) {
    json top = json::array();
    for (const auto& [id, lp] : lps[i].top)
      top.push_back({{"token", tt.text(id)}, {"logprob", finite_logprob(lp)}, {"bytes", tt.bytes(id)}});
    content.push_back({{"token", tt.text(ids[i])},
                       {"logprob", finite_logprob(lps[i].logprob)},
                       {"bytes", tt.bytes(ids[i])},
                       {"top_logprobs", std::move(top)}});
  }
  return {{"content", std::move(content)}};
}

// Legacy completions logprobs: parallel arrays tokens / token_logprobs / top_logprobs / text_offset.
json completion_logprobs(const TokenText& tt, Choice& c, size_t begin) {
  json tokens = json::array(), token_lps = json::array(), tops = json::array(), offsets = json::array();
  for (size_t i = begin; i < c.token_ids.size() && i < c.logprobs.size(); ++i) {
    const std::string text = tt.text(c.token_ids[i]);
    tokens.push_back(text);
    token_lps.push_back(finite_logprob(c.logprobs[i].logprob));
    json top = json::object();
    for (const auto& [id, lp] : c.logprobs[i].top) top[tt.text(id)] = finite_logprob(lp);
    top[text] = finite_logprob(c.logprobs[i].logprob);  // the sampled token is always among them (vLLM, OpenAI)
    tops.push_back(std::move(top));
    offsets.push_back(c.text_offset);
    c.text_offset += text.size();
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(token_lps)},
          {"top_logprobs", std::move(tops)},
          {"text_offset", std::move(offsets)}};
}

}  // namespace

GenerationHandler::GenerationHandler(AsyncEngine& engine, const ChatPrompt& chat, Metrics& metrics,
                                     std::string model_name)
    : engine_(engine),
      chat_(chat),
      metrics_(metrics),
      model_name_(std::move(model_name)),
      created_(std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                   .count()) {}

std::string GenerationHandler::next_id(RouteKind kind) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  const char* prefix = kind == RouteKind::kChat ? "chatcmpl" : kind == RouteKind::kCompletion ? "cmpl" : "gen";
  return fmt::format("{}-{:012x}{:04x}", prefix, rng() & 0xffffffffffffull, counter_++ & 0xffff);
}

std::vector<int32_t> GenerationHandler::tokenize(const GenerationRequest& request, const PromptInput& prompt) const {
  if (!prompt.is_text) return prompt.ids;
  const Tokenizer* tok = engine_.tokenizer();
  const char* field = request.kind == RouteKind::kChat       ? "messages"
                      : request.kind == RouteKind::kGenerate ? "text"
                                                             : "prompt";
  if (!tok) bad_request(field, "this model has no tokenizer: send the prompt as token ids");
  // A chat template writes BOS itself where the model wants it (tokenizer/chat_template.h).
  return tok->encode(prompt.text, /*add_special=*/request.kind != RouteKind::kChat);
}

asio::awaitable<void> GenerationHandler::handle(GenerationRequest request, Connection& connection) {
  const Clock::time_point arrival = Clock::now();
  if (!request.model.empty() && request.model != model_name_)
    throw ApiError(404,
                   fmt::format("the model '{}' does not exist; this server serves '{}'", request.model, model_name_),
                   "model", "model_not_found");
  if (request.kind == RouteKind::kChat) request.prompts = {{true, chat_.render(request.messages), {}}};

  // Tokenize and check every prompt before anything is submitted.
  const int64_t max_model_len = engine_.config().max_model_len;
  const char* prompt_field = request.kind == RouteKind::kChat       ? "messages"
                             : request.kind == RouteKind::kGenerate ? "text"
                                                                    : "prompt";
  const char* max_tokens_field = request.kind == RouteKind::kGenerate ? "max_new_tokens" : "max_tokens";
  std::vector<std::vector<int32_t>> prompt_ids;
  for (const PromptInput& p : request.prompts) {
    std::vector<int32_t> ids = tokenize(request, p);
    const int64_t len = static_cast<int64_t>(ids.size());
    if (len == 0) bad_request(prompt_field, "the prompt is empty (it encodes to no tokens)");
    if (len >= max_model_len)
      throw ApiError(400,
                     fmt::format("this model's maximum context length is {} tokens, but the prompt has {} tokens "
                                 "(prompt and output must fit together)",
                                 max_model_len, len),
                     prompt_field, "context_length_exceeded");
    const int64_t room = max_model_len - len;
    if (request.max_tokens_given && request.params.max_tokens > room)
      throw ApiError(400,
                     fmt::format("'{}' is {}, but the prompt has {} tokens and this model's maximum context length is "
                                 "{}: at most {} tokens can be generated",
                                 max_tokens_field, request.params.max_tokens, len, max_model_len, room),
                     max_tokens_field, "context_length_exceeded");
    prompt_ids.push_back(std::move(ids));
  }
  request.params.logprobs = request.logprobs;
  const bool chat = request.kind == RouteKind::kChat;

  const size_t n = static_cast<size_t>(request.n);
  std::vector<Choice> choices(prompt_ids.size() * n);
  AbortUnfinished abort_guard{engine_, choices};
  auto channel = std::make_shared<OutputChannel>(connection.executor());
  for (size_t p = 0; p < prompt_ids.size(); ++p) {
    for (size_t j = 0; j < n; ++j) {
      const size_t index = p * n + j;
      Choice& c = choices[index];
      c.prompt_index = p;
      SamplingParams params = request.params;
      if (!request.max_tokens_given) {
        // The route's default, or for chat all the room left (as vLLM), capped to what fits.
        const int64_t room = max_model_len - static_cast<int64_t>(prompt_ids[p].size());
        params.max_tokens = static_cast<int32_t>(chat ? room : std::min<int64_t>(params.max_tokens, room));
      }
      if (params.seed && j > 0) params.seed = *params.seed + j;  // n samples, each repeatable, not all equal
      try {
        c.id = engine_.add_request(prompt_ids[p], params,
                                   [channel, index](const RequestOutput& o) { channel->push(index, o); });
      } catch (const Error& e) {
        const std::string what = e.what();
        if (what.find("shut down") != std::string::npos) throw ApiError(503, what);
        throw ApiError(400, what);
      }
    }
  }
  connection.watch_peer([channel] { channel->wake(); });

  const std::string id = next_id(request.kind);
  const TokenText token_text(engine_.tokenizer());
  const char* chunk_object = chat ? "chat.completion.chunk" : "text_completion";
  auto echo_text = [&](size_t p) -> std::string {
    if (!request.echo) return "";
    const PromptInput& in = request.prompts[p];
    if (in.is_text) return in.text;
    const Tokenizer* tok = engine_.tokenizer();
    return tok ? tok->decode(in.ids, /*skip_special=*/true) : "";
  };
  auto usage = [&]() {
    int64_t prompt_tokens = 0, completion_tokens = 0, cached = 0;
    for (size_t i = 0; i < choices.size(); ++i) {
      completion_tokens += choices[i].output_tokens;
      if (i % n == 0) {  // a prompt counts once, whatever n is
        prompt_tokens += static_cast<int64_t>(prompt_ids[choices[i].prompt_index].size());
        cached += choices[i].cached_tokens;
      }
    }
    return json{{"prompt_tokens", prompt_tokens},
                {"completion_tokens", completion_tokens},
                {"total_tokens", prompt_tokens + completion_tokens},
                {"prompt_tokens_details", {{"cached_tokens", cached}}}};
  };
  auto chunk = [&](json choice_list) {
    json j = {{"id", id},
              {"object", chunk_object},
              {"created", created_},
              {"model", model_name_},
              {"choices", std::move(choice_list)}};
    if (request.include_usage) j["usage"] = nullptr;
    return j;
  };

  if (request.stream) {
    if (!co_await connection.start_stream("text/event-stream")) co_return;
    std::string opening;
    for (size_t i = 0; i < choices.size(); ++i) {
      if (chat) {
        opening += sse_event(chunk(json::array({{{"index", i},
                                                 {"delta", {{"role", "assistant"}, {"content", ""}}},
                                                 {"logprobs", nullptr},
                                                 {"finish_reason", nullptr}}})));
      } else if (request.kind == RouteKind::kCompletion && request.echo) {
        opening += sse_event(chunk(json::array({{{"index", i},
                                                 {"text", echo_text(choices[i].prompt_index)},
                                                 {"logprobs", nullptr},
                                                 {"finish_reason", nullptr}}})));
      }
    }
    if (!opening.empty() && !co_await connection.send_chunk(opening)) {
      metrics_.record_disconnect();
      co_return;
    }
  } else {
    for (Choice& c : choices) c.text = echo_text(c.prompt_index);
  }

  size_t unfinished = choices.size();
  while (unfinished > 0) {
    std::vector<ChoiceOutput> batch = co_await channel->wait();
    if (connection.peer_gone()) {
      metrics_.record_disconnect();
      co_return;  // abort_guard aborts the engine requests
    }
    std::string events;
    for (ChoiceOutput& co : batch) {
      Choice& c = choices[co.choice];
      RequestOutput& o = co.output;
      if (c.finished) continue;
      const size_t first_new = c.token_ids.size();
      if (!o.new_token_ids.empty() && !c.has_first_token) {
        c.has_first_token = true;
        c.first_token = Clock::now();
      }
      c.token_ids.insert(c.token_ids.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      for (TokenLogprobs& lp : o.logprobs) c.logprobs.push_back(std::move(lp));
      c.prompt_tokens = o.prompt_tokens;
      c.output_tokens = o.output_tokens;
      c.cached_tokens = o.cached_tokens;
      if (o.finished) {
        c.finished = true;
        c.finish = o.finish_reason;
        c.stop_reason = o.stop_reason;
        c.error = o.error;
        --unfinished;
        const Clock::time_point now = Clock::now();
        metrics_.record_generation({c.has_first_token ? seconds(c.first_token - arrival) : -1.0, seconds(now - arrival),
                                    c.prompt_tokens, c.output_tokens});
      }
      if (!request.stream) {
        c.text += o.text_delta;
        continue;
      }
      const bool want_logprobs = request.logprobs >= 0 && first_new < c.token_ids.size();
      if (o.text_delta.empty() && !o.finished && !want_logprobs) continue;
      if (!c.error.empty()) {
        events += sse_event(ApiError(500, c.error).to_json());
        continue;
      }
      if (request.kind == RouteKind::kGenerate) {
        events += sse_event({{"index", co.choice}, {"output", o.text_delta}, {"finish_reason", finish_reason_json(c)}});
        continue;
      }
      json choice = {{"index", co.choice}};
      if (chat) {
        choice["delta"] = o.text_delta.empty() ? json::object() : json{{"content", o.text_delta}};
        choice["logprobs"] =
            want_logprobs ? chat_logprobs(token_text, c.token_ids, c.logprobs, first_new) : json(nullptr);
      } else {
        choice["text"] = o.text_delta;
        choice["logprobs"] = want_logprobs ? completion_logprobs(token_text, c, first_new) : json(nullptr);
      }
      choice["finish_reason"] = finish_reason_json(c);
      choice["stop_reason"] = stop_reason_json(c);
      events += sse_event(chunk(json::array({std::move(choice)})));
    }
    if (request.stream && !events.empty() && !co_await connection.send_chunk(events)) {
      metrics_.record_disconnect();
      co_return;
    }
  }

  if (request.stream) {
    std::string tail;
    if (request.include_usage && request.kind != RouteKind::kGenerate) {
      json u = chunk(json::array());
      u["usage"] = usage();
      tail += sse_event(u);
    }
    tail += "data: [DONE]\n\n";
    if (co_await connection.send_chunk(tail)) co_await connection.end_stream();
    co_return;
  }

  for (const Choice& c : choices) {
    if (!c.error.empty()) throw ApiError(500, fmt::format("the engine failed the request: {}", c.error));
    if (c.finish == FinishReason::kAbort) throw ApiError(503, "the request was aborted: the server is shutting down");
  }
  json body;
  if (request.kind == RouteKind::kGenerate) {
    body = {{"output", choices[0].text}, {"finish_reason", finish_reason_json(choices[0])}};
    if (choices.size() > 1) {
      body["outputs"] = json::array();
      for (const Choice& c : choices) body["outputs"].push_back(c.text);
    }
  } else {
    json list = json::array();
    for (size_t i = 0; i < choices.size(); ++i) {
      Choice& c = choices[i];
      json choice = {{"index", i}};
      if (chat) {
        choice["message"] = {{"role", "assistant"}, {"content", c.text}};
        choice["logprobs"] =
            request.logprobs >= 0 ? chat_logprobs(token_text, c.token_ids, c.logprobs, 0) : json(nullptr);
      } else {
        choice["text"] = c.text;
        choice["logprobs"] = request.logprobs >= 0 ? completion_logprobs(token_text, c, 0) : json(nullptr);
      }
      choice["finish_reason"] = finish_reason_json(c);
      choice["stop_reason"] = stop_reason_json(c);
      list.push_back(std::move(choice));
    }
    body = {{"id", id},
            {"object", chat ? "chat.completion" : "text_completion"},
            {"created", created_},
            {"model", model_name_},
            {"choices", std::move(list)},
            {"usage", usage()}};
  }
  co_await connection.send(http::status::ok, dump(body), "application/json");
}

}  // namespace minfer::server
