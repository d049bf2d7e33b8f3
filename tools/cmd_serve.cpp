// `minfer serve`: the HTTP server (/generate and the OpenAI-compatible API) over the batching engine.
#include <CLI/CLI.hpp>
#include <memory>
#include <string>

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
};

void run_serve(ServeArgs& args) {
  args.options.engine = args.engine.resolve();
  if (take_tensor_parallel_role(args.options.engine)) return;
  if (args.options.http.io_threads < 1) fail("--io-threads must be >= 1, got {}", args.options.http.io_threads);
  if (args.max_body_bytes < 1024) fail("--max-body-bytes must be >= 1024, got {}", args.max_body_bytes);
  if (args.drain_timeout_s < 0) fail("--drain-timeout must be >= 0 seconds, got {}", args.drain_timeout_s);
  args.options.http.max_body_bytes = static_cast<uint64_t>(args.max_body_bytes);
  args.options.http.drain_timeout = std::chrono::seconds(args.drain_timeout_s);
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
  cmd->add_option("--api-key", o.api_key, "Require 'Authorization: Bearer KEY' on every /v1 route");
  cmd->add_option("--served-model-name", o.served_model_name, "Model id of the API (default: the model's file name)");
  cmd->add_option("--chat-template", o.chat_template_file, "Jinja chat template file (default: the model's own)");
  cmd->add_option("--tool-call-parser", o.tool_call_parser,
                  "How the model writes tool calls: auto (from the chat template), hermes, llama3_json, mistral")
      ->capture_default_str();
  cmd->add_option("--reasoning-parser", o.reasoning_parser,
                  "Split <think> blocks into reasoning_content: auto (when the template has them), none, qwen3, "
                  "deepseek_r1")
      ->capture_default_str();
  cmd->add_option("--io-threads", o.http.io_threads, "Threads serving connections")->capture_default_str();
  cmd->add_option("--max-body-bytes", args->max_body_bytes, "Largest request body (413 above)")->capture_default_str();
  cmd->add_option("--drain-timeout", args->drain_timeout_s,
                  "Seconds to let running requests finish after SIGTERM/SIGINT")
      ->capture_default_str();
  cmd->callback([args] { run_serve(*args); });
}

}  // namespace minfer::tools
