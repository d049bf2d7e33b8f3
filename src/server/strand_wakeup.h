// Wakes the connection coroutine that waits for a request's outputs. The engine thread calls notify() after it
// applies an output to a RequestState (the state's listener); notify posts one wake-up to the connection's
// strand, where the coroutine waits on a timer that the wake-up cancels. The coroutine then takes what every
// state of the request holds. Several engine requests (n > 1, a list of prompts) share one wake-up.
#pragma once

// clang-format off
#include "server/asio.h"
#include <boost/asio/steady_timer.hpp>
// clang-format on
#include <atomic>
#include <memory>

namespace minfer::server {

class StrandWakeup : public std::enable_shared_from_this<StrandWakeup> {
 public:
  explicit StrandWakeup(boost::asio::any_io_executor strand);

  // Any thread (the engine's): wake the waiter; several calls before it runs make one wake-up.
  void notify();
  // On the strand: returns once notify() or wake() has been called since the last return.
  boost::asio::awaitable<void> wait();
  // On the strand: wake the waiter now (the client went away).
  void wake();

 private:
  std::atomic<bool> pending_{false};  // a notify() not yet seen by wait()
  std::atomic<bool> posted_{false};   // a wake-up is posted and has not run
  boost::asio::steady_timer timer_;   // strand only; never expires, cancel() is the wake-up
};

}  // namespace minfer::server
