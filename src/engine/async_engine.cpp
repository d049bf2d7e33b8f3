// AsyncEngine: the step loop on its own thread. Callers hand requests and aborts to an inbox under a mutex
// (so adding never waits for a step to finish); the loop takes them between steps and applies each output
// to its request's RequestState without holding the lock.
#include <spdlog/spdlog.h>

#include <thread>
#include <unordered_map>

#include "base/error.h"
#include "dist/communicator.h"
#include "engine/engine_core.h"
#include "minfer/engine.h"
#include "model/sampling_defaults.h"

namespace minfer {

struct AsyncEngine::Impl {
  explicit Impl(const EngineConfig& config) : core(config) { snapshot = core.stats(); }

  struct NewRequest {
    std::vector<int32_t> prompt;
    SamplingParams params;
    std::unique_ptr<GrammarMatcher> grammar;  // structured outputs, compiled on the caller's thread
    std::shared_ptr<RequestState> state;
    std::vector<SeqImage> images;  // prepared on the caller's thread (EngineCore::prepare_images)
  };

  std::shared_ptr<RequestState> submit(std::vector<int32_t> prompt, const SamplingParams& params,
                                       RequestOptions options) {
    core.validate_request(prompt, params);
    std::unique_ptr<GrammarMatcher> grammar = core.compile_grammar(params);
    auto state = std::make_shared<RequestState>(core.next_id(), prompt, options.stream, std::move(options.on_update));
    std::vector<SeqImage> images = core.prepare_images(prompt, options.images);
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!accepting)
        throw Error(fmt::format("the engine is shut down{}", failed.empty() ? "" : ": " + failed),
                    ErrorCode::kUnavailable);
      inbox.push_back({std::move(prompt), params, std::move(grammar), state, std::move(images)});
    }
    cv.notify_one();
    return state;
  }

  std::vector<int32_t> encode(std::string_view text) const {
    // Tokenizers may keep caches; encode one prompt at a time.
    std::lock_guard<std::mutex> lock(encode_mu);
    return core.encode(text);
  }

  void deliver(std::vector<RequestOutput>& outputs) {
    for (RequestOutput& o : outputs) {
      auto it = states.find(o.id);
      if (it == states.end()) continue;
      const bool finished = o.finished;
      try {
        it->second->apply(std::move(o));
      } catch (const std::exception& e) {
        spdlog::error("the listener of request {} threw: {}", it->first, e.what());
      }
      if (finished) states.erase(it);
    }
  }

  void loop() {
    for (;;) {
      std::vector<NewRequest> adds;
      std::vector<RequestId> cancels;
      bool stop_now = false, drain_now = true;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return stop || !inbox.empty() || !aborts.empty() || core.has_unfinished(); });
        adds.swap(inbox);
        cancels.swap(aborts);
        stop_now = stop;
        drain_now = drain;
      }
      std::vector<RequestOutput> outputs;
      for (NewRequest& r : adds) {
        const RequestId id = r.state->id();
        states[id] = std::move(r.state);
        try {
          core.add_request(id, std::move(r.prompt), r.params, std::move(r.grammar), std::move(r.images));
        } catch (const std::exception& e) {
          RequestOutput o;
          o.id = id;
          o.finished = true;
          o.finish_reason = FinishReason::kAbort;
          o.error = e.what();
          outputs.push_back(std::move(o));
        }
      }
      for (RequestId id : cancels) core.abort(id);
      if (stop_now && !drain_now) {
        std::vector<RequestOutput> rest = core.abort_all();
        outputs.insert(outputs.end(), std::make_move_iterator(rest.begin()), std::make_move_iterator(rest.end()));
      } else if (core.has_unfinished()) {
        try {
          std::vector<RequestOutput> now = core.step();
          outputs.insert(outputs.end(), std::make_move_iterator(now.begin()), std::make_move_iterator(now.end()));
        } catch (const std::exception& e) {
          // A failed step leaves the sequences in an unknown state: end them all and refuse new work.
          spdlog::error("engine step failed: {}", e.what());
          const auto* error = dynamic_cast<const Error*>(&e);
          const bool unavailable = error && error->code() == ErrorCode::kUnavailable;
          std::vector<RequestOutput> rest = core.abort_all(e.what(), unavailable);
          if (unavailable && dist::Communicator::world().distributed()) end_group_soon();
          outputs.insert(outputs.end(), std::make_move_iterator(rest.begin()), std::make_move_iterator(rest.end()));
          std::lock_guard<std::mutex> lock(mu);
          failed = e.what();
          accepting = false;
        }
      }
      // Stats are published before the outputs, so a caller that has its final output sees it counted.
      EngineStats after_step = core.stats();
      {
        std::lock_guard<std::mutex> lock(mu);
        snapshot = std::move(after_step);
      }
      deliver(outputs);
      {
        std::lock_guard<std::mutex> lock(mu);
        if (stop_now && inbox.empty() && aborts.empty() && !core.has_unfinished()) break;
      }
    }
    // Anything left (only requests added after an abort-shutdown began) ends as aborted.
    std::vector<RequestOutput> rest = core.abort_all();
    deliver(rest);
  }

  // A broken tensor-parallel group cannot recover: once the failed requests have had their 503s (a moment for the
  // server to write them), every rank ends with exit code 1 (mpirun exits with it).
  static void end_group_soon() {
    std::thread([] {
      std::this_thread::sleep_for(std::chrono::seconds(2));
      spdlog::error("tensor parallel: the group is broken; ending every rank");
      dist::Communicator::world().abort_group(1);
    }).detach();
  }

  EngineCore core;
  std::thread thread;
  mutable std::mutex mu;
  mutable std::mutex encode_mu;
  std::condition_variable cv;
  std::vector<NewRequest> inbox;
  std::vector<RequestId> aborts;
  bool accepting = true;
  bool stop = false;
  bool drain = true;
  std::string failed;
  EngineStats snapshot;
  std::unordered_map<RequestId, std::shared_ptr<RequestState>> states;  // loop thread only
};

AsyncEngine::AsyncEngine(const EngineConfig& config) : impl_(std::make_unique<Impl>(config)) {
  impl_->thread = std::thread([this] { impl_->loop(); });
}

AsyncEngine::~AsyncEngine() { shutdown(/*drain=*/false); }

std::shared_ptr<RequestState> AsyncEngine::add_request(std::string_view prompt, const SamplingParams& params,
                                                       RequestOptions options) {
  return add_request(impl_->encode(prompt), params, std::move(options));
}

std::shared_ptr<RequestState> AsyncEngine::add_request(std::vector<int32_t> prompt_token_ids,
                                                       const SamplingParams& params, RequestOptions options) {
  return impl_->submit(std::move(prompt_token_ids), params, std::move(options));
}

void AsyncEngine::abort(RequestId id) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->aborts.push_back(id);
  }
  impl_->cv.notify_one();
}

void AsyncEngine::shutdown(bool drain) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->accepting = false;
    if (!impl_->stop) impl_->drain = drain;
    impl_->stop = true;
  }
  impl_->cv.notify_one();
  if (impl_->thread.joinable() && impl_->thread.get_id() != std::this_thread::get_id()) impl_->thread.join();
}

EngineStats AsyncEngine::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->snapshot;
}

const EngineConfig& AsyncEngine::config() const { return impl_->core.config(); }

std::vector<int32_t> AsyncEngine::encode(std::string_view text) const { return impl_->encode(text); }

const Tokenizer* AsyncEngine::tokenizer() const { return impl_->core.tokenizer(); }
std::string AsyncEngine::chat_template_source() const { return impl_->core.chat_template_source(); }
bool AsyncEngine::takes_images() const { return impl_->core.takes_images(); }
SamplingDefaults AsyncEngine::sampling_defaults() const { return read_sampling_defaults(impl_->core.weights()); }

}  // namespace minfer
