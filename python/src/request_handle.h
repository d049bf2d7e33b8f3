// One request's outputs, pushed by the engine thread and taken by the Python thread that submitted it.
// Waits take a timeout so the waiting thread can come back for Ctrl-C between waits (a blocking wait with the
// GIL released would make the process deaf to signals).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "minfer/engine.h"

namespace minfer::python {

class RequestHandle {
 public:
  // The engine is held weakly: the engine thread holds handles (in its output callbacks), so a strong
  // reference could make the engine thread drop the last reference to its own engine.
  RequestHandle(std::weak_ptr<AsyncEngine> engine, std::vector<int32_t> prompt_token_ids)
      : engine_(std::move(engine)), prompt_token_ids_(std::move(prompt_token_ids)) {}

  void set_id(RequestId id) { id_ = id; }  // once, before the handle is shared
  RequestId id() const { return id_; }
  const std::vector<int32_t>& prompt_token_ids() const { return prompt_token_ids_; }

  // Engine thread.
  void push(const RequestOutput& output);

  enum class Wait { kOutput, kTimeout, kDone };
  // Takes the next output into `out` (kOutput), or times out, or reports that the finished output has
  // already been taken (kDone).
  Wait next(std::chrono::milliseconds timeout, RequestOutput& out);
  bool done() const;  // the finished output has been taken
  // Ends the request if it is still running; its final output (finish_reason abort) follows.
  void abort();

 private:
  std::weak_ptr<AsyncEngine> engine_;
  std::vector<int32_t> prompt_token_ids_;
  RequestId id_ = 0;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<RequestOutput> queue_;
  bool finished_pushed_ = false;
  bool finished_taken_ = false;
};

// Accumulates the outputs of several requests into one CompletionOutput each (prompt order), in slices of
// waiting so the caller can check for signals between slices.
class CompletionCollector {
 public:
  explicit CompletionCollector(std::vector<std::shared_ptr<RequestHandle>> handles);

  // Waits up to `timeout` for more outputs; true once every request has finished.
  bool wait_for(std::chrono::milliseconds timeout);
  void abort_all();
  std::vector<CompletionOutput>& results() { return results_; }
  // The first engine error reported for any request ("" when none failed).
  const std::string& error() const { return error_; }

 private:
  std::vector<std::shared_ptr<RequestHandle>> handles_;
  std::vector<CompletionOutput> results_;
  size_t next_ = 0;  // requests before this one have finished
  std::string error_;
};

}  // namespace minfer::python
