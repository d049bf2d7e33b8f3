// What the Python Engine object holds: an AsyncEngine (its step loop on its own thread, so any number of
// Python threads can submit at once).
// Plain C++: the bindings release the GIL around every call that can wait.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "minfer/engine.h"
#include "minfer/tokenizer.h"
#include "request_handle.h"

namespace minfer::python {

class PyEngine {
 public:
  // Loads the model and allocates the KV pool; throws minfer::Error.
  explicit PyEngine(const EngineConfig& config);
  ~PyEngine();  // aborts what is still running
  PyEngine(const PyEngine&) = delete;
  PyEngine& operator=(const PyEngine&) = delete;

  // Encodes a prompt as the engine does (BOS as the tokenizer's config says). Thread-safe.
  std::vector<int32_t> encode_prompt(std::string_view text) const;
  // Validates and queues a request; outputs go to the returned handle's state (each delta kept when stream).
  // Thread-safe; throws minfer::Error (bad prompt or parameters, engine closed).
  // images: the prompt's encoded image files (multimodal models), one per image placeholder.
  std::shared_ptr<RequestHandle> submit(std::vector<int32_t> prompt_token_ids, const SamplingParams& params,
                                        bool stream, std::vector<std::string> images = {});

  // The engine's tokenizer. Throws minfer::Error when the checkpoint has none. Calls from Python hold
  // tokenizer_mutex(), as AsyncEngine::encode holds its own: tokenizers may keep caches.
  const Tokenizer& tokenizer();
  std::mutex& tokenizer_mutex() { return tokenizer_use_mu_; }

  EngineStats stats() const { return engine_->stats(); }
  const EngineConfig& config() const { return engine_->config(); }  // as resolved by the engine
  const AsyncEngine& async_engine() const { return *engine_; }

  // Stops the engine: running requests end with finish_reason "abort", new ones are refused. Idempotent.
  void close();
  bool closed() const;

 private:
  std::shared_ptr<AsyncEngine> engine_;
  mutable std::mutex mu_;
  bool closed_ = false;
  std::mutex tokenizer_use_mu_;
};

}  // namespace minfer::python
