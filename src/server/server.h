// `minfer serve`: the engine, the HTTP server and the routes put together, run until SIGTERM/SIGINT.
#pragma once

#include <string>

#include "minfer/config.h"
#include "server/access.h"
#include "server/http_server.h"

namespace minfer::server {

struct ServeOptions {
  EngineConfig engine;  // model_path empty: serve the built-in demo model
  HttpServerConfig http;
  AccessOptions access;  // API keys (none: no authentication) and CORS
  // Requests for the model (generation, embeddings) running or waiting beyond max_num_seqs before new ones get 503
  // with Retry-After.
  int64_t max_queued_requests = 256;
  double request_timeout_s = 0;   // the longest a generation request may run (408 after); 0 = no limit
  double stream_ping_s = 10;      // Anthropic streams: a ping this often while waiting
  std::string served_model_name;  // empty: the model directory's or file's name
  std::string chat_template_file;
  std::string tool_call_parser = "auto";  // vLLM's names: auto, hermes, llama3_json, mistral
  std::string reasoning_parser = "auto";  // auto, none, qwen3, deepseek_r1
  // /v1/responses' stored responses: an SQLite file (empty: in memory, at most responses_store_capacity of them).
  std::string responses_store;
  int64_t responses_store_capacity = 4096;
  // file:// image URLs are read only under this directory (vLLM's --allowed-local-media-path); empty: never.
  std::string allowed_local_media_path;
};

// Prints "listening on http://HOST:PORT" on stdout once requests are accepted. Throws minfer::Error for
// a model that cannot be loaded or an address that cannot be bound.
void run_server(ServeOptions options);

}  // namespace minfer::server
