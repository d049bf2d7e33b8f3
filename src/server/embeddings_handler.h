// POST /v1/embeddings (OpenAI's route) on an engine started with --task embed: `input` as a string, strings,
// token ids or lists of token ids -> one engine request per input, each answered with the prompt's pooled,
// L2-normalised final hidden state (EngineConfig::pooling, --pooling last|mean). `encoding_format` float or
// base64 (little-endian f32, as OpenAI); `dimensions` must equal the model's hidden size (no Matryoshka
// truncation). A client that goes away aborts its requests.
#pragma once

// clang-format off
#include "server/asio.h"
// clang-format on
#include <string>

#include "minfer/engine.h"
#include "server/http_server.h"
#include "server/json.h"
#include "server/metrics.h"

namespace minfer::server {

class EmbeddingsHandler {
 public:
  EmbeddingsHandler(AsyncEngine& engine, Metrics& metrics, std::string model_name)
      : engine_(engine), metrics_(metrics), model_name_(std::move(model_name)) {}

  // Throws ApiError before anything is written for a request that cannot be served.
  asio::awaitable<void> handle(const json& body, Connection& connection);

 private:
  std::vector<std::vector<int32_t>> inputs(const json& body) const;

  AsyncEngine& engine_;
  Metrics& metrics_;
  std::string model_name_;
};

}  // namespace minfer::server
