#include "request_handle.h"

namespace minfer::python {

void RequestHandle::push(const RequestOutput& output) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_pushed_) return;
    finished_pushed_ = output.finished;
    queue_.push_back(output);
  }
  cv_.notify_all();
}

RequestHandle::Wait RequestHandle::next(std::chrono::milliseconds timeout, RequestOutput& out) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout, [this] { return !queue_.empty() || finished_taken_; })) return Wait::kTimeout;
  if (queue_.empty()) return Wait::kDone;
  out = std::move(queue_.front());
  queue_.pop_front();
  if (out.finished) finished_taken_ = true;
  return Wait::kOutput;
}

bool RequestHandle::done() const {
  std::lock_guard<std::mutex> lock(mu_);
  return finished_taken_;
}

void RequestHandle::abort() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_pushed_) return;
  }
  if (std::shared_ptr<AsyncEngine> engine = engine_.lock()) engine->abort(id_);
}

CompletionCollector::CompletionCollector(std::vector<std::shared_ptr<RequestHandle>> handles)
    : handles_(std::move(handles)), results_(handles_.size()) {
  for (size_t i = 0; i < handles_.size(); ++i) {
    results_[i].id = handles_[i]->id();
    results_[i].prompt_token_ids = handles_[i]->prompt_token_ids();
  }
}

bool CompletionCollector::wait_for(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  RequestOutput o;
  while (next_ < handles_.size()) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    const RequestHandle::Wait w = handles_[next_]->next(std::max(left, std::chrono::milliseconds(0)), o);
    if (w == RequestHandle::Wait::kTimeout) return false;
    if (w == RequestHandle::Wait::kDone) {
      ++next_;
      continue;
    }
    CompletionOutput& r = results_[next_];
    r.token_ids.insert(r.token_ids.end(), o.new_token_ids.begin(), o.new_token_ids.end());
    r.text += o.text_delta;
    r.cached_tokens = o.cached_tokens;
    if (o.finished) {
      r.finish_reason = o.finish_reason;
      r.stop_reason = o.stop_reason;
      if (!o.error.empty() && error_.empty()) error_ = o.error;
      ++next_;
    }
  }
  return true;
}

void CompletionCollector::abort_all() {
  for (size_t i = next_; i < handles_.size(); ++i) handles_[i]->abort();
}

}  // namespace minfer::python
