// A request submitted from Python: its RequestState (filled by the engine thread) and a weak reference to the
// engine, to abort it. Waits take a timeout so the waiting thread can come back for Ctrl-C between waits (a
// blocking wait with the GIL released would make the process deaf to signals).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <vector>

#include "minfer/engine.h"

namespace minfer::python {

class RequestHandle {
 public:
  // The engine is held weakly, so a handle kept by Python does not keep a closed engine's thread alive.
  RequestHandle(std::weak_ptr<AsyncEngine> engine, std::shared_ptr<RequestState> state)
      : engine_(std::move(engine)), state_(std::move(state)) {}

  RequestId id() const { return state_->id(); }
  const std::vector<int32_t>& prompt_token_ids() const { return state_->prompt_token_ids(); }
  RequestState& state() { return *state_; }
  bool done() const { return state_->done(); }
  // Ends the request if it is still running; its final output (finish_reason abort) follows.
  void abort();

 private:
  std::weak_ptr<AsyncEngine> engine_;
  std::shared_ptr<RequestState> state_;
};

// Waits up to `timeout` for every request to finish; true once all have.
bool wait_all(const std::vector<std::shared_ptr<RequestHandle>>& handles, std::chrono::milliseconds timeout);

}  // namespace minfer::python
