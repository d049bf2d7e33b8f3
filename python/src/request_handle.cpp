#include "request_handle.h"

namespace minfer::python {

void RequestHandle::abort() {
  if (state_->finished()) return;
  if (std::shared_ptr<AsyncEngine> engine = engine_.lock()) engine->abort(state_->id());
}

bool wait_all(const std::vector<std::shared_ptr<RequestHandle>>& handles, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (const auto& h : handles) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (!h->state().finished() && !h->state().wait_for(std::max(left, std::chrono::milliseconds(0)))) return false;
    if (!h->state().finished()) return false;  // woken by a queued delta (a streaming handle)
  }
  return true;
}

}  // namespace minfer::python
