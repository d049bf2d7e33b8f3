// The model `minfer serve` runs when given none: the tiny-qwen2 test model (random weights, a small
// byte-level BPE tokenizer and the ChatML template) written to a temporary directory at start, so the
// server works on a fresh machine. Its output is meaningless text.
#pragma once

#include <string>

namespace minfer::server {

class DemoModel {
 public:
  DemoModel();   // writes the model; throws minfer::Error when the temporary directory cannot be written
  ~DemoModel();  // removes it
  DemoModel(const DemoModel&) = delete;
  DemoModel& operator=(const DemoModel&) = delete;

  const std::string& path() const { return dir_; }

 private:
  std::string dir_;
};

}  // namespace minfer::server
