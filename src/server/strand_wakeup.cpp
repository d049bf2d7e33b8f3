#include "server/strand_wakeup.h"

#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace minfer::server {

namespace asio = boost::asio;

StrandWakeup::StrandWakeup(asio::any_io_executor strand) : timer_(std::move(strand)) {
  timer_.expires_at(asio::steady_timer::time_point::max());
}

void StrandWakeup::notify() {
  pending_.store(true);
  if (posted_.exchange(true)) return;  // one posted wake-up serves every notify before it runs
  asio::post(timer_.get_executor(), [self = shared_from_this()] {
    self->posted_.store(false);
    self->timer_.cancel();
  });
}

void StrandWakeup::wake() {
  pending_.store(true);
  timer_.cancel();
}

asio::awaitable<void> StrandWakeup::wait() {
  // A notify between the check and the wait posts its cancel to the strand, which runs only after the wait
  // below has started: no wake-up is lost. Spurious wake-ups just loop.
  while (!pending_.exchange(false)) {
    boost::system::error_code ec;
    timer_.expires_at(asio::steady_timer::time_point::max());
    co_await timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
}

}  // namespace minfer::server
