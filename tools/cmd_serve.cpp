// `minfer serve`: the HTTP server (/generate and the OpenAI-compatible API) over the batching engine.
#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <tuple>

#include "base/error.h"
#include "server/server.h"
#include "tools/commands.h"
#include "tools/engine_flags.h"
#include "tools/tensor_parallel.h"

namespace minfer::tools {
namespace {

struct ServeArgs {
  server::ServeOptions options;
  EngineFlags engine;
  int64_t max_body_bytes = 8 << 20;
  int drain_timeout_s = 300;
  int idle_timeout_s = 120, header_timeout_s = 15, body_timeout_s = 60;
};

void run_serve(ServeArgs& args) {
  args.options.engine = args.engine.resolve();
  if (take_tensor_parallel_role(args.options.engine)) return;
  if (args.options.http.io_threads < 1) fail("--io-threads must be >= 1, got {}", args.options.http.io_threads);
  if (args.max_body_bytes < 1024) fail("--max-body-bytes must be >= 1024, got {}", args.max_body_bytes);
  if (args.drain_timeout_s < 0) fail("--drain-timeout must be >= 0 seconds, got {}", args.drain_timeout_s);
  args.options.http.max_body_bytes = static_cast<uint64_t>(args.max_body_bytes);
  args.options.http.drain_timeout = std::chrono::seconds(args.drain_timeout_s);
  args.options.http.idle_timeout = std::chrono::seconds(args.idle_timeout_s);
  args.options.http.header_timeout = std::chrono::seconds(args.header_timeout_s);
  args.options.http.body_timeout = std::chrono::seconds(args.body_timeout_s);
  server::add_env_api_keys(args.options.access.api_keys);
  server::run_server(args.options);
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto args = std::make_shared<ServeArgs>();
  server::ServeOptions& o = args->options;
  CLI::App* cmd = app.add_subcommand(
      "serve",
      "Serve a model over HTTP: POST /generate, the OpenAI API (/v1/completions, /v1/chat/completions), "
      "GET /v1/models, /health, /metrics");
  add_engine_flags(*cmd, args->engine,
                   "Hugging Face directory, .gguf file, or llama2.c .bin (none: SmolLM2-135M-Instruct from the "
                   "project venv, else a random-weight demo model)");
  cmd->add_option("--host", o.http.host, "Address to bind (0.0.0.0 to accept remote clients)")->capture_default_str();
  cmd->add_option("--port", o.http.port, "Port (0 = any free port; the line 'listening on ...' tells which)")
      ->capture_default_str();
  cmd->add_option("--api-key", o.access.api_keys,
                  "Require 'Authorization: Bearer KEY' on every route that runs or tokenizes for the model "
                  "(repeatable: several keys; MINFER_API_KEY=K1,K2 adds keys)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_flag("--metrics-require-key", o.access.metrics_require_key, "Put /metrics behind the API key too");
  for (auto [flag, list, help] :
       {std::tuple{"--allowed-origins", &o.access.allowed_origins,
                   "CORS: origins whose browser pages may call the API (repeatable or comma-separated; * = any; "
                   "default none)"},
        {"--allowed-methods", &o.access.allowed_methods, "CORS: methods allowed cross-origin (default *)"},
        {"--allowed-headers", &o.access.allowed_headers, "CORS: request headers allowed cross-origin (default *)"}}) {
    cmd->add_option(flag, *list, help)
        ->delimiter(',')
        ->expected(1)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  }
  cmd->add_option("--ssl-keyfile", o.http.ssl_keyfile, "Serve HTTPS with this PEM private key (with --ssl-certfile)");
  cmd->add_option("--ssl-certfile", o.http.ssl_certfile, "Serve HTTPS with this PEM certificate chain");
  cmd->add_option("--max-connections", o.http.max_connections,
                  "Open connections above which new ones get 503 with Retry-After")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--stream-ping-interval", o.stream_ping_s,
                  "Seconds between the keep-alive pings of a waiting /v1/messages stream (Anthropic's ping event)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--request-timeout", o.request_timeout_s,
                  "Seconds a generation request may run before it ends with 408 and is aborted (0 = no limit; a "
                  "request's own \"timeout\" field may set a shorter one)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--max-queued-requests", o.max_queued_requests,
                  "Model requests waiting beyond --max-num-seqs above which new ones get 503 with Retry-After")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  for (auto [flag, seconds, help] :
       {std::tuple{"--timeout-keep-alive", &args->idle_timeout_s, "Seconds an idle keep-alive connection is kept"},
        {"--header-timeout", &args->header_timeout_s, "Seconds a client has to send a request's header"},
        {"--body-timeout", &args->body_timeout_s, "Seconds a client has to send a request's body"}})
    cmd->add_option(flag, *seconds, help)->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--served-model-name", o.served_model_name, "Model id of the API (default: the model's file name)");
  cmd->add_option("--chat-template", o.chat_template_file, "Jinja chat template file (default: the model's own)");
  cmd->add_option("--tool-call-parser", o.tool_call_parser,
                  "How the model writes tool calls: auto (from the chat template), hermes, llama3_json, mistral, "
                  "qwen3_coder (Qwen3-Coder, Qwen3.5), openai (gpt-oss's harmony messages)")
      ->capture_default_str();
  cmd->add_option("--reasoning-parser", o.reasoning_parser,
                  "Split reasoning into reasoning_content: auto (<think> blocks or harmony channels when the template "
                  "has them), none, qwen3, deepseek_r1, openai_gptoss")
      ->capture_default_str();
  cmd->add_option("--allowed-local-media-path", o.allowed_local_media_path,
                  "Directory under which file:// image URLs in requests may be read (default: none may)");
  cmd->add_option("--responses-store", o.responses_store,
                  "SQLite file keeping /v1/responses' stored responses across restarts (default: in memory)");
  cmd->add_option("--responses-store-capacity", o.responses_store_capacity,
                  "Stored responses kept in memory (least recently used evicted first; without --responses-store)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--io-threads", o.http.io_threads, "Threads serving connections")->capture_default_str();
  cmd->add_option("--max-body-bytes", args->max_body_bytes, "Largest request body (413 above)")->capture_default_str();
  cmd->add_option("--drain-timeout", args->drain_timeout_s,
                  "Seconds to let running requests finish after SIGTERM/SIGINT")
      ->capture_default_str();
  cmd->callback([args] { run_serve(*args); });
}

}  // namespace minfer::tools
