// One request as its outputs arrive: the engine applies each RequestOutput (a delta) to the request's state,
// which folds it into the result so far (text, ids, logprobs, finish reason) and, for a streaming reader,
// queues it. Readers wait on it with a timeout (a Python thread comes back for Ctrl-C between waits), or
// register a listener that the engine calls after each delta (the server posts a wake-up to the
// connection's executor). The blocking Engine::generate, AsyncEngine, the Python binding and the server all
// read requests through this one type.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

#include "minfer/outputs.h"

namespace minfer {

class RequestState {
 public:
  using Clock = std::chrono::steady_clock;
  // Called on the engine's thread after each delta is applied; it must not block or call back into the
  // engine except AsyncEngine::abort.
  using Listener = std::function<void()>;

  // stream: keep each delta for take()/next() (a reader that wants only the result passes false).
  RequestState(RequestId id, std::vector<int32_t> prompt_token_ids, bool stream = true, Listener listener = {});
  RequestState(const RequestState&) = delete;
  RequestState& operator=(const RequestState&) = delete;

  RequestId id() const { return id_; }
  const std::vector<int32_t>& prompt_token_ids() const { return prompt_; }

  // Engine side: folds the delta in, queues it (stream), wakes waiters, calls the listener. Deltas after the
  // finished one are ignored.
  void apply(RequestOutput delta);

  // Waits at most `timeout` until a delta is queued (stream) or the request has finished; true when so.
  bool wait_for(std::chrono::milliseconds timeout) const;
  // Streaming: the deltas queued so far, oldest first (empty when none).
  std::vector<RequestOutput> take();
  // Streaming, blocking: the next delta; nullopt once the finished one has been taken.
  std::optional<RequestOutput> next();
  // Streaming: the next delta, waiting at most `timeout`; nullopt on timeout or once the finished one has been
  // taken (done() tells which).
  std::optional<RequestOutput> next(std::chrono::milliseconds timeout);
  // The finished delta has arrived (result() is final).
  bool finished() const;
  // Finished, and (streaming) every delta taken.
  bool done() const;
  // Everything so far, folded (a copy).
  CompletionOutput result() const;
  int64_t output_tokens() const;
  // When the state was made (the request's arrival), when its first token came, and when it finished.
  Clock::time_point arrival_time() const { return arrival_; }
  std::optional<Clock::time_point> first_token_time() const;
  std::optional<Clock::time_point> finish_time() const;

 private:
  const RequestId id_;
  const std::vector<int32_t> prompt_;
  const bool stream_;
  const Listener listener_;
  const Clock::time_point arrival_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  CompletionOutput result_;
  std::deque<RequestOutput> queue_;
  bool finished_ = false;
  std::optional<Clock::time_point> first_token_, finish_;
};

}  // namespace minfer
