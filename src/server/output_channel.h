// Hands a request's engine outputs from the engine thread to the connection coroutine that waits for them.
// The engine thread pushes under a mutex and posts one wake-up to the connection's strand; the coroutine
// waits on a timer that the wake-up cancels. Several engine requests (n > 1, or a list of prompts) share
// one channel, each output tagged with its choice index.
#pragma once

// clang-format off
#include "server/asio.h"
#include <boost/asio/steady_timer.hpp>
// clang-format on
#include <memory>
#include <mutex>
#include <vector>

#include "minfer/outputs.h"

namespace minfer::server {

struct ChoiceOutput {
  size_t choice = 0;
  RequestOutput output;
};

class OutputChannel : public std::enable_shared_from_this<OutputChannel> {
 public:
  explicit OutputChannel(boost::asio::any_io_executor strand);

  // Any thread (the engine's): queue an output and wake the waiter.
  void push(size_t choice, const RequestOutput& output);
  // On the strand: wake the waiter without an output (e.g. the client went away).
  void wake();
  // On the strand: the outputs queued so far; waits until there is at least one or wake() was called
  // (then the result may be empty).
  boost::asio::awaitable<std::vector<ChoiceOutput>> wait();

 private:
  std::vector<ChoiceOutput> take();

  std::mutex mu_;
  std::vector<ChoiceOutput> queue_;
  bool wake_posted_ = false;
  bool woken_ = false;               // strand only
  boost::asio::steady_timer timer_;  // strand only; never expires, cancel() is the wake-up
};

}  // namespace minfer::server
