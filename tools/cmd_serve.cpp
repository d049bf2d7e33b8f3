// `minfer serve`: the HTTP server (/generate and the OpenAI-compatible API) over the batching engine.
#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "base/error.h"
#include "server/server.h"
#include "tools/commands.h"
#include "tools/engine_flags.h"
#include "tools/fusion_flags.h"
#include "tools/quant_flags.h"

namespace minfer::tools {
namespace {

struct ServeArgs {
  server::ServeOptions options;
  graph::FusionOptions fusion;
  QuantFlags quant;
  int64_t max_body_bytes = 8 << 20;
  int drain_timeout_s = 300;
  bool no_continuous_batching = false;
  bool no_prefix_caching = false;
};

void run_serve(ServeArgs& args) {
  EngineConfig& e = args.options.engine;
  e.fusion_strategy = args.fusion.strategy;
  e.disabled_fusion_passes = args.fusion.disabled_passes;
  e.quant = args.quant.config();
  e.enable_continuous_batching = !args.no_continuous_batching;
  e.enable_prefix_caching = !args.no_prefix_caching;
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
  EngineConfig& e = o.engine;
  CLI::App* cmd = app.add_subcommand(
      "serve",
      "Serve a model over HTTP: POST /generate, the OpenAI API (/v1/completions, /v1/chat/completions), "
      "GET /v1/models, /health, /metrics");
  cmd->add_option(
      "-m,--model", e.model_path,
      "Hugging Face directory, .gguf file, or llama2.c .bin (none: SmolLM2-135M-Instruct from the project venv, "
      "else a random-weight demo model)");
  cmd->add_option("--host", o.http.host, "Address to bind (0.0.0.0 to accept remote clients)")->capture_default_str();
  cmd->add_option("--port", o.http.port, "Port (0 = any free port; the line 'listening on ...' tells which)")
      ->capture_default_str();
  cmd->add_option("--api-key", o.api_key, "Require 'Authorization: Bearer KEY' on every /v1 route");
  cmd->add_option("--served-model-name", o.served_model_name, "Model id of the API (default: the model's file name)");
  cmd->add_option("--chat-template", o.chat_template_file, "Jinja chat template file (default: the model's own)");
  cmd->add_option("--io-threads", o.http.io_threads, "Threads serving connections")->capture_default_str();
  cmd->add_option("--max-body-bytes", args->max_body_bytes, "Largest request body (413 above)")->capture_default_str();
  cmd->add_option("--drain-timeout", args->drain_timeout_s,
                  "Seconds to let running requests finish after SIGTERM/SIGINT")
      ->capture_default_str();
  // Engine.
  cmd->add_option("-t,--threads", e.num_threads, "Compute threads (0 = one per core)")->capture_default_str();
  cmd->add_option("--page-size", e.page_size, "Tokens per KV page (power of two, 8-256)")->capture_default_str();
  cmd->add_option("--max-model-len", e.max_model_len, "Context per request, prompt + output (0 = model's, <= 8192)")
      ->capture_default_str();
  cmd->add_option("--max-num-seqs", e.max_num_seqs, "Most sequences running at once")->capture_default_str();
  cmd->add_option("--max-num-batched-tokens", e.max_num_batched_tokens, "Most tokens computed in one step")
      ->capture_default_str();
  cmd->add_option("--kv-cache-memory", e.kv_cache_memory, "KV pool size, e.g. 512MiB (0 = a fraction of free RAM)")
      ->transform(CLI::AsSizeValue(false));
  cmd->add_option("--kv-cache-memory-fraction", e.kv_cache_memory_fraction,
                  "Fraction of free memory for the KV pool when --kv-cache-memory is 0")
      ->capture_default_str();
  cmd->add_flag("--no-continuous-batching", args->no_continuous_batching,
                "Static batching: run a batch to completion before the next");
  cmd->add_flag("--no-prefix-caching", args->no_prefix_caching, "Do not share KV pages of equal prompt prefixes");
  add_kv_cache_dtype_flag(*cmd, e.kv_cache_dtype);
  add_fusion_flags(*cmd, args->fusion);
  add_quant_flags(*cmd, args->quant);
  cmd->callback([args] { run_serve(*args); });
}

}  // namespace minfer::tools
