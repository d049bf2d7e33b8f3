#include "server/generation_handler.h"

#include <fmt/format.h>

#include <random>

#include "server/api_error.h"
#include "server/responses_protocol.h"

namespace minfer::server {
namespace {

double seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

const char* prompt_field(RouteKind kind) {
  return is_chat(kind) ? "messages" : kind == RouteKind::kGenerate ? "text" : "prompt";
}

// The model's sampling defaults for the fields the client left out.
void apply_model_defaults(const SamplingDefaults& d, const SamplingGiven& given, SamplingParams& p) {
  if (!given.temperature && d.temperature) p.temperature = *d.temperature;
  if (!given.top_p && d.top_p) p.top_p = *d.top_p;
  if (!given.top_k && d.top_k) p.top_k = *d.top_k;
  if (!given.temperature && d.min_p) p.min_p = *d.min_p;
  if (!given.temperature && d.repetition_penalty) p.repetition_penalty = *d.repetition_penalty;
}

// The prompt and its max_tokens must fit in max_model_len together.
void check_context(const GenerationRequest& request, int64_t prompt_len, int64_t max_model_len) {
  const char* field = prompt_field(request.kind);
  if (prompt_len == 0) bad_request(field, "the prompt is empty (it encodes to no tokens)");
  if (prompt_len >= max_model_len)
    throw ApiError(400,
                   fmt::format("this model's maximum context length is {} tokens, but the prompt has {} tokens "
                               "(prompt and output must fit together)",
                               max_model_len, prompt_len),
                   field, "context_length_exceeded");
  const int64_t room = max_model_len - prompt_len;
  const char* max_tokens_field = request.kind == RouteKind::kGenerate ? "max_new_tokens" : "max_tokens";
  if (request.max_tokens_given && request.params.max_tokens > room)
    throw ApiError(400,
                   fmt::format("'{}' is {}, but the prompt has {} tokens and this model's maximum context length is "
                               "{}: at most {} tokens can be generated",
                               max_tokens_field, request.params.max_tokens, prompt_len, max_model_len, room),
                   max_tokens_field, "context_length_exceeded");
}

}  // namespace

// A request's time limit: when it passes, the waiting loop is woken and ends the request.
class GenerationHandler::Deadline {
 public:
  Deadline(const asio::any_io_executor& strand, double seconds, std::shared_ptr<StrandWakeup> wakeup)
      : seconds_(seconds), timer_(strand), passed_(std::make_shared<bool>(false)) {
    if (seconds <= 0) return;
    timer_.expires_after(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds)));
    timer_.async_wait([passed = passed_, wakeup = std::move(wakeup)](const boost::system::error_code& ec) {
      if (ec) return;  // cancelled: the request ended first
      *passed = true;
      wakeup->wake();
    });
  }
  bool passed() const { return *passed_; }
  ApiError error() const {
    return ApiError(408, fmt::format("the request ran past its timeout of {} s and was aborted", seconds_), "timeout",
                    "timeout");
  }

 private:
  double seconds_;
  asio::steady_timer timer_;
  std::shared_ptr<bool> passed_;
};

// A stream's keep-alive: every `seconds` it wakes the waiting loop, which then sends the writer's keep-alive event
// (Anthropic's ping) while the request waits in the queue or a long prompt is prefilled.
class GenerationHandler::Heartbeat {
 public:
  Heartbeat(const asio::any_io_executor& strand, double seconds, std::shared_ptr<StrandWakeup> wakeup)
      : seconds_(seconds), timer_(strand), due_(std::make_shared<bool>(false)), wakeup_(std::move(wakeup)) {
    arm();
  }
  // Whether a beat came since the last call (the next one is then armed).
  bool take() {
    if (!*due_) return false;
    *due_ = false;
    arm();
    return true;
  }

 private:
  void arm() {
    if (seconds_ <= 0) return;
    timer_.expires_after(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds_)));
    timer_.async_wait([due = due_, wakeup = wakeup_](const boost::system::error_code& ec) {
      if (ec) return;  // cancelled: the stream ended
      *due = true;
      wakeup->wake();
    });
  }

  double seconds_;
  asio::steady_timer timer_;
  std::shared_ptr<bool> due_;
  std::shared_ptr<StrandWakeup> wakeup_;
};

GenerationHandler::GenerationHandler(AsyncEngine& engine, const ChatPrompt& chat, Metrics& metrics,
                                     std::string model_name, double request_timeout_s, double stream_ping_s)
    : engine_(engine),
      chat_(chat),
      metrics_(metrics),
      model_name_(std::move(model_name)),
      created_(std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                   .count()),
      request_timeout_s_(request_timeout_s),
      stream_ping_s_(stream_ping_s),
      sampling_defaults_(engine.sampling_defaults()) {}

std::string GenerationHandler::next_id(RouteKind kind) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  if (kind == RouteKind::kMessages)  // Anthropic's ids: msg_ and 24 characters
    return fmt::format("msg_{:020x}{:04x}", rng() & 0xffffffffffffffffull, counter_++ & 0xffff);
  if (kind == RouteKind::kResponses) return responses_id("resp");
  const char* prefix = kind == RouteKind::kChat ? "chatcmpl" : kind == RouteKind::kCompletion ? "cmpl" : "gen";
  return fmt::format("{}-{:012x}{:04x}", prefix, rng() & 0xffffffffffffull, counter_++ & 0xffff);
}

asio::awaitable<void> GenerationHandler::handle(GenerationRequest request, Connection& connection) {
  const Clock::time_point arrival = Clock::now();
  const std::vector<std::vector<int32_t>> prompts = prepare(request);
  auto wakeup = std::make_shared<StrandWakeup>(connection.executor());
  std::vector<Choice> choices = submit(request, prompts, wakeup);
  AbortUnfinished abort_guard{engine_, choices};
  connection.watch_peer([wakeup] { wakeup->wake(); });
  const std::unique_ptr<ResponseWriter> writer = ResponseWriter::make(response_context(request, prompts));
  const double limit = request.timeout_s > 0 && request_timeout_s_ > 0
                           ? std::min(request.timeout_s, request_timeout_s_)
                           : std::max(request.timeout_s, request_timeout_s_);
  const Deadline deadline(connection.executor(), limit, wakeup);
  if (request.stream)
    co_await stream(*writer, choices, *wakeup, connection, arrival, deadline);
  else
    co_await answer_whole(*writer, choices, *wakeup, connection, arrival, deadline);
}

// Everything that can refuse the request happens here, before anything is submitted.
std::vector<std::vector<int32_t>> GenerationHandler::prepare(GenerationRequest& request) const {
  check_model(request);
  if (is_chat(request.kind)) {
    if (!request.chat.images.empty() && !engine_.takes_images()) {
      const ImageRef& first = request.chat.images.front();
      bad_request(first.part + ".type", "'{}' is an image, and the model '{}' takes no images (it has no vision tower)",
                  first.part, model_name_);
    }
    request.prompts = {{true, chat_.render(request.chat), {}}};
    chat_.decode_for_parsing(request.params);
    for (const ImageRef& image : request.chat.images)
      request.image_files.push_back(fetch_image(image, allowed_local_media_path_));
  }
  if (request.model_defaults) apply_model_defaults(sampling_defaults_, *request.model_defaults, request.params);
  request.params.logprobs = request.logprobs;
  std::vector<std::vector<int32_t>> prompts;
  for (const PromptInput& p : request.prompts) {
    prompts.push_back(tokenize(request, p));
    check_context(request, static_cast<int64_t>(prompts.back().size()), engine_.config().max_model_len);
  }
  return prompts;
}

void GenerationHandler::check_model(const GenerationRequest& request) const {
  if (!request.model.empty() && request.model != model_name_)
    throw ApiError(404,
                   fmt::format("the model '{}' does not exist; this server serves '{}'", request.model, model_name_),
                   "model", "model_not_found");
}

int64_t GenerationHandler::count_tokens(GenerationRequest request) const {
  check_model(request);
  request.prompts = {{true, chat_.render(request.chat), {}}};
  return static_cast<int64_t>(tokenize(request, request.prompts[0]).size());
}

std::vector<int32_t> GenerationHandler::tokenize(const GenerationRequest& request, const PromptInput& prompt) const {
  if (!prompt.is_text) return prompt.ids;
  const Tokenizer* tok = engine_.tokenizer();
  if (!tok) bad_request(prompt_field(request.kind), "this model has no tokenizer: send the prompt as token ids");
  // A chat template writes BOS itself where the model wants it (tokenizer/chat_template.h).
  return tok->encode(prompt.text, /*add_special=*/!is_chat(request.kind));
}

std::vector<Choice> GenerationHandler::submit(const GenerationRequest& request,
                                              const std::vector<std::vector<int32_t>>& prompts,
                                              const std::shared_ptr<StrandWakeup>& wakeup) {
  const size_t n = static_cast<size_t>(request.n);
  const int64_t max_model_len = engine_.config().max_model_len;
  std::vector<Choice> choices;
  AbortUnfinished abort_on_error{engine_, choices};  // a refused choice leaves none of the others running
  for (size_t p = 0; p < prompts.size(); ++p) {
    for (size_t j = 0; j < n; ++j) {
      SamplingParams params = request.params;
      if (!request.max_tokens_given) {
        // The route's default, or for chat all the room left (as vLLM), capped to what fits.
        const int64_t room = max_model_len - static_cast<int64_t>(prompts[p].size());
        params.max_tokens =
            static_cast<int32_t>(is_chat(request.kind) ? room : std::min<int64_t>(params.max_tokens, room));
      }
      if (params.seed && j > 0) params.seed = *params.seed + j;  // n samples, each repeatable, not all equal
      try {
        RequestOptions options{
            .stream = request.stream, .on_update = [wakeup] { wakeup->notify(); }, .images = request.image_files};
        choices.push_back({p, engine_.add_request(prompts[p], params, std::move(options))});
      } catch (const Error& e) {
        // The engine compiles the grammar: its errors name the field the grammar came from.
        const bool grammar =
            !request.structured_field.empty() && std::string_view(e.what()).starts_with("structured outputs");
        throw api_error(e, grammar ? request.structured_field.c_str() : prompt_field(request.kind));
      }
    }
  }
  std::vector<Choice> out = std::move(choices);
  choices.clear();
  return out;
}

ResponseContext GenerationHandler::response_context(const GenerationRequest& request,
                                                    const std::vector<std::vector<int32_t>>& prompts) {
  ResponseContext ctx{&request, next_id(request.kind), created_, model_name_, engine_.tokenizer(), {}, {}, {}};
  if (is_chat(request.kind))
    ctx.chat_output = chat_.output_options(request.chat, request.prompts[0].text, request.stream);
  for (size_t p = 0; p < prompts.size(); ++p) {
    ctx.prompt_tokens.push_back(static_cast<int64_t>(prompts[p].size()));
    if (request.return_token_ids) ctx.prompt_ids.push_back(prompts[p]);
    const PromptInput& in = request.prompts[p];
    std::string echo;
    if (request.echo && is_chat(request.kind)) {
      // vLLM's chat echo: the last message's content, when it is the assistant's (the reply continues it).
      const json& last = request.chat.messages.back();
      if (last["role"] == "assistant" && last["content"].is_string()) echo = last["content"].get<std::string>();
    } else if (request.echo) {
      echo = in.is_text ? in.text : ctx.tokenizer ? ctx.tokenizer->decode(in.ids, true) : "";
    }
    ctx.echo.push_back(std::move(echo));
  }
  return ctx;
}

void GenerationHandler::record_finished(const Choice& c, Clock::time_point arrival) {
  const RequestState& s = *c.state;
  const auto first = s.first_token_time();
  metrics_.record_generation({first ? seconds(*first - arrival) : -1.0,
                              seconds(s.finish_time().value_or(Clock::now()) - arrival),
                              static_cast<int64_t>(s.prompt_token_ids().size()), s.output_tokens(),
                              finish_reason_name(s.result().finish_reason)});
}

asio::awaitable<void> GenerationHandler::stream(const ResponseWriter& writer, std::vector<Choice>& choices,
                                                StrandWakeup& wakeup, Connection& connection, Clock::time_point arrival,
                                                const Deadline& deadline) {
  if (!co_await connection.start_stream("text/event-stream")) co_return;
  Heartbeat heartbeat(connection.executor(), writer.keepalive().empty() ? 0 : stream_ping_s_,
                      wakeup.shared_from_this());
  std::string events = writer.begin(choices);
  while (true) {
    if (!events.empty() && !co_await connection.send_chunk(events)) break;
    if (all_done(choices)) {
      if (co_await connection.send_chunk(writer.finish(choices))) co_await connection.end_stream();
      co_return;
    }
    co_await wakeup.wait();
    if (connection.peer_gone()) break;
    if (deadline.passed()) {  // the abort guard in handle() aborts the engine requests
      if (co_await connection.send_chunk(writer.error_event(deadline.error()))) co_await connection.end_stream();
      co_return;
    }
    events = heartbeat.take() ? writer.keepalive() : "";
    for (size_t i = 0; i < choices.size(); ++i) {
      for (const RequestOutput& o : choices[i].state->take()) {
        if (o.finished) record_finished(choices[i], arrival);
        events += o.error.empty() ? writer.delta(i, choices[i], o)
                                  : writer.error_event(ApiError(o.error_unavailable ? 503 : 500, o.error));
      }
    }
  }
  metrics_.record_disconnect();  // the abort guard in handle() aborts the engine requests
}

asio::awaitable<void> GenerationHandler::answer_whole(const ResponseWriter& writer, std::vector<Choice>& choices,
                                                      StrandWakeup& wakeup, Connection& connection,
                                                      Clock::time_point arrival, const Deadline& deadline) {
  while (!all_finished(choices)) {
    co_await wakeup.wait();
    if (connection.peer_gone()) {
      metrics_.record_disconnect();
      co_return;
    }
    if (deadline.passed()) throw deadline.error();  // the abort guard in handle() aborts the engine requests
  }
  for (const Choice& c : choices) {
    record_finished(c, arrival);
    const CompletionOutput r = c.state->result();
    if (!r.error.empty())
      throw ApiError(r.error_unavailable ? 503 : 500, fmt::format("the engine failed the request: {}", r.error));
    if (r.finish_reason == FinishReason::kAbort)
      throw ApiError(503, "the request was aborted: the server is shutting down");
  }
  co_await connection.send(http::status::ok, dump_json(writer.body(choices)), "application/json");
}

}  // namespace minfer::server
