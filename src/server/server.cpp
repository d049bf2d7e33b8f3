#include "server/server.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

#include "dist/communicator.h"
#include "minfer/engine.h"
#include "model/default_model.h"
#include "server/chat_prompt.h"
#include "server/demo_model.h"
#include "server/generation_handler.h"
#include "server/metrics.h"
#include "server/router.h"

namespace minfer::server {
namespace {

// Each streaming client holds a socket: lift the soft limit on open files to the hard one.
void raise_open_file_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
}

std::string default_model_name(const std::string& model_path) {
  std::filesystem::path p(model_path);
  while (!p.empty() && p.filename().empty()) p = p.parent_path();  // "dir/" -> "dir"
  return p.filename().string();
}

}  // namespace

void run_server(ServeOptions options) {
  raise_open_file_limit();
  std::optional<DemoModel> demo;
  if (options.engine.model_path.empty()) {
    if (auto path = find_default_model()) {
      options.engine.model_path = *path;
      spdlog::info("no --model given: serving the default model, SmolLM2-135M-Instruct ({})", *path);
    }
  }
  if (options.engine.model_path.empty()) {
    spdlog::warn("no --model given and {}", default_model_hint());
    demo.emplace();
    options.engine.model_path = demo->path();
    if (options.served_model_name.empty()) options.served_model_name = "minfer-demo";
    spdlog::warn(
        "no --model given: serving a built-in DEMO model with RANDOM weights ({}); its output is meaningless text. "
        "Give --model PATH to serve a real checkpoint.",
        demo->path());
  }
  if (options.served_model_name.empty()) options.served_model_name = default_model_name(options.engine.model_path);

  AsyncEngine engine(options.engine);
  const EngineConfig& config = engine.config();
  const ChatPrompt chat =
      ChatPrompt::load(engine, options.chat_template_file, options.tool_call_parser, options.reasoning_parser);
  if (chat.available()) {
    spdlog::info("chat template: {}; tool calls parsed as {}; reasoning blocks {}", chat.describe(),
                 chat.tool_parser()->name(), chat.reasoning() ? "split into reasoning_content" : "not split");
  } else {
    spdlog::warn("/v1/chat/completions is unavailable: {}", chat.describe());
  }
  Metrics metrics(options.served_model_name);
  GenerationHandler generation(engine, chat, metrics, options.served_model_name, options.request_timeout_s,
                               options.stream_ping_s);
  generation.set_allowed_local_media_path(options.allowed_local_media_path);
  const TokenizerRoutes tokenizer_routes(engine, chat);
  EmbeddingsHandler embeddings(engine, metrics, options.served_model_name);
  const Access access(options.access);
  ResponseStore responses(options.responses_store, options.responses_store_capacity);
  if (!options.responses_store.empty()) spdlog::info("stored responses kept in {}", options.responses_store);
  Router router(engine, generation, tokenizer_routes, embeddings, responses, metrics, access,
                config.max_num_seqs + options.max_queued_requests);

  HttpServer http(
      options.http,
      [&router](const HttpRequest& request, Connection& connection) { return router.handle(request, connection); },
      error_json);
  http.on_connection_open = [&metrics] { metrics.connection_opened(); };
  http.on_connection_close = [&metrics] { metrics.connection_closed(); };
  // Under tensor parallel a signal usually means mpirun is ending the group (a rank died): running requests cannot
  // drain, so the collectives stop waiting and they end at once with 503.
  http.on_signal = [](int signal) {
    if (dist::Communicator::world().distributed())
      dist::Communicator::world().interrupt(fmt::format("signal {} (mpirun ends the group when a rank dies)", signal));
  };
  http.bind();
  spdlog::info("serving '{}' (max_model_len {}, {} io thread(s)){}", options.served_model_name, config.max_model_len,
               options.http.io_threads,
               access.keys_required()
                   ? fmt::format(", {} API key(s) required on every model route", options.access.api_keys.size())
                   : "");
  if (!access.keys_required() && !is_loopback_host(options.http.host))
    spdlog::warn(
        "listening on {} without an API key: anyone who can reach the port can run the model (--api-key or "
        "MINFER_API_KEY)",
        options.http.host);
  fmt::print("listening on {}://{}:{}\n", options.http.ssl_certfile.empty() ? "http" : "https", options.http.host,
             http.port());
  std::fflush(stdout);
  http.run();
  // Requests still running here are past the drain timeout (or a second signal came): abort them. The engine
  // must stop before the HTTP server goes, since its callbacks post to the server's io_context.
  engine.shutdown(/*drain=*/false);
  spdlog::info("stopped");
}

}  // namespace minfer::server
