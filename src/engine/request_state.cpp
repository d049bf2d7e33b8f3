#include "minfer/request_state.h"

#include <utility>

namespace minfer {

RequestState::RequestState(RequestId id, std::vector<int32_t> prompt_token_ids, bool stream, Listener listener)
    : id_(id),
      prompt_(std::move(prompt_token_ids)),
      stream_(stream),
      listener_(std::move(listener)),
      arrival_(Clock::now()) {
  result_.id = id;
  result_.prompt_token_ids = prompt_;
}

void RequestState::apply(RequestOutput delta) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return;
    CompletionOutput& r = result_;
    if (!delta.new_token_ids.empty() && !first_token_) first_token_ = Clock::now();
    r.token_ids.insert(r.token_ids.end(), delta.new_token_ids.begin(), delta.new_token_ids.end());
    r.logprobs.insert(r.logprobs.end(), delta.logprobs.begin(), delta.logprobs.end());
    r.text += delta.text_delta;
    r.cached_tokens = delta.cached_tokens;
    r.spec_decode = delta.spec_decode;
    if (!delta.prompt_logits.empty()) r.prompt_logits = std::move(delta.prompt_logits);
    if (!delta.embedding.empty()) r.embedding = std::move(delta.embedding);
    if (delta.finished) {
      finished_ = true;
      finish_ = Clock::now();
      r.finish_reason = delta.finish_reason;
      r.stop_reason = delta.stop_reason;
      r.error = delta.error;
      r.error_unavailable = delta.error_unavailable;
    }
    if (stream_) queue_.push_back(std::move(delta));
  }
  cv_.notify_all();
  if (listener_) listener_();
}

bool RequestState::wait_for(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [this] { return !queue_.empty() || finished_; });
}

std::vector<RequestOutput> RequestState::take() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<RequestOutput> out(std::make_move_iterator(queue_.begin()), std::make_move_iterator(queue_.end()));
  queue_.clear();
  return out;
}

std::optional<RequestOutput> RequestState::next() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !queue_.empty() || finished_; });
  if (queue_.empty()) return std::nullopt;
  RequestOutput o = std::move(queue_.front());
  queue_.pop_front();
  return o;
}

std::optional<RequestOutput> RequestState::next(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout, [this] { return !queue_.empty() || finished_; }) || queue_.empty())
    return std::nullopt;
  RequestOutput o = std::move(queue_.front());
  queue_.pop_front();
  return o;
}

bool RequestState::finished() const {
  std::lock_guard<std::mutex> lock(mu_);
  return finished_;
}

bool RequestState::done() const {
  std::lock_guard<std::mutex> lock(mu_);
  return finished_ && queue_.empty();
}

CompletionOutput RequestState::result() const {
  std::lock_guard<std::mutex> lock(mu_);
  return result_;
}

int64_t RequestState::output_tokens() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(result_.token_ids.size());
}

std::optional<RequestState::Clock::time_point> RequestState::first_token_time() const {
  std::lock_guard<std::mutex> lock(mu_);
  return first_token_;
}

std::optional<RequestState::Clock::time_point> RequestState::finish_time() const {
  std::lock_guard<std::mutex> lock(mu_);
  return finish_;
}

}  // namespace minfer
