// The public, single-threaded Engine: a thin layer over EngineCore that assigns ids and offers the
// blocking generate() (each prompt's outputs folded by a RequestState).
#include "minfer/engine.h"

#include <unordered_map>

#include "base/error.h"
#include "engine/engine_core.h"

namespace minfer {

Engine::Engine(const EngineConfig& config) : core_(std::make_unique<EngineCore>(config)) {}
Engine::Engine(std::unique_ptr<EngineCore> core) : core_(std::move(core)) {}
Engine::~Engine() = default;

RequestId Engine::add_request(std::string_view prompt, const SamplingParams& params) {
  return add_request(core_->encode(prompt), params);
}

RequestId Engine::add_request(std::vector<int32_t> prompt_token_ids, const SamplingParams& params) {
  core_->validate_request(prompt_token_ids, params);
  const RequestId id = core_->next_id();
  core_->add_request(id, std::move(prompt_token_ids), params);
  return id;
}

RequestId Engine::add_request(std::vector<int32_t> prompt_token_ids, const SamplingParams& params,
                              const std::vector<std::string>& images) {
  core_->validate_request(prompt_token_ids, params);
  std::vector<SeqImage> prepared = core_->prepare_images(prompt_token_ids, images);
  const RequestId id = core_->next_id();
  core_->add_request(id, std::move(prompt_token_ids), params, nullptr, std::move(prepared));
  return id;
}

std::vector<RequestOutput> Engine::step() {
  std::vector<RequestOutput> out(std::make_move_iterator(stashed_.begin()), std::make_move_iterator(stashed_.end()));
  stashed_.clear();
  std::vector<RequestOutput> now = core_->step();
  out.insert(out.end(), std::make_move_iterator(now.begin()), std::make_move_iterator(now.end()));
  return out;
}

bool Engine::abort(RequestId id) { return core_->abort(id); }

bool Engine::has_unfinished() const { return core_->has_unfinished(); }

std::vector<CompletionOutput> Engine::generate(const std::vector<std::string>& prompts, const SamplingParams& params) {
  std::vector<std::vector<int32_t>> ids;
  ids.reserve(prompts.size());
  for (const std::string& p : prompts) ids.push_back(core_->encode(p));
  return generate(ids, params);
}

std::vector<CompletionOutput> Engine::generate(const std::vector<std::vector<int32_t>>& prompts,
                                               const SamplingParams& params) {
  // Validate everything before queueing anything, so a bad prompt leaves the engine untouched.
  for (const auto& p : prompts) core_->validate_request(p, params);
  std::vector<RequestId> ids;
  for (const auto& p : prompts) ids.push_back(add_request(p, params));
  return run_to_completion(ids, prompts);
}

std::vector<CompletionOutput> Engine::run_to_completion(const std::vector<RequestId>& ids,
                                                        const std::vector<std::vector<int32_t>>& prompts) {
  std::unordered_map<RequestId, std::unique_ptr<RequestState>> states;
  for (size_t i = 0; i < ids.size(); ++i)
    states.emplace(ids[i], std::make_unique<RequestState>(ids[i], prompts[i], /*stream=*/false));
  size_t remaining = ids.size();
  while (remaining > 0) {
    MINFER_CHECK(core_->has_unfinished(), "generate: {} requests vanished", remaining);
    for (RequestOutput& o : core_->step()) {
      auto it = states.find(o.id);
      if (it == states.end()) {
        stashed_.push_back(std::move(o));
        continue;
      }
      remaining -= o.finished ? 1 : 0;
      it->second->apply(std::move(o));
    }
  }
  std::vector<CompletionOutput> results;
  for (RequestId id : ids) results.push_back(states.at(id)->result());
  return results;
}

EngineStats Engine::stats() const { return core_->stats(); }
const EngineConfig& Engine::config() const { return core_->config(); }
std::vector<int32_t> Engine::encode(std::string_view text) const { return core_->encode(text); }
std::string Engine::decode(const std::vector<int32_t>& ids) const { return core_->decode(ids); }
const Tokenizer* Engine::tokenizer() const { return core_->tokenizer(); }

}  // namespace minfer
