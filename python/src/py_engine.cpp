#include "py_engine.h"

#include "minfer/error.h"

namespace minfer::python {

PyEngine::PyEngine(const EngineConfig& config) : engine_(std::make_shared<AsyncEngine>(config)) {}

PyEngine::~PyEngine() { close(); }

std::vector<int32_t> PyEngine::encode_prompt(std::string_view text) const { return engine_->encode(text); }

std::shared_ptr<RequestHandle> PyEngine::submit(std::vector<int32_t> prompt_token_ids, const SamplingParams& params,
                                                bool stream, std::vector<std::string> images) {
  return std::make_shared<RequestHandle>(
      engine_,
      engine_->add_request(std::move(prompt_token_ids), params, {.stream = stream, .images = std::move(images)}));
}

const Tokenizer& PyEngine::tokenizer() {
  const Tokenizer* t = engine_->tokenizer();
  if (t == nullptr)
    throw Error(engine_->config().model_path + ": this model has no tokenizer; give prompts as token ids");
  return *t;
}

void PyEngine::close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
    closed_ = true;
  }
  engine_->shutdown(/*drain=*/false);
}

bool PyEngine::closed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return closed_;
}

}  // namespace minfer::python
