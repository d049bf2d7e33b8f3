#include "server/output_channel.h"

#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace minfer::server {

namespace asio = boost::asio;

OutputChannel::OutputChannel(asio::any_io_executor strand) : timer_(std::move(strand)) {
  timer_.expires_at(asio::steady_timer::time_point::max());
}

void OutputChannel::push(size_t choice, const RequestOutput& output) {
  bool post = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back({choice, output});
    post = !wake_posted_;
    wake_posted_ = true;
  }
  // One wake-up per batch of outputs: the coroutine takes everything queued when it runs.
  if (post) asio::post(timer_.get_executor(), [self = shared_from_this()] { self->timer_.cancel(); });
}

void OutputChannel::wake() {
  woken_ = true;
  timer_.cancel();
}

std::vector<ChoiceOutput> OutputChannel::take() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ChoiceOutput> out;
  out.swap(queue_);
  wake_posted_ = false;
  return out;
}

asio::awaitable<std::vector<ChoiceOutput>> OutputChannel::wait() {
  for (;;) {
    std::vector<ChoiceOutput> out = take();
    if (!out.empty() || woken_) {
      woken_ = false;
      co_return out;
    }
    // A push between take() and this wait posts its cancel to the strand, which runs only after the wait
    // below has started: no wake-up is lost. Spurious wake-ups just loop.
    boost::system::error_code ec;
    timer_.expires_at(asio::steady_timer::time_point::max());
    co_await timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
}

}  // namespace minfer::server
